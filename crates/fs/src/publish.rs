//! The atomic publisher (SPEC 7.3) and the private state-file writer (SPEC
//! 12).

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::DirBuilderExt;
use std::path::Path;
use std::sync::OnceLock;

use rustix::fs::{AtFlags, FileType, Gid, Mode, OFlags, Uid};
use rustix::io::Errno;

use crate::dir::{LeafState, check_leaf, leaf_state, type_name};
use crate::process::{own_pid, process_umask, running_as_root};
use crate::{Dir, FsError, FsOp, LeafStat, Swap};

/// Longest file name most Linux filesystems accept (`NAME_MAX`).
const NAME_MAX: usize = 255;

/// Number of lowercase hex digits of the random temp-name suffix.
pub(crate) const SUFFIX_HEX: usize = 12;

/// How many fresh temp names to try when one already exists.
const CREATE_ATTEMPTS: usize = 16;

/// Permission bits of a file created by a [`Publish`] (SPEC 7.3,
/// `new_file_mode`). An existing file always keeps its own bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NewFileMode {
    /// `0600` (`new_file_mode = "owner"`, the default).
    Owner,
    /// `0666 & !umask` (`new_file_mode = "system"`), as most editors create
    /// files. The umask is read once per process (from `/proc/self/status`,
    /// or by setting and restoring it) and cached.
    System,
}

/// Options of one [`Publish`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PublishOptions {
    /// Mode of a newly created file.
    pub new_file_mode: NewFileMode,
    /// The leaf as the caller saw it (the daemon passes the file it read
    /// inside the path lock, [`crate::Existing::stat`]). When `Some`, the
    /// leaf must still be that inode (`dev`, `ino`) right before the
    /// rename, else [`FsError::SymlinkEscape`] (swapped meanwhile; a leaf
    /// that vanished counts as swapped), and the published file gets this
    /// stat's permission bits (and owner and group, as root): publish does
    /// not look at the leaf a second time before that recheck.
    pub expect_existing: Option<LeafStat>,
}

impl Default for PublishOptions {
    /// `Owner` mode, no expectation.
    fn default() -> Self {
        PublishOptions {
            new_file_mode: NewFileMode::Owner,
            expect_existing: None,
        }
    }
}

/// What a successful [`Publish::run`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Published {
    /// True when the target did not exist before.
    pub created: bool,
    /// Number of bytes in the published file (the length of `bytes`).
    pub bytes_written: u64,
    /// True when the directory was fsynced after the rename, i.e. the new
    /// name is durable. False only when that fsync failed (logged with
    /// `tracing::warn!`) or the directory could not be opened readable; the
    /// new content is in place either way, so the operation did happen.
    pub durable: bool,
    /// The published file's device and inode (the temp file's, renamed).
    pub identity: (u64, u64),
}

/// How the published file's mode (and owner) are chosen.
#[derive(Clone, Copy, Debug)]
enum ModePolicy {
    /// An existing file keeps its permission bits (and owner and group when
    /// we are root); a new file gets this mode.
    KeepExisting(NewFileMode),
    /// Always 0600, owner = us (private state files).
    Private,
    /// These permission bits (and, as root, this owner and group): an
    /// undo putting back a file as it was.
    Exact(u32, Option<(u32, u32)>),
}

/// The temp file name a [`Publish`] would use for `leaf` in this process, with
/// a fresh random suffix: `.<leaf>.<pid>.<12 lowercase hex>.tmp` (SPEC 7.3).
///
/// The leaf is cut so the whole name fits in 255 bytes: at a UTF-8 character
/// boundary when the leaf is valid UTF-8, at a byte otherwise. Errors only if
/// the system random source fails.
pub fn temp_file_name(leaf: &OsStr) -> io::Result<OsString> {
    Ok(temp_name_with(leaf, own_pid(), &random_suffix()?))
}

