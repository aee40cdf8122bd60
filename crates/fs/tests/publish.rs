//! The atomic publisher, directory handles and leaf reads on real files.

use std::ffi::OsStr;
use std::os::unix::fs::{MetadataExt, PermissionsExt, symlink};
use std::path::Path;

use writegate_fs::{
    Atime, Content, Dir, FsError, NewFileMode, Publish, PublishOptions, Published, WRITE_CHUNK,
    read_existing, stat_leaf,
};
use writegate_testkit::{Tmpfs, assert_err, is_root, mode_of, names, tempdir, temps};

fn opts() -> PublishOptions {
    PublishOptions {
        new_file_mode: NewFileMode::Owner,
        expect_existing: None,
    }
}

fn ok() -> impl FnMut() -> Result<(), FsError> {
    || Ok(())
}

/// A [`Publish`] of `bytes` to `leaf` with `o` and the precommit check
/// `precommit`.
fn publish(
    d: &Dir,
    leaf: &OsStr,
    bytes: &[u8],
    o: &PublishOptions,
    precommit: &mut dyn FnMut() -> Result<(), FsError>,
) -> Result<Published, FsError> {
    Publish::new(d, leaf, bytes, o).precommit(precommit).run()
}

/// The refusal a precommit check makes in these tests.
fn refusal(dir: &Path, leaf: &str, reason: &str) -> FsError {
    FsError::Aborted {
        path: dir.join(leaf),
        reason: reason.to_string(),
    }
}

fn publish_ok(dir: &Path, leaf: &str, bytes: &[u8]) -> writegate_fs::Published {
    let d = Dir::open_canonical(dir).unwrap();
    publish(&d, OsStr::new(leaf), bytes, &opts(), &mut ok()).unwrap()
}

#[test]
fn creates_new_file_0600() {
    let (_t, dir) = tempdir();
    let p = publish_ok(&dir, "new.txt", b"hello\n");
    assert!(p.created);
    assert!(p.durable);
    assert_eq!(p.bytes_written, 6);
    assert_eq!(std::fs::read(dir.join("new.txt")).unwrap(), b"hello\n");
    assert_eq!(mode_of(&dir.join("new.txt")), 0o600);
    assert_eq!(names(&dir), vec!["new.txt"]);
}

/// Content of several write chunks and a ragged tail (the chunks each
/// started to disk early, ADR 0006) lands byte for byte, over an existing
/// longer file too, and no temp file stays. (The content only: which
/// ranges are written and started is `pieces`' unit test.)
#[test]
fn content_over_many_write_chunks_lands_byte_exact() {
    let (_t, dir) = tempdir();
    let bytes: Vec<u8> = (0..3 * WRITE_CHUNK + 17)
        .map(|i| u8::try_from(i % 251).unwrap())
        .collect();
    let p = publish_ok(&dir, "big.bin", &bytes);
    assert_eq!(p.bytes_written, bytes.len() as u64);
    assert_eq!(std::fs::read(dir.join("big.bin")).unwrap(), bytes);
    // Shorter content over it: the new file is exactly the new bytes.
    let shorter = &bytes[..=WRITE_CHUNK];
    publish_ok(&dir, "big.bin", shorter);
    assert_eq!(std::fs::read(dir.join("big.bin")).unwrap(), shorter);
    assert_eq!(names(&dir), vec!["big.bin"]);
}

#[test]
fn system_mode_uses_umask() {
    let (_t, dir) = tempdir();
    let d = Dir::open_canonical(&dir).unwrap();
    let o = PublishOptions {
        new_file_mode: NewFileMode::System,
        expect_existing: None,
    };
    publish(&d, OsStr::new("s.txt"), b"x", &o, &mut ok()).unwrap();
    // Learn the umask the way a file creation sees it.
    let probe = dir.join("probe");
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
        .unwrap();
    assert_eq!(mode_of(&dir.join("s.txt")), mode_of(&probe) & 0o666);
}

