//! What tests look at on disk: temp directories, names, modes, snapshots,
//! temp files left behind, the lines of an audit log.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// A fresh temp directory and its canonical path.
pub fn tempdir() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().canonicalize().unwrap();
    (t, p)
}

/// The names in `dir`, sorted (a temp file left behind shows).
pub fn names(dir: &Path) -> Vec<OsString> {
    let mut v: Vec<_> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    v.sort();
    v
}

/// Permission bits of `p` (not following a symlink).
pub fn mode_of(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

/// writegate temp files (`.<leaf>.<pid>.<hex>.tmp`) anywhere under `dir`.
pub fn temps(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let p = e.path();
            let n = e.file_name().to_string_lossy().into_owned();
            if e.file_type().unwrap().is_dir() {
                stack.push(p);
            } else if n.starts_with('.') && p.extension().is_some_and(|x| x == "tmp") {
                out.push(p);
            }
        }
    }
    out
}

/// The lines of a JSON-lines log such as the audit log, without their
/// `\n` (none if the file is missing). Panics on a torn tail: the audit log
/// only ever holds whole lines.
pub fn audit_lines(path: &Path) -> Vec<String> {
    let text = fs::read_to_string(path).unwrap_or_default();
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "torn tail in {}: {:?}",
        path.display(),
        &text[text.rfind('\n').map_or(0, |i| i + 1)..]
    );
    text.lines().map(str::to_string).collect()
}

/// One entry of a tree snapshot: kind, permission bits, and the bytes of a
/// file or the target of a link.
#[derive(Debug, PartialEq, Eq)]
pub enum Entry {
    /// A directory and its mode.
    Dir(u32),
    /// A regular file, its mode and bytes.
    File(u32, Vec<u8>),
    /// A symlink and its target.
    Link(PathBuf),
    /// Anything else (a socket, a fifo) and its mode.
    Other(u32),
}

/// Every path under `dir` (relative), without following links, except the
/// top-level names in `skip`.
pub fn snapshot(dir: &Path, skip: &[&str]) -> BTreeMap<PathBuf, Entry> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(dir).unwrap().to_path_buf();
            if d == dir && skip.iter().any(|x| rel == Path::new(x)) {
                continue;
            }
            let m = fs::symlink_metadata(&p).unwrap();
            let mode = m.permissions().mode() & 0o7777;
            let ft = m.file_type();
            let entry = if ft.is_dir() {
                stack.push(p.clone());
                Entry::Dir(mode)
            } else if ft.is_symlink() {
                Entry::Link(fs::read_link(&p).unwrap())
            } else if ft.is_file() {
                Entry::File(mode, fs::read(&p).unwrap_or_default())
            } else {
                Entry::Other(mode)
            };
            out.insert(rel, entry);
        }
    }
    out
}
