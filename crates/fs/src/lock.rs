//! The daemon-wide path lock (SPEC 7.4), keyed by the real file: the
//! directory's identity (device and inode) plus the leaf name, so that any
//! number of paths to one directory (bind mounts, symlinked parents
//! resolved to the same directory) share one lock.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

/// What a lock is keyed by.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LockKey {
    /// A file named `rest` (a leaf, or the missing directories below it and
    /// the leaf) in the directory with this device and inode number.
    File {
        /// `st_dev` of the directory.
        dev: u64,
        /// `st_ino` of the directory.
        ino: u64,
        /// The leaf, or the relative path from the directory to the leaf.
        rest: PathBuf,
    },
    /// A path as given, when no identity could be read (tests, or a
    /// directory that cannot be looked at; the operation then fails anyway).
    Path(PathBuf),
}

impl LockKey {
    /// The key of `leaf` in the open directory `dir`: its identity, one
    /// `statx` per handle ([`crate::Dir`] keeps it for `can_defer_frees`).
    pub fn of(dir: &crate::Dir, leaf: &OsStr) -> LockKey {
        match dir.identity() {
            Some(id) => LockKey::File {
                dev: id.dev,
                ino: id.ino,
                rest: PathBuf::from(leaf),
            },
            None => LockKey::Path(dir.path().join(leaf)),
        }
    }

    /// The key of a canonical `target` whose directory does not exist yet:
    /// the identity of its deepest existing ancestor (looked up without
    /// following a symlink) and the rest of the path below it.
    pub fn of_missing(target: &Path) -> LockKey {
        let mut dir = target.parent();
        while let Some(d) = dir {
            if let Ok(st) = rustix::fs::lstat(d)
                && rustix::fs::FileType::from_raw_mode(st.st_mode)
                    == rustix::fs::FileType::Directory
            {
                let rest = target.strip_prefix(d).map(Path::to_path_buf);
                return match rest {
                    Ok(rest) => LockKey::File {
                        dev: st.st_dev,
                        ino: st.st_ino,
                        rest,
                    },
                    Err(_) => LockKey::Path(target.to_path_buf()),
                };
            }
            dir = d.parent();
        }
        LockKey::Path(target.to_path_buf())
    }
}

impl From<&Path> for LockKey {
    fn from(p: &Path) -> LockKey {
        LockKey::Path(p.to_path_buf())
    }
}

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

/// The daemon-wide registry of per-target locks, keyed by [`LockKey`]
/// (SPEC 7.4). One instance serves the whole daemon, shared by every
/// runtime, so two workspaces writing one file are serialised too.
///
/// Each key is a FIFO ticket lock: lockers are served strictly in the order
/// they called [`PathLocks::lock`] (first come, first served). A key's entry
/// exists only while someone holds or waits for it, so the registry does not
/// grow with the number of files ever written. Locking blocks the calling
/// thread; the lock is not reentrant (locking a key twice on one thread
/// deadlocks). Keys are compared as given.
#[derive(Debug, Default)]
pub struct PathLocks {
    map: Mutex<HashMap<LockKey, Entry>>,
    /// `map.len()`, stored under the map's lock whenever it changes, so that
    /// [`PathLocks::len`] (asked once per request) need not take the lock.
    live: AtomicUsize,
}

impl PathLocks {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Block until the lock of `key` is ours, after everyone who asked for
    /// it earlier; the returned guard unlocks when dropped (also during a
    /// panic unwind).
    pub fn lock(&self, key: impl Into<LockKey>) -> PathGuard<'_> {
        let key: LockKey = key.into();
        let mut map = self.map_guard();
        let entry = map.entry(key.clone()).or_insert_with(|| Entry {
            next_ticket: 0,
            now_serving: 0,
            cv: Arc::new(Condvar::new()),
        });
        let ticket = entry.next_ticket;
        entry.next_ticket += 1;
        let cv = Arc::clone(&entry.cv);
        self.live.store(map.len(), Ordering::Relaxed);
        loop {
            // The entry cannot be removed while our ticket is outstanding.
            let serving = map.get(&key).map_or(ticket, |e| e.now_serving);
            if serving == ticket {
                break;
            }
            map = cv.wait(map).unwrap_or_else(PoisonError::into_inner);
        }
        PathGuard { locks: self, key }
    }

    /// Number of keys currently held or waited for (0 when idle): a
    /// snapshot, read without the registry's lock.
    pub fn len(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    /// How many lockers hold or wait for `key` right now (the holder counts
    /// as one; 0 when the key is free). For tests and diagnostics.
    pub fn queued(&self, key: impl Into<LockKey>) -> usize {
        self.map_guard().get(&key.into()).map_or(0, |e| {
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
    fn map_guard(&self) -> MutexGuard<'_, HashMap<LockKey, Entry>> {
        self.map.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn unlock(&self, key: &LockKey) {
        let mut map = self.map_guard();
        let Some(entry) = map.get_mut(key) else {
            return;
        };
        entry.now_serving += 1;
        if entry.now_serving == entry.next_ticket {
            map.remove(key);
            self.live.store(map.len(), Ordering::Relaxed);
        } else {
            entry.cv.notify_all();
        }
    }
}

/// Holds one key of a [`PathLocks`] registry; unlocks on drop.
#[derive(Debug)]
pub struct PathGuard<'a> {
    locks: &'a PathLocks,
    key: LockKey,
}

impl PathGuard<'_> {
    /// The locked key.
    pub fn key(&self) -> &LockKey {
        &self.key
    }
}

impl Drop for PathGuard<'_> {
    fn drop(&mut self) {
        self.locks.unlock(&self.key);
    }
}
