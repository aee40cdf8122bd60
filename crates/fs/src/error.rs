//! [`FsError`]: every failure of this crate, naming the path it concerns and
//! keeping the operating system's error as its source.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use rustix::io::Errno;

/// Every failure of this crate's directory, read, publish, log and socket
/// operations.
///
/// Each variant names the path it concerns (shown with [`Path::display`];
/// the caller decides whether raw paths may be shown, SPEC 10
/// `audit.raw_paths`) and its `Display` text says what happened to it and
/// what to do. Where the operating system refused, its [`io::Error`] is the
/// variant's [`std::error::Error::source`], not part of the `Display` text:
/// print the whole chain to see it. Which wire `errorKind` (SPEC 11) a
/// variant stands for is decided by the daemon, in one place
/// (`writegate-core`'s `error.rs`); this crate knows nothing of the wire.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// A component of the canonical directory path, or the leaf at read or
    /// recheck time, is a symlink, or another inode than the one checked,
    /// although the caller resolved the path as canonical: the path was
    /// swapped after it was resolved. Nothing was written.
    #[error(
        "`{}` {what}; nothing was written: resolve the path again and retry, or write to the real target",
        path.display()
    )]
    SymlinkEscape {
        /// The component or leaf that changed (for the temp-file cases, the
        /// target the temp file was for).
        path: PathBuf,
        /// What was found there.
        what: Swap,
        /// The system error that revealed it (`ELOOP`, or a failed lookup of
        /// the temp file), if one did.
        #[source]
        source: Option<io::Error>,
    },
    /// An entry exists but is not the kind of file required: a leaf that is
    /// not a regular file, a directory component that is not a directory, a
    /// socket path that is not a socket. It was left alone.
    #[error("`{}` is a {found}, not a {expected}; it was left alone", path.display())]
    NotAFile {
        /// The entry.
        path: PathBuf,
        /// What it is (`"directory"`, `"symlink"`, `"fifo"`, ...).
        found: &'static str,
        /// What it had to be (`"regular file"`, `"directory"`, `"socket"`).
        expected: &'static str,
    },
    /// A directory (or one of its components) does not exist (`ENOENT`).
    #[error("`{}` does not exist; create it first, or check the path", path.display())]
    NotFound {
        /// The missing entry (the deepest one looked at).
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The operating system refused with `EACCES` or `EPERM`.
    #[error(
        "permission denied: cannot {op} `{}`; check the permissions of it and of the directories above it",
        path.display()
    )]
    PermissionDenied {
        /// What was being done.
        op: FsOp,
        /// The entry it was done to.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The caller's precommit check (e.g. the generation guard, SPEC 2)
    /// refused immediately before the rename, with a message (a
    /// [`crate::Publish`] returns the check's own error as it is; this is
    /// the refusal a caller's check makes when it has no error type of its
    /// own). Nothing was written.
    #[error("`{}` was not written: {reason}", path.display())]
    Aborted {
        /// The target.
        path: PathBuf,
        /// The caller's message, as its check returned it.
        reason: String,
    },
    /// Any other I/O failure (`ENOSPC`, `EDQUOT`, `EIO`, ...).
    #[error("cannot {op} `{}`", path.display())]
    Io {
        /// What was being done.
        op: FsOp,
        /// The entry it was done to.
        path: PathBuf,
        /// The operating system's error (its kind and raw errno kept).
        #[source]
        source: io::Error,
    },
    /// One `write(2)` to an append-only log wrote only part of the line
    /// (e.g. the disk filled up). The log was truncated back to where the
    /// line began (`rolled_back`); when even that failed, the next append
    /// cuts the fragment before writing.
    #[error(
        "short write to `{}`: {written} of {len} bytes (the disk is probably full); {}",
        path.display(),
        if *rolled_back { "the partial line was removed; free some space" } else { "the partial line could not be removed yet (the next append removes it); free some space" }
    )]
    ShortWrite {
        /// The log file.
        path: PathBuf,
        /// Bytes the kernel accepted.
        written: usize,
        /// Bytes of the whole line.
        len: usize,
        /// Whether the partial line was removed again.
        rolled_back: bool,
    },
    /// The daemon's private runtime directory is not private (SPEC 1: it
    /// must be a real directory, ours, mode 0700).
    #[error("`{}` {problem}; refusing to use it", path.display())]
    NotPrivate {
        /// The directory.
        path: PathBuf,
        /// What is wrong with it.
        problem: PrivateDirProblem,
    },
    /// An argument the API rules out, a bug in the caller: a directory path
    /// that is relative or holds `..`, a leaf that is not one file-name
    /// component, a log line holding a line break.
    #[error("`{}` {problem} (a bug in the caller)", path.display())]
    InvalidInput {
        /// The offending path or name (the log's path for a log line).
        path: PathBuf,
        /// What is wrong with it.
        problem: &'static str,
    },
}

