//! Removing one regular file relative to an open directory handle
//! (`writegate setup --remove` takes out a file it wrote earlier).

use std::ffi::OsStr;

use rustix::fs::AtFlags;
use rustix::io::Errno;

use crate::dir::{LeafState, check_leaf, leaf_state};
use crate::{Dir, FsError, FsOp, LeafStat, Swap};

/// Removes the regular file `leaf` of `dir`, then fsyncs the directory.
///
/// With `expect`, the leaf must still be that inode (`dev`, `ino`), else
/// [`FsError::SymlinkEscape`] (replaced since the caller looked) and
/// nothing is removed. Returns `false` when there was nothing to remove.
/// Errors: a symlink leaf -> [`FsError::SymlinkEscape`]; a leaf that is not
/// a regular file -> [`FsError::NotAFile`]; `EACCES`/`EPERM` ->
/// [`FsError::PermissionDenied`]; a `leaf` that is not one file name
/// component -> [`FsError::InvalidInput`]. Each names the path.
pub fn remove_leaf(dir: &Dir, leaf: &OsStr, expect: Option<&LeafStat>) -> Result<bool, FsError> {
    check_leaf(leaf)?;
    let shown = || dir.path().join(leaf);
    match (leaf_state(dir.fd(), dir.path(), leaf)?, expect) {
        (LeafState::Missing, None) => return Ok(false),
        (LeafState::Missing, Some(_)) => {
            return Err(FsError::SymlinkEscape {
                path: shown(),
                what: Swap::VanishedAfterCheck,
                source: None,
            });
        }
        (LeafState::Regular(st), Some(e)) if st.dev != e.dev || st.ino != e.ino => {
            return Err(FsError::SymlinkEscape {
                path: shown(),
                what: Swap::ReplacedAfterCheck,
                source: None,
            });
        }
        (LeafState::Regular(_), _) => {}
    }
    match rustix::fs::unlinkat(dir.fd(), leaf, AtFlags::empty()) {
        Ok(()) => {}
        Err(Errno::NOENT) => return Ok(false),
        Err(e) => return Err(FsError::errno(FsOp::Remove, &shown(), e)),
    }
    if dir.syncable() {
        rustix::fs::fsync(dir.fd()).map_err(|e| FsError::errno(FsOp::Sync, dir.path(), e))?;
    }
    Ok(true)
}

/// Removes the file (or symlink: never followed) at `path`: for the
/// person's own commands (`service uninstall`, a settings backup past the
/// kept few), which name a path of their own, not an agent's.
///
/// Errors: as `unlink(2)`.
pub fn unlink_path(path: &std::path::Path) -> std::io::Result<()> {
    std::fs::remove_file(path)
}

/// Removes `path` if it is an empty directory (`rmdir(2)`): for the
/// person's own commands, as [`unlink_path`].
///
/// Errors: as `rmdir(2)` (not empty, not a directory, missing).
pub fn rmdir_empty(path: &std::path::Path) -> std::io::Result<()> {
    std::fs::remove_dir(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_a_file_and_refuses_a_swapped_one() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        std::fs::write(root.join("a"), "x").unwrap();
        std::fs::write(root.join("b"), "y").unwrap();
        let dir = Dir::open_canonical(&root).unwrap();
        let st_a = crate::stat_leaf(&dir, OsStr::new("a")).unwrap().unwrap();
        // `b` is not the inode the caller saw as `a`: refused, kept.
        assert!(remove_leaf(&dir, OsStr::new("b"), Some(&st_a)).is_err());
        assert!(root.join("b").exists());
        assert!(remove_leaf(&dir, OsStr::new("a"), Some(&st_a)).unwrap());
        assert!(!root.join("a").exists());
        assert!(!remove_leaf(&dir, OsStr::new("a"), None).unwrap());
        std::os::unix::fs::symlink(root.join("b"), root.join("l")).unwrap();
        assert!(remove_leaf(&dir, OsStr::new("l"), None).is_err());
        assert!(root.join("l").symlink_metadata().is_ok());
    }
}
