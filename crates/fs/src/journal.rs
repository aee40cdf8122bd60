//! The intent journal behind the audit sink: one small append-only file per
//! live process, locked for that process's lifetime, so that the next start
//! can tell which operations a dead process may have committed without
//! recording them.

use std::os::fd::OwnedFd;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags};
use rustix::io::Errno;

use crate::publish::random_suffix;
use crate::{FsError, FsOp};

/// File-name suffix of a journal (`<pid>.<12 hex>.intents`).
pub const JOURNAL_SUFFIX: &str = ".intents";

/// How many fresh names [`Journal::create`] tries.
const CREATE_ATTEMPTS: usize = 16;

/// One process's intent journal: a 0600 file `<pid>.<12 hex>.intents` in a
/// 0700 directory, opened `O_APPEND`, holding an exclusive `flock(2)` until
/// it is dropped (or the process dies), which is how
/// [`orphan_journals`] tells a live process's journal from a dead one's.
/// The caller appends one line per intent and clears the file when nothing
/// is pending. Shareable between threads (`&self` methods).
#[derive(Debug)]
pub struct Journal {
    fd: OwnedFd,
    path: PathBuf,
}

impl Journal {
    /// Creates a fresh journal in `dir` (created 0700 with missing parents)
    /// and locks it. A name another process grabbed in between (an orphan
    /// scan that saw the new file) is given up for a fresh one.
    ///
    /// Errors: the directory or the file cannot be created, as the
    /// operating system reports it, naming the path.
    pub fn create(dir: &Path) -> Result<Journal, FsError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| FsError::os(FsOp::CreateDir, dir, e))?;
        let flags = OFlags::RDWR
            | OFlags::APPEND
            | OFlags::CREATE
            | OFlags::EXCL
            | OFlags::CLOEXEC
            | OFlags::NOFOLLOW
            | OFlags::NOCTTY;
        let mut last = None;
        for _ in 0..CREATE_ATTEMPTS {
            let suffix = random_suffix().map_err(|e| FsError::os(FsOp::Open, dir, e))?;
            let path = dir.join(format!("{}.{suffix}{JOURNAL_SUFFIX}", std::process::id()));
            let fd = match rustix::fs::open(&path, flags, Mode::from_raw_mode(0o600)) {
                Ok(fd) => fd,
                Err(Errno::EXIST) => continue,
                Err(e) => return Err(FsError::errno(FsOp::Open, &path, e)),
            };
            match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => {}
                Err(Errno::WOULDBLOCK) => {
                    last = Some(path);
                    continue;
                }
                Err(e) => return Err(FsError::errno(FsOp::Lock, &path, e)),
            }
            // Still linked? An orphan scan may have taken and removed the
            // empty file between our open and our lock.
            let st = rustix::fs::fstat(&fd).map_err(|e| FsError::errno(FsOp::Stat, &path, e))?;
            if st.st_nlink == 0 {
                last = Some(path);
                continue;
            }
            return Ok(Journal { fd, path });
        }
        Err(FsError::errno(
            FsOp::Lock,
            &last.unwrap_or_else(|| dir.to_path_buf()),
            Errno::WOULDBLOCK,
        ))
    }

    /// The journal's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends `line` (one line, `\n`-terminated by the caller) with one
    /// `write(2)`. A short write is truncated back to `len_before` (the
    /// caller's count of the journal's bytes) and reported as
    /// [`FsError::ShortWrite`]; a failed one as the operating system says.
    pub fn append(&self, line: &[u8], len_before: u64) -> Result<(), FsError> {
        let result = loop {
            match rustix::io::write(&self.fd, line) {
                Ok(n) => break Ok(n),
                Err(Errno::INTR) => {}
                Err(e) => break Err(e),
            }
        };
        match result {
            Ok(n) if n == line.len() => Ok(()),
            Ok(written) => Err(FsError::ShortWrite {
                path: self.path.clone(),
                written,
                len: line.len(),
                rolled_back: rustix::fs::ftruncate(&self.fd, len_before).is_ok(),
            }),
            Err(e) => Err(FsError::errno(FsOp::Append, &self.path, e)),
        }
    }

    /// Empties the journal (`ftruncate` to 0): nothing is pending.
    pub fn clear(&self) -> Result<(), FsError> {
        rustix::fs::ftruncate(&self.fd, 0)
            .map_err(|e| FsError::errno(FsOp::Truncate, &self.path, e))
    }

    /// `fdatasync` the journal.
    pub fn sync(&self) -> Result<(), FsError> {
        rustix::fs::fdatasync(&self.fd).map_err(|e| FsError::errno(FsOp::Sync, &self.path, e))
    }

    /// Removes the journal file (still holding its lock, which is released
    /// when the journal is dropped, so no orphan scan can take it in
    /// between). For a clean shutdown with nothing pending.
    pub fn remove(&self) -> Result<(), FsError> {
        std::fs::remove_file(&self.path).map_err(|e| FsError::os(FsOp::Remove, &self.path, e))
    }
}

/// The journal of a process that is gone, locked by us until dropped or
/// [`Orphan::remove`]d (see [`orphan_journals`]).
#[derive(Debug)]
pub struct Orphan {
    fd: OwnedFd,
    path: PathBuf,
}

impl Orphan {
    /// The journal's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The journal's whole content.
    pub fn read(&self) -> Result<Vec<u8>, FsError> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match rustix::io::pread(&self.fd, &mut buf, out.len() as u64) {
                Ok(0) => return Ok(out),
                Ok(n) => out.extend_from_slice(&buf[..n]),
                Err(Errno::INTR) => {}
                Err(e) => return Err(FsError::errno(FsOp::Read, &self.path, e)),
            }
        }
    }

    /// Removes the journal, while still holding its lock (a scan by another
    /// process that opened it meanwhile then finds it unlinked and skips
    /// it), then releases it.
    pub fn remove(self) -> Result<(), FsError> {
        std::fs::remove_file(&self.path).map_err(|e| FsError::os(FsOp::Remove, &self.path, e))
    }
}

/// The journals in `dir` whose owner is gone: every regular
/// `*.intents` file whose exclusive lock can be taken without waiting and
/// that is still linked once locked. Each is returned locked. Journals of
/// live processes are skipped; so are entries that vanish meanwhile. A
/// missing `dir` has none.
///
/// Errors: `dir` cannot be listed, or an entry cannot be opened or locked
/// for another reason than being gone or busy.
pub fn orphan_journals(dir: &Path) -> Result<Vec<Orphan>, FsError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(FsError::os(FsOp::OpenDir, dir, e)),
    };
    let flags = OFlags::RDWR | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::NONBLOCK;
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| FsError::os(FsOp::OpenDir, dir, e))?;
        let name = entry.file_name();
        if !name.as_encoded_bytes().ends_with(JOURNAL_SUFFIX.as_bytes()) {
            continue;
        }
        let path = dir.join(&name);
        let fd = match rustix::fs::open(&path, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => continue,
            Err(e) => return Err(FsError::errno(FsOp::Open, &path, e)),
        };
        let st = rustix::fs::fstat(&fd).map_err(|e| FsError::errno(FsOp::Stat, &path, e))?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            continue;
        }
        match rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {}
            Err(Errno::WOULDBLOCK) => continue,
            Err(e) => return Err(FsError::errno(FsOp::Lock, &path, e)),
        }
        // Removed by another scan between our open and our lock?
        let linked = rustix::fs::statat(rustix::fs::CWD, &path, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|now| (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino));
        if !linked {
            continue;
        }
        out.push(Orphan { fd, path });
    }
    out.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(out)
}