/// What [`FsError::SymlinkEscape`] found where the canonical path said
/// there was a plain entry; its `Display` text completes "`path` ...".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swap {
    /// The entry is a symlink (or the kernel met one: `ELOOP`).
    Symlink,
    /// A directory component was replaced while the walk opened it.
    ReplacedWhileOpening,
    /// The leaf is another inode than the one the caller checked
    /// ([`crate::PublishOptions::expect_existing`]).
    ReplacedAfterCheck,
    /// The leaf the caller checked is gone.
    VanishedAfterCheck,
    /// The leaf changed between the publisher's two looks at it.
    ChangedWhilePublishing,
    /// The publisher's temp file name now names another entry, of this
    /// kind; it was left alone.
    TempReplaced {
        /// What the temp name names now (`"regular file"`, `"symlink"`, ...).
        found: &'static str,
    },
    /// The publisher's temp file name names nothing any more.
    TempVanished,
}

impl fmt::Display for Swap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Swap::Symlink => f.write_str("is a symlink"),
            Swap::ReplacedWhileOpening => f.write_str("was replaced while being opened"),
            Swap::ReplacedAfterCheck => {
                f.write_str("was replaced by another file after it was checked")
            }
            Swap::VanishedAfterCheck => f.write_str("disappeared after it was checked"),
            Swap::ChangedWhilePublishing => f.write_str("changed while it was being published"),
            Swap::TempReplaced { found } => {
                write!(f, "had its temp file replaced by a {found} before commit")
            }
            Swap::TempVanished => f.write_str("had its temp file vanish before commit"),
        }
    }
}

/// What is wrong with a runtime directory ([`FsError::NotPrivate`]); its
/// `Display` text completes "`path` ...".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PrivateDirProblem {
    /// It is not a directory (a symlink to one does not count).
    NotADirectory {
        /// What it is (`"symlink"`, `"regular file"`, ...).
        found: &'static str,
    },
    /// Another user owns it.
    ForeignOwner {
        /// Its owner.
        uid: u32,
        /// Our effective UID.
        ours: u32,
    },
    /// Its permission bits are not `0o700`.
    LooseMode {
        /// Its permission bits (`st_mode & 0o777`).
        mode: u32,
    },
}

impl fmt::Display for PrivateDirProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PrivateDirProblem::NotADirectory { found } => {
                write!(f, "is a {found}, not a directory")
            }
            PrivateDirProblem::ForeignOwner { uid, ours } => {
                write!(f, "is owned by uid {uid}, not by us ({ours})")
            }
            PrivateDirProblem::LooseMode { mode } => {
                write!(f, "has mode {mode:o}, not 0700 (chmod 700 it)")
            }
        }
    }
}

/// What this crate was doing when the operating system refused; its
/// `Display` text completes "cannot ... `path`".
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsOp {
    /// Opening a directory (a component of a canonical path, or a parent).
    OpenDir,
    /// Creating a directory and its missing parents.
    CreateDir,
    /// Looking at an entry (`fstatat`, `fstat`, `lstat`).
    Stat,
    /// Opening a file.
    Open,
    /// Reading a file.
    Read,
    /// Creating the publisher's temp file in a directory (the path is the
    /// directory).
    CreateTemp,
    /// Writing the new content into the temp file for the path.
    WriteTemp,
    /// Giving the temp file the owner and group of the file it replaces.
    SetTempOwner,
    /// Setting the permission bits of the temp file for the path.
    SetTempMode,
    /// `fsync` of the temp file for the path.
    SyncTemp,
    /// Renaming the temp file over the path.
    Rename,
    /// Appending a line to a log.
    Append,
    /// `fsync`/`fdatasync` of a file.
    Sync,
    /// Taking or releasing an advisory lock (`flock`) on a file.
    Lock,
    /// Truncating a file (a log's torn tail or rolled-back line, a journal
    /// being cleared).
    Truncate,
    /// Reserving disk space for a file (`fallocate`).
    Reserve,
    /// Setting the permission bits of an entry.
    SetMode,
    /// Removing an entry.
    Remove,
}

impl fmt::Display for FsOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FsOp::OpenDir => "open the directory",
            FsOp::CreateDir => "create the directory",
            FsOp::Stat => "look at",
            FsOp::Open => "open",
            FsOp::Read => "read",
            FsOp::CreateTemp => "create a temp file in",
            FsOp::WriteTemp => "write the temp file for",
            FsOp::SetTempOwner => "set the owner of the temp file for",
            FsOp::SetTempMode => "set the permissions of the temp file for",
            FsOp::SyncTemp => "fsync the temp file for",
            FsOp::Rename => "rename the temp file onto",
            FsOp::Append => "append to",
            FsOp::Sync => "fsync",
            FsOp::Lock => "lock",
            FsOp::Truncate => "truncate",
            FsOp::Reserve => "reserve space for",
            FsOp::SetMode => "set the permissions of",
            FsOp::Remove => "remove",
        })
    }
}

