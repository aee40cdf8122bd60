//! [`FsView`]: the read-only lookups the resolver may make, and [`OsView`],
//! the real filesystem.

use std::io;
use std::path::{Path, PathBuf};

/// What the resolver may do to the filesystem: read-only lookups, nothing else
/// (SPEC 5: "it may lstat, readlink and realpath").
///
/// Implementations must not follow a symlink in the *last* component of
/// [`FsView::lstat`], and must have no side effects. Tests wrap [`OsView`] to
/// change the filesystem between calls and so simulate races.
pub trait FsView {
    /// `lstat(2)`: the kind, device, inode and permission bits of `path`
    /// without following a symlink in its last component. A missing entry
    /// is `ErrorKind::NotFound`.
    fn lstat(&self, path: &Path) -> io::Result<Stat>;

    /// `readlink(2)`: the raw target of the symlink at `path`, unresolved.
    fn read_link(&self, path: &Path) -> io::Result<PathBuf>;

    /// `realpath(3)`: `path` with every symlink, `.` and `..` resolved; the
    /// path must exist. Used only by [`crate::resolve_external`] (SPEC 7.1
    /// step 3); the workspace resolver walks components itself. The default
    /// is [`std::fs::canonicalize`].
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        std::fs::canonicalize(path)
    }
}

/// The result of [`FsView::lstat`]: what kind of entry, its identity and
/// its permission bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stat {
    /// The kind of the entry itself (a symlink is [`FileKind::Symlink`]).
    pub kind: FileKind,
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
    /// Permission bits: `st_mode & 0o7777`.
    pub mode: u32,
}

/// The kind of a directory entry, as `lstat` sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (never the kind of a resolved canonical path).
    Symlink,
    /// Anything else: socket, FIFO, block or character device.
    Other,
}

/// The real filesystem: `lstat` through [`rustix::fs::lstat`], `readlink`
/// through [`std::fs::read_link`], `realpath` through
/// [`std::fs::canonicalize`]. Stateless; all lookups are read-only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OsView;

impl FsView for OsView {
    fn lstat(&self, path: &Path) -> io::Result<Stat> {
        use rustix::fs::FileType;
        let st = rustix::fs::lstat(path)?;
        let kind = match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => FileKind::File,
            FileType::Directory => FileKind::Dir,
            FileType::Symlink => FileKind::Symlink,
            _ => FileKind::Other,
        };
        // The field types differ between platforms (u64 on Linux, i32 on macOS).
        #[allow(clippy::unnecessary_cast, clippy::useless_conversion)]
        Ok(Stat {
            kind,
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            mode: (st.st_mode as u32) & 0o7777,
        })
    }

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        std::fs::read_link(path)
    }
}
