//! The append-only log file behind the audit sink (SPEC 10): whole lines
//! only, under an advisory lock shared by every process that appends to it.

use std::borrow::Cow;
use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};

use rustix::fs::{FallocateFlags, FileType, FlockOperation, Mode, OFlags};
use rustix::io::Errno;

use crate::dir::type_name;
use crate::{FsError, FsOp};

/// Bytes read at a time when looking for line breaks.
const CHUNK: usize = 64 * 1024;

/// An append-only log file (the audit sink, SPEC 10) that never holds a
/// partial line where a reader can see it followed by another line.
///
/// Every [`AppendLog::append`] takes an exclusive `flock(2)` on the file
/// (so every process appending through this type takes turns), makes sure
/// the file ends with a line break (a torn tail left by a writer that died
/// mid-`write(2)`, or by a power cut, is cut back to the last whole line),
/// writes the line with one `write(2)` on an `O_APPEND` descriptor and, when
/// the kernel takes only part of it (a full disk), truncates the file back
/// to where the line began. A line is therefore either wholly in the file
/// or not at all. Shareable between threads (`&self` methods; appends from
/// threads of one process serialise on the lock).
#[derive(Debug)]
pub struct AppendLog {
    fd: OwnedFd,
    path: PathBuf,
    dev: u64,
    ino: u64,
    /// `flock` locks belong to the open file description, which every
    /// thread shares: threads take turns on this first.
    threads: Mutex<()>,
    /// The length this process last left the file at, under the lock, with
    /// a whole line at its end ([`NO_END`] until the first append or
    /// repair). When the file is that long again, its last byte is that
    /// `\n` and the one-byte read that checks it is skipped (see
    /// [`AppendLog::whole_len`]).
    known_end: AtomicU64,
}

/// [`AppendLog`]'s `known_end` before this process has seen a whole end.
const NO_END: u64 = u64::MAX;

/// Whether [`AppendLog::reserve`] could reserve the space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reserved {
    /// The blocks are allocated: appends into them cannot fail for lack of
    /// space (`ENOSPC`, `EDQUOT`).
    Yes,
    /// The filesystem cannot reserve space (`fallocate` with
    /// `FALLOC_FL_KEEP_SIZE` unsupported): appends may still hit a full disk.
    Unsupported,
}

