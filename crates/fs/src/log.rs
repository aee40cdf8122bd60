//! The append-only log file behind the audit sink (SPEC 10).

use std::borrow::Cow;
use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::dir::type_name;
use crate::{FsError, FsOp};

/// An append-only log file (the audit sink, SPEC 10): every
/// [`AppendLog::append`] adds one whole line with a single `write(2)` on an
/// `O_APPEND` descriptor, so lines from many threads (or processes) never
/// interleave. Shareable between threads (`&self` methods).
#[derive(Debug)]
pub struct AppendLog {
    fd: OwnedFd,
    path: PathBuf,
}

impl AppendLog {
    /// Open (or create) the log at `path` with
    /// `O_WRONLY|O_APPEND|O_CREAT|O_CLOEXEC|O_NOFOLLOW|O_NONBLOCK`, mode 0600
    /// when created (an existing file keeps its mode). Missing parent
    /// directories are created mode 0700 (the daemon's own state directory,
    /// reached by path).
    ///
    /// Errors name the path: a symlink at `path` is
    /// [`FsError::SymlinkEscape`] (`ELOOP`, never followed); anything but a
    /// regular file at `path` (a fifo, a device) is [`FsError::NotAFile`];
    /// other failures as the operating system reports them
    /// ([`FsError::NotFound`], [`FsError::PermissionDenied`],
    /// [`FsError::Io`]).
    pub fn open(path: &Path) -> Result<Self, FsError> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(|e| FsError::os(FsOp::CreateDir, parent, e))?;
        }
        // O_NONBLOCK so that a fifo planted at the path cannot block the
        // open; it has no effect on a regular file.
        let flags = OFlags::WRONLY
            | OFlags::APPEND
            | OFlags::CREATE
            | OFlags::CLOEXEC
            | OFlags::NOFOLLOW
            | OFlags::NONBLOCK
            | OFlags::NOCTTY;
        let fd = rustix::fs::open(path, flags, Mode::from_raw_mode(0o600))
            .map_err(|e| FsError::errno(FsOp::Open, path, e))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| FsError::errno(FsOp::Stat, path, e))?;
        let found = FileType::from_raw_mode(st.st_mode);
        if found != FileType::RegularFile {
            return Err(FsError::NotAFile {
                path: path.to_path_buf(),
                found: type_name(found),
                expected: "regular file",
            });
        }
        Ok(AppendLog {
            fd,
            path: path.to_path_buf(),
        })
    }

    /// The path the log was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Append `line` as one whole line with ONE `write(2)` call.
    ///
    /// `line` is one line, with or without its trailing `\n` (one is added
    /// when missing). A `\n` anywhere else is [`FsError::InvalidInput`] (it
    /// would split the record). The write is retried only on `EINTR`; a
    /// failed write is [`FsError::Io`] (or another variant by its errno), a
    /// short one [`FsError::ShortWrite`], after which a lone `\n` is appended
    /// best-effort so the fragment cannot run into the next record. Not
    /// fsynced: see [`AppendLog::sync`].
    pub fn append(&self, line: &[u8]) -> Result<(), FsError> {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        if body.contains(&b'\n') {
            return Err(FsError::invalid(
                &self.path,
                "cannot take a log line holding a line break (it would split the record)",
            ));
        }
        let buf: Cow<'_, [u8]> = if line.ends_with(b"\n") {
            Cow::Borrowed(line)
        } else {
            let mut owned = Vec::with_capacity(line.len() + 1);
            owned.extend_from_slice(line);
            owned.push(b'\n');
            Cow::Owned(owned)
        };
        let written = loop {
            match rustix::io::write(&self.fd, &buf) {
                Ok(n) => break n,
                Err(Errno::INTR) => {}
                Err(e) => return Err(FsError::errno(FsOp::Append, &self.path, e)),
            }
        };
        if written == buf.len() {
            return Ok(());
        }
        if written > 0 {
            // Terminate the fragment; its own failure changes nothing.
            let _ = rustix::io::write(&self.fd, b"\n");
        }
        Err(FsError::ShortWrite {
            path: self.path.clone(),
            written,
            len: buf.len(),
        })
    }

    /// `fdatasync` the log, making every appended line durable.
    pub fn sync(&self) -> Result<(), FsError> {
        rustix::fs::fdatasync(&self.fd).map_err(|e| FsError::errno(FsOp::Sync, &self.path, e))
    }
}
