//! Releasing replaced files off the request's critical path.
//!
//! When `renameat` replaces a file, the old inode loses its last name. If
//! nothing else holds it, the kernel frees its blocks inside that `rename`
//! call, and on some filesystems that is slow: on ext4 without a journal and
//! with `discard`, freeing a 1 KiB file's block issues a synchronous discard
//! and takes about 200 µs, a quarter of a whole durable write (measured in
//! docs/performance.md). The daemon reads the file it replaces anyway (for
//! its format and `hashBefore`), so it keeps that read descriptor open across
//! the rename: the rename then only unlinks (about 25 µs) and the blocks are
//! freed when the last descriptor closes. [`Releaser`] closes those
//! descriptors on its own thread, after the request has been answered or
//! while it is being answered.
//!
//! Nothing about durability changes: the new content, its metadata and the
//! new name are fsynced before the descriptor is handed over. What moves is
//! only the freeing of the old content's blocks. If the process dies first,
//! the kernel closes the descriptor itself; after a crash the filesystem's
//! own recovery (orphan list or `fsck`) frees them, as for any file deleted
//! while open.

use std::os::fd::OwnedFd;
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::sync::{Mutex, PoisonError};
use std::thread::JoinHandle;

/// Descriptors queued for closing at most. When the queue is full the
/// caller closes its descriptor itself. So replaced files held open number
/// at most this many queued, plus the one being closed, plus one per request
/// in flight (between its rename and its hand-over).
pub const RELEASE_QUEUE: usize = 64;

/// Closes descriptors of replaced files on a background thread (see the
/// module docs). The thread starts with the first [`Releaser::release`], so
/// an idle daemon has no extra thread.
///
/// Dropping the `Releaser` does not wait: the thread closes what is queued
/// and ends, or, if a close hangs (a dead network mount), the process exit
/// closes the rest. [`Releaser::drain`] waits, for tests and benches.
#[derive(Default)]
pub struct Releaser {
    state: Mutex<State>,
}

#[derive(Default)]
enum State {
    /// No thread yet.
    #[default]
    Idle,
    /// The thread runs and takes descriptors from `tx`.
    Running {
        tx: SyncSender<OwnedFd>,
        thread: JoinHandle<()>,
    },
    /// The thread could not be started (logged once): callers close inline.
    Failed,
}

impl Releaser {
    /// An idle releaser (no thread yet).
    pub fn new() -> Releaser {
        Releaser::default()
    }

    /// Hands `fd` over to be closed soon on the releaser's thread. Never
    /// blocks on the queue: when it is full, or the thread could not be
    /// started, `fd` is closed here and now.
    pub fn release(&self, fd: OwnedFd) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if matches!(*state, State::Idle) {
            *state = start();
        }
        let State::Running { tx, .. } = &*state else {
            return; // Failed: `fd` closes as it drops here
        };
        match tx.try_send(fd) {
            Ok(()) => {}
            // Full or gone: close it here (it drops with the error).
            Err(TrySendError::Full(fd) | TrySendError::Disconnected(fd)) => drop(fd),
        }
    }

    /// Closes everything queued and waits for the thread to end. For tests
    /// and benches that must know the replaced files are freed; the daemon
    /// never calls it.
    pub fn drain(self) {
        let state = self
            .state
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner);
        if let State::Running { tx, thread } = state {
            drop(tx);
            let _ = thread.join();
        }
    }
}

/// Starts the release thread: `Running`, or `Failed` (logged) when the
/// system cannot give us a thread.
fn start() -> State {
    let (tx, rx) = sync_channel::<OwnedFd>(RELEASE_QUEUE);
    let spawned = std::thread::Builder::new()
        .name("writegate-release".into())
        // Nothing on this thread's stack but a loop.
        .stack_size(64 * 1024)
        .spawn(move || {
            // Each descriptor is closed as it arrives; the loop ends when
            // the releaser is dropped or drained.
            for fd in rx {
                drop(fd);
            }
        });
    match spawned {
        Ok(thread) => State::Running { tx, thread },
        Err(e) => {
            tracing::warn!(error = %e,
                "could not start the release thread; replaced files are closed inline from now on");
            State::Failed
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;
    use std::path::{Path, PathBuf};

    /// A canonical temp dir, so the links in `/proc/self/fd` start with it.
    fn canonical_tempdir() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = std::fs::canonicalize(dir.path()).unwrap();
        (dir, path)
    }

    /// How many descriptors of this process point at deleted files in
    /// `dir` (shown as `<path> (deleted)`).
    fn deleted_open_in(dir: &Path) -> usize {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .filter(|t| t.starts_with(dir) && t.to_string_lossy().ends_with(" (deleted)"))
            .count()
    }

    /// A file removed while its descriptor is held stays allocated until the
    /// releaser closes that descriptor (`drain` waits for the close).
    #[test]
    fn released_descriptor_is_closed_and_the_inode_freed() {
        let (_keep, dir) = canonical_tempdir();
        let path = dir.join("old");
        let mut f = File::create(&path).unwrap();
        f.write_all(&vec![b'x'; 1 << 20]).unwrap();
        drop(f);
        let held = File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(held.metadata().unwrap().nlink(), 0);
        assert_eq!(deleted_open_in(&dir), 1);
        let r = Releaser::new();
        r.release(held.into());
        r.drain();
        assert_eq!(deleted_open_in(&dir), 0);
    }

    /// Four times more descriptors than the queue holds: release never
    /// blocks, and every one is closed, none lost or leaked.
    #[test]
    fn a_burst_larger_than_the_queue_is_closed_without_blocking() {
        let (_keep, dir) = canonical_tempdir();
        let n = RELEASE_QUEUE * 4;
        let mut held = Vec::new();
        for i in 0..n {
            let p = dir.join(format!("f{i}"));
            std::fs::write(&p, b"x").unwrap();
            held.push(File::open(&p).unwrap());
            std::fs::remove_file(&p).unwrap();
        }
        assert_eq!(deleted_open_in(&dir), n);
        let r = Releaser::new();
        for f in held {
            r.release(f.into());
        }
        r.drain();
        assert_eq!(deleted_open_in(&dir), 0);
    }
}
