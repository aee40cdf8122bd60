//! Directory handles opened without following symlinks, and reads of a leaf
//! relative to such a handle (SPEC 7.3 "relative to an open directory
//! handle").

use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::OnceLock;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};
use rustix::io::Errno;

use crate::{FsError, FsOp, Swap};

/// Flags for intermediate components of a walk. `O_PATH` needs only search
/// permission, so a walk passes through directories we may not list (as
/// path resolution by the kernel does).
#[cfg(any(target_os = "linux", target_os = "android"))]
const WALK_FLAGS: OFlags = OFlags::PATH
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const WALK_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Flags for the final directory: readable, so it can be fsynced and listed.
pub(crate) const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// An open directory handle obtained by opening a canonical absolute path
/// without following any symlink: on Linux one `openat2` with
/// `RESOLVE_NO_SYMLINKS`, falling back (on any error, for a precise error
/// kind, or on kernels without `openat2`) to a walk from `/` one component
/// at a time with `openat(O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)`
/// (intermediate components `O_PATH`, the final directory `O_RDONLY` so it
/// can be fsynced).
///
/// Because the caller's path was canonical (every symlink resolved), meeting
/// a symlink on the walk means a component was swapped after resolving: the
/// walk fails with [`FsError::SymlinkEscape`]. Once open, the handle keeps
/// naming the same directory inode whatever happens to the path, so every
/// operation done through it (SPEC 7.3) stays in that directory.
#[derive(Debug)]
pub struct Dir {
    fd: OwnedFd,
    path: PathBuf,
    syncable: bool,
    /// [`Dir::identity`], looked up once.
    ident: OnceLock<Option<DirIdentity>>,
}

/// What one `statx` of an open directory tells: its `(dev, ino)` (the
/// encoding `fstat`'s `st_dev` uses) and, on Linux 6.8 and later, the
/// 64-bit unique ID of the mount it is on, which is never reused while the
/// system runs (`STATX_MNT_ID_UNIQUE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DirIdentity {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) mount: Option<u64>,
}

/// `STATX_MNT_ID_UNIQUE` (Linux 6.8): rustix 1.1 names only the reusable
/// `STATX_MNT_ID`.
#[cfg(any(target_os = "linux", target_os = "android"))]
const STATX_MNT_ID_UNIQUE: u32 = 0x0000_4000;

