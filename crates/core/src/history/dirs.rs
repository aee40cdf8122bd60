//! The directories an undo of a creation takes back. The list comes from
//! the history index, a file a same-UID process can rewrite, so no entry
//! of it is trusted: each is checked again at undo time by the rules a
//! write's own directories obey, and removed without following a symlink;
//! an entry that fails is skipped and reported, never an error (the file
//! itself is already taken back by then).
//!
//! An entry is removed only when:
//! - the operation is a workspace write (the external writer never creates
//!   directories, SPEC 7.1, so a list on an external record was not written
//!   by writegate), recorded in the workspace whose runtime the undo runs
//!   in (the one that holds the file);
//! - it is an absolute path in canonical form (no `.`, `..`, `//` or
//!   trailing `/`), strictly below that workspace's root, and one of the
//!   directories on the way to the file (a write creates only its file's
//!   missing parents);
//! - the workspace resolver, run on it now, finds it inside that root as
//!   the same canonical path (no symlink on the way) and an existing
//!   directory;
//! - at removal, walked from the root's handle with `O_NOFOLLOW` and
//!   removed with `unlinkat(AT_REMOVEDIR)` relative to its parent's handle
//!   (only if empty), innermost first.

use super::Record;
use crate::audit::Writer;
use crate::runtime::Runtime;
use std::path::{Component, Path, PathBuf};
use writegate_fs::{Dir, DirRemoval};
use writegate_paths::{FileKind, OsView};

/// A directory the operation recorded as created that the undo did not
/// remove, and why. Serialised (camelCase) in the undo outcome's
/// `skippedDirs`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct SkippedDir {
    /// The directory as the history recorded it.
    pub path: String,
    /// Why it stays.
    pub reason: String,
}

/// The entries of `rec.created_dirs` an undo of `rec` may remove (see the
/// module doc), innermost first, and those it skips. `file` is the
/// canonical path the undo removes (already resolved and found equal to
/// the record's), `runtime` the workspace the undo runs in.
pub(crate) fn removable(
    rec: &Record,
    file: &Path,
    runtime: &Runtime,
) -> (Vec<PathBuf>, Vec<SkippedDir>) {
    let mut ok: Vec<PathBuf> = Vec::new();
    let mut skipped = Vec::new();
    let parent = file.parent().unwrap_or(file);
    for entry in &rec.created_dirs {
        match check(rec, entry, parent, runtime) {
            Ok(Some(p)) if !ok.contains(&p) => ok.push(p),
            Ok(_) => {}
            Err(reason) => skipped.push(SkippedDir {
                path: entry.clone(),
                reason,
            }),
        }
    }
    // Innermost first: they are all on one chain, so the longest first.
    ok.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    (ok, skipped)
}

/// One entry: `Ok(Some(path))` to remove, `Ok(None)` already gone,
/// `Err(reason)` skipped.
fn check(
    rec: &Record,
    entry: &str,
    parent: &Path,
    runtime: &Runtime,
) -> Result<Option<PathBuf>, String> {
    let root = &runtime.root;
    if rec.writer == Writer::External {
        return Err(
            "the external writer creates no directories, so this entry of the history index was not written by writegate; left alone"
                .to_string(),
        );
    }
    if rec.workspace != runtime.id {
        return Err(format!(
            "the operation is recorded in another workspace than {}, which holds the file; left alone",
            root.display()
        ));
    }
    let path = PathBuf::from(entry);
    let plain = path.is_absolute()
        && path
            .components()
            .all(|c| matches!(c, Component::RootDir | Component::Normal(_)))
        // Byte for byte: `Path`'s `==` compares components, which reads
        // `/ws//a`, `/ws/./a` and `/ws/a/` as `/ws/a`.
        && path.components().collect::<PathBuf>().as_os_str() == path.as_os_str();
    if !plain {
        return Err(
            "not an absolute canonical path (it holds `.`, `..`, an empty name or a trailing `/`); left alone"
                .to_string(),
        );
    }
    if path == *root || !writegate_paths::is_within(&path, root) {
        return Err(format!(
            "not below the workspace root {}; left alone",
            root.display()
        ));
    }
    if !writegate_paths::is_within(parent, &path) {
        return Err(format!(
            "not a directory on the way to {}, so the operation did not create it; left alone",
            crate::path_text(parent)
        ));
    }
    match writegate_paths::resolve(&OsView, &path, std::slice::from_ref(root)) {
        Ok(r) if r.canonical != path => Err(format!(
            "a symlink is on its way now (it resolves to {}); left alone",
            crate::path_text(&r.canonical)
        )),
        Ok(r) if r.root != *root => Err(format!(
            "not below the workspace root {}; left alone",
            root.display()
        )),
        Ok(r) => match r.kind {
            None => Ok(None),
            Some(FileKind::Dir) => Ok(Some(path)),
            Some(_) => Err("no longer a directory; left alone".to_string()),
        },
        Err(e) => Err(format!("{e}; left alone")),
    }
}

