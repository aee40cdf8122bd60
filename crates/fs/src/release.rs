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
use std::sync::Mutex;
use std::sync::mpsc::{SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;

/// Descriptors queued for closing at most. When the queue is full the
/// caller closes its descriptor itself, so a burst of replacements can never
/// hold more than this many extra descriptors open.
pub const RELEASE_QUEUE: usize = 64;

/// Closes descriptors of replaced files on a background thread (see the
/// module docs). The thread starts with the first [`Releaser::release`], so
/// an idle daemon has no extra thread. Dropping the `Releaser` closes
/// everything still queued and joins the thread.
#[derive(Default)]
pub struct Releaser {
    inner: Mutex<Option<Worker>>,
}

struct Worker {
    tx: SyncSender<OwnedFd>,
    thread: JoinHandle<()>,
}

impl Releaser {
    /// An idle releaser (no thread yet).
    pub fn new() -> Releaser {
        Releaser::default()
    }

    /// Hands `fd` over to be closed soon on the releaser's thread. Never
    /// blocks on the queue: when it is full, or the thread cannot be
    /// started, `fd` is closed here and now.
    pub fn release(&self, fd: OwnedFd) {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.is_none() {
            let (tx, rx) = sync_channel::<OwnedFd>(RELEASE_QUEUE);
            let spawned = std::thread::Builder::new()
                .name("writegate-release".into())
                // Nothing on this thread's stack but a loop.
                .stack_size(64 * 1024)
                .spawn(move || {
                    // Each descriptor is dropped (closed) as it arrives.
                    for fd in rx {
                        drop(fd);
                    }
                });
            match spawned {
                Ok(thread) => *inner = Some(Worker { tx, thread }),
                Err(e) => {
                    tracing::warn!(error = %e, "could not start the release thread; closing inline");
                    return; // `fd` drops here
                }
            }
        }
        let Some(worker) = inner.as_ref() else {
            return;
        };
        match worker.tx.try_send(fd) {
            Ok(()) => {}
            // Full or gone: close it here (drops with the error).
            Err(TrySendError::Full(fd) | TrySendError::Disconnected(fd)) => drop(fd),
        }
    }
}

impl Drop for Releaser {
    fn drop(&mut self) {
        let inner = self.inner.get_mut().unwrap_or_else(|p| p.into_inner());
        if let Some(Worker { tx, thread }) = inner.take() {
            drop(tx);
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;
    use std::io::Write;
    use std::os::unix::fs::MetadataExt;

    /// A replaced file stays allocated while its descriptor is held and is
    /// closed by the releaser (dropping the releaser joins its thread, so the
    /// close has happened by then).
    #[test]
    fn released_descriptor_is_closed_and_the_inode_freed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old");
        let mut f = File::create(&path).unwrap();
        f.write_all(&vec![b'x'; 1 << 20]).unwrap();
        f.sync_all().unwrap();
        let held = File::open(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        drop(f);
        // Still allocated: `held` keeps the unlinked inode alive.
        assert_eq!(held.metadata().unwrap().nlink(), 0);
        assert!(held.metadata().unwrap().blocks() > 0);
        assert_eq!(open_into(dir.path()), 1);
        let r = Releaser::new();
        r.release(held.into());
        drop(r);
        assert_eq!(open_into(dir.path()), 0);
    }

    /// How many descriptors of this process point into `dir` (an unlinked
    /// file shows as `<path> (deleted)`).
    fn open_into(dir: &std::path::Path) -> usize {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .flatten()
            .filter_map(|e| std::fs::read_link(e.path()).ok())
            .filter(|t| t.starts_with(dir))
            .count()
    }

    /// More descriptors than the queue holds: every one is closed, none is
    /// lost, and release never blocks.
    #[test]
    fn a_burst_larger_than_the_queue_is_closed_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let r = Releaser::new();
        for i in 0..(RELEASE_QUEUE * 4) {
            let p = dir.path().join(format!("f{i}"));
            std::fs::write(&p, b"x").unwrap();
            let f = File::open(&p).unwrap();
            std::fs::remove_file(&p).unwrap();
            r.release(f.into());
        }
        drop(r);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        assert_eq!(open_into(dir.path()), 0);
    }
}