impl Dir {
    /// Open the canonical absolute directory `dir` (SPEC 7.3).
    ///
    /// Errors: a relative path or one with a `..` component ->
    /// [`FsError::InvalidInput`] (not canonical, a caller bug); a component
    /// that is a symlink, or is replaced while being opened ->
    /// [`FsError::SymlinkEscape`]; a component that is not a directory ->
    /// [`FsError::NotAFile`]; a missing component -> [`FsError::NotFound`];
    /// `EACCES`/`EPERM` -> [`FsError::PermissionDenied`]; other failures ->
    /// [`FsError::Io`]. Each names the component concerned.
    ///
    /// A final directory that we may search but not read is still opened
    /// (with `O_PATH`): writes into it work, but its fsync after a rename is
    /// skipped and [`crate::Published::durable`] reports `false`.
    pub fn open_canonical(dir: &Path) -> Result<Dir, FsError> {
        if !dir.is_absolute() {
            return Err(FsError::invalid(dir, "is not an absolute directory path"));
        }
        let mut names: Vec<&OsStr> = Vec::new();
        for comp in dir.components() {
            match comp {
                Component::RootDir | Component::CurDir => {}
                Component::Normal(name) => names.push(name),
                Component::ParentDir | Component::Prefix(_) => {
                    return Err(FsError::invalid(
                        dir,
                        "is not a canonical directory path (it holds `..`)",
                    ));
                }
            }
        }
        let root = Path::new("/");
        if names.is_empty() {
            let fd = rustix::fs::open(root, DIR_FLAGS, Mode::empty())
                .map_err(|e| FsError::errno(FsOp::OpenDir, root, e))?;
            return Ok(Dir::new(fd, PathBuf::from("/"), true));
        }
        // Fast path: one `openat2` with RESOLVE_NO_SYMLINKS (Linux 5.6+)
        // refuses a symlink in any component, exactly like the walk below.
        // Any error falls through to the walk, which classifies it precisely.
        #[cfg(any(target_os = "linux", target_os = "android"))]
        if let Ok(fd) = rustix::fs::openat2(
            rustix::fs::CWD,
            dir,
            DIR_FLAGS,
            Mode::empty(),
            rustix::fs::ResolveFlags::NO_SYMLINKS | rustix::fs::ResolveFlags::NO_MAGICLINKS,
        ) {
            return Ok(Dir::new(fd, dir.to_path_buf(), true));
        }
        let mut cur = rustix::fs::open(root, WALK_FLAGS, Mode::empty())
            .map_err(|e| FsError::errno(FsOp::OpenDir, root, e))?;
        let mut walked = PathBuf::from("/");
        let mut syncable = true;
        let last = names.len() - 1;
        for (i, name) in names.into_iter().enumerate() {
            walked.push(name);
            let flags = if i == last { DIR_FLAGS } else { WALK_FLAGS };
            let next = match rustix::fs::openat(&cur, name, flags, Mode::empty()) {
                Ok(fd) => fd,
                Err(Errno::ACCESS) if i == last && flags != WALK_FLAGS => {
                    // Searchable but not readable: open it for *at calls only.
                    syncable = false;
                    rustix::fs::openat(&cur, name, WALK_FLAGS, Mode::empty())
                        .map_err(|e| classify_component_error(&cur, name, e, &walked))?
                }
                Err(e) => return Err(classify_component_error(&cur, name, e, &walked)),
            };
            cur = next;
        }
        Ok(Dir::new(cur, dir.to_path_buf(), syncable))
    }

    /// The path this handle was opened from (for messages only: the path may
    /// no longer name this directory).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether a file replaced in this directory may be kept open across
    /// the rename, so that its blocks are freed later by a
    /// [`crate::Releaser`] instead of inside `renameat` (see `release.rs`).
    ///
    /// True only on local disk filesystems where that merely delays the
    /// freeing: ext2/3/4, XFS, Btrfs, F2FS and tmpfs (`fstatfs` magic
    /// numbers). False everywhere else, because there an open replaced
    /// file is visible or harmful: NFS renames it to `.nfsXXXX` (one more
    /// round trip, and a name in the directory until it is closed), FUSE
    /// to `.fuse_hiddenXXXX`, and SMB servers may refuse to replace an open
    /// file. Also false when `fstatfs` fails.
    ///
    /// The answer is remembered per mount when the directory's `statx` gave the
    /// mount's unique ID (Linux 6.8 and later): a mount's filesystem type
    /// never changes and its unique ID is never given to another mount, so
    /// only the first directory of each mount costs an `fstatfs`. Without
    /// that ID, one `fstatfs` per call (a device number alone could name
    /// another filesystem after an unmount).
    pub fn can_defer_frees(&self) -> bool {
        let mount = self.identity().and_then(|i| i.mount);
        if let Some(known) = mount.and_then(|m| defer_by_mount().lock().ok()?.get(&m).copied()) {
            return known;
        }
        // Only an answer `fstatfs` gave is remembered: a failed call (false)
        // is asked again next time.
        let Some(answer) = self.fs_frees_later() else {
            return false;
        };
        if let Some(m) = mount
            && let Ok(mut cache) = defer_by_mount().lock()
        {
            if cache.len() >= DEFER_CACHE_MOUNTS {
                cache.clear();
            }
            cache.insert(m, answer);
        }
        answer
    }