/// `.<leaf cut>.<pid>.<suffix>.tmp`, the leaf cut so the whole fits
/// `NAME_MAX` bytes.
pub(crate) fn temp_name_with(leaf: &OsStr, pid: u32, suffix: &str) -> OsString {
    let mut digits = [0u8; 10];
    let pid = decimal(pid, &mut digits);
    let overhead = 1 + 1 + pid.len() + 1 + suffix.len() + ".tmp".len();
    let max_leaf = NAME_MAX.saturating_sub(overhead);
    let bytes = leaf.as_bytes();
    let cut = if bytes.len() <= max_leaf {
        bytes
    } else {
        match std::str::from_utf8(bytes) {
            Ok(s) => {
                let mut end = max_leaf;
                while !s.is_char_boundary(end) {
                    end -= 1;
                }
                &bytes[..end]
            }
            Err(_) => &bytes[..max_leaf],
        }
    };
    let mut name = Vec::with_capacity(overhead + cut.len());
    name.push(b'.');
    name.extend_from_slice(cut);
    name.push(b'.');
    name.extend_from_slice(pid);
    name.push(b'.');
    name.extend_from_slice(suffix.as_bytes());
    name.extend_from_slice(b".tmp");
    OsString::from_vec(name)
}

/// `n` in decimal, written into `buf` (no allocation: a temp name is made
/// for every write).
fn decimal(mut n: u32, buf: &mut [u8; 10]) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + u8::try_from(n % 10).unwrap_or(0);
        n /= 10;
        if n == 0 {
            return &buf[at..];
        }
    }
}

/// If `name` has the temp-file shape `.<anything>.<pid>.<12 lowercase
/// hex>.tmp` (anything non-empty, pid decimal and non-zero), return the pid.
pub(crate) fn parse_temp_name(name: &[u8]) -> Option<u32> {
    let inner = name.strip_prefix(b".")?.strip_suffix(b".tmp")?;
    // inner = <anything>.<pid>.<hex>
    let dot = inner.iter().rposition(|&b| b == b'.')?;
    let (rest, hex) = (&inner[..dot], &inner[dot + 1..]);
    if hex.len() != SUFFIX_HEX || !hex.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        return None;
    }
    let dot = rest.iter().rposition(|&b| b == b'.')?;
    let (anything, pid) = (&rest[..dot], &rest[dot + 1..]);
    if anything.is_empty() || pid.is_empty() || pid.len() > 10 || pid[0] == b'0' {
        return None;
    }
    if !pid.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let pid: u32 = std::str::from_utf8(pid).ok()?.parse().ok()?;
    (pid != 0).then_some(pid)
}

/// 12 lowercase hex digits that nobody without this process's key can
/// predict: the first 6 bytes of SHA-256 over a 32-byte key, read from the
/// system random source once per process, and a counter that never
/// repeats within the process. One `getrandom` per process instead of one
/// per write (a system call costs 2-4 µs on a vCPU that just woke from an
/// fsync; docs/decisions/0009-small-write-costs.md). The suffix only has to
/// be hard to guess and unlikely to collide: the temp file is created
/// `O_EXCL` (a taken name is retried with the next suffix), and the name
/// also carries the pid.
///
/// Errors: the random source's, until a call gets the key (a failed call
/// leaves it unset, and the next call asks again).
pub(crate) fn random_suffix() -> io::Result<String> {
    use sha2::Digest as _;
    use std::sync::atomic::{AtomicU64, Ordering};
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    static KEY: OnceLock<[u8; 32]> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let key = if let Some(k) = KEY.get() {
        k
    } else {
        let mut k = [0u8; 32];
        getrandom::fill(&mut k).map_err(|e| match e.raw_os_error() {
            Some(code) => io::Error::from_raw_os_error(code),
            None => io::Error::other(format!("random source: {e}")),
        })?;
        // A racing first call may have set it: either key will do.
        KEY.get_or_init(|| k)
    };
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let digest = sha2::Sha256::new()
        .chain_update(key)
        .chain_update(n.to_le_bytes())
        .finalize();
    let mut s = String::with_capacity(SUFFIX_HEX);
    for b in &digest[..SUFFIX_HEX / 2] {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    Ok(s)
}

/// Removes the temp file by name when dropped, unless disarmed.
struct TempGuard<'a> {
    dir: BorrowedFd<'a>,
    name: OsString,
    armed: bool,
}

