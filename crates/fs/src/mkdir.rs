//! Creating the missing parent directories of a workspace write (because
//! agents create `src/new/mod.rs` directly), the same way everything here
//! is done: relative to open directory handles, never following a symlink.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::{Component, Path, PathBuf};

use rustix::fs::{AtFlags, Mode};
use rustix::io::Errno;

use crate::dir::{DIR_FLAGS, classify_component_error};
use crate::{Dir, FsError, FsOp};

/// The directories [`open_creating`] made, so that a write that fails
/// afterwards can take them away again ([`CreatedDirs::remove`]).
#[derive(Debug, Default)]
pub struct CreatedDirs {
    /// `(parent handle, name, full path)` of each, outermost first.
    made: Vec<(OwnedFd, OsString, PathBuf)>,
}

impl CreatedDirs {
    /// The full paths of the directories created, outermost first.
    pub fn paths(&self) -> Vec<&Path> {
        self.made.iter().map(|(_, _, p)| p.as_path()).collect()
    }

    /// How many were created.
    pub fn len(&self) -> usize {
        self.made.len()
    }

    /// True when none was.
    pub fn is_empty(&self) -> bool {
        self.made.is_empty()
    }

    /// Removes the directories again, innermost first, each only if it is
    /// still empty (`unlinkat(AT_REMOVEDIR)` refuses otherwise: whatever
    /// someone else put there meanwhile stays). Best effort: a failure is
    /// left alone.
    pub fn remove(self) {
        for (parent, name, _) in self.made.into_iter().rev() {
            let _ = rustix::fs::unlinkat(&parent, &name, AtFlags::REMOVEDIR);
            let _ = rustix::fs::fsync(&parent);
        }
    }
}

/// Opens the canonical directory `dir`, creating each missing component
/// below the already existing canonical directory `root` with `mode`
/// (before the umask), and fsyncing each parent after a creation so the new
/// entry is durable.
///
/// The walk goes from `root` one component at a time with
/// `openat(O_DIRECTORY | O_NOFOLLOW)` and `mkdirat`: a component that is a
/// symlink (or is swapped for one while we walk) is
/// [`FsError::SymlinkEscape`], never followed, so every directory created is
/// inside `root`. A component that exists as another kind of file is
/// [`FsError::NotAFile`]. `dir` must be `root` or below it, with only plain
/// components in between ([`FsError::InvalidInput`] otherwise: a caller
/// bug). A component created concurrently by someone else is simply used.
///
/// Returns the open directory and what was created.
pub fn open_creating(root: &Path, dir: &Path, mode: u32) -> Result<(Dir, CreatedDirs), FsError> {
    let rel = dir
        .strip_prefix(root)
        .map_err(|_| FsError::invalid(dir, "is not below the workspace root"))?;
    let mut names = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => names.push(n),
            _ => {
                return Err(FsError::invalid(
                    dir,
                    "is not a canonical path below the root",
                ));
            }
        }
    }
    let root_dir = Dir::open_canonical(root)?;
    let mut created = CreatedDirs::default();
    let mut cur: OwnedFd = rustix::fs::openat(root_dir.fd(), ".", DIR_FLAGS, Mode::empty())
        .map_err(|e| FsError::errno(FsOp::OpenDir, root, e))?;
    let mut walked = root.to_path_buf();
    for name in names {
        walked.push(name);
        let next = match rustix::fs::openat(&cur, name, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => {
                match rustix::fs::mkdirat(&cur, name, Mode::from_raw_mode(mode & 0o7777)) {
                    Ok(()) => {
                        rustix::fs::fsync(&cur)
                            .map_err(|e| FsError::errno(FsOp::Sync, &walked, e))?;
                        let parent = rustix::io::dup(&cur)
                            .map_err(|e| FsError::errno(FsOp::OpenDir, &walked, e))?;
                        created
                            .made
                            .push((parent, name.to_os_string(), walked.clone()));
                    }
                    // Someone else made it meanwhile: use it (checked below).
                    Err(Errno::EXIST) => {}
                    Err(e) => {
                        created.remove();
                        return Err(FsError::errno(FsOp::CreateDir, &walked, e));
                    }
                }
                match rustix::fs::openat(&cur, name, DIR_FLAGS, Mode::empty()) {
                    Ok(fd) => fd,
                    Err(e) => {
                        let err = classify_component_error(&cur, name, e, &walked);
                        created.remove();
                        return Err(err);
                    }
                }
            }
            Err(e) => {
                let err = classify_component_error(&cur, name, e, &walked);
                created.remove();
                return Err(err);
            }
        };
        cur = next;
    }
    Ok((Dir::from_parts(cur, dir.to_path_buf()), created))
}