#[test]
fn existing_file_keeps_0755_and_content_is_replaced() {
    let (_t, dir) = tempdir();
    let f = dir.join("run.sh");
    std::fs::write(&f, b"old content that is longer\n").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
    let before = std::fs::metadata(&f).unwrap();
    let p = publish_ok(&dir, "run.sh", b"new\n");
    assert!(!p.created);
    assert_eq!(std::fs::read(&f).unwrap(), b"new\n");
    assert_eq!(mode_of(&f), 0o755);
    assert_ne!(std::fs::metadata(&f).unwrap().ino(), before.ino());
    assert!(temps(&dir).is_empty());
}

#[test]
fn setuid_bits_are_dropped_and_0640_kept() {
    let (_t, dir) = tempdir();
    let f = dir.join("a");
    std::fs::write(&f, b"a").unwrap();
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o4640)).unwrap();
    publish_ok(&dir, "a", b"b");
    assert_eq!(mode_of(&f), 0o640);
}

#[test]
fn root_keeps_owner_and_group() {
    if !is_root() {
        eprintln!("skipped: needs root to chown");
        return;
    }
    let (_t, dir) = tempdir();
    let f = dir.join("owned");
    std::fs::write(&f, b"a").unwrap();
    std::os::unix::fs::chown(&f, Some(4242), Some(4343)).unwrap();
    publish_ok(&dir, "owned", b"b");
    let m = std::fs::metadata(&f).unwrap();
    assert_eq!((m.uid(), m.gid()), (4242, 4343));
    assert_eq!(std::fs::read(&f).unwrap(), b"b");
}

/// With the caller's stat of the file it read (the daemon's path), that
/// stat decides the new file's bits and, as root, owner and group: setuid
/// dropped, 0755 kept, no second look at the leaf before the recheck.
#[test]
fn expected_stat_decides_mode_and_owner() {
    let (_t, dir) = tempdir();
    let f = dir.join("run.sh");
    std::fs::write(&f, b"old\n").unwrap();
    if is_root() {
        std::os::unix::fs::chown(&f, Some(4242), Some(4343)).unwrap();
    }
    // After the chown, which clears setuid.
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let d = Dir::open_canonical(&dir).unwrap();
    let seen = read_existing(&d, OsStr::new("run.sh"), None, Atime::Update)
        .unwrap()
        .unwrap();
    assert_eq!(seen.stat.mode, 0o4755);
    let o = PublishOptions {
        new_file_mode: NewFileMode::Owner,
        expect_existing: Some(seen.stat),
    };
    let p = publish(&d, OsStr::new("run.sh"), b"new\n", &o, &mut ok()).unwrap();
    assert!(!p.created);
    assert_eq!(std::fs::read(&f).unwrap(), b"new\n");
    assert_eq!(mode_of(&f), 0o755);
    if is_root() {
        let m = std::fs::metadata(&f).unwrap();
        assert_eq!((m.uid(), m.gid()), (4242, 4343));
    }
    assert!(temps(&dir).is_empty());
}

#[test]
fn precommit_refusal_leaves_target_identical_and_no_temp() {
    let (_t, dir) = tempdir();
    let f = dir.join("keep.txt");
    std::fs::write(&f, b"original\r\nbytes").unwrap();
    let d = Dir::open_canonical(&dir).unwrap();
    let mut calls = 0;
    let err = publish(
        &d,
        OsStr::new("keep.txt"),
        b"replacement",
        &opts(),
        &mut || {
            calls += 1;
            Err(refusal(&dir, "keep.txt", "generation closed"))
        },
    )
    .unwrap_err();
    assert_eq!(calls, 1);
    assert!(
        matches!(err, FsError::Aborted { ref reason, .. } if reason == "generation closed"),
        "{err:?}"
    );
    assert_eq!(std::fs::read(&f).unwrap(), b"original\r\nbytes");
    assert_eq!(names(&dir), vec!["keep.txt"]);

    // And for a file that did not exist: still nothing there.
    let err = publish(&d, OsStr::new("absent"), b"x", &opts(), &mut || {
        Err(refusal(&dir, "absent", "no"))
    })
    .unwrap_err();
    assert!(matches!(err, FsError::Aborted { .. }), "{err:?}");
    assert_eq!(names(&dir), vec!["keep.txt"]);
}