    /// [`Dir::can_defer_frees`]'s answer from `fstatfs`; `None` when it
    /// fails.
    fn fs_frees_later(&self) -> Option<bool> {
        const EXT_SUPER_MAGIC: u64 = 0xEF53;
        const XFS_SUPER_MAGIC: u64 = 0x5846_5342;
        const BTRFS_SUPER_MAGIC: u64 = 0x9123_683E;
        const F2FS_SUPER_MAGIC: u64 = 0xF2F5_2010;
        const TMPFS_MAGIC: u64 = 0x0102_1994;
        match rustix::fs::fstatfs(&self.fd) {
            Ok(st) => {
                // `f_type` is a signed word on some targets and unsigned on
                // others: compare its low 32 bits, where every magic number
                // lives, taking the bits as they are (a negative value too).
                #[allow(clippy::cast_sign_loss, clippy::cast_lossless)]
                let magic = (st.f_type as u64) & 0xFFFF_FFFF;
                Some(matches!(
                    magic,
                    EXT_SUPER_MAGIC
                        | XFS_SUPER_MAGIC
                        | BTRFS_SUPER_MAGIC
                        | F2FS_SUPER_MAGIC
                        | TMPFS_MAGIC
                ))
            }
            Err(_) => None,
        }
    }

    /// Whether the handle can be fsynced (false only for a directory we may
    /// search but not read).
    pub(crate) fn syncable(&self) -> bool {
        self.syncable
    }

    /// The handle's file descriptor as a borrowed fd.
    /// A handle from an already opened readable directory descriptor (the
    /// caller walked to it without following any symlink).
    pub(crate) fn from_parts(fd: OwnedFd, path: PathBuf) -> Dir {
        Dir::new(fd, path, true)
    }

    fn new(fd: OwnedFd, path: PathBuf, syncable: bool) -> Dir {
        Dir {
            fd,
            path,
            syncable,
            ident: OnceLock::new(),
        }
    }

