//! Start-up removal of temp files left by dead processes (SPEC 7.3, last
//! bullet).

use std::ffi::{CStr, OsStr};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType, Mode};
use rustix::io::Errno;
use rustix::process::Pid;

use crate::Dir;
use crate::dir::DIR_FLAGS;
use crate::publish::parse_temp_name;

/// A directory waiting to be listed: its name relative to an open parent.
struct Pending {
    parent: Arc<OwnedFd>,
    name: Vec<u8>,
    path: PathBuf,
}

/// Remove temp files of the publisher's naming (`.<anything>.<pid>.<12
/// lowercase hex>.tmp`, regular files only) under the canonical directory
/// `root` whose pid is not our own and names no live process (`kill(pid, 0)`
/// fails with `ESRCH`; `EPERM` means alive). Each removal is logged with
/// `tracing::info!`; the removed paths are returned.
///
/// The walk goes through directory handles (`openat` with `O_NOFOLLOW`,
/// `unlinkat` relative to the handle), never follows a symlink, and stays on
/// `root`'s filesystem (mount points below it are skipped). Failures are
/// logged with `tracing::warn!` and skipped; an unopenable `root` yields an
/// empty list. Caveat: a pid is only meaningful in our pid namespace, so a
/// live writer in another namespace sharing the tree could lose its temp
/// file; run this only at start-up, before serving (SPEC 7.3).
pub fn remove_stale_temps(root: &Path) -> Vec<PathBuf> {
    let mut removed = Vec::new();
    let root_dir = match Dir::open_canonical(root) {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(root = %root.display(), error = &e as &dyn std::error::Error,
                "stale temp cleanup: cannot open root");
            return removed;
        }
    };
    let root_dev = match rustix::fs::fstat(&root_dir) {
        Ok(st) => st.st_dev,
        Err(e) => {
            tracing::warn!(root = %root.display(), error = %e,
                "stale temp cleanup: cannot stat root");
            return removed;
        }
    };
    let me = std::process::id();
    // Re-open the root readable for listing (the handle may be O_PATH).
    let first = match rustix::fs::openat(&root_dir, c".", DIR_FLAGS, Mode::empty()) {
        Ok(fd) => fd,
        Err(e) => {
            tracing::warn!(root = %root.display(), error = %e,
                "stale temp cleanup: cannot list root");
            return removed;
        }
    };
    let mut stack = Vec::new();
    scan_dir(
        Arc::new(first),
        root.to_path_buf(),
        root_dev,
        me,
        &mut stack,
        &mut removed,
    );
    removed
}

/// List one directory: remove matching stale temps, push subdirectories.
fn scan_dir(
    dirfd: Arc<OwnedFd>,
    path: PathBuf,
    root_dev: u64,
    me: u32,
    stack: &mut Vec<Pending>,
    removed: &mut Vec<PathBuf>,
) {
    let mut next = Some((dirfd, path));
    while let Some((dirfd, path)) = next.take().or_else(|| open_pending(stack, root_dev)) {
        list_one(&dirfd, &path, me, stack, removed);
    }
}

/// Pop pending directories until one opens as a directory on the root's
/// filesystem.
fn open_pending(stack: &mut Vec<Pending>, root_dev: u64) -> Option<(Arc<OwnedFd>, PathBuf)> {
    while let Some(p) = stack.pop() {
        let fd = match rustix::fs::openat(
            p.parent.as_fd(),
            OsStr::from_bytes(&p.name),
            DIR_FLAGS,
            Mode::empty(),
        ) {
            Ok(fd) => fd,
            Err(e) => {
                // ELOOP/ENOTDIR: swapped for a symlink or a file meanwhile.
                tracing::warn!(path = %p.path.display(), error = %e,
                    "stale temp cleanup: skipping directory");
                continue;
            }
        };
        match rustix::fs::fstat(&fd) {
            Ok(st) if st.st_dev == root_dev => return Some((Arc::new(fd), p.path)),
            Ok(_) => {} // another filesystem
            Err(e) => {
                tracing::warn!(path = %p.path.display(), error = %e,
                    "stale temp cleanup: skipping directory");
            }
        }
    }
    None
}

fn list_one(
    dirfd: &Arc<OwnedFd>,
    path: &Path,
    me: u32,
    stack: &mut Vec<Pending>,
    removed: &mut Vec<PathBuf>,
) {
    let mut entries = match rustix::fs::Dir::read_from(dirfd.as_fd()) {
        Ok(d) => d,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e,
                "stale temp cleanup: cannot list directory");
            return;
        }
    };
    while let Some(entry) = entries.read() {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(path = %path.display(), error = %e,
                    "stale temp cleanup: error listing directory");
                break;
            }
        };
        let name: &CStr = entry.file_name();
        let bytes = name.to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        let mut ft = entry.file_type();
        if ft == FileType::Unknown {
            ft = match rustix::fs::statat(dirfd.as_fd(), name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => FileType::from_raw_mode(st.st_mode),
                Err(_) => continue,
            };
        }
        let child = path.join(OsStr::from_bytes(bytes));
        match ft {
            FileType::Directory => stack.push(Pending {
                parent: Arc::clone(dirfd),
                name: bytes.to_vec(),
                path: child,
            }),
            FileType::RegularFile => {
                let Some(pid) = parse_temp_name(bytes) else {
                    continue;
                };
                if pid == me || !is_dead(pid) {
                    continue;
                }
                match rustix::fs::unlinkat(dirfd.as_fd(), name, AtFlags::empty()) {
                    Ok(()) => {
                        tracing::info!(path = %child.display(), pid,
                            "removed stale temp file of a dead process");
                        removed.push(child);
                    }
                    Err(Errno::NOENT) => {}
                    Err(e) => tracing::warn!(path = %child.display(), error = %e,
                        "stale temp cleanup: cannot remove"),
                }
            }
            _ => {}
        }
    }
}

/// True when no process has this pid (`kill(pid, 0)` -> `ESRCH`).
fn is_dead(pid: u32) -> bool {
    let Some(pid) = i32::try_from(pid).ok().and_then(Pid::from_raw) else {
        return false;
    };
    matches!(rustix::process::test_kill_process(pid), Err(Errno::SRCH))
}