impl Drop for TempGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        match rustix::fs::unlinkat(self.dir, &self.name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(e) => tracing::warn!(
                temp = %std::path::Path::new(&self.name).display(),
                error = %e,
                "could not remove temp file"
            ),
        }
    }
}

/// Create a fresh temp file for `leaf` in `dir`:
/// `O_WRONLY|O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC`, mode 0600, retrying with a
/// new suffix when the name exists. Errors name the directory.
fn create_temp(
    dir: BorrowedFd<'_>,
    dir_path: &Path,
    leaf: &OsStr,
) -> Result<(OsString, OwnedFd), FsError> {
    let flags = OFlags::WRONLY
        | OFlags::CREATE
        | OFlags::EXCL
        | OFlags::NOFOLLOW
        | OFlags::CLOEXEC
        | OFlags::NOCTTY;
    let pid = own_pid();
    let mut last = Errno::EXIST;
    for _ in 0..CREATE_ATTEMPTS {
        let suffix = random_suffix().map_err(|e| FsError::os(FsOp::CreateTemp, dir_path, e))?;
        let name = temp_name_with(leaf, pid, &suffix);
        match rustix::fs::openat(dir, &name, flags, Mode::from_raw_mode(0o600)) {
            Ok(fd) => return Ok((name, fd)),
            Err(Errno::EXIST) => last = Errno::EXIST,
            Err(e) => return Err(FsError::errno(FsOp::CreateTemp, dir_path, e)),
        }
    }
    Err(FsError::errno(FsOp::CreateTemp, dir_path, last))
}

/// Check the caller's expectation about the leaf's identity.
fn check_expectation(
    expect: &LeafStat,
    state: &LeafState,
    shown: impl FnOnce() -> std::path::PathBuf,
) -> Result<(), FsError> {
    let (dev, ino) = (expect.dev, expect.ino);
    let what = match state {
        LeafState::Regular(st) if st.dev == dev && st.ino == ino => return Ok(()),
        LeafState::Regular(_) => Swap::ReplacedAfterCheck,
        LeafState::Missing => Swap::VanishedAfterCheck,
    };
    Err(FsError::SymlinkEscape {
        path: shown(),
        what,
        source: None,
    })
}