/// Removes `dirs` (from [`removable`]: canonical, below `root`, innermost
/// first), each only if empty, without following a symlink; returns the
/// ones removed and adds the others to `skipped` with the reason.
pub(crate) fn remove(root: &Path, dirs: &[PathBuf], skipped: &mut Vec<SkippedDir>) -> Vec<String> {
    let mut removed = Vec::new();
    if dirs.is_empty() {
        return removed;
    }
    let skip = |skipped: &mut Vec<SkippedDir>, d: &Path, reason: String| {
        skipped.push(SkippedDir {
            path: crate::path_text(d),
            reason,
        });
    };
    let base = match Dir::open_canonical(root) {
        Ok(b) => b,
        Err(e) => {
            for d in dirs {
                skip(
                    skipped,
                    d,
                    format!("the workspace root cannot be opened ({e}); left alone"),
                );
            }
            return removed;
        }
    };
    for d in dirs {
        let Ok(rel) = d.strip_prefix(root) else {
            skip(
                skipped,
                d,
                "not below the workspace root; left alone".into(),
            );
            continue;
        };
        match writegate_fs::remove_empty_dir_below(&base, rel) {
            Ok(DirRemoval::Removed) => removed.push(crate::path_text(d)),
            Ok(DirRemoval::Gone) => {}
            Ok(DirRemoval::NotEmpty) => skip(
                skipped,
                d,
                "not empty (something was put there since); left alone".into(),
            ),
            Ok(DirRemoval::NotADirectory) => {
                skip(skipped, d, "no longer a directory; left alone".into());
            }
            Err(e) => skip(skipped, d, format!("{e}; left alone")),
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::Intent;
    use std::os::unix::fs::symlink;

    /// A workspace with `x/y` in it and a directory outside, and a record
    /// of a creation of `file` listing `dirs`.
    fn setup() -> (tempfile::TempDir, PathBuf, PathBuf, Runtime) {
        let d = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(d.path()).unwrap();
        let (root, out) = (base.join("ws"), base.join("out"));
        std::fs::create_dir_all(root.join("x/y")).unwrap();
        std::fs::create_dir_all(out.join("y")).unwrap();
        let rt = Runtime::new(root.clone(), true);
        (d, root, out, rt)
    }

    fn record(rt: &Runtime, file: &Path, dirs: &[&Path]) -> Record {
        let mut r = super::super::new_record("op-1", file, Intent::Write, Writer::Workspace);
        r.workspace.clone_from(&rt.id);
        r.created = true;
        r.created_dirs = dirs.iter().map(|d| crate::path_text(d)).collect();
        r
    }

    fn paths(skipped: &[SkippedDir]) -> Vec<&str> {
        skipped.iter().map(|s| s.path.as_str()).collect()
    }

    #[test]
    fn the_directories_on_the_files_way_are_removable_innermost_first() {
        let (_d, root, _out, rt) = setup();
        let file = root.join("x/y/f.txt");
        let r = record(&rt, &file, &[&root.join("x"), &root.join("x/y")]);
        let (ok, skipped) = removable(&r, &file, &rt);
        assert_eq!(ok, [root.join("x/y"), root.join("x")]);
        assert!(skipped.is_empty(), "{skipped:?}");
        let mut skipped = Vec::new();
        let removed = remove(&root, &ok, &mut skipped);
        assert_eq!(removed.len(), 2, "{skipped:?}");
        assert!(!root.join("x").exists() && root.is_dir());
    }

    /// An entry on the file's way that a symlink now leads through (out
    /// of the workspace, or to another place inside it) fails the
    /// resolver's check; so does the root itself, and anything of another
    /// workspace's record or of an external one.
    #[test]
    fn entries_through_a_symlink_or_of_another_record_are_skipped() {
        let (_d, root, out, rt) = setup();
        let file = root.join("x/y/f.txt");
        std::fs::rename(root.join("x"), root.join("real")).unwrap();
        symlink(&out, root.join("x")).unwrap();
        let r = record(&rt, &file, &[&root.join("x/y"), &root]);
        let (ok, skipped) = removable(&r, &file, &rt);
        assert!(ok.is_empty(), "{ok:?}");
        assert_eq!(
            paths(&skipped),
            [crate::path_text(&root.join("x/y")), crate::path_text(&root)]
        );
        assert!(skipped[0].reason.contains("symlink escape"), "{skipped:?}");
        std::fs::remove_file(root.join("x")).unwrap();
        symlink(root.join("real"), root.join("x")).unwrap();
        let (ok, skipped) = removable(&r, &file, &rt);
        assert!(ok.is_empty(), "{ok:?}");
        assert!(skipped[0].reason.contains("resolves to"), "{skipped:?}");

        std::fs::remove_file(root.join("x")).unwrap();
        std::fs::rename(root.join("real"), root.join("x")).unwrap();
        let mut other = record(&rt, &file, &[&root.join("x/y")]);
        other.workspace = "0123456789ab".into();
        assert!(removable(&other, &file, &rt).0.is_empty());
        let mut external = record(&rt, &file, &[&root.join("x/y")]);
        external.writer = Writer::External;
        assert!(removable(&external, &file, &rt).0.is_empty());
        assert!(out.join("y").is_dir() && root.join("x/y").is_dir());
    }
}
