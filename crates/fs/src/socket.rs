//! The daemon's own runtime files: the private socket directory and the
//! socket file (SPEC 1). These are the daemon's files, not user writes.

use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::Path;

/// The effective UID of this process.
pub fn current_uid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// Makes sure `dir` is a private directory of ours: created 0700 when
/// missing (parents too, each 0700); an existing one must be a real
/// directory (not a symlink), owned by us, with mode 0700, else an error
/// naming what is wrong (SPEC 1: "the directory must then be ours and 0700,
/// else refuse to start").
pub fn prepare_private_dir(dir: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)?;
        }
        Err(e) => return Err(e),
        Ok(_) => {}
    }
    let meta = std::fs::symlink_metadata(dir)?;
    if !meta.file_type().is_dir() {
        return Err(io::Error::other(format!(
            "{} is not a directory (a symlink or file); refusing to use it for the socket",
            dir.display()
        )));
    }
    if meta.uid() != current_uid() {
        return Err(io::Error::other(format!(
            "{} is owned by uid {}, not by us ({}); refusing to use it",
            dir.display(),
            meta.uid(),
            current_uid()
        )));
    }
    if meta.permissions().mode() & 0o777 != 0o700 {
        return Err(io::Error::other(format!(
            "{} has mode {:o}, not 0700; refusing to use it (chmod 700 it)",
            dir.display(),
            meta.permissions().mode() & 0o777
        )));
    }
    Ok(())
}

/// Removes a socket file (a stale one at start-up, ours at shutdown).
/// Refuses anything that is not a socket.
pub fn remove_socket_file(path: &Path) -> io::Result<()> {
    use std::os::unix::fs::FileTypeExt;
    let meta = std::fs::symlink_metadata(path)?;
    if !meta.file_type().is_socket() {
        return Err(io::Error::other(format!(
            "{} is not a socket",
            path.display()
        )));
    }
    std::fs::remove_file(path)
}

/// Sets the permission bits of the socket file we just bound.
pub fn set_socket_mode(path: &Path, mode: u32) -> io::Result<()> {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
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
        assert!(prepare_private_dir(&p).is_err());
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&p, &link).unwrap();
        assert!(prepare_private_dir(&link).is_err());
    }

    #[test]
    fn remove_socket_file_refuses_regular_files() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("f");
        std::fs::write(&f, b"x").unwrap();
        assert!(remove_socket_file(&f).is_err());
        assert!(f.exists());
        let s = d.path().join("s.sock");
        let _l = std::os::unix::net::UnixListener::bind(&s).unwrap();
        remove_socket_file(&s).unwrap();
        assert!(!s.exists());
    }
}