/// One atomic publish: replaces (or creates) `leaf` in `dir` with `bytes`
/// (SPEC 7.3) when [`Publish::run`] is called.
///
/// ```no_run
/// # use writegate_fs::{Dir, FsError, Publish, PublishOptions};
/// # fn f(dir: &Dir) -> Result<(), FsError> {
/// let opts = PublishOptions::default();
/// Publish::new(dir, "a.txt".as_ref(), b"bytes\n", &opts)
///     .on_written(&mut || { /* start work beside the disk's */ })
///     .precommit(&mut || Ok::<(), FsError>(()))
///     .run()?;
/// # Ok(()) }
/// ```
///
/// Steps, all relative to the directory handle:
/// 1. create `.<leaf>.<pid>.<12 hex>.tmp` (see [`temp_file_name`]) with
///    `O_CREAT|O_EXCL|O_NOFOLLOW`, mode 0600;
/// 2. write all of `bytes`, in [`WRITE_CHUNK`] pieces whose writeback
///    starts as each is written (Linux);
/// 3. without `opts.expect_existing`, look at the leaf
///    (`fstatat(AT_SYMLINK_NOFOLLOW)`): a symlink ->
///    [`FsError::SymlinkEscape`], another kind of file ->
///    [`FsError::NotAFile`]; with it, take the caller's stat as what is
///    there (step 6 checks it);
/// 4. set the mode: an existing file keeps its permission bits (`0o777`;
///    setuid, setgid and sticky are dropped, as the kernel drops them when a
///    file is written) and, when `geteuid() == 0`, its owner and group; a new
///    file gets 0600 or `0666 & !umask` per `opts.new_file_mode`;
/// 5. fsync the temp file;
/// 6. recheck: the leaf is still what step 3 saw (same inode, or still
///    missing; else [`FsError::SymlinkEscape`], a swap; a symlink or another
///    kind of file there is refused as in step 3), the temp name still
///    refers to the inode we created (else [`FsError::SymlinkEscape`]), then
///    the caller's [`Publish::precommit`] check (its error is returned as
///    it is);
/// 7. `renameat(dir, temp, dir, leaf)`; 8. fsync the directory.
///
/// On any failure before the rename the temp file is unlinked and the target
/// is left byte-identical. `ENOSPC`, `EDQUOT` and other I/O failures are
/// [`FsError::Io`]; `EACCES`/`EPERM` are [`FsError::PermissionDenied`]; a
/// `leaf` that is not one file name component is
/// [`FsError::InvalidInput`]. Every error names the target (the directory
/// for a temp file that cannot be created) and keeps the operating system's
/// error as its source. A failing directory fsync after the rename is not an
/// error (the content is already in place): it is logged and reported as
/// [`Published::durable`] `false`.
#[must_use = "a Publish does nothing until it is run"]
pub struct Publish<'a, E = FsError> {
    /// The directory handle.
    dir: BorrowedFd<'a>,
    /// Whether the directory can be fsynced (it was opened readable).
    syncable: bool,
    /// The directory's path, for messages.
    dir_path: &'a Path,
    /// The file name in the directory.
    leaf: &'a OsStr,
    /// The new content.
    bytes: &'a [u8],
    /// How the published file's mode (and owner) are chosen.
    policy: ModePolicy,
    /// The leaf as the caller saw it ([`PublishOptions::expect_existing`]).
    expect_existing: Option<&'a LeafStat>,
    /// Called once the bytes are in the temp file.
    written: Option<&'a mut dyn FnMut()>,
    /// Called immediately before the rename.
    precommit: Option<&'a mut dyn FnMut() -> Result<(), E>>,
}

impl<'a> Publish<'a> {
    /// A publish of `bytes` to `leaf` in `dir` with `opts`: no hook, no
    /// precommit check, the mode chosen by `opts.new_file_mode` (see
    /// [`Publish::restore`]).
    pub fn new(dir: &'a Dir, leaf: &'a OsStr, bytes: &'a [u8], opts: &'a PublishOptions) -> Self {
        Publish {
            dir: dir.fd(),
            syncable: dir.syncable(),
            dir_path: dir.path(),
            leaf,
            bytes,
            policy: ModePolicy::KeepExisting(opts.new_file_mode),
            expect_existing: opts.expect_existing.as_ref(),
            written: None,
            precommit: None,
        }
    }
}

impl<'a, E: From<FsError>> Publish<'a, E> {
    /// Calls `written()` once the bytes are in the temp file and before it
    /// is fsynced (not at all when publishing fails earlier): where work
    /// that need not come before the write (the hashes of a large
    /// overwrite, old and new bytes, ADR 0005) is started on helper
    /// threads, which then have the CPUs while this thread waits for the
    /// disk, instead of taking them from the write itself.
    pub fn on_written(mut self, written: &'a mut dyn FnMut()) -> Self {
        self.written = Some(written);
        self
    }

