//! The daemon-wide path lock (SPEC 7.4).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// One key's ticket queue.
#[derive(Debug)]
struct Entry {
    /// The ticket the next arriving locker gets.
    next_ticket: u64,
    /// The ticket that holds the lock now.
    now_serving: u64,
    /// Waiters of this key only, so an unlock wakes no other key's waiters.
    cv: Arc<Condvar>,
}

/// The daemon-wide registry of per-target locks, keyed by canonical target
/// path (SPEC 7.4). One instance serves the whole daemon, shared by every
/// runtime, so two workspaces writing one file are serialised too.
///
/// Each key is a FIFO ticket lock: lockers are served strictly in the order
/// they called [`PathLocks::lock`] (first come, first served). A key's entry
/// exists only while someone holds or waits for it, so the registry does not
/// grow with the number of files ever written. Locking blocks the calling
/// thread; the lock is not reentrant (locking a key twice on one thread
/// deadlocks). Keys are compared as given: callers pass canonical paths.
#[derive(Debug, Default)]
pub struct PathLocks {
    map: Mutex<HashMap<PathBuf, Entry>>,
}

impl PathLocks {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Block until the lock of `key` is ours, after everyone who asked for
    /// it earlier; the returned guard unlocks when dropped (also during a
    /// panic unwind).
    pub fn lock(&self, key: &Path) -> PathGuard<'_> {
        let mut map = self.map_guard();
        let entry = map.entry(key.to_path_buf()).or_insert_with(|| Entry {
            next_ticket: 0,
            now_serving: 0,
            cv: Arc::new(Condvar::new()),
        });
        let ticket = entry.next_ticket;
        entry.next_ticket += 1;
        let cv = Arc::clone(&entry.cv);
        loop {
            // The entry cannot be removed while our ticket is outstanding.
            let serving = map.get(key).map_or(ticket, |e| e.now_serving);
            if serving == ticket {
                break;
            }
            map = cv.wait(map).unwrap_or_else(PoisonError::into_inner);
        }
        PathGuard {
            locks: self,
            key: key.to_path_buf(),
        }
    }

    /// Number of keys currently held or waited for (0 when idle).
    pub fn len(&self) -> usize {
        self.map_guard().len()
    }

    /// How many lockers hold or wait for `key` right now (the holder counts
    /// as one; 0 when the key is free). For tests and diagnostics.
    pub fn queued(&self, key: &Path) -> usize {
        self.map_guard().get(key).map_or(0, |e| {
            usize::try_from(e.next_ticket - e.now_serving).unwrap_or(usize::MAX)
        })
    }

    /// True when no key is held or waited for.
    pub fn is_empty(&self) -> bool {
        self.map_guard().is_empty()
    }

    /// The registry map; a panic elsewhere never leaves it inconsistent
    /// (every critical section is a few field updates), so poisoning is
    /// ignored.
    fn map_guard(&self) -> MutexGuard<'_, HashMap<PathBuf, Entry>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn unlock(&self, key: &Path) {
        let mut map = self.map_guard();
        let Some(entry) = map.get_mut(key) else {
            return;
        };
        entry.now_serving += 1;
        if entry.now_serving == entry.next_ticket {
            map.remove(key);
        } else {
            entry.cv.notify_all();
        }
    }
}

/// Holds one key of a [`PathLocks`] registry; unlocks on drop.
#[derive(Debug)]
pub struct PathGuard<'a> {
    locks: &'a PathLocks,
    key: PathBuf,
}

impl PathGuard<'_> {
    /// The locked key.
    pub fn key(&self) -> &Path {
        &self.key
    }
}

impl Drop for PathGuard<'_> {
    fn drop(&mut self) {
        self.locks.unlock(&self.key);
    }
}