    /// The directory's identity, from one `statx` (or, where `statx` is
    /// missing or refused, `fstat`, with no mount ID) the first time it is
    /// asked for; `None` when both fail.
    pub(crate) fn identity(&self) -> Option<DirIdentity> {
        *self.ident.get_or_init(|| {
            #[cfg(any(target_os = "linux", target_os = "android"))]
            {
                use rustix::fs::StatxFlags;
                let want = StatxFlags::INO | StatxFlags::from_bits_retain(STATX_MNT_ID_UNIQUE);
                if let Ok(st) = rustix::fs::statx(&self.fd, "", AtFlags::EMPTY_PATH, want)
                    && st.stx_mask & StatxFlags::INO.bits() != 0
                {
                    return Some(DirIdentity {
                        dev: rustix::fs::makedev(st.stx_dev_major, st.stx_dev_minor),
                        ino: st.stx_ino,
                        mount: (st.stx_mask & STATX_MNT_ID_UNIQUE != 0).then_some(st.stx_mnt_id),
                    });
                }
            }
            rustix::fs::fstat(&self.fd).ok().map(|st| DirIdentity {
                dev: st.st_dev,
                ino: st.st_ino,
                mount: None,
            })
        })
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsFd for Dir {
    /// The directory's file descriptor, for `*at` system calls.
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Mounts whose [`Dir::can_defer_frees`] answer is remembered at most; the
/// map is emptied when full (a process that writes on more mounts than
/// this only asks `fstatfs` again).
const DEFER_CACHE_MOUNTS: usize = 256;

/// [`Dir::can_defer_frees`]'s answers by unique mount ID.
fn defer_by_mount() -> &'static std::sync::Mutex<std::collections::HashMap<u64, bool>> {
    static CACHE: OnceLock<std::sync::Mutex<std::collections::HashMap<u64, bool>>> =
        OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// Turn the error of `openat(parent, name, O_DIRECTORY|O_NOFOLLOW)` into the
/// right variant. Linux reports a symlink there as `ENOTDIR` (like a regular
/// file) or `ELOOP`, so ask `fstatat` what is there now: a symlink is a swap;
/// a directory means the component changed between the two calls, also a
/// swap; another kind of file is `NotAFile`.
pub(crate) fn classify_component_error(
    parent: &OwnedFd,
    name: &OsStr,
    err: Errno,
    walked: &Path,
) -> FsError {
    let swapped = |what: Swap| FsError::SymlinkEscape {
        path: walked.to_path_buf(),
        what,
        source: Some(err.into()),
    };
    match err {
        Errno::LOOP | Errno::NOTDIR => {
            match rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => match FileType::from_raw_mode(st.st_mode) {
                    FileType::Symlink => swapped(Swap::Symlink),
                    FileType::Directory => swapped(Swap::ReplacedWhileOpening),
                    other => FsError::NotAFile {
                        path: walked.to_path_buf(),
                        found: type_name(other),
                        expected: "directory",
                    },
                },
                Err(_) if err == Errno::LOOP => swapped(Swap::Symlink),
                Err(e) => FsError::errno(FsOp::Stat, walked, e),
            }
        }
        other => FsError::errno(FsOp::OpenDir, walked, other),
    }
}

/// Metadata of a regular-file leaf, from `fstatat(AT_SYMLINK_NOFOLLOW)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeafStat {
    /// Permission bits (`st_mode & 0o7777`, including setuid/setgid/sticky).
    pub mode: u32,
    /// Owner user id.
    pub uid: u32,
    /// Owner group id.
    pub gid: u32,
    /// Device id (`st_dev`).
    pub dev: u64,
    /// Inode number (`st_ino`).
    pub ino: u64,
    /// Size in bytes (`st_size`).
    pub len: u64,
}

impl LeafStat {
    pub(crate) fn from_stat(st: &Stat) -> LeafStat {
        LeafStat {
            mode: st.st_mode & 0o7777,
            uid: st.st_uid,
            gid: st.st_gid,
            dev: st.st_dev,
            ino: st.st_ino,
            len: u64::try_from(st.st_size).unwrap_or(0),
        }
    }
}

/// An existing regular file read through a directory handle. It keeps the
/// read descriptor open: a caller that then replaces the file hands it to a
/// [`crate::Releaser`] with [`Existing::take_handle`], so the old content's
/// blocks are freed off the request's critical path (see `release.rs`);
/// otherwise it closes when the `Existing` drops. (Holding a descriptor is
/// why it is neither `Clone` nor `PartialEq`.)
#[derive(Debug)]
pub struct Existing {
    /// The file's metadata as it was read: what a [`crate::Publish`] expects
    /// at the leaf ([`crate::PublishOptions::expect_existing`]). `len` is
    /// `st_size` at open time, or the number of bytes actually seen when the
    /// file grew (or shrank) while being read.
    pub stat: LeafStat,
    /// What was read of the file.
    pub content: Content,
    /// The open read-only descriptor of this file (`None` once taken).
    handle: Option<OwnedFd>,
}

/// What [`read_existing`] or [`read_prefix`] read of a file.
#[derive(Debug, PartialEq, Eq)]
pub enum Content {
    /// All of the file's bytes.
    Whole(Vec<u8>),
    /// The first `max_bytes` bytes of a longer file ([`read_prefix`]).
    Prefix(Vec<u8>),
    /// Nothing: the file is larger than the caller's `max_bytes`
    /// ([`read_existing`]), and the caller refuses (e.g. `file_too_large`,
    /// SPEC 8.3).
    TooLarge,
    /// Nothing yet: the file was only opened ([`open_existing`]), and the
    /// caller reads it a piece at a time ([`Existing::stream`]).
    Unread,
}

impl Content {
    /// The bytes read: all of the file, its beginning, or none.
    pub fn bytes(&self) -> &[u8] {
        match self {
            Content::Whole(b) | Content::Prefix(b) => b,
            Content::TooLarge | Content::Unread => &[],
        }
    }
}

impl Existing {
    /// Takes the file's open descriptor (once; `None` after): opened
    /// `O_RDONLY|O_NOFOLLOW|O_NONBLOCK|O_CLOEXEC` through the directory
    /// handle, the same inode as `stat.dev`/`stat.ino`, its offset wherever the read
    /// stopped (0 when `read_existing` refused by size without reading).
    /// Holding it past a `rename` over the file keeps the old inode alive,
    /// so the rename does not free its blocks; see
    /// [`crate::Dir::can_defer_frees`] for where that is wanted.
    pub fn take_handle(&mut self) -> Option<OwnedFd> {
        self.handle.take()
    }