    /// Calls `precommit()` immediately before the rename (step 6): the
    /// caller's own check (the generation, the audit intent), which refuses
    /// with the caller's error type `F`. Its error is returned as it is (a
    /// typed refusal needs no side channel); every failure of the publisher
    /// itself is an [`FsError`] converted into `F`.
    pub fn precommit<F: From<FsError>>(
        self,
        precommit: &'a mut dyn FnMut() -> Result<(), F>,
    ) -> Publish<'a, F> {
        Publish {
            dir: self.dir,
            syncable: self.syncable,
            dir_path: self.dir_path,
            leaf: self.leaf,
            bytes: self.bytes,
            policy: self.policy,
            expect_existing: self.expect_existing,
            written: self.written,
            precommit: Some(precommit),
        }
    }

    /// For an undo: the published file gets exactly the permission bits
    /// `mode` (and, when running as root, the owner and group `owner`) of
    /// the file it puts back, whatever is at the leaf now, in place of the
    /// options' `new_file_mode` and the kept mode of step 4.
    pub fn restore(mut self, mode: u32, owner: Option<(u32, u32)>) -> Self {
        self.policy = ModePolicy::Exact(mode, owner);
        self
    }

    /// Publishes, as described on [`Publish`].
    ///
    /// Errors: the precommit's own error; otherwise an [`FsError`] as
    /// described on [`Publish`], converted into `E`.
    pub fn run(self) -> Result<Published, E> {
        let Publish {
            dir,
            syncable,
            dir_path,
            leaf,
            bytes,
            policy,
            expect_existing,
            mut written,
            mut precommit,
        } = self;
        check_leaf(leaf)?;
        // The path for messages, built only for an error or a warning.
        let shown = || dir_path.join(leaf);
        let errno_err = |op: FsOp| move |e: Errno| FsError::errno(op, &shown(), e);
        let io_err = |op: FsOp| move |e: io::Error| FsError::os(op, &shown(), e);

        // 1. Exclusive temp file.
        let (temp, fd) = create_temp(dir, dir_path, leaf)?;
        let mut guard = TempGuard {
            dir,
            name: temp,
            armed: true,
        };
        let ours = rustix::fs::fstat(&fd).map_err(errno_err(FsOp::Stat))?;
        let mut file = File::from(fd);

        // 2. Content.
        write_content(&mut file, bytes).map_err(io_err(FsOp::WriteTemp))?;
        if let Some(written) = written.as_mut() {
            written();
        }

        // 3. What is at the leaf decides the mode: the caller's file, when it
        //    read one (step 6 checks it is still there), else a look now.
        let before = match expect_existing {
            Some(seen) => LeafState::Regular(*seen),
            None => leaf_state(dir, dir_path, leaf)?,
        };

        // 4. Mode and owner, only changed when they differ (filesystems without
        //    Unix ownership then still work when nothing needs changing).
        let (want_mode, want_owner) = match (policy, &before) {
            (ModePolicy::Private, _)
            | (ModePolicy::KeepExisting(NewFileMode::Owner), LeafState::Missing) => (0o600, None),
            (ModePolicy::KeepExisting(_), LeafState::Regular(st)) => {
                let owner = running_as_root().then_some((st.uid, st.gid));
                (st.mode & 0o777, owner)
            }
            (ModePolicy::KeepExisting(NewFileMode::System), LeafState::Missing) => {
                (0o666 & !process_umask(), None)
            }
            (ModePolicy::Exact(mode, owner), _) => {
                (mode & 0o7777, owner.filter(|_| running_as_root()))
            }
        };
        let mut now_mode = ours.st_mode & 0o7777;
        if let Some((uid, gid)) = want_owner.filter(|&o| o != (ours.st_uid, ours.st_gid)) {
            rustix::fs::fchown(&file, Some(Uid::from_raw(uid)), Some(Gid::from_raw(gid)))
                .map_err(errno_err(FsOp::SetTempOwner))?;
            // fchown may clear bits: look again.
            now_mode = rustix::fs::fstat(&file)
                .map_err(errno_err(FsOp::Stat))?
                .st_mode
                & 0o7777;
        }
        if now_mode != want_mode {
            rustix::fs::fchmod(&file, Mode::from_raw_mode(want_mode))
                .map_err(errno_err(FsOp::SetTempMode))?;
        }

        // 5. Durable content and metadata before the name can point at it.
        file.sync_all().map_err(io_err(FsOp::SyncTemp))?;

        // 6. Recheck immediately before the rename.
        let after = leaf_state(dir, dir_path, leaf)?;
        if let Some(seen) = expect_existing {
            check_expectation(seen, &after, shown)?;
        }
        let same = match (&before, &after) {
            (LeafState::Missing, LeafState::Missing) => true,
            (LeafState::Regular(a), LeafState::Regular(b)) => (a.dev, a.ino) == (b.dev, b.ino),
            _ => false,
        };
        if !same {
            return Err(FsError::SymlinkEscape {
                path: shown(),
                what: Swap::ChangedWhilePublishing,
                source: None,
            }
            .into());
        }
        match rustix::fs::statat(dir, &guard.name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st)
                if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile
                    && (st.st_dev, st.st_ino) == (ours.st_dev, ours.st_ino) => {}
            Ok(st) => {
                // Someone else's file now has our temp name: leave it alone.
                guard.armed = false;
                return Err(FsError::SymlinkEscape {
                    path: shown(),
                    what: Swap::TempReplaced {
                        found: type_name(FileType::from_raw_mode(st.st_mode)),
                    },
                    source: None,
                }
                .into());
            }
            Err(e) => {
                guard.armed = false;
                return Err(FsError::SymlinkEscape {
                    path: shown(),
                    what: Swap::TempVanished,
                    source: Some(e.into()),
                }
                .into());
            }
        }
        if let Some(precommit) = precommit.as_mut() {
            precommit()?;
        }

        // 7. Commit.
        rustix::fs::renameat(dir, &guard.name, dir, leaf).map_err(|e| match e {
            // The target became a directory meanwhile.
            Errno::ISDIR | Errno::NOTDIR | Errno::NOTEMPTY => FsError::NotAFile {
                path: shown(),
                found: "directory",
                expected: "regular file",
            },
            other => errno_err(FsOp::Rename)(other),
        })?;
        guard.armed = false;
        drop(file);

        // 8. Durable name.
        let durable = if syncable {
            match rustix::fs::fsync(dir) {
                Ok(()) => true,
                Err(e) => {
                    tracing::warn!(path = %shown().display(), error = %e,
                        "directory fsync failed after publishing");
                    false
                }
            }
        } else {
            tracing::warn!(path = %shown().display(),
                "directory not readable: published without directory fsync");
            false
        };
        Ok(Published {
            created: after == LeafState::Missing,
            bytes_written: bytes.len() as u64,
            durable,
            identity: (ours.st_dev, ours.st_ino),
        })
    }
}

