//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Asserts that the `Result` `$r` is an `Err` matching `$p`, showing what it
/// was otherwise. (Not every test binary uses it, hence the allows.)
#[allow(unused_macros)]
macro_rules! assert_err {
    ($r:expr, $p:pat) => {{
        let r = $r;
        assert!(
            matches!(r, Err($p)),
            "expected Err({}), got {r:?}",
            stringify!($p)
        );
    }};
}
#[allow(unused_imports)]
pub(crate) use assert_err;

/// A fresh temp directory and its canonical path.
pub(crate) fn tempdir() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().canonicalize().unwrap();
    (t, p)
}

/// Names in `dir`, sorted.
pub(crate) fn names(dir: &Path) -> Vec<OsString> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    v.sort();
    v
}

/// Names in `dir` that look like publisher temp files.
pub(crate) fn temps(dir: &Path) -> Vec<OsString> {
    names(dir)
        .into_iter()
        .filter(|n| n.to_string_lossy().ends_with(".tmp"))
        .collect()
}

/// Permission bits of `path` (not following a symlink).
pub(crate) fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

pub(crate) fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}
