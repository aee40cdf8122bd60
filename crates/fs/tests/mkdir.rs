//! `open_creating` (the missing parent directories of a workspace
//! write): real directories and symlinks in temp dirs.

use std::os::unix::fs::{PermissionsExt, symlink};
use writegate_fs::{FsError, open_creating};

fn root() -> (tempfile::TempDir, std::path::PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let r = std::fs::canonicalize(t.path()).unwrap();
    (t, r)
}

#[test]
fn creates_each_missing_component_with_the_mode() {
    let (_t, r) = root();
    std::fs::create_dir(r.join("src")).unwrap();
    let dir = r.join("src/new/deeper");
    let (d, made) = open_creating(&r, &dir, 0o750).unwrap();
    assert_eq!(d.path(), dir);
    assert_eq!(made.paths(), [r.join("src/new").as_path(), dir.as_path()]);
    for p in made.paths() {
        let m = std::fs::metadata(p).unwrap();
        assert!(m.is_dir());
        // The umask may only take bits away.
        assert_eq!(
            m.permissions().mode() & 0o777 & !0o750,
            0,
            "{}",
            p.display()
        );
    }
    // Existing directories are just opened.
    let (_d, again) = open_creating(&r, &dir, 0o755).unwrap();
    assert!(again.is_empty());
}

#[test]
fn a_symlinked_component_is_never_followed() {
    let (_t, r) = root();
    let outside = tempfile::tempdir().unwrap();
    symlink(outside.path(), r.join("link")).unwrap();
    let err = open_creating(&r, &r.join("link/new"), 0o755).unwrap_err();
    assert!(matches!(err, FsError::SymlinkEscape { .. }), "{err}");
    assert!(std::fs::read_dir(outside.path()).unwrap().next().is_none());
}

#[test]
fn a_file_in_the_way_is_not_a_directory_and_nothing_stays() {
    let (_t, r) = root();
    std::fs::write(r.join("file"), b"x").unwrap();
    let err = open_creating(&r, &r.join("a/file/b"), 0o755);
    // `a` is created, then `a/file` is missing too, then `a/file/b`: all
    // fine; but a file at `file` blocks `file/b`.
    assert!(err.is_ok());
    let err = open_creating(&r, &r.join("file/b"), 0o755).unwrap_err();
    assert!(matches!(err, FsError::NotAFile { .. }), "{err}");
}

#[test]
fn remove_takes_away_only_empty_created_directories() {
    let (_t, r) = root();
    let (_d, made) = open_creating(&r, &r.join("x/y"), 0o755).unwrap();
    made.remove();
    assert!(!r.join("x").exists());
    let (_d, made) = open_creating(&r, &r.join("p/q"), 0o755).unwrap();
    std::fs::write(r.join("p/keep.txt"), b"k").unwrap();
    made.remove();
    assert!(!r.join("p/q").exists());
    assert!(r.join("p/keep.txt").exists(), "someone else's file stays");
}

#[test]
fn dir_outside_the_root_is_a_caller_bug() {
    let (_t, r) = root();
    let err = open_creating(&r, std::path::Path::new("/elsewhere/x"), 0o755).unwrap_err();
    assert!(matches!(err, FsError::InvalidInput { .. }), "{err}");
}