/// How many bytes the publisher hands the kernel per `write(2)` of a temp
/// file: 256 KiB; content longer than this has each piece's writeback
/// started as it is written (`sync_file_range(SYNC_FILE_RANGE_WRITE)`, on
/// Linux), so the fsync waits only for the tail. Measured on the 2-vCPU
/// KVM guest (docs/decisions/0006-temp-file-in-pieces.md): one 5 MiB
/// `write(2)` into a new ext4 file took 20-29 ms, the same bytes in 64 KiB
/// to 1 MiB pieces 7-9 ms, and with early writeback 5.5-6.5 ms; 2 MiB
/// pieces were as slow as one write.
pub const WRITE_CHUNK: usize = 256 * 1024;

/// Writes `bytes` to the new temp file: the pieces of [`pieces`], one
/// `write(2)` each, and, on Linux, for content longer than one piece, each
/// written piece is handed to the disk at once with
/// `sync_file_range(SYNC_FILE_RANGE_WRITE)`, which starts writeback and
/// does not wait for it. The device then writes while the next pieces are
/// copied, and the fsync of step 5 waits only for the tail. This changes
/// when the bytes start moving, never whether they are durable: the fsync
/// still decides.
///
/// Errors: the `write(2)` error.
fn write_content(file: &mut File, bytes: &[u8]) -> io::Result<()> {
    for piece in pieces(bytes.len()) {
        file.write_all(&bytes[piece.clone()])?;
        #[cfg(target_os = "linux")]
        if bytes.len() > WRITE_CHUNK {
            start_writeback(file, &piece);
        }
    }
    Ok(())
}