    /// A second [`Existing`] of the same open file: its descriptor
    /// duplicated (`F_DUPFD_CLOEXEC`), nothing read ([`Content::Unread`]).
    /// Another thread reads the file through it ([`Existing::stream`])
    /// while this one's descriptor goes elsewhere. [`FsError::Io`] once the
    /// descriptor was taken, or when it cannot be duplicated; `path` names
    /// the file in the error.
    pub fn duplicate(&self, path: &Path) -> Result<Existing, FsError> {
        let dup = match self.handle.as_ref() {
            Some(fd) => rustix::io::fcntl_dupfd_cloexec(fd, 0)
                .map_err(|e| FsError::errno(FsOp::Open, path, e))?,
            None => {
                return Err(FsError::os(
                    FsOp::Open,
                    path,
                    std::io::Error::from(std::io::ErrorKind::NotConnected),
                ));
            }
        };
        Ok(Existing {
            stat: self.stat,
            content: Content::Unread,
            handle: Some(dup),
        })
    }

    /// Reads a file only opened ([`Content::Unread`], by [`open_existing`];
    /// pieces read with [`Existing::stream`] do not count) as
    /// [`read_prefix`] would have read it, through the same descriptor: the
    /// same inode, not the leaf's name again. `path` names it in an error.
    /// [`FsError::Io`] once the descriptor was taken or the file was read.
    pub fn read_prefix(self, path: &Path, max_bytes: u64) -> Result<Existing, FsError> {
        match (self.content, self.handle) {
            (Content::Unread, Some(fd)) => read_opened(fd, self.stat, max_bytes, path),
            _ => Err(FsError::os(
                FsOp::Read,
                path,
                std::io::Error::from(std::io::ErrorKind::NotConnected),
            )),
        }
    }

    /// Reads the file through its open descriptor from its first byte, in
    /// pieces of at most `chunk` bytes handed to `each` in order, until its
    /// end or until `each` breaks: a file too large to hold whole
    /// ([`Content::TooLarge`]) read a piece at a time (a paged read keeps
    /// only the lines it shows). `path` names the file in an error. Returns
    /// `each`'s break, or the bytes read. Reads at explicit offsets
    /// (`pread`), so whatever read the descriptor before does not matter.
    /// [`FsError::Io`] once the descriptor was taken.
    pub fn stream<B>(
        &self,
        path: &Path,
        chunk: usize,
        mut each: impl FnMut(&[u8]) -> std::ops::ControlFlow<B>,
    ) -> Result<std::ops::ControlFlow<B, u64>, FsError> {
        use std::ops::ControlFlow;
        let Some(fd) = self.handle.as_ref() else {
            return Err(FsError::os(
                FsOp::Read,
                path,
                std::io::Error::from(std::io::ErrorKind::NotConnected),
            ));
        };
        let mut buf = vec![0u8; chunk.max(1)];
        let mut offset = 0u64;
        loop {
            let n = match rustix::io::pread(fd, &mut buf, offset) {
                Ok(0) => return Ok(ControlFlow::Continue(offset)),
                Ok(n) => n,
                Err(Errno::INTR) => continue,
                Err(e) => return Err(FsError::errno(FsOp::Read, path, e)),
            };
            offset += n as u64;
            if let ControlFlow::Break(b) = each(&buf[..n]) {
                return Ok(ControlFlow::Break(b));
            }
        }
    }
}

/// Check that `leaf` is one path component we can use relative to a
/// directory handle: non-empty, no `/`, no NUL, not `.` or `..`.
pub(crate) fn check_leaf(leaf: &OsStr) -> Result<(), FsError> {
    let b = leaf.as_bytes();
    if b.is_empty() || b == b"." || b == b".." || b.contains(&b'/') || b.contains(&0) {
        return Err(FsError::invalid(
            leaf,
            "is not a single file name component",
        ));
    }
    Ok(())
}

/// What a leaf name refers to right now (`fstatat(AT_SYMLINK_NOFOLLOW)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LeafState {
    /// Nothing by that name.
    Missing,
    /// A regular file.
    Regular(LeafStat),
}

