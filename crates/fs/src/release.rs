//! Releasing replaced files off the request's critical path.
//!
//! When `renameat` replaces a file, the old inode loses its last name. If
//! nothing else holds it, the kernel frees its blocks inside that `rename`
//! call, and on some filesystems that is slow: on ext4 without a journal and
//! with `discard`, freeing a 1 KiB file's block issues a synchronous discard
//! and takes about 200 µs, a quarter of a whole durable write (measured in
//! docs/decisions/0002-small-write-latency.md). The daemon reads the file it
//! replaces anyway (for its format and `hashBefore`), so it keeps that read
//! descriptor open across the rename: the rename then only unlinks (about
//! 25 µs) and the blocks are freed when the last descriptor closes. [`Releaser`] closes those
//! descriptors on its own thread, a batch at a time, within about
//! [`RELEASE_LINGER`] of their hand-over.
//!
//! Nothing about durability changes: the new content, its metadata and the
//! new name are fsynced before the descriptor is handed over. What moves is
//! only the freeing of the old content's blocks. If the process dies first,
//! the kernel closes the descriptor itself; after a crash the filesystem's
//! own recovery (orphan list or `fsck`) frees them, as for any file deleted
//! while open.

use std::os::fd::OwnedFd;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// Descriptors queued for closing at most. When the queue is full the
/// caller closes its descriptor itself. So replaced files held open number
/// at most this many queued, plus as many in the batch being closed, plus
/// one per request in flight (between its rename and its hand-over).
pub const RELEASE_QUEUE: usize = 64;

/// How long the release thread, once woken, lets descriptors gather before
/// it closes them: a stream of writes wakes it once per this interval, not
/// once per replaced file (each wake of an idle thread is a context switch
/// and, on a VM, an inter-processor interrupt; measured in
/// docs/decisions/0009-small-write-costs.md). Blocks are freed this much
/// later at most.
pub const RELEASE_LINGER: Duration = Duration::from_millis(5);

/// Closes descriptors of replaced files on a background thread (see the
/// module docs), a batch at a time: the first descriptor after a quiet
/// spell wakes the thread, which waits [`RELEASE_LINGER`] (or until half
/// the queue is full) and closes everything queued by then. The thread
/// starts with the first [`Releaser::release`], so an idle daemon has no
/// extra thread.
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
    /// The thread runs and takes descriptors from `queue`.
    Running {
        queue: Arc<Queue>,
        thread: JoinHandle<()>,
    },
    /// The thread could not be started (logged once): callers close inline.
    Failed,
}

/// What the callers and the release thread share.
#[derive(Default)]
struct Queue {
    inner: Mutex<Inner>,
    wake: Condvar,
}

#[derive(Default)]
struct Inner {
    fds: Vec<OwnedFd>,
    /// The thread waits for a first descriptor (not lingering): the next
    /// one must wake it.
    asleep: bool,
    /// Close what is queued and end.
    stop: bool,
}

impl Queue {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The release thread: sleeps until a descriptor comes, lingers, closes
    /// the batch; ends once stopped and empty.
    fn run(&self) {
        let mut q = self.lock();
        loop {
            while q.fds.is_empty() && !q.stop {
                q.asleep = true;
                q = self.wake.wait(q).unwrap_or_else(PoisonError::into_inner);
                q.asleep = false;
            }
            if !q.stop && q.fds.len() < RELEASE_QUEUE / 2 {
                // Let a stream of writes add to the batch (callers do not
                // wake a lingering thread until half the queue is full).
                q = self
                    .wake
                    .wait_timeout(q, RELEASE_LINGER)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
            let batch = std::mem::replace(&mut q.fds, Vec::with_capacity(RELEASE_QUEUE));
            let stop = q.stop;
            drop(q);
            // Each close frees a replaced file's blocks.
            drop(batch);
            q = self.lock();
            if stop && q.fds.is_empty() {
                return;
            }
        }
    }
}

impl Releaser {
    /// An idle releaser (no thread yet).
    pub fn new() -> Releaser {
        Releaser::default()
    }

    /// Hands `fd` over to be closed soon on the releaser's thread (within
    /// about [`RELEASE_LINGER`]). Never blocks on the queue: when it is
    /// full, or the thread could not be started, `fd` is closed here and
    /// now.
    pub fn release(&self, fd: OwnedFd) {
        let queue = {
            let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            if matches!(*state, State::Idle) {
                *state = start();
            }
            match &*state {
                State::Running { queue, .. } => queue.clone(),
                // Failed: `fd` closes as it drops here.
                _ => return,
            }
        };
        let mut q = queue.lock();
        if q.fds.len() >= RELEASE_QUEUE {
            drop(q);
            return; // full: `fd` closes here
        }
        q.fds.push(fd);
        if q.asleep || q.fds.len() == RELEASE_QUEUE / 2 {
            q.asleep = false;
            // Woken after the lock is let go, so it does not wait for it.
            drop(q);
            queue.wake.notify_one();
        }
    }