/// The byte ranges [`write_content`] writes `len` bytes in: consecutive,
/// from 0 to `len`, each [`WRITE_CHUNK`] long but the last (none for 0).
fn pieces(len: usize) -> impl Iterator<Item = std::ops::Range<usize>> {
    (0..len)
        .step_by(WRITE_CHUNK)
        .map(move |start| start..len.min(start + WRITE_CHUNK))
}

/// `sync_file_range(fd, piece.start, piece.len(), SYNC_FILE_RANGE_WRITE)`:
/// starts writeback of the range without waiting for it. rustix has no
/// wrapper, hence libc.
///
/// Its result is deliberately dropped, and that is sound only because the
/// flag is `SYNC_FILE_RANGE_WRITE` alone: with it the kernel records a
/// writeback error for the fsync that follows, which reports it. With
/// `SYNC_FILE_RANGE_WAIT_BEFORE` or `_WAIT_AFTER` the kernel would hand the
/// error to this call instead and the fsync would return 0: never add
/// either here without checking the result.
#[cfg(target_os = "linux")]
fn start_writeback(file: &File, piece: &std::ops::Range<usize>) {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (
        libc::off64_t::try_from(piece.start),
        libc::off64_t::try_from(piece.len()),
    ) else {
        return;
    };
    // SAFETY: a plain system call on a descriptor this function borrows for
    // its whole duration; it reads no memory of ours.
    let _ = unsafe {
        libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE)
    };
}

