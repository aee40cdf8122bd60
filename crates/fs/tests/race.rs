//! A directory swapped for a symlink to an outside directory while another
//! thread publishes into it: nothing may ever land outside (SPEC 7.3).

use std::ffi::OsStr;
use std::os::unix::fs::symlink;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use writegate_fs::{Dir, FsError, NewFileMode, Publish, PublishOptions};
use writegate_testkit::{names, tempdir};

/// Publishes that must succeed (the rest of the attempts are refused opens).
const PUBLISHES: u64 = 3000;
/// Upper bound on attempts, so the test always ends.
const MAX_ATTEMPTS: u64 = 200_000;

#[test]
fn swapping_a_directory_for_a_symlink_never_redirects_a_write() {
    let (_t, base) = tempdir();
    // The target directories are d (leaf in the swapped component) and
    // d/inner (the swapped component in the middle). The outside directory
    // has the same shape, so a path-following write would succeed there.
    let dir = base.join("d");
    let inner = dir.join("inner");
    let parked = base.join("d.parked");
    let outside = base.join("outside");
    std::fs::create_dir_all(&inner).unwrap();
    std::fs::create_dir_all(outside.join("inner")).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let swapper = {
        let (stop, swaps) = (Arc::clone(&stop), Arc::clone(&swaps));
        let (dir, parked, outside) = (dir.clone(), parked.clone(), outside.clone());
        std::thread::spawn(move || {
            let mut n = 0u32;
            while !stop.load(Ordering::Relaxed) {
                std::fs::rename(&dir, &parked).unwrap();
                symlink(&outside, &dir).unwrap();
                std::thread::yield_now();
                std::fs::remove_file(&dir).unwrap();
                std::fs::rename(&parked, &dir).unwrap();
                swaps.fetch_add(1, Ordering::Relaxed);
                // Stay real for a varying while so that publishes get through
                // and swaps hit every step of them.
                n = n.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                let spin = Instant::now();
                let wait = Duration::from_micros(u64::from(n >> 24) % 300);
                while spin.elapsed() < wait {
                    std::hint::spin_loop();
                }
            }
        })
    };

    let opts = PublishOptions {
        new_file_mode: NewFileMode::Owner,
        expect_existing: None,
    };
    let (mut published, mut refused, mut attempts) = (0u64, 0u64, 0u64);
    while published < PUBLISHES && attempts < MAX_ATTEMPTS {
        attempts += 1;
        let target = if attempts % 2 == 0 { &dir } else { &inner };
        match Dir::open_canonical(target) {
            Ok(d) => {
                let bytes = format!("{attempts}\n");
                Publish::new(&d, OsStr::new("f.txt"), bytes.as_bytes(), &opts)
                    .run()
                    .unwrap();
                published += 1;
            }
            Err(e) => {
                assert!(
                    matches!(e, FsError::SymlinkEscape { .. } | FsError::NotFound { .. }),
                    "{e:?}"
                );
                refused += 1;
            }
        }
        assert!(
            names(&outside) == ["inner"] && names(&outside.join("inner")).is_empty(),
            "a write escaped at attempt {attempts}"
        );
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();

    eprintln!(
        "published {published}, refused {refused}, swaps {}",
        swaps.load(Ordering::Relaxed)
    );
    assert_eq!(names(&outside), ["inner"]);
    assert!(names(&outside.join("inner")).is_empty());
    // How many get through depends on scheduling (a loaded machine lets the
    // swapper win more often); what matters is that some did and none escaped.
    assert!(
        published > 0,
        "no publish got through; the test proved nothing"
    );
    assert!(swaps.load(Ordering::Relaxed) > 0);
    assert_eq!(names(&dir), ["f.txt", "inner"]);
    assert_eq!(names(&inner), ["f.txt"]);
}