    /// Closes everything queued and waits for the thread to end. For tests
    /// and benches that must know the replaced files are freed; the daemon
    /// never calls it.
    pub fn drain(self) {
        let state = std::mem::take(&mut *self.state.lock().unwrap_or_else(PoisonError::into_inner));
        if let State::Running { queue, thread } = state {
            stop(&queue);
            let _ = thread.join();
        }
    }
}

impl Drop for Releaser {
    /// The thread closes what is queued and ends; nobody waits for it.
    fn drop(&mut self) {
        let state = self.state.get_mut().unwrap_or_else(PoisonError::into_inner);
        if let State::Running { queue, .. } = state {
            stop(queue);
        }
    }
}

fn stop(queue: &Queue) {
    queue.lock().stop = true;
    queue.wake.notify_all();
}

/// Starts the release thread: `Running`, or `Failed` (logged) when the
/// system cannot give us a thread.
fn start() -> State {
    let queue = Arc::new(Queue::default());
    let theirs = queue.clone();
    let spawned = std::thread::Builder::new()
        .name("writegate-release".into())
        // Nothing on this thread's stack but a loop.
        .stack_size(64 * 1024)
        .spawn(move || theirs.run());
    match spawned {
        Ok(thread) => State::Running { queue, thread },
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
    use std::time::Duration;

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

    /// A descriptor of the file `name` in `dir`, which has no name any more
    /// (as a replaced file has after the rename).
    fn deleted_but_open(dir: &Path, name: &str) -> OwnedFd {
        let p = dir.join(name);
        std::fs::write(&p, b"x").unwrap();
        let held = File::open(&p).unwrap();
        std::fs::remove_file(&p).unwrap();
        held.into()
    }

    /// Waits (at most 5 s, else fails with `why`) until no descriptor of a
    /// deleted file in `dir` is open.
    fn all_closed_soon(dir: &Path, why: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while deleted_open_in(dir) > 0 {
            assert!(std::time::Instant::now() < deadline, "{why}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// A stream of releases, closed in batches (ADR 0009), is closed
    /// whole soon after the last one; and a releaser dropped with
    /// descriptors queued still closes them.
    #[test]
    fn a_stream_of_releases_is_closed_in_batches_and_none_is_kept() {
        let (_keep, dir) = canonical_tempdir();
        let r = Releaser::new();
        let n = 40;
        for i in 0..n {
            r.release(deleted_but_open(&dir, &format!("s{i}")));
            std::thread::sleep(Duration::from_micros(200));
        }
        // Within a few lingers of the last one, all are closed.
        all_closed_soon(&dir, "descriptors kept");
        assert!(matches!(*r.state.lock().unwrap(), State::Running { .. }));
        // Dropped with some queued: they are closed all the same.
        for i in 0..5 {
            r.release(deleted_but_open(&dir, &format!("d{i}")));
        }
        drop(r);
        all_closed_soon(&dir, "a dropped releaser kept descriptors");
    }

    /// Stopping wakes a thread asleep on an empty queue: `drain` after a
    /// quiet spell returns at once, and a dropped releaser's thread ends
    /// (its share of the queue goes with it).
    #[test]
    fn stopping_wakes_a_sleeping_thread_and_it_ends() {
        let (_keep, dir) = canonical_tempdir();
        let one = |r: &Releaser, name: &str| r.release(deleted_but_open(&dir, name));
        let quiet = || {
            // Closed, and the thread asleep again (several lingers).
            std::thread::sleep(RELEASE_LINGER * 6);
            assert_eq!(deleted_open_in(&dir), 0);
        };
        let r = Releaser::new();
        one(&r, "a");
        quiet();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            r.drain();
            let _ = tx.send(());
        });
        rx.recv_timeout(Duration::from_secs(10))
            .expect("drain of a sleeping releaser returns");
        let r = Releaser::new();
        one(&r, "b");
        quiet();
        let queue = match &*r.state.lock().unwrap() {
            State::Running { queue, .. } => Arc::downgrade(queue),
            _ => panic!("the thread runs"),
        };
        drop(r);
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while queue.upgrade().is_some() {
            assert!(
                std::time::Instant::now() < deadline,
                "a dropped releaser's thread still runs"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Four times more descriptors than the queue holds: release never
    /// blocks, and every one is closed, none lost or leaked.
    #[test]
    fn a_burst_larger_than_the_queue_is_closed_without_blocking() {
        let (_keep, dir) = canonical_tempdir();
        let n = RELEASE_QUEUE * 4;
        let mut held = Vec::new();
        for i in 0..n {
            held.push(deleted_but_open(&dir, &format!("f{i}")));
        }
        assert_eq!(deleted_open_in(&dir), n);
        let r = Releaser::new();
        for fd in held {
            r.release(fd);
        }
        r.drain();
        assert_eq!(deleted_open_in(&dir), 0);
    }
}
