//! The daemon-wide path lock (SPEC 7.4).

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use writegate_fs::PathLocks;

#[test]
fn serialises_a_non_atomic_increment() {
    const THREADS: u64 = 4;
    const ITERS: u64 = 20_000;
    let locks = Arc::new(PathLocks::new());
    let counter = Arc::new(AtomicU64::new(0));
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let (locks, counter) = (Arc::clone(&locks), Arc::clone(&counter));
            std::thread::spawn(move || {
                for i in 0..ITERS {
                    let _g = locks.lock(Path::new("/ws/file.txt"));
                    // Read-modify-write in two steps: only the lock makes it exact.
                    let v = counter.load(Ordering::Relaxed);
                    if (i + t) % 64 == 0 {
                        std::thread::yield_now();
                    }
                    counter.store(v + 1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(counter.load(Ordering::Relaxed), THREADS * ITERS);
    assert_eq!(locks.len(), 0);
    assert!(locks.is_empty());
}

fn wait_until(what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn first_come_first_served() {
    const WAITERS: usize = 8;
    let locks = Arc::new(PathLocks::new());
    let key = Path::new("/ws/a");
    let order = Arc::new(Mutex::new(Vec::new()));
    let held = locks.lock(key);
    assert_eq!(locks.queued(key), 1);
    let mut handles = Vec::new();
    for n in 0..WAITERS {
        let (l, order) = (Arc::clone(&locks), Arc::clone(&order));
        handles.push(std::thread::spawn(move || {
            let _g = l.lock(Path::new("/ws/a"));
            order.lock().unwrap().push(n);
        }));
        // Make sure waiter n queued before waiter n+1 arrives.
        wait_until("waiter queued", || locks.queued(key) == n + 2);
    }
    // Another key is independent.
    {
        let _other = locks.lock(Path::new("/ws/b"));
        assert_eq!(locks.len(), 2);
    }
    drop(held);
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(*order.lock().unwrap(), (0..WAITERS).collect::<Vec<_>>());
    assert_eq!(locks.len(), 0);
    assert_eq!(locks.queued(key), 0);
}

#[test]
fn guard_released_on_panic() {
    let locks = Arc::new(PathLocks::new());
    let l2 = Arc::clone(&locks);
    let r = std::thread::spawn(move || {
        let _g = l2.lock(Path::new("/p"));
        panic!("boom");
    })
    .join();
    assert!(r.is_err());
    assert_eq!(locks.len(), 0);
    let g = locks.lock(Path::new("/p"));
    assert_eq!(g.key(), &writegate_fs::LockKey::Path("/p".into()));
}

#[test]
fn registry_does_not_grow() {
    let locks = PathLocks::new();
    for i in 0..1000 {
        let _g = locks.lock(Path::new(&format!("/f{i}")));
        assert_eq!(locks.len(), 1);
    }
    assert_eq!(locks.len(), 0);
}

/// The two keys of one file: by its open directory, and "missing", by its
/// deepest existing ancestor. When the parent exists after all (a directory
/// swapped back in between a failed open and the look), they are the same
/// key, which one operation must not lock twice (the lock is not
/// reentrant: the core's lock step holds it once). Found by the
/// directory-swap race test, which hung there.
#[test]
fn the_missing_key_of_a_file_whose_parent_exists_is_its_directory_key() {
    let t = tempfile::tempdir().unwrap();
    let parent = std::fs::canonicalize(t.path()).unwrap().join("d");
    std::fs::create_dir(&parent).unwrap();
    let dir = writegate_fs::Dir::open_canonical(&parent).unwrap();
    let leaf = std::ffi::OsStr::new("f.txt");
    assert_eq!(
        writegate_fs::LockKey::of_missing(&parent.join("f.txt")),
        writegate_fs::LockKey::of(&dir, leaf)
    );
    // The first key comes from `statx`, the second from `lstat`: the same
    // device number on filesystems whose devices are anonymous (`0:N`) too.
    // (Minors past 255, which take another encoding, are checked by a unit
    // test of `makedev` in dir.rs.)
    for other in ["/proc", "/dev/shm", "/sys"] {
        let Ok(dir) = writegate_fs::Dir::open_canonical(Path::new(other)) else {
            continue;
        };
        assert_eq!(
            writegate_fs::LockKey::of_missing(&Path::new(other).join("f.txt")),
            writegate_fs::LockKey::of(&dir, leaf),
            "{other}"
        );
    }
}