impl AppendLog {
    /// Open (or create) the log at `path` with
    /// `O_RDWR|O_APPEND|O_CREAT|O_CLOEXEC|O_NOFOLLOW|O_NONBLOCK`, mode 0600
    /// when created (an existing file keeps its mode). Missing parent
    /// directories are created mode 0700 (the daemon's own state directory,
    /// reached by path). Opening changes nothing in the file: a torn tail is
    /// repaired by the first [`LogLock::repair_tail`] or append.
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
        // open; it has no effect on a regular file. Readable too: the
        // tail check and the recovery scan read the log back.
        let flags = OFlags::RDWR
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
            dev: st.st_dev,
            ino: st.st_ino,
            threads: Mutex::new(()),
            known_end: AtomicU64::new(NO_END),
        })
    }

    /// The path the log was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `(st_dev, st_ino)` of the open file (to tell whether the file at the
    /// path is still this one).
    pub fn identity(&self) -> (u64, u64) {
        (self.dev, self.ino)
    }

    /// Takes the exclusive `flock(2)` on the log, waiting for other
    /// appenders (in this process or another), until the returned guard is
    /// dropped.
    pub fn lock(&self) -> Result<LogLock<'_>, FsError> {
        let thread = self.threads.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            match rustix::fs::flock(&self.fd, FlockOperation::LockExclusive) {
                Ok(()) => {
                    return Ok(LogLock {
                        log: self,
                        _thread: thread,
                    });
                }
                Err(Errno::INTR) => {}
                Err(e) => return Err(FsError::errno(FsOp::Lock, &self.path, e)),
            }
        }
    }

    /// Append `line` as one whole line (see the type's doc): takes the
    /// lock, then [`LogLock::append`]. Returns the file's length after it.
    pub fn append(&self, line: &[u8]) -> Result<u64, FsError> {
        self.lock()?.append(line)
    }

    /// `fdatasync` the log, making every appended line durable.
    pub fn sync(&self) -> Result<(), FsError> {
        rustix::fs::fdatasync(&self.fd).map_err(|e| FsError::errno(FsOp::Sync, &self.path, e))
    }

    /// The file's current length in bytes.
    pub fn len(&self) -> Result<u64, FsError> {
        let st =
            rustix::fs::fstat(&self.fd).map_err(|e| FsError::errno(FsOp::Stat, &self.path, e))?;
        Ok(u64::try_from(st.st_size).unwrap_or(0))
    }

    /// The file's length when it ends with a whole line (or is empty),
    /// checked WITHOUT the lock: `fstat`, then a one-byte `pread` of the
    /// last byte. `None` when the last byte is not `\n` (a torn tail, or a
    /// line being appended or cut back right then): the caller then takes
    /// the lock ([`LogLock::repair_tail`]).
    ///
    /// A length returned is a lower bound on where every later line will
    /// start, for as long as the file is this one: at the moment of the
    /// read the file was at least that long and its byte before that
    /// offset was a `\n`. Lines hold no other `\n`, so that byte ends a
    /// whole line, and nothing cuts a whole line: a torn-tail cut keeps
    /// everything up to the last `\n`, and a rolled-back short write cuts
    /// back only to where its own line began. (Used for the offset an
    /// intent records, from which recovery looks for its event.)
    ///
    /// When the file is exactly as long as this process last left it under
    /// the lock (after a whole line of its own, or a repair), the `pread` is
    /// skipped: that byte was a `\n` then, and appenders only add bytes
    /// after it or cut back to a line start. Only an outside truncation
    /// below that length, followed by regrowth to exactly the same length
    /// ending mid-line, would make the skip wrong: the offset would then
    /// not be a lower bound (the append, which always checks the tail under
    /// the lock, cuts that fragment), and recovery after a crash in that
    /// window could miss the event and write it again.
    ///
    /// Errors: `fstat` or `pread` failures, naming the path.
    pub fn whole_len(&self) -> Result<Option<u64>, FsError> {
        let len = self.len()?;
        if len == 0 || len == self.known_end.load(Ordering::Relaxed) {
            return Ok(Some(len));
        }
        let mut last = [0u8; 1];
        loop {
            match rustix::io::pread(&self.fd, &mut last, len - 1) {
                Ok(1) if last[0] == b'\n' => return Ok(Some(len)),
                Ok(_) => return Ok(None),
                Err(Errno::INTR) => {}
                Err(e) => return Err(FsError::errno(FsOp::Read, &self.path, e)),
            }
        }
    }

    /// Whether the log is empty.
    pub fn is_empty(&self) -> Result<bool, FsError> {
        Ok(self.len()? == 0)
    }

    /// Allocates `len` bytes of disk from `offset` on without changing the
    /// file's length (`fallocate(FALLOC_FL_KEEP_SIZE)`), so that appends up
    /// to `offset + len` cannot fail for lack of space. Any truncation of
    /// the log (a rolled-back short write, a repaired tail) gives the
    /// reservation back.
    ///
    /// Errors: `ENOSPC`/`EDQUOT` and other failures as [`FsError::Io`]; a
    /// filesystem without the call is `Ok(Reserved::Unsupported)`.
    pub fn reserve(&self, offset: u64, len: u64) -> Result<Reserved, FsError> {
        loop {
            match rustix::fs::fallocate(&self.fd, FallocateFlags::KEEP_SIZE, offset, len) {
                Ok(()) => return Ok(Reserved::Yes),
                Err(Errno::INTR) => {}
                Err(Errno::OPNOTSUPP | Errno::NOSYS) => return Ok(Reserved::Unsupported),
                Err(e) => return Err(FsError::errno(FsOp::Reserve, &self.path, e)),
            }
        }
    }
}

/// The exclusive lock on an [`AppendLog`] (released on drop). Everything
/// that changes the log's length is done through it.
#[derive(Debug)]
pub struct LogLock<'a> {
    log: &'a AppendLog,
    _thread: MutexGuard<'a, ()>,
}

impl Drop for LogLock<'_> {
    fn drop(&mut self) {
        // Closing the descriptor would release it too; an unlock failure
        // leaves nothing to do.
        let _ = rustix::fs::flock(&self.log.fd, FlockOperation::Unlock);
    }
}

