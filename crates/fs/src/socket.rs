//! The daemon's own runtime files: the private socket directory and the
//! socket file (SPEC 1). These are the daemon's files, not user writes.

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::Path;

use rustix::fs::FileType;

use crate::dir::type_name;
use crate::{FsError, FsOp, PrivateDirProblem};

/// The effective UID of this process.
pub fn current_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Makes sure `dir` is a private directory of ours: created 0700 when
/// missing (parents too, each 0700); an existing one must be a real
/// directory (not a symlink), owned by us, with mode 0700, else
/// [`FsError::NotPrivate`] saying what is wrong (SPEC 1: "the directory must
/// then be ours and 0700, else refuse to start"). Failures of the operating
/// system name the directory.
pub fn prepare_private_dir(dir: &Path) -> Result<(), FsError> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|e| FsError::os(FsOp::CreateDir, dir, e))?;
        }
        Err(e) => return Err(FsError::os(FsOp::Stat, dir, e)),
        Ok(_) => {}
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| FsError::os(FsOp::Stat, dir, e))?;
    let problem = if !meta.file_type().is_dir() {
        PrivateDirProblem::NotADirectory {
            found: type_name(FileType::from_raw_mode(meta.mode())),
        }
    } else if meta.uid() != current_uid() {
        PrivateDirProblem::ForeignOwner {
            uid: meta.uid(),
            ours: current_uid(),
        }
    } else if meta.permissions().mode() & 0o777 != 0o700 {
        PrivateDirProblem::LooseMode {
            mode: meta.permissions().mode() & 0o777,
        }
    } else {
        return Ok(());
    };
    Err(FsError::NotPrivate {
        path: dir.to_path_buf(),
        problem,
    })
}

/// Removes a socket file (a stale one at start-up, ours at shutdown).
/// Refuses anything that is not a socket ([`FsError::NotAFile`]); failures
/// of the operating system name the path.
pub fn remove_socket_file(path: &Path) -> Result<(), FsError> {
    let meta = std::fs::symlink_metadata(path).map_err(|e| FsError::os(FsOp::Stat, path, e))?;
    let found = FileType::from_raw_mode(meta.mode());
    if found != FileType::Socket {
        return Err(FsError::NotAFile {
            path: path.to_path_buf(),
            found: type_name(found),
            expected: "socket",
        });
    }
    std::fs::remove_file(path).map_err(|e| FsError::os(FsOp::Remove, path, e))
}

/// Sets the permission bits of the socket file we just bound.
pub fn set_socket_mode(path: &Path, mode: u32) -> Result<(), FsError> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| FsError::os(FsOp::SetMode, path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_0700_and_refuses_loose_or_foreign_dirs() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a/b");
        prepare_private_dir(&p).unwrap();
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o700
        );
        prepare_private_dir(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = prepare_private_dir(&p).unwrap_err();
        assert!(
            matches!(
                e,
                FsError::NotPrivate {
                    problem: PrivateDirProblem::LooseMode { mode: 0o755 },
                    ..
                }
            ),
            "{e:?}"
        );
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        let e = prepare_private_dir(&link).unwrap_err();
        assert!(
            matches!(
                e,
                FsError::NotPrivate {
                    problem: PrivateDirProblem::NotADirectory { found: "symlink" },
                    ..
                }
            ),
            "{e:?}"
        );
    }

    #[test]
    fn remove_socket_file_refuses_regular_files() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        std::fs::write(&f, b"x").unwrap();
        let e = remove_socket_file(&f).unwrap_err();
        assert!(
            matches!(
                e,
                FsError::NotAFile {
                    found: "regular file",
                    expected: "socket",
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(f.exists());
        let s = d.path().join("s.sock");
        let _l = std::os::unix::net::UnixListener::bind(&s).unwrap();
        remove_socket_file(&s).unwrap();
        assert!(!s.exists());
    }
}