/// Stat `leaf` in `dir` without following it: missing -> `Missing`, regular
/// file -> `Regular`, symlink -> `SymlinkEscape`, anything else -> `NotAFile`.
pub(crate) fn leaf_state(
    dir: BorrowedFd<'_>,
    dir_path: &Path,
    leaf: &OsStr,
) -> Result<LeafState, FsError> {
    // The path for messages, built only for an error.
    let shown = || dir_path.join(leaf);
    let st = match rustix::fs::statat(dir, leaf, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(Errno::NOENT) => return Ok(LeafState::Missing),
        Err(e) => return Err(FsError::errno(FsOp::Stat, &shown(), e)),
    };
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => Ok(LeafState::Regular(LeafStat::from_stat(&st))),
        FileType::Symlink => Err(FsError::SymlinkEscape {
            path: shown(),
            what: Swap::Symlink,
            source: None,
        }),
        other => Err(FsError::NotAFile {
            path: shown(),
            found: type_name(other),
            expected: "regular file",
        }),
    }
}

/// A short English name of a file type for messages.
pub(crate) fn type_name(t: FileType) -> &'static str {
    match t {
        FileType::RegularFile => "regular file",
        FileType::Directory => "directory",
        FileType::Symlink => "symlink",
        FileType::Fifo => "fifo",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Unknown => "file of unknown type",
    }
}

/// Metadata of `leaf` in `dir` (`fstatat(AT_SYMLINK_NOFOLLOW)`), without
/// opening it.
///
/// Returns `Ok(None)` when nothing has that name. Errors: a symlink leaf ->
/// [`FsError::SymlinkEscape`]; a leaf that is not a regular file ->
/// [`FsError::NotAFile`]; `EACCES`/`EPERM` -> [`FsError::PermissionDenied`];
/// a `leaf` that is not one file name component ->
/// [`FsError::InvalidInput`].
pub fn stat_leaf(dir: &Dir, leaf: &OsStr) -> Result<Option<LeafStat>, FsError> {
    check_leaf(leaf)?;
    match leaf_state(dir.fd(), dir.path(), leaf)? {
        LeafState::Missing => Ok(None),
        LeafState::Regular(st) => Ok(Some(st)),
    }
}

/// The largest capacity `read_existing` reserves up front (64 MiB); beyond
/// it the buffer grows as bytes actually arrive.
const MAX_CAPACITY_HINT: u64 = 64 * 1024 * 1024;

/// Whether reading a file through [`read_existing`] or [`read_prefix`]
/// updates its access time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Atime {
    /// As any read does (the read methods: someone reads the file).
    Update,
    /// `O_NOATIME`: for the reads a write or an edit makes of its target
    /// (a dry run's too), and for looking at a file after a crash. Those
    /// reads are writegate's own bookkeeping; without the flag every write
    /// to a file written since its last read also dirtied the old inode's
    /// access time (a metadata write per write). The kernel allows the flag only to the
    /// file's owner (or `CAP_FOWNER`): another's file (as the `lstat`
    /// before the open saw it) is opened without it, and so is a file
    /// whose open with it is refused (`EPERM`).
    Keep,
}

