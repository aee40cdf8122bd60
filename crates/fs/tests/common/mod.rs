//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A fresh temp directory and its canonical path.
pub fn tempdir() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().canonicalize().unwrap();
    (t, p)
}

/// Names in `dir`, sorted.
pub fn names(dir: &Path) -> Vec<OsString> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    v.sort();
    v
}

/// Names in `dir` that look like publisher temp files.
pub fn temps(dir: &Path) -> Vec<OsString> {
    names(dir)
        .into_iter()
        .filter(|n| n.to_string_lossy().ends_with(".tmp"))
        .collect()
}

/// Permission bits of `path` (not following a symlink).
pub fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap()
        .permissions()
        .mode()
        & 0o7777
}

pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}