impl LogLock<'_> {
    fn err(&self, op: FsOp) -> impl Fn(Errno) -> FsError + '_ {
        move |e| FsError::errno(op, &self.log.path, e)
    }

    /// Reads up to `buf.len()` bytes at `offset` (fewer only at the end).
    fn read_at(&self, buf: &mut [u8], offset: u64) -> Result<usize, FsError> {
        let mut done = 0;
        while done < buf.len() {
            match rustix::io::pread(&self.log.fd, &mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(Errno::INTR) => {}
                Err(e) => return Err(self.err(FsOp::Read)(e)),
            }
        }
        Ok(done)
    }

    fn truncate(&self, len: u64) -> Result<(), FsError> {
        loop {
            match rustix::fs::ftruncate(&self.log.fd, len) {
                Ok(()) => return Ok(()),
                Err(Errno::INTR) => {}
                Err(e) => return Err(self.err(FsOp::Truncate)(e)),
            }
        }
    }

    /// Cuts a torn tail: when the file does not end with `\n`, truncates it
    /// to just after its last `\n` (to empty when it has none). Returns the
    /// number of bytes cut (0 when the file was whole).
    pub fn repair_tail(&mut self) -> Result<u64, FsError> {
        let len = self.log.len()?;
        self.repair_tail_at(len).map(|cut| cut.1)
    }

    /// [`LogLock::repair_tail`] for a file of length `len`; returns the new
    /// length and the bytes cut.
    ///
    /// Always reads the last byte (unlike [`AppendLog::whole_len`], it does
    /// not trust the length this process last left the file at): under the
    /// lock, a fragment is cut even when an outside truncation made the file
    /// that long again.
    fn repair_tail_at(&self, len: u64) -> Result<(u64, u64), FsError> {
        if len == 0 {
            return Ok((0, 0));
        }
        let mut last = [0u8; 1];
        if self.read_at(&mut last, len - 1)? == 1 && last[0] == b'\n' {
            self.log.known_end.store(len, Ordering::Relaxed);
            return Ok((len, 0));
        }
        let mut end = len;
        let mut buf = vec![0u8; CHUNK];
        let keep = loop {
            if end == 0 {
                break 0;
            }
            let start = end.saturating_sub(CHUNK as u64);
            let want = usize::try_from(end - start).unwrap_or(CHUNK);
            let got = self.read_at(&mut buf[..want], start)?;
            if let Some(i) = memrchr_newline(&buf[..got]) {
                break start + i as u64 + 1;
            }
            end = start;
        };
        self.truncate(keep)?;
        self.log.known_end.store(keep, Ordering::Relaxed);
        Ok((keep, len - keep))
    }

    /// Appends `line` as one whole line with ONE `write(2)` call, after
    /// cutting a torn tail ([`LogLock::repair_tail`]). Returns the file's
    /// length after the line.
    ///
    /// `line` is one line, with or without its trailing `\n` (one is added
    /// when missing). A `\n` anywhere else is [`FsError::InvalidInput`] (it
    /// would split the record). The write is retried only on `EINTR`; a
    /// failed write is [`FsError::Io`] (or another variant by its errno), a
    /// short one [`FsError::ShortWrite`]. Either way the file is truncated
    /// back to its length before the call, so no fragment stays behind
    /// (when even that fails, the error says so and the next append cuts
    /// the fragment). Not fsynced: see [`AppendLog::sync`].
    pub fn append(&mut self, line: &[u8]) -> Result<u64, FsError> {
        let body = line.strip_suffix(b"\n").unwrap_or(line);
        if body.contains(&b'\n') {
            return Err(FsError::invalid(
                &self.log.path,
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
        let (start, _) = self.repair_tail_at(self.log.len()?)?;
        let result = loop {
            match rustix::io::write(&self.log.fd, &buf) {
                Ok(n) => break Ok(n),
                Err(Errno::INTR) => {}
                Err(e) => break Err(e),
            }
        };
        match result {
            Ok(n) if n == buf.len() => {
                let end = start + n as u64;
                self.log.known_end.store(end, Ordering::Relaxed);
                Ok(end)
            }
            Ok(written) => {
                let rolled_back = self.truncate(start).is_ok();
                Err(FsError::ShortWrite {
                    path: self.log.path.clone(),
                    written,
                    len: buf.len(),
                    rolled_back,
                })
            }
            Err(e) => {
                // A failed write(2) wrote nothing; cut anything that did
                // land anyway (it cannot hurt: the file had `start` bytes).
                if self.log.len().is_ok_and(|now| now > start) {
                    let _ = self.truncate(start);
                }
                Err(self.err(FsOp::Append)(e))
            }
        }
    }

    /// Calls `each` with every whole line (without its `\n`) that starts at
    /// or after byte `offset`, in order. A line that began before `offset`
    /// is skipped up to its end; a last line without `\n` is passed too.
    pub fn lines_from(&self, offset: u64, each: &mut dyn FnMut(&[u8])) -> Result<(), FsError> {
        let len = self.log.len()?;
        let mut pos = offset.min(len);
        let mut buf = vec![0u8; CHUNK];
        let mut carry: Vec<u8> = Vec::new();
        // Start mid-line? Skip to the next line break.
        let mut skipping = false;
        if pos > 0 {
            let mut prev = [0u8; 1];
            skipping = self.read_at(&mut prev, pos - 1)? == 1 && prev[0] != b'\n';
        }
        while pos < len {
            let want = usize::try_from((len - pos).min(CHUNK as u64)).unwrap_or(CHUNK);
            let got = self.read_at(&mut buf[..want], pos)?;
            if got == 0 {
                break;
            }
            pos += got as u64;
            let mut rest = &buf[..got];
            while let Some(i) = rest.iter().position(|&b| b == b'\n') {
                if skipping {
                    skipping = false;
                } else if carry.is_empty() {
                    each(&rest[..i]);
                } else {
                    carry.extend_from_slice(&rest[..i]);
                    each(&carry);
                    carry.clear();
                }
                rest = &rest[i + 1..];
            }
            if !skipping {
                carry.extend_from_slice(rest);
            }
        }
        if !carry.is_empty() {
            each(&carry);
        }
        Ok(())
    }
}

/// Index of the last `\n` in `bytes`.
fn memrchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().rposition(|&b| b == b'\n')
}