/// Opens the regular file `leaf` in `dir` for reading (`O_NOFOLLOW`,
/// classified before opening so a fifo or device is never opened) and
/// returns it with its metadata; `None` when nothing has that name. Shared
/// by [`read_prefix`] and [`read_existing`].
fn open_regular(
    dir: &Dir,
    leaf: &OsStr,
    atime: Atime,
) -> Result<Option<(OwnedFd, LeafStat)>, FsError> {
    check_leaf(leaf)?;
    // The path for messages, built only for an error.
    let shown = || dir.path().join(leaf);
    // Classify first so that a fifo or a device is never opened.
    let LeafState::Regular(seen) = leaf_state(dir.fd(), dir.path(), leaf)? else {
        return Ok(None);
    };
    let flags =
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK | OFlags::NOCTTY;
    // Only the owner (or root, with CAP_FOWNER) may ask for O_NOATIME: for
    // another's file it would be a refused open before the real one.
    let euid = crate::process::own_euid();
    let opened = if atime == Atime::Keep && (euid == 0 || seen.uid == euid) {
        match rustix::fs::openat(dir.fd(), leaf, flags | OFlags::NOATIME, Mode::empty()) {
            // Refused all the same (the owner changed meanwhile, or root
            // without CAP_FOWNER): read it the ordinary way.
            Err(Errno::PERM) => rustix::fs::openat(dir.fd(), leaf, flags, Mode::empty()),
            other => other,
        }
    } else {
        rustix::fs::openat(dir.fd(), leaf, flags, Mode::empty())
    };
    let fd = match opened {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Ok(None),
        Err(e) => return Err(FsError::errno(FsOp::Open, &shown(), e)),
    };
    let st = rustix::fs::fstat(&fd).map_err(|e| FsError::errno(FsOp::Stat, &shown(), e))?;
    let ft = FileType::from_raw_mode(st.st_mode);
    if ft != FileType::RegularFile {
        return Err(FsError::NotAFile {
            path: shown(),
            found: type_name(ft),
            expected: "regular file",
        });
    }
    let meta = LeafStat::from_stat(&st);
    Ok(Some((fd, meta)))
}

/// Like [`read_existing`] but a file longer than `max_bytes` is not an
/// error for the caller to refuse: its first `max_bytes` bytes are returned
/// as [`Content::Prefix`], with `len` the file's size. For callers that only
/// need to look at a file's beginning (the format of a file a whole-file
/// write replaces, SPEC 7.2). Same errors as [`read_existing`]; like it, the
/// result holds the file open until it is dropped or its handle taken.
pub fn read_prefix(
    dir: &Dir,
    leaf: &OsStr,
    max_bytes: u64,
    atime: Atime,
) -> Result<Option<Existing>, FsError> {
    let Some((fd, meta)) = open_regular(dir, leaf, atime)? else {
        return Ok(None);
    };
    read_opened(fd, meta, max_bytes, &dir.path().join(leaf)).map(Some)
}

/// [`read_prefix`] of a file already open (`fd`, its offset at 0, `meta`
/// its stat); `path` names it in an error.
fn read_opened(
    fd: OwnedFd,
    meta: LeafStat,
    max_bytes: u64,
    path: &Path,
) -> Result<Existing, FsError> {
    let hint = meta.len.min(max_bytes).min(MAX_CAPACITY_HINT);
    let mut bytes = Vec::with_capacity(usize::try_from(hint).unwrap_or(0));
    let mut file = File::from(fd);
    (&mut file)
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| FsError::os(FsOp::Read, path, e))?;
    let (len, content) = if bytes.len() as u64 > max_bytes {
        bytes.truncate(usize::try_from(max_bytes).unwrap_or(usize::MAX));
        (meta.len.max(max_bytes + 1), Content::Prefix(bytes))
    } else {
        (bytes.len() as u64, Content::Whole(bytes))
    };
    Ok(Existing {
        stat: LeafStat { len, ..meta },
        content,
        handle: Some(file.into()),
    })
}