#[test]
fn leaf_swapped_for_symlink_is_refused_and_target_untouched() {
    let (_t, base) = tempdir();
    let dir = base.join("ws");
    let outside = base.join("outside");
    std::fs::create_dir(&dir).unwrap();
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(dir.join("a.txt"), b"mine").unwrap();
    std::fs::write(outside.join("secret"), b"secret").unwrap();

    // The caller saw a regular file ...
    let d = Dir::open_canonical(&dir).unwrap();
    let seen = read_existing(&d, OsStr::new("a.txt"), None, Atime::Update)
        .unwrap()
        .unwrap();
    // ... which is then swapped for a symlink to an outside file.
    std::fs::remove_file(dir.join("a.txt")).unwrap();
    symlink(outside.join("secret"), dir.join("a.txt")).unwrap();

    let o = PublishOptions {
        new_file_mode: NewFileMode::Owner,
        expect_existing: Some(seen.stat),
    };
    let err = publish(&d, OsStr::new("a.txt"), b"evil", &o, &mut ok()).unwrap_err();
    assert!(matches!(err, FsError::SymlinkEscape { .. }), "{err:?}");
    // Without an expectation the symlink leaf is refused too.
    let err = publish(&d, OsStr::new("a.txt"), b"evil", &opts(), &mut ok()).unwrap_err();
    assert!(matches!(err, FsError::SymlinkEscape { .. }), "{err:?}");

    assert_eq!(std::fs::read(outside.join("secret")).unwrap(), b"secret");
    assert!(
        std::fs::symlink_metadata(dir.join("a.txt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(temps(&dir).is_empty());
    assert_eq!(names(&outside), vec!["secret"]);
}

#[test]
fn leaf_replaced_by_another_file_fails_expectation() {
    let (_t, dir) = tempdir();
    std::fs::write(dir.join("a"), b"1").unwrap();
    let d = Dir::open_canonical(&dir).unwrap();
    let seen = stat_leaf(&d, OsStr::new("a")).unwrap().unwrap();
    std::fs::write(dir.join("b"), b"2").unwrap();
    std::fs::rename(dir.join("b"), dir.join("a")).unwrap();
    let o = PublishOptions {
        new_file_mode: NewFileMode::Owner,
        expect_existing: Some(seen),
    };
    let err = publish(&d, OsStr::new("a"), b"3", &o, &mut ok()).unwrap_err();
    assert!(matches!(err, FsError::SymlinkEscape { .. }), "{err:?}");
    assert_eq!(std::fs::read(dir.join("a")).unwrap(), b"2");
    // Vanished counts as swapped too.
    std::fs::remove_file(dir.join("a")).unwrap();
    let err = publish(&d, OsStr::new("a"), b"3", &o, &mut ok()).unwrap_err();
    assert!(matches!(err, FsError::SymlinkEscape { .. }), "{err:?}");
    assert!(names(&dir).is_empty());
    // The matching expectation works.
    std::fs::write(dir.join("c"), b"1").unwrap();
    let seen = stat_leaf(&d, OsStr::new("c")).unwrap().unwrap();
    let o = PublishOptions {
        expect_existing: Some(seen),
        ..o
    };
    publish(&d, OsStr::new("c"), b"ok", &o, &mut ok()).unwrap();
    assert_eq!(std::fs::read(dir.join("c")).unwrap(), b"ok");
}

#[test]
fn non_regular_leaf_is_not_a_file() {
    let (_t, dir) = tempdir();
    std::fs::create_dir(dir.join("sub")).unwrap();
    let d = Dir::open_canonical(&dir).unwrap();
    let err = publish(&d, OsStr::new("sub"), b"x", &opts(), &mut ok()).unwrap_err();
    assert!(matches!(err, FsError::NotAFile { .. }), "{err:?}");
    assert_eq!(names(&dir), vec!["sub"]);
    let err = read_existing(&d, OsStr::new("sub"), None, Atime::Update).unwrap_err();
    assert!(matches!(err, FsError::NotAFile { .. }), "{err:?}");
    let err = stat_leaf(&d, OsStr::new("sub")).unwrap_err();
    assert!(matches!(err, FsError::NotAFile { .. }), "{err:?}");
}

#[test]
fn fifo_leaf_is_refused_without_blocking() {
    let (_t, dir) = tempdir();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        dir.join("pipe"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let d = Dir::open_canonical(&dir).unwrap();
    assert_err!(
        read_existing(&d, OsStr::new("pipe"), None, Atime::Update),
        FsError::NotAFile { .. }
    );
    assert_err!(
        publish(&d, OsStr::new("pipe"), b"x", &opts(), &mut ok()),
        FsError::NotAFile { .. }
    );
    assert_eq!(names(&dir), vec!["pipe"]);
}

#[test]
fn read_existing_cases() {
    let (_t, dir) = tempdir();
    let d = Dir::open_canonical(&dir).unwrap();
    assert!(
        read_existing(&d, OsStr::new("none"), None, Atime::Update)
            .unwrap()
            .is_none()
    );
    assert!(stat_leaf(&d, OsStr::new("none")).unwrap().is_none());

    std::fs::write(dir.join("f"), b"0123456789").unwrap();
    std::fs::set_permissions(dir.join("f"), std::fs::Permissions::from_mode(0o640)).unwrap();
    let e = read_existing(&d, OsStr::new("f"), None, Atime::Update)
        .unwrap()
        .unwrap();
    assert_eq!(e.content, Content::Whole(b"0123456789".to_vec()));
    assert_eq!((e.stat.len, e.stat.mode), (10, 0o640));
    let m = std::fs::metadata(dir.join("f")).unwrap();
    assert_eq!(
        (e.stat.dev, e.stat.ino, e.stat.uid, e.stat.gid),
        (m.dev(), m.ino(), m.uid(), m.gid())
    );

    let e = read_existing(&d, OsStr::new("f"), Some(10), Atime::Update)
        .unwrap()
        .unwrap();
    assert!(matches!(&e.content, Content::Whole(b) if b.len() == 10));
    let e = read_existing(&d, OsStr::new("f"), Some(9), Atime::Update)
        .unwrap()
        .unwrap();
    assert_eq!(e.content, Content::TooLarge);
    assert_eq!(e.stat.len, 10);

    let s = stat_leaf(&d, OsStr::new("f")).unwrap().unwrap();
    assert_eq!((s.len, s.mode, s.ino), (10, 0o640, m.ino()));

    symlink(dir.join("f"), dir.join("link")).unwrap();
    assert_err!(
        read_existing(&d, OsStr::new("link"), None, Atime::Update),
        FsError::SymlinkEscape { .. }
    );
    assert_err!(
        stat_leaf(&d, OsStr::new("link")),
        FsError::SymlinkEscape { .. }
    );
    symlink(dir.join("missing"), dir.join("dangling")).unwrap();
    assert_err!(
        read_existing(&d, OsStr::new("dangling"), None, Atime::Update),
        FsError::SymlinkEscape { .. }
    );
}

#[test]
fn bad_leaves_are_invalid_input() {
    let (_t, dir) = tempdir();
    let d = Dir::open_canonical(&dir).unwrap();
    for leaf in ["", ".", "..", "a/b", "/abs"] {
        let err = publish(&d, OsStr::new(leaf), b"x", &opts(), &mut ok()).unwrap_err();
        match err {
            FsError::InvalidInput { path, .. } => assert_eq!(path, Path::new(leaf)),
            other => panic!("{leaf}: {other:?}"),
        }
    }
    assert!(names(&dir).is_empty());
}

#[test]
fn open_canonical_refuses_symlinked_component() {
    let (_t, base) = tempdir();
    std::fs::create_dir_all(base.join("real/inner")).unwrap();
    symlink(base.join("real"), base.join("alias")).unwrap();
    let err = Dir::open_canonical(&base.join("alias/inner")).unwrap_err();
    assert!(matches!(err, FsError::SymlinkEscape { .. }), "{err:?}");
    // The symlink as the final component is refused too.
    let err = Dir::open_canonical(&base.join("alias")).unwrap_err();
    assert!(matches!(err, FsError::SymlinkEscape { .. }), "{err:?}");
    // A dangling symlink component as well.
    symlink(base.join("nowhere"), base.join("dangling")).unwrap();
    let err = Dir::open_canonical(&base.join("dangling/x")).unwrap_err();
    assert!(matches!(err, FsError::SymlinkEscape { .. }), "{err:?}");
    // The canonical path works.
    let d = Dir::open_canonical(&base.join("real/inner")).unwrap();
    assert_eq!(d.path(), base.join("real/inner"));
}

#[test]
fn open_canonical_other_errors() {
    let (_t, base) = tempdir();
    std::fs::write(base.join("file"), b"").unwrap();
    assert_err!(
        Dir::open_canonical(&base.join("missing/x")),
        FsError::NotFound { .. }
    );
    assert_err!(
        Dir::open_canonical(&base.join("missing")),
        FsError::NotFound { .. }
    );
    assert_err!(
        Dir::open_canonical(&base.join("file")),
        FsError::NotAFile { .. }
    );
    assert_err!(
        Dir::open_canonical(&base.join("file/x")),
        FsError::NotAFile { .. }
    );
    for bad in ["relative/dir", "/a/../b"] {
        match Dir::open_canonical(Path::new(bad)).unwrap_err() {
            FsError::InvalidInput { path, .. } => assert_eq!(path, Path::new(bad)),
            other => panic!("{other:?}"),
        }
    }
    Dir::open_canonical(Path::new("/")).unwrap();
}

#[test]
fn handle_keeps_writes_in_the_opened_directory() {
    // Open, then swap the directory for a symlink to an outside directory:
    // the write still lands in the directory that was opened.
    let (_t, base) = tempdir();
    let dir = base.join("d");
    let outside = base.join("outside");
    std::fs::create_dir(&dir).unwrap();
    std::fs::create_dir(&outside).unwrap();
    let d = Dir::open_canonical(&dir).unwrap();
    std::fs::rename(&dir, base.join("moved")).unwrap();
    symlink(&outside, &dir).unwrap();
    publish(&d, OsStr::new("f"), b"data", &opts(), &mut ok()).unwrap();
    assert!(names(&outside).is_empty());
    assert_eq!(std::fs::read(base.join("moved/f")).unwrap(), b"data");
}

#[test]
fn publish_with_255_byte_multibyte_leaf() {
    let (_t, dir) = tempdir();
    let leaf = "é".repeat(127) + "a"; // 255 bytes
    assert_eq!(leaf.len(), 255);
    let d = Dir::open_canonical(&dir).unwrap();
    // The temp name must fit too, or creating it would fail.
    publish(&d, OsStr::new(&leaf), b"x", &opts(), &mut || {
        let t = temps(&dir);
        assert_eq!(t.len(), 1);
        let t = t[0]
            .file_name()
            .unwrap()
            .to_str()
            .expect("temp name cut inside a character");
        assert!(t.len() <= 255);
        assert!(t.starts_with(".é"));
        Ok(())
    })
    .unwrap();
    assert_eq!(names(&dir), vec![std::ffi::OsString::from(&leaf)]);
    assert_eq!(std::fs::read(dir.join(&leaf)).unwrap(), b"x");
}

#[test]
fn temp_exists_during_commit_and_is_named_right() {
    let (_t, dir) = tempdir();
    let d = Dir::open_canonical(&dir).unwrap();
    let pid = std::process::id();
    publish(&d, OsStr::new("n.txt"), b"x", &opts(), &mut || {
        let t = temps(&dir);
        assert_eq!(t.len(), 1);
        let t = t[0].file_name().unwrap().to_str().unwrap();
        let prefix = format!(".n.txt.{pid}.");
        assert!(t.starts_with(&prefix), "{t}");
        let hex = t
            .strip_prefix(&prefix)
            .unwrap()
            .strip_suffix(".tmp")
            .unwrap();
        assert_eq!(hex.len(), 12);
        assert!(hex.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')));
        assert_eq!(mode_of(&dir.join(t)), 0o600);
        Ok(())
    })
    .unwrap();
    assert_eq!(names(&dir), vec!["n.txt"]);
}

#[test]
fn many_publishes_leave_no_temps() {
    let (_t, dir) = tempdir();
    let d = Dir::open_canonical(&dir).unwrap();
    for i in 0..50 {
        publish(
            &d,
            OsStr::new("x"),
            format!("{i}").as_bytes(),
            &opts(),
            &mut ok(),
        )
        .unwrap();
    }
    assert_eq!(std::fs::read(dir.join("x")).unwrap(), b"49");
    assert_eq!(names(&dir), vec!["x"]);
}

#[test]
fn enospc_is_io_error_and_target_stays_identical() {
    let (_t, base) = tempdir();
    let mnt = base.join("small");
    let Some(_tmpfs) = Tmpfs::mount_at(&mnt, "64k") else {
        return;
    };
    std::fs::write(mnt.join("keep"), b"small original").unwrap();
    let d = Dir::open_canonical(&mnt).unwrap();
    let big = vec![b'x'; 1024 * 1024];
    let err = publish(&d, OsStr::new("keep"), &big, &opts(), &mut ok()).unwrap_err();
    assert!(matches!(err, FsError::Io { .. }), "{err:?}");
    match &err {
        FsError::Io { source, .. } => assert_eq!(source.raw_os_error(), Some(28), "{source}"), // ENOSPC
        other => panic!("{other:?}"),
    }
    assert_eq!(std::fs::read(mnt.join("keep")).unwrap(), b"small original");
    assert_eq!(names(&mnt), vec!["keep"]);
}

/// The descriptor an `Existing` keeps is the replaced file itself: after a
/// publish over it, it refers to the old inode (no name left, the old bytes
/// still readable through it), and it can be taken once.
#[test]
fn existing_keeps_the_replaced_inode_open_across_the_publish() {
    use std::io::Read;
    let (_t, dir) = tempdir();
    std::fs::write(dir.join("a.txt"), b"old bytes\n").unwrap();
    let d = Dir::open_canonical(&dir).unwrap();
    for prefix in [false, true] {
        let read = if prefix {
            writegate_fs::read_prefix(&d, OsStr::new("a.txt"), 4, Atime::Keep)
        } else {
            read_existing(&d, OsStr::new("a.txt"), None, Atime::Update)
        };
        let mut seen = read.unwrap().expect("the file exists");
        let before = (seen.stat.dev, seen.stat.ino);
        let o = PublishOptions {
            new_file_mode: NewFileMode::Owner,
            expect_existing: Some(seen.stat),
        };
        publish(&d, OsStr::new("a.txt"), b"new bytes\n", &o, &mut ok()).unwrap();
        let fd = seen.take_handle().expect("the read descriptor");
        assert!(seen.take_handle().is_none(), "taken once");
        let mut old = std::fs::File::from(fd);
        let meta = old.metadata().unwrap();
        assert_eq!((meta.dev(), meta.ino()), before);
        assert_eq!(meta.nlink(), 0, "the replaced inode has no name left");
        let mut rest = Vec::new();
        std::io::Seek::rewind(&mut old).unwrap();
        old.read_to_end(&mut rest).unwrap();
        assert_eq!(rest, b"old bytes\n");
        assert_eq!(std::fs::read(dir.join("a.txt")).unwrap(), b"new bytes\n");
        std::fs::write(dir.join("a.txt"), b"old bytes\n").unwrap();
    }
    assert!(temps(&dir).is_empty());
}

/// Deferring frees is refused on a filesystem that is not a local disk
/// (procfs here), and allowed on tmpfs when `/dev/shm` is one.
#[test]
fn deferred_frees_only_on_local_disk_filesystems() {
    let proc_dir = Dir::open_canonical(Path::new("/proc")).unwrap();
    assert!(!proc_dir.can_defer_frees());
    let shm_is_tmpfs = writegate_testkit::MountInfo::of(Path::new("/dev/shm"))
        .is_some_and(|m| m.fstype == "tmpfs" && m.point == Path::new("/dev/shm"));
    if shm_is_tmpfs {
        assert!(
            Dir::open_canonical(Path::new("/dev/shm"))
                .unwrap()
                .can_defer_frees()
        );
    }
    // The answers are remembered per mount; asking again, through
    // new handles and in turn, gives each mount its own answer.
    for _ in 0..3 {
        assert!(
            !Dir::open_canonical(Path::new("/proc"))
                .unwrap()
                .can_defer_frees()
        );
        if shm_is_tmpfs {
            assert!(
                Dir::open_canonical(Path::new("/dev/shm"))
                    .unwrap()
                    .can_defer_frees()
            );
        }
    }
}

/// A publish calls its `on_written` hook once the bytes are in
/// the temp file and before the precommit, and not at all when publishing
/// fails before the write.
#[test]
fn the_written_hook_runs_after_the_write_and_before_the_precommit() {
    let (_t, dir) = tempdir();
    let d = Dir::open_canonical(&dir).unwrap();
    let steps = std::cell::RefCell::new(Vec::new());
    let temp_content = &|| {
        // The one temp file in the directory holds the bytes already.
        std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "tmp"))
            .map(|p| std::fs::read(p).unwrap())
            .collect::<Vec<_>>()
    };
    let o = opts();
    Publish::new(&d, OsStr::new("w.txt"), b"new bytes", &o)
        .on_written(&mut || {
            assert_eq!(temp_content(), vec![b"new bytes".to_vec()]);
            steps.borrow_mut().push("written");
        })
        .precommit(&mut || {
            steps.borrow_mut().push("precommit");
            Ok::<(), FsError>(())
        })
        .run()
        .unwrap();
    assert_eq!(*steps.borrow(), ["written", "precommit"]);
    assert_eq!(std::fs::read(dir.join("w.txt")).unwrap(), b"new bytes");
    // A leaf that is not one name component fails before anything is written.
    let mut ran = false;
    let err = Publish::new(&d, OsStr::new("a/b"), b"x", &o)
        .on_written(&mut || ran = true)
        .run();
    assert!(err.is_err());
    assert!(!ran, "written ran for a write that never happened");
}

/// Sets `path`'s access time to 1,000 s after the epoch, before its
/// modification time, where relatime updates it on the next read.
fn age_atime(path: &std::path::Path) {
    let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000);
    let f = std::fs::File::options().write(true).open(path).unwrap();
    f.set_times(std::fs::FileTimes::new().set_accessed(old))
        .unwrap();
}

fn atime(path: &std::path::Path) -> i64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().atime()
}

/// The reads a write or an edit makes of the file it replaces
/// (`Atime::Keep`) leave the file's access time alone; the read methods'
/// reads (`Atime::Update`) update it as any read does.
#[test]
fn reads_for_a_replacement_leave_the_access_time_alone() {
    let (_t, dir) = tempdir();
    // A filesystem mounted `noatime` updates nothing: then there is
    // nothing to tell apart.
    let control = dir.join("control.txt");
    std::fs::write(&control, b"x").unwrap();
    age_atime(&control);
    std::fs::read(&control).unwrap();
    if atime(&control) == 1_000 {
        eprintln!("note: this filesystem does not update access times; skipped");
        return;
    }
    let d = Dir::open_canonical(&dir).unwrap();
    for name in ["kept.txt", "prefix.txt", "read.txt"] {
        std::fs::write(dir.join(name), b"content\n").unwrap();
        age_atime(&dir.join(name));
    }
    read_existing(&d, OsStr::new("kept.txt"), None, Atime::Keep)
        .unwrap()
        .unwrap();
    writegate_fs::read_prefix(&d, OsStr::new("prefix.txt"), 4, Atime::Keep)
        .unwrap()
        .unwrap();
    assert_eq!(atime(&dir.join("kept.txt")), 1_000);
    assert_eq!(atime(&dir.join("prefix.txt")), 1_000);
    let seen = read_existing(&d, OsStr::new("read.txt"), None, Atime::Update)
        .unwrap()
        .unwrap();
    assert_eq!(seen.content, Content::Whole(b"content\n".to_vec()));
    assert_ne!(atime(&dir.join("read.txt")), 1_000);
}