/// Write a small private state file atomically (persistent approvals, SPEC
/// 12): temp file in the same directory, fsync, rename over `path`, fsync
/// the directory. The file always ends up mode 0600 and owned by us; missing
/// parent directories are created mode 0700 (this is the daemon's own state
/// directory, opened by path; symlinks in it are followed).
///
/// Errors: `path` without a parent or file name ->
/// [`FsError::InvalidInput`]; `path` naming a symlink ->
/// [`FsError::SymlinkEscape`], a non-regular file -> [`FsError::NotAFile`]
/// (never followed or replaced); failures of the operating system as
/// [`Publish`] classifies them, naming the path.
pub fn write_private_file(path: &Path, bytes: &[u8]) -> Result<(), FsError> {
    let invalid = || FsError::invalid(path, "is not a file path (it has no file name)");
    let leaf = path.file_name().ok_or_else(invalid)?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        Some(_) => Path::new("."),
        None => return Err(invalid()),
    };
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(parent)
        .map_err(|e| FsError::os(FsOp::CreateDir, parent, e))?;
    let dfd = rustix::fs::open(
        parent,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| FsError::errno(FsOp::OpenDir, parent, e))?;
    Publish {
        dir: dfd.as_fd(),
        syncable: true,
        dir_path: parent,
        leaf,
        bytes,
        policy: ModePolicy::Private,
        expect_existing: None,
        written: None,
        precommit: None,
    }
    .run()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789ab";

    /// The pieces a temp file is written (and its writeback started) in
    /// cover the content exactly once, in order, none longer than a chunk.
    #[test]
    fn pieces_cover_the_content_in_order() {
        for len in [
            0,
            1,
            WRITE_CHUNK - 1,
            WRITE_CHUNK,
            WRITE_CHUNK + 1,
            3 * WRITE_CHUNK + 17,
        ] {
            let p: Vec<_> = pieces(len).collect();
            let mut at = 0;
            for r in &p {
                assert_eq!(r.start, at, "len {len}: {p:?}");
                assert!(!r.is_empty() && r.len() <= WRITE_CHUNK, "len {len}: {p:?}");
                at = r.end;
            }
            assert_eq!(at, len, "len {len}: {p:?}");
            assert_eq!(p.len(), len.div_ceil(WRITE_CHUNK));
        }
    }

    #[test]
    fn decimal_digits() {
        let mut buf = [0u8; 10];
        for n in [0, 7, 10, 4242, 99_999, u32::MAX] {
            assert_eq!(decimal(n, &mut buf), n.to_string().as_bytes());
        }
    }

    #[test]
    fn temp_name_format() {
        let name = temp_name_with(OsStr::new("main.rs"), 4242, HEX);
        assert_eq!(name, OsStr::new(".main.rs.4242.0123456789ab.tmp"));
        assert_eq!(parse_temp_name(name.as_bytes()), Some(4242));
    }

    #[test]
    fn random_suffix_is_12_lowercase_hex() {
        let a = random_suffix().unwrap();
        let b = random_suffix().unwrap();
        assert_eq!(a.len(), 12);
        assert!(a.bytes().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')));
        assert_ne!(a, b);
        // No repeat in many: the counter never repeats, and the digest is
        // cut to 48 bits (a birthday collision in 10,000 is about 2e-7).
        let many: std::collections::HashSet<String> =
            (0..10_000).map(|_| random_suffix().unwrap()).collect();
        assert_eq!(many.len(), 10_000);
        let name = temp_file_name(OsStr::new("x")).unwrap();
        assert_eq!(parse_temp_name(name.as_bytes()), Some(std::process::id()));
    }

    #[test]
    fn long_multibyte_leaf_is_cut_at_a_char_boundary() {
        for (ch, prefix) in [
            ("é", ""),
            ("é", "a"),
            ("😀", ""),
            ("😀", "a"),
            ("😀", "ab"),
            ("😀", "abc"),
        ] {
            let leaf = format!("{prefix}{}", ch.repeat(255 / ch.len()));
            let leaf = &leaf[..leaf.len().min(255)];
            for pid in [1u32, 4_194_304, u32::MAX] {
                let name = temp_name_with(OsStr::new(leaf), pid, HEX);
                let bytes = name.as_bytes();
                assert!(bytes.len() <= 255, "{} bytes", bytes.len());
                let s = std::str::from_utf8(bytes).expect("cut inside a character");
                let tail = format!(".{pid}.{HEX}.tmp");
                let cut = s.strip_prefix('.').unwrap().strip_suffix(&tail).unwrap();
                assert!(leaf.starts_with(cut));
                // Nothing more of the leaf would have fitted.
                let next = leaf[cut.len()..].chars().next().unwrap();
                assert!(bytes.len() + next.len_utf8() > 255);
                assert_eq!(parse_temp_name(bytes), Some(pid));
            }
        }
    }

    #[test]
    fn non_utf8_leaf_is_cut_at_a_byte() {
        let leaf = OsStr::from_bytes(&[0xffu8; 300]);
        let name = temp_name_with(leaf, 7, HEX);
        assert_eq!(name.len(), 255);
        assert_eq!(parse_temp_name(name.as_bytes()), Some(7));
    }

    #[test]
    fn parse_rejects_other_shapes() {
        for bad in [
            "a.txt",
            ".a.txt.12.0123456789ab.tmp.bak",
            ".a.txt.12.0123456789AB.tmp",
            ".a.txt.12.0123456789a.tmp",
            ".a.txt.12.0123456789abc.tmp",
            ".a.txt.x12.0123456789ab.tmp",
            ".a.txt..0123456789ab.tmp",
            ".a.txt.012.0123456789ab.tmp",
            ".a.txt.0.0123456789ab.tmp",
            ".a.txt.99999999999.0123456789ab.tmp",
            "..12.0123456789ab.tmp",
            ".12.0123456789ab.tmp",
            "a.txt.12.0123456789ab.tmp",
        ] {
            assert_eq!(parse_temp_name(bad.as_bytes()), None, "{bad}");
        }
        assert_eq!(
            parse_temp_name(b".with.dots.in.it.99.ffffffffffff.tmp"),
            Some(99)
        );
    }
}
