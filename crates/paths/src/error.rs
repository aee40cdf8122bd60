//! [`ResolveError`]: the refusals of the resolver and of the external target check.

use std::io;
use std::path::Path;

/// Why a path was refused by [`crate::resolve`] or [`crate::resolve_external`].
///
/// Each variant carries a human message that may name the raw path (so it is
/// only fit for places where raw paths are allowed, SPEC 10 `audit.raw_paths`);
/// [`ResolveError::hint`] never names a path. Each variant stands for one wire
/// `errorKind` (SPEC 11), named in its docs; the daemon maps them, in one
/// place (`writegate-core`'s `error.rs`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// `parse_error`: empty path, NUL byte, relative path where an absolute one
    /// is required, a path of [`crate::PATH_MAX`] bytes or more or a name over
    /// [`crate::NAME_MAX`] bytes, a non-directory in the middle of the path, a
    /// trailing `/` on something that is not a directory, or (external check)
    /// a leaf that is a fifo, socket or device / a parent that is not a
    /// directory.
    #[error("parse error: {0}")]
    ParseError(String),
    /// `not_a_file`: (external check) the leaf is a directory, where a
    /// regular file is needed.
    #[error("not a file: {0}")]
    NotAFile(String),
    /// `path_outside_workspace`: lexically outside every root (SPEC 5), or
    /// suspicious (SPEC 6), or (external check) holding a `.`/`..` component.
    #[error("path outside workspace: {0}")]
    OutsideWorkspace(String),
    /// `reserved_name`: a component is a DOS device name (`con`, `nul.txt`,
    /// `COM1.log`), refused everywhere, inside the workspace too (SPEC 6).
    #[error("reserved name: {0}")]
    ReservedName(String),
    /// `symlink_escape`: the canonical path leaves the root, a dangling link
    /// whose target would be outside, a link cycle or more than
    /// [`crate::MAX_SYMLINK_HOPS`] hops; (external check) a symlink leaf, or a
    /// leaf whose device/inode changed between lstat and realpath.
    #[error("symlink escape: {0}")]
    SymlinkEscape(String),
    /// `path_not_found`: no existing ancestor (the workspace root itself is
    /// gone); (external check) the direct parent of a new leaf is missing.
    #[error("path not found: {0}")]
    NotFound(String),
    /// `permission_denied`: a lookup failed with `EACCES`/`EPERM` (or another
    /// error that prevented looking at the path at all).
    #[error("permission denied: {0}")]
    PermissionDenied(String),
}

impl ResolveError {
    /// A short, path-free advice for the wire `hint` field and the audit event
    /// (safe to record even when `audit.raw_paths` is off).
    pub fn hint(&self) -> String {
        match self {
            ResolveError::ParseError(_) => {
                "use an absolute path of at most 4095 bytes with names of at most 255 bytes, whose parent components are directories and whose leaf is a regular file (or does not exist yet)"
            }
            ResolveError::NotAFile(_) => {
                "name a file inside it instead (a directory is never replaced)"
            }
            ResolveError::OutsideWorkspace(_) => {
                "write inside the workspace root; paths outside it, paths with `.`/`..` on the external route, and suspicious names (trailing dots or spaces, `...`, DOS device names, UNC or device prefixes) are refused"
            }
            ResolveError::ReservedName(_) => {
                "a DOS device name (con, prn, aux, nul, com1-com9, lpt1-lpt9, alone or before a dot) is refused everywhere, inside the workspace too, because it can alias a device; choose another name"
            }
            ResolveError::SymlinkEscape(_) => {
                "a symlink leads outside the workspace (or loops, or the file changed while it was checked), and writegate does not follow it out; write a path whose every component is inside the workspace, replace the symlink with the file itself, or, if the target's directory should be writable, register it as a workspace"
            }
            ResolveError::NotFound(_) => "the parent directory does not exist; create it first",
            ResolveError::PermissionDenied(_) => {
                "the daemon is not allowed to look up this path; check the directory permissions"
            }
        }
        .to_string()
    }
}

/// Map an I/O error met while looking at `path` (`what` says which lookup) to
/// a [`ResolveError`]. `ENOENT` maps to [`ResolveError::NotFound`]; callers
/// that treat a missing entry as a missing tail must handle it before calling.
pub(crate) fn io_error(err: &io::Error, what: &str, path: &Path) -> ResolveError {
    use rustix::io::Errno;
    let msg = format!("{what} {}: {err}", path.display());
    match Errno::from_io_error(err) {
        Some(Errno::NOENT) => return ResolveError::NotFound(msg),
        Some(Errno::ACCESS | Errno::PERM) => return ResolveError::PermissionDenied(msg),
        Some(Errno::NOTDIR | Errno::NAMETOOLONG | Errno::INVAL | Errno::ILSEQ) => {
            return ResolveError::ParseError(msg);
        }
        Some(Errno::LOOP) => return ResolveError::SymlinkEscape(msg),
        _ => {}
    }
    match err.kind() {
        io::ErrorKind::NotFound => ResolveError::NotFound(msg),
        io::ErrorKind::NotADirectory
        | io::ErrorKind::InvalidFilename
        | io::ErrorKind::InvalidInput => ResolveError::ParseError(msg),
        // `PermissionDenied`, and anything else (EIO, ENOMEM, ...), which
        // means we could not look at the path at all: fail closed with the
        // closest kind.
        _ => ResolveError::PermissionDenied(msg),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_never_name_the_path() {
        let secret = "/home/u/secret-project/x.txt".to_string();
        for e in [
            ResolveError::ParseError(secret.clone()),
            ResolveError::NotAFile(secret.clone()),
            ResolveError::OutsideWorkspace(secret.clone()),
            ResolveError::ReservedName(secret.clone()),
            ResolveError::SymlinkEscape(secret.clone()),
            ResolveError::NotFound(secret.clone()),
            ResolveError::PermissionDenied(secret.clone()),
        ] {
            assert!(!e.hint().contains("secret"));
            assert!(e.to_string().contains("secret"));
        }
    }

    #[test]
    fn io_errors_map_to_variants() {
        use rustix::io::Errno;
        let p = Path::new("/x");
        let of = |e: Errno| io_error(&io::Error::from_raw_os_error(e.raw_os_error()), "lstat", p);
        assert!(matches!(
            of(Errno::ACCESS),
            ResolveError::PermissionDenied(_)
        ));
        assert!(matches!(of(Errno::PERM), ResolveError::PermissionDenied(_)));
        assert!(matches!(of(Errno::NOENT), ResolveError::NotFound(_)));
        assert!(matches!(of(Errno::NOTDIR), ResolveError::ParseError(_)));
        assert!(matches!(
            of(Errno::NAMETOOLONG),
            ResolveError::ParseError(_)
        ));
        assert!(matches!(of(Errno::LOOP), ResolveError::SymlinkEscape(_)));
        assert!(matches!(of(Errno::IO), ResolveError::PermissionDenied(_)));
    }
}