/// Opens the regular file `leaf` relative to `dir` with `O_NOFOLLOW`, as
/// [`read_existing`] does, and reads nothing: the result has
/// [`Content::Unread`], and the caller reads it through
/// [`Existing::stream`] (a large file whose format is learned a piece at a
/// time). Same errors as [`read_existing`].
pub fn open_existing(dir: &Dir, leaf: &OsStr, atime: Atime) -> Result<Option<Existing>, FsError> {
    Ok(open_regular(dir, leaf, atime)?.map(|(fd, stat)| Existing {
        stat,
        content: Content::Unread,
        handle: Some(fd),
    }))
}

/// Read the regular file `leaf` relative to `dir` with `O_NOFOLLOW` (SPEC
/// 7.2: the format read happens inside the path lock).
///
/// Returns `Ok(None)` when nothing has that name. With `max_bytes =
/// Some(n)`, a file larger than `n` bytes is not read: the result has
/// [`Content::TooLarge`] and `len` set, so the caller can refuse with
/// `file_too_large`. Errors: a symlink leaf -> [`FsError::SymlinkEscape`];
/// anything but a regular file (directory, fifo, device, socket) ->
/// [`FsError::NotAFile`], checked before opening so a fifo or device is never
/// opened; `EACCES`/`EPERM` -> [`FsError::PermissionDenied`]; other failures
/// -> [`FsError::Io`]. The result holds the file open until it is dropped or
/// its handle taken ([`Existing::take_handle`]).
pub fn read_existing(
    dir: &Dir,
    leaf: &OsStr,
    max_bytes: Option<u64>,
    atime: Atime,
) -> Result<Option<Existing>, FsError> {
    let Some((fd, meta)) = open_regular(dir, leaf, atime)? else {
        return Ok(None);
    };
    if max_bytes.is_some_and(|max| meta.len > max) {
        return Ok(Some(Existing {
            stat: meta,
            content: Content::TooLarge,
            handle: Some(fd),
        }));
    }
    let mut file = File::from(fd);
    // Never size a buffer from st_size alone: a sparse or growing file can
    // claim anything. The capacity is a hint, capped.
    let hint = meta
        .len
        .min(max_bytes.unwrap_or(u64::MAX))
        .min(MAX_CAPACITY_HINT);
    let mut bytes = Vec::with_capacity(usize::try_from(hint).unwrap_or(0));
    let read = match max_bytes {
        // Read one byte past the cap to notice a file that grew meanwhile.
        Some(max) => (&mut file)
            .take(max.saturating_add(1))
            .read_to_end(&mut bytes),
        None => file.read_to_end(&mut bytes),
    };
    read.map_err(|e| FsError::os(FsOp::Read, &dir.path().join(leaf), e))?;
    let seen = bytes.len() as u64;
    let (len, content) = if max_bytes.is_some_and(|max| seen > max) {
        (meta.len.max(seen), Content::TooLarge)
    } else {
        (seen, Content::Whole(bytes))
    };
    Ok(Some(Existing {
        stat: LeafStat { len, ..meta },
        content,
        handle: Some(file.into()),
    }))
}

#[cfg(test)]
mod tests {
    /// [`super::Dir::identity`] builds the device number from `statx`'s
    /// major and minor with `makedev`; lock keys compare it with `lstat`'s
    /// `st_dev`, which the kernel encodes as `(minor & 0xff) | (major <<
    /// 8) | ((minor & !0xff) << 12)`. The two agree, minors past 255 (an
    /// anonymous device `0:340` after many mounts) included.
    #[test]
    fn makedev_is_the_kernels_st_dev_encoding() {
        let kernel = |major: u32, minor: u32| {
            u64::from(minor & 0xff) | (u64::from(major) << 8) | (u64::from(minor & !0xff) << 12)
        };
        for (major, minor) in [
            (0, 0),
            (0, 27),
            (0, 255),
            (0, 256),
            (0, 340),
            (254, 3),
            (8, 1),
            (4095, 0xF_FFFF),
        ] {
            assert_eq!(
                rustix::fs::makedev(major, minor),
                kernel(major, minor),
                "{major}:{minor}"
            );
        }
    }
}