impl FsError {
    /// Classify `err`, met while doing `op` on `path`: `ENOENT` ->
    /// [`FsError::NotFound`], `EACCES`/`EPERM` ->
    /// [`FsError::PermissionDenied`], `ELOOP` -> [`FsError::SymlinkEscape`]
    /// (this crate never follows a symlink where it meets one), anything
    /// else -> [`FsError::Io`]. `err` is kept as the source in every case.
    pub(crate) fn os(op: FsOp, path: &Path, err: io::Error) -> FsError {
        let path = path.to_path_buf();
        match err.raw_os_error().map(Errno::from_raw_os_error) {
            Some(Errno::NOENT) => FsError::NotFound { path, source: err },
            Some(Errno::ACCESS | Errno::PERM) => FsError::PermissionDenied {
                op,
                path,
                source: err,
            },
            Some(Errno::LOOP) => FsError::SymlinkEscape {
                path,
                what: Swap::Symlink,
                source: Some(err),
            },
            Some(_) => FsError::Io {
                op,
                path,
                source: err,
            },
            None => match err.kind() {
                io::ErrorKind::NotFound => FsError::NotFound { path, source: err },
                io::ErrorKind::PermissionDenied => FsError::PermissionDenied {
                    op,
                    path,
                    source: err,
                },
                _ => FsError::Io {
                    op,
                    path,
                    source: err,
                },
            },
        }
    }

    /// [`FsError::os`] for a `rustix` errno.
    pub(crate) fn errno(op: FsOp, path: &Path, err: Errno) -> FsError {
        FsError::os(op, path, io::Error::from(err))
    }

    /// [`FsError::InvalidInput`] for `path`.
    pub(crate) fn invalid(path: impl Into<PathBuf>, problem: &'static str) -> FsError {
        FsError::InvalidInput {
            path: path.into(),
            problem,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn os_errors_keep_path_and_source() {
        let p = Path::new("/x/y");
        let of = |e: Errno| FsError::errno(FsOp::Open, p, e);
        assert!(matches!(of(Errno::NOENT), FsError::NotFound { .. }));
        assert!(matches!(
            of(Errno::ACCESS),
            FsError::PermissionDenied { op: FsOp::Open, .. }
        ));
        assert!(matches!(of(Errno::PERM), FsError::PermissionDenied { .. }));
        assert!(matches!(
            of(Errno::LOOP),
            FsError::SymlinkEscape {
                what: Swap::Symlink,
                source: Some(_),
                ..
            }
        ));
        let e = of(Errno::NOSPC);
        assert!(matches!(e, FsError::Io { op: FsOp::Open, .. }), "{e:?}");
        // The message names the path and the operation; the OS error is the
        // source, with its errno intact, not repeated in the message.
        assert_eq!(e.to_string(), "cannot open `/x/y`");
        let src = e.source().and_then(|s| s.downcast_ref::<io::Error>());
        assert_eq!(
            src.and_then(io::Error::raw_os_error),
            Some(Errno::NOSPC.raw_os_error())
        );
        // Errors without an errno are classified by kind.
        let e = FsError::os(FsOp::Read, p, io::ErrorKind::NotFound.into());
        assert!(matches!(e, FsError::NotFound { .. }));
        let e = FsError::os(FsOp::Read, p, io::ErrorKind::UnexpectedEof.into());
        assert!(matches!(e, FsError::Io { op: FsOp::Read, .. }));
    }

    #[test]
    fn messages_name_the_path_and_what_to_do() {
        let p = PathBuf::from("/w/a.txt");
        let e = FsError::SymlinkEscape {
            path: p.clone(),
            what: Swap::ReplacedAfterCheck,
            source: None,
        };
        assert_eq!(
            e.to_string(),
            "`/w/a.txt` was replaced by another file after it was checked; nothing was written: resolve the path again and retry, or write to the real target"
        );
        let e = FsError::NotAFile {
            path: p.clone(),
            found: "directory",
            expected: "regular file",
        };
        assert_eq!(
            e.to_string(),
            "`/w/a.txt` is a directory, not a regular file; it was left alone"
        );
        let e = FsError::NotPrivate {
            path: p,
            problem: PrivateDirProblem::LooseMode { mode: 0o755 },
        };
        assert_eq!(
            e.to_string(),
            "`/w/a.txt` has mode 755, not 0700 (chmod 700 it); refusing to use it"
        );
    }
}
