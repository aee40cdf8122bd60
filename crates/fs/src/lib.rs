//! `writegate-fs` is the only crate of writegate that writes to disk. It opens a
//! target's directory by walking a canonical path one component at a time
//! without following symlinks, reads and stats the leaf relative to that
//! directory handle, publishes new bytes atomically and durably (temp file in
//! the same directory, fsync, recheck, `renameat`, directory fsync; SPEC 7.3),
//! serialises writers per canonical target with a daemon-wide FIFO path lock
//! (SPEC 7.4), closes the descriptors of replaced files on a background thread
//! so their blocks are freed off the request's critical path, removes temp
//! files left by dead processes, appends whole lines
//! to the audit log (SPEC 10) and writes small private state files atomically
//! (persistent approvals, SPEC 12). It must never decide policy: it knows
//! nothing about workspaces, containment, suspicious names, encodings, sizes
//! or approvals. Callers hand it canonical paths and finished bytes; it only
//! refuses what it cannot do safely (a symlink where the canonical path said
//! there was none, a leaf that is not a regular file, a refused precommit) and
//! reports every failure as an [`FsError`] whose [`FsError::kind`] is the wire
//! `errorKind`. Everything here is synchronous and blocking: async callers run
//! it on blocking threads.

#![warn(missing_docs)]

mod cleanup;
mod dir;
mod lock;
mod log;
mod publish;
mod release;
mod socket;

use std::io;

use rustix::io::Errno;

pub use cleanup::remove_stale_temps;
pub use dir::{Dir, Existing, LeafStat, read_existing, read_prefix, stat_leaf};
pub use lock::{PathGuard, PathLocks};
pub use log::AppendLog;
pub use publish::{
    NewFileMode, PublishOptions, Published, publish, temp_file_name, write_private_file,
};
pub use release::{RELEASE_QUEUE, Releaser};
pub use socket::{current_uid, prepare_private_dir, remove_socket_file, set_socket_mode};

/// Every failure of this crate's directory, read and publish operations.
///
/// Each variant maps to one wire `errorKind` (SPEC 11) through
/// [`FsError::kind`]. The `String` payloads are human-readable messages that
/// may contain the path involved; callers decide whether raw paths may be
/// shown (SPEC 10, `audit.raw_paths`).
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// A component of the canonical directory path, or the leaf at read or
    /// recheck time, is a symlink (or was swapped for another inode) although
    /// the caller resolved it as canonical: a swap was detected. Nothing was
    /// written. Kind `symlink_escape`.
    #[error("symlink escape: {0}")]
    SymlinkEscape(String),
    /// The leaf (or a directory component) exists but is not the kind of file
    /// required: the leaf is not a regular file, or a component of the
    /// directory path is not a directory. Kind `parse_error`.
    #[error("not a regular file: {0}")]
    NotAFile(String),
    /// The directory (or one of its components) does not exist. Kind
    /// `path_not_found`.
    #[error("not found: {0}")]
    NotFound(String),
    /// `EACCES` or `EPERM` from the operating system. Kind
    /// `permission_denied`.
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// The caller's precommit check (e.g. the generation guard, SPEC 2)
    /// refused immediately before the rename; the message is the caller's.
    /// Nothing was written. Kind `aborted`: the caller maps it to its own
    /// `errorKind` (e.g. `generation_closed`).
    #[error("aborted: {0}")]
    Aborted(String),
    /// Any other I/O failure, including `ENOSPC` and `EDQUOT`, with the raw OS
    /// error kept. Kind `io_error`.
    #[error("I/O error: {0}")]
    Io(#[from] io::Error),
}

impl FsError {
    /// The wire `errorKind` (SPEC 11) of this error: one of
    /// `"symlink_escape"`, `"parse_error"`, `"path_not_found"`,
    /// `"permission_denied"`, `"aborted"` (the caller maps it) or
    /// `"io_error"`.
    pub fn kind(&self) -> &'static str {
        match self {
            FsError::SymlinkEscape(_) => "symlink_escape",
            FsError::NotAFile(_) => "parse_error",
            FsError::NotFound(_) => "path_not_found",
            FsError::PermissionDenied(_) => "permission_denied",
            FsError::Aborted(_) => "aborted",
            FsError::Io(_) => "io_error",
        }
    }

    /// Map an errno met while operating on `what` (a path or a description)
    /// to the matching variant: `ENOENT` -> `NotFound`, `EACCES`/`EPERM` ->
    /// `PermissionDenied`, `ELOOP` -> `SymlinkEscape`, everything else ->
    /// `Io` with the raw errno kept.
    pub(crate) fn from_errno(err: Errno, what: &dyn std::fmt::Display) -> FsError {
        let io_err = io::Error::from(err);
        match err {
            Errno::NOENT => FsError::NotFound(format!("{what}: {io_err}")),
            Errno::ACCESS | Errno::PERM => FsError::PermissionDenied(format!("{what}: {io_err}")),
            Errno::LOOP => FsError::SymlinkEscape(format!("{what}: {io_err}")),
            _ => FsError::Io(io_err),
        }
    }

    /// Map a `std::io::Error` the same way as [`FsError::from_errno`].
    pub(crate) fn from_io(err: io::Error, what: &dyn std::fmt::Display) -> FsError {
        match err.raw_os_error() {
            Some(raw) => FsError::from_errno(Errno::from_raw_os_error(raw), what),
            None => match err.kind() {
                io::ErrorKind::NotFound => FsError::NotFound(format!("{what}: {err}")),
                io::ErrorKind::PermissionDenied => {
                    FsError::PermissionDenied(format!("{what}: {err}"))
                }
                _ => FsError::Io(err),
            },
        }
    }
}

impl From<FsError> for io::Error {
    /// Lossy conversion for the `std::io::Result` helpers
    /// ([`write_private_file`]): `NotFound` and `PermissionDenied` keep their
    /// kind, `Io` is returned unchanged, the rest become `ErrorKind::Other`
    /// with the error's message.
    fn from(err: FsError) -> io::Error {
        match err {
            FsError::Io(e) => e,
            FsError::NotFound(m) => io::Error::new(io::ErrorKind::NotFound, m),
            FsError::PermissionDenied(m) => io::Error::new(io::ErrorKind::PermissionDenied, m),
            other => io::Error::other(other.to_string()),
        }
    }
}

/// Invalid-argument error for inputs that are not what the API promises
/// (relative path, a leaf with a `/`, ...): a caller bug, reported as `Io`.
pub(crate) fn invalid_input(msg: String) -> FsError {
    FsError::Io(io::Error::new(io::ErrorKind::InvalidInput, msg))
}
