//! The before-image store of undo (ADR 0020): the file a commit replaces,
//! kept under the operation's id in a private directory of the state
//! directory, and the removal of a file an undo takes back.
//!
//! An image is the replaced inode itself, hard-linked into the store
//! before the rename (no byte copied), when the store is on the file's
//! filesystem and the kernel lets us link it; otherwise a copy, written to
//! a temp name (0600), fsynced and renamed to its name. Either way an
//! image name either holds a whole image or does not exist.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;

use crate::dir::DIR_FLAGS;
use crate::{Dir, FsError, FsOp, LeafStat, Swap};

/// How an image was kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageKind {
    /// The replaced inode, hard-linked into the store.
    Link,
    /// A copy of its bytes (another filesystem, or linking refused).
    Copy,
}

impl ImageKind {
    /// `link` or `copy`.
    pub fn as_str(self) -> &'static str {
        match self {
            ImageKind::Link => "link",
            ImageKind::Copy => "copy",
        }
    }
}

/// What [`ImageStore::keep`] kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kept {
    /// Link or copy.
    pub kind: ImageKind,
    /// Bytes of the image.
    pub len: u64,
    /// The image's modification time in nanoseconds since the epoch: an
    /// image changed through another hard link of the old file shows a new
    /// one (checked when the operation has no `hashBefore`).
    pub mtime_ns: i128,
}

/// The directory of kept images (`<store>/images`), open.
#[derive(Debug)]
pub struct ImageStore {
    fd: OwnedFd,
    path: PathBuf,
    dev: u64,
}

/// An image's name must be one plain file name of the store: the names
/// come from the history index, which a same-UID process can rewrite, and
/// a name holding `/` (or `..`) would reach out of the store when it is
/// opened, kept or removed (an eviction of a forged `../x` would unlink a
/// file elsewhere).
fn check_name(store: &Path, name: &str) -> Result<(), FsError> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(FsError::invalid(
            store.join(name),
            "is not a plain name in the history store",
        ));
    }
    Ok(())
}

/// The modification time of a stat in nanoseconds.
fn mtime_ns(st: &rustix::fs::Stat) -> i128 {
    i128::from(st.st_mtime) * 1_000_000_000 + i128::from(st.st_mtime_nsec)
}

impl ImageStore {
    /// Opens (creating, mode 0700) the image directory `path` and its
    /// parents. An existing directory owned by someone else, or open to
    /// others (group or world bits), is refused: the store holds the old
    /// contents of the user's files.
    ///
    /// Errors: as the operating system reports them, naming the path;
    /// another owner or open bits -> [`FsError::PermissionDenied`].
    pub fn open(path: &Path) -> Result<ImageStore, FsError> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(path)
            .map_err(|e| FsError::os(FsOp::CreateDir, path, e))?;
        let fd = rustix::fs::open(path, DIR_FLAGS, Mode::empty())
            .map_err(|e| FsError::errno(FsOp::OpenDir, path, e))?;
        let st = rustix::fs::fstat(&fd).map_err(|e| FsError::errno(FsOp::Stat, path, e))?;
        if st.st_uid != crate::current_uid() {
            return Err(FsError::os(
                FsOp::OpenDir,
                path,
                io::Error::new(
                    io::ErrorKind::PermissionDenied,
                    "the history store belongs to another user",
                ),
            ));
        }
        if st.st_mode & 0o077 != 0 {
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(0o700))
                .map_err(|e| FsError::errno(FsOp::SetMode, path, e))?;
        }
        Ok(ImageStore {
            fd,
            path: path.to_path_buf(),
            dev: st.st_dev,
        })
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Keeps the file at `leaf` in `dir`, which must be the inode `expect`
    /// (the file the commit read inside its lock), under `name`.
    ///
    /// A hard link when the store is on the same device; on `EXDEV`,
    /// `EPERM` (protected hard links) or `EMLINK`, a copy instead. A link
    /// that turns out to name another inode (the leaf swapped meanwhile) is
    /// removed again and refused as [`FsError::SymlinkEscape`].
    ///
    /// Errors: the copy's (a full disk: nothing is left behind) and the
    /// link's other failures, naming the leaf.
    pub fn keep(
        &self,
        dir: &Dir,
        leaf: &OsStr,
        expect: &LeafStat,
        name: &str,
    ) -> Result<Kept, FsError> {
        check_name(&self.path, name)?;
        let shown = || dir.path().join(leaf);
        if expect.dev == self.dev {
            match rustix::fs::linkat(dir.fd(), leaf, &self.fd, name, AtFlags::empty()) {
                Ok(()) => {
                    let st = rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW)
                        .map_err(|e| FsError::errno(FsOp::Stat, &self.path.join(name), e))?;
                    if (st.st_dev, st.st_ino) != (expect.dev, expect.ino) {
                        let _ = rustix::fs::unlinkat(&self.fd, name, AtFlags::empty());
                        return Err(FsError::SymlinkEscape {
                            path: shown(),
                            what: Swap::ChangedWhilePublishing,
                            source: None,
                        });
                    }
                    return Ok(Kept {
                        kind: ImageKind::Link,
                        len: u64::try_from(st.st_size).unwrap_or(0),
                        mtime_ns: mtime_ns(&st),
                    });
                }
                Err(Errno::XDEV | Errno::PERM | Errno::MLINK | Errno::ACCESS) => {}
                Err(Errno::NOENT) => {
                    return Err(FsError::SymlinkEscape {
                        path: shown(),
                        what: Swap::VanishedAfterCheck,
                        source: None,
                    });
                }
                Err(e) => return Err(FsError::errno(FsOp::Open, &shown(), e)),
            }
        }
        self.copy(dir, leaf, expect, name)
    }

    /// The copy path of [`ImageStore::keep`].
    fn copy(
        &self,
        dir: &Dir,
        leaf: &OsStr,
        expect: &LeafStat,
        name: &str,
    ) -> Result<Kept, FsError> {
        let shown = || dir.path().join(leaf);
        let src = rustix::fs::openat(
            dir.fd(),
            leaf,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::empty(),
        )
        .map_err(|e| FsError::errno(FsOp::Open, &shown(), e))?;
        let st = rustix::fs::fstat(&src).map_err(|e| FsError::errno(FsOp::Stat, &shown(), e))?;
        if (st.st_dev, st.st_ino) != (expect.dev, expect.ino) {
            return Err(FsError::SymlinkEscape {
                path: shown(),
                what: Swap::ChangedWhilePublishing,
                source: None,
            });
        }
        let temp = format!(".{name}.tmp");
        let image_path = self.path.join(&temp);
        let _ = rustix::fs::unlinkat(&self.fd, temp.as_str(), AtFlags::empty());
        let fd = rustix::fs::openat(
            &self.fd,
            temp.as_str(),
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )
        .map_err(|e| FsError::errno(FsOp::CreateTemp, &image_path, e))?;
        let mut out = File::from(fd);
        let mut input = File::from(src);
        let written = io::copy(&mut input, &mut out).and_then(|n| out.sync_all().map(|()| n));
        let written = match written {
            Ok(n) => n,
            Err(e) => {
                drop(out);
                let _ = rustix::fs::unlinkat(&self.fd, temp.as_str(), AtFlags::empty());
                return Err(FsError::os(FsOp::WriteTemp, &image_path, e));
            }
        };
        let meta = rustix::fs::fstat(&out).map_err(|e| FsError::errno(FsOp::Stat, &image_path, e));
        if let Err(e) = rustix::fs::renameat(&self.fd, temp.as_str(), &self.fd, name) {
            let _ = rustix::fs::unlinkat(&self.fd, temp.as_str(), AtFlags::empty());
            return Err(FsError::errno(FsOp::Rename, &self.path.join(name), e));
        }
        let meta = meta?;
        Ok(Kept {
            kind: ImageKind::Copy,
            len: written,
            mtime_ns: mtime_ns(&meta),
        })
    }

    /// Opens the image `name` for reading: the file and its stat (`None`
    /// when there is no such image, e.g. evicted).
    pub fn open_image(&self, name: &str) -> Result<Option<(File, LeafStat, i128)>, FsError> {
        check_name(&self.path, name)?;
        let path = || self.path.join(name);
        match rustix::fs::openat(
            &self.fd,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
            Mode::empty(),
        ) {
            Ok(fd) => {
                let st =
                    rustix::fs::fstat(&fd).map_err(|e| FsError::errno(FsOp::Stat, &path(), e))?;
                if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
                    return Ok(None);
                }
                let mtime = mtime_ns(&st);
                Ok(Some((File::from(fd), LeafStat::from_stat(&st), mtime)))
            }
            Err(Errno::NOENT) => Ok(None),
            Err(e) => Err(FsError::errno(FsOp::Open, &path(), e)),
        }
    }

    /// Whether the image `name` exists.
    pub fn has(&self, name: &str) -> bool {
        if check_name(&self.path, name).is_err() {
            return false;
        }
        rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW).is_ok()
    }

    /// Removes the image `name` (a missing one is fine), returning a
    /// descriptor of it opened just before: its blocks are freed when that
    /// closes, which the caller can leave to a `Releaser` (on a filesystem
    /// that discards freed blocks, freeing a 5 MiB image inside `unlinkat`
    /// is a synchronous discard on the request's path). `None` when it was
    /// missing or could not be opened (then it is freed at once).
    pub fn remove_held(&self, name: &str) -> Result<Option<OwnedFd>, FsError> {
        check_name(&self.path, name)?;
        // `O_PATH`: a reference to the inode without opening it (no
        // device's open, no FIFO's), which keeps its blocks until closed.
        let held = rustix::fs::openat(
            &self.fd,
            name,
            OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .ok();
        self.remove(name)?;
        Ok(held)
    }

    /// Removes the image `name` (a missing one is fine).
    pub fn remove(&self, name: &str) -> Result<(), FsError> {
        check_name(&self.path, name)?;
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()) {
            Ok(()) | Err(Errno::NOENT) => Ok(()),
            Err(e) => Err(FsError::errno(FsOp::Remove, &self.path.join(name), e)),
        }
    }

    /// The names in the store (images and leftover temp files).
    pub fn names(&self) -> Result<Vec<OsString>, FsError> {
        let rd =
            std::fs::read_dir(&self.path).map_err(|e| FsError::os(FsOp::Read, &self.path, e))?;
        Ok(rd.filter_map(|e| e.ok().map(|e| e.file_name())).collect())
    }

    /// `fsync`s the store directory (the names of images kept so far).
    pub fn sync(&self) -> Result<(), FsError> {
        rustix::fs::fsync(&self.fd).map_err(|e| FsError::errno(FsOp::Sync, &self.path, e))
    }
}

/// Whether `name` is one of [`ImageStore::keep`]'s temp names.
pub fn is_image_temp(name: &OsStr) -> bool {
    let b = name.as_bytes();
    b.starts_with(b".") && b.ends_with(b".tmp")
}

/// Removes the file at `leaf` in `dir` (an undo taking back a creation),
/// which must still be the inode `expect`, then fsyncs the directory.
///
/// Errors: a leaf that is another inode now or gone ->
/// [`FsError::SymlinkEscape`]; the operating system's failures naming it.
pub fn unlink_leaf(dir: &Dir, leaf: &OsStr, expect: &LeafStat) -> Result<(), FsError> {
    let shown = || dir.path().join(leaf);
    match rustix::fs::statat(dir.fd(), leaf, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if (st.st_dev, st.st_ino) == (expect.dev, expect.ino) => {}
        Ok(_) => {
            return Err(FsError::SymlinkEscape {
                path: shown(),
                what: Swap::ReplacedAfterCheck,
                source: None,
            });
        }
        Err(_) => {
            return Err(FsError::SymlinkEscape {
                path: shown(),
                what: Swap::VanishedAfterCheck,
                source: None,
            });
        }
    }
    rustix::fs::unlinkat(dir.fd(), leaf, AtFlags::empty())
        .map_err(|e| FsError::errno(FsOp::Remove, &shown(), e))?;
    let _ = rustix::fs::fsync(dir.fd().as_fd());
    Ok(())
}

/// What [`remove_empty_dir_below`] found at the directory it was asked to
/// remove.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirRemoval {
    /// It was an empty directory and is gone.
    Removed,
    /// It holds something (put there since it was created): left alone.
    NotEmpty,
    /// Nothing is there any more.
    Gone,
    /// Something else than a directory is there (a file, a symlink): left
    /// alone.
    NotADirectory,
}

/// Removes the directory `rel` below the open directory `root` if it is
/// empty (an undo taking back the directories a creation made), never
/// following a symlink: each component above it is opened from `root` with
/// `O_DIRECTORY | O_NOFOLLOW`, and the last one is removed with
/// `unlinkat(AT_REMOVEDIR)` relative to its parent's handle, which removes
/// only an empty directory and never follows the name it removes. The
/// parent is fsynced after a removal.
///
/// Errors: `rel` not made of plain names only (`..`, `.`, absolute, empty)
/// -> [`FsError::InvalidInput`]; a component above it that is a symlink, or
/// is swapped for one meanwhile -> [`FsError::SymlinkEscape`]; one that is
/// another kind of file -> [`FsError::NotAFile`]; the operating system's
/// other failures, naming the path.
pub fn remove_empty_dir_below(root: &Dir, rel: &Path) -> Result<DirRemoval, FsError> {
    let full = root.path().join(rel);
    let mut names = Vec::new();
    for c in rel.components() {
        match c {
            std::path::Component::Normal(n) => names.push(n),
            _ => {
                return Err(FsError::invalid(
                    &full,
                    "is not a plain path below the root",
                ));
            }
        }
    }
    let Some((last, above)) = names.split_last() else {
        return Err(FsError::invalid(&full, "names no directory below the root"));
    };
    let mut cur: OwnedFd = rustix::fs::openat(root.fd(), ".", DIR_FLAGS, Mode::empty())
        .map_err(|e| FsError::errno(FsOp::OpenDir, root.path(), e))?;
    let mut walked = root.path().to_path_buf();
    for name in above {
        walked.push(name);
        cur = match rustix::fs::openat(&cur, *name, DIR_FLAGS, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::NOENT) => return Ok(DirRemoval::Gone),
            Err(e) => return Err(crate::dir::classify_component_error(&cur, name, e, &walked)),
        };
    }
    match rustix::fs::statat(&cur, *last, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Directory => {}
        Ok(_) => return Ok(DirRemoval::NotADirectory),
        Err(Errno::NOENT) => return Ok(DirRemoval::Gone),
        Err(e) => return Err(FsError::errno(FsOp::Stat, &full, e)),
    }
    match rustix::fs::unlinkat(&cur, *last, AtFlags::REMOVEDIR) {
        Ok(()) => {
            let _ = rustix::fs::fsync(&cur);
            Ok(DirRemoval::Removed)
        }
        Err(Errno::NOTEMPTY | Errno::EXIST) => Ok(DirRemoval::NotEmpty),
        Err(Errno::NOENT) => Ok(DirRemoval::Gone),
        // Swapped for a file or a symlink since the look above: rmdir
        // does not follow it, and it stays.
        Err(Errno::NOTDIR) => Ok(DirRemoval::NotADirectory),
        Err(e) => Err(FsError::errno(FsOp::Remove, &full, e)),
    }
}

/// Replaces the file `name` in the directory `dir` with `bytes`, whole or
/// not at all: a temp name (`.<name>.tmp`, 0600, created exclusively, so a
/// planted symlink is not followed) written, fsynced and renamed over
/// `name`, then the directory fsynced. On failure (a full disk) the temp
/// file is removed and `name` is as it was. The history index's
/// compaction; the caller excludes other writers of `name`.
///
/// Errors: as the operating system reports them, naming the temp file or
/// `name`.
pub fn replace_whole(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), FsError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let temp = dir.join(format!(".{name}.tmp"));
    let _ = std::fs::remove_file(&temp);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(FsError::os(FsOp::WriteTemp, &temp, e));
    }
    let target = dir.join(name);
    if let Err(e) = std::fs::rename(&temp, &target) {
        let _ = std::fs::remove_file(&temp);
        return Err(FsError::os(FsOp::Rename, &target, e));
    }
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn root() -> (tempfile::TempDir, PathBuf, Dir) {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let dir = Dir::open_canonical(&root).unwrap();
        (d, root, dir)
    }

    /// Names from a rewritten index never reach out of the store.
    #[test]
    fn an_image_name_is_one_plain_name_of_the_store() {
        let (_d, root, dir) = root();
        let store = ImageStore::open(&root.join("h/images")).unwrap();
        std::fs::write(root.join("h/victim"), b"keep").unwrap();
        std::fs::write(root.join("f"), b"x").unwrap();
        let st = crate::stat_leaf(&dir, OsStr::new("f")).unwrap().unwrap();
        for name in ["../victim", "..", ".", "", "a/b", "/etc/passwd", "a\0b"] {
            assert!(store.remove(name).is_err(), "{name:?}");
            assert!(store.open_image(name).is_err(), "{name:?}");
            assert!(!store.has(name), "{name:?}");
            assert!(
                store.keep(&dir, OsStr::new("f"), &st, name).is_err(),
                "{name:?}"
            );
        }
        assert_eq!(std::fs::read(root.join("h/victim")).unwrap(), b"keep");
        let kept = store.keep(&dir, OsStr::new("f"), &st, "0123-1").unwrap();
        assert_eq!(kept.kind, ImageKind::Link);
        assert!(store.has("0123-1") && store.remove("0123-1").is_ok());
    }

    /// An evicted image's name goes at once and its blocks stay until the
    /// held descriptor closes (the releaser closes it off the request's
    /// path); a missing image is fine, and a forged name still refused.
    #[test]
    fn a_held_removal_unlinks_the_name_and_keeps_the_inode_until_closed() {
        let (_d, root, dir) = root();
        let store = ImageStore::open(&root.join("h/images")).unwrap();
        std::fs::write(root.join("f"), vec![7u8; 1 << 20]).unwrap();
        let st = crate::stat_leaf(&dir, OsStr::new("f")).unwrap().unwrap();
        store.keep(&dir, OsStr::new("f"), &st, "0123-2").unwrap();
        std::fs::remove_file(root.join("f")).unwrap();
        let held = store.remove_held("0123-2").unwrap().expect("a descriptor");
        assert!(!store.has("0123-2"));
        let after = rustix::fs::fstat(&held).unwrap();
        assert_eq!(after.st_nlink, 0);
        assert_eq!(after.st_size, 1 << 20);
        assert!(after.st_blocks > 0, "the blocks are still held");
        assert!(store.remove_held("0123-2").unwrap().is_none());
        assert!(store.remove_held("../f").is_err());
    }

    #[test]
    fn an_empty_directory_goes_and_a_full_one_stays() {
        let (_d, root, dir) = root();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::create_dir_all(root.join("c")).unwrap();
        std::fs::write(root.join("c/keep"), b"x").unwrap();
        let r = remove_empty_dir_below(&dir, Path::new("a/b")).unwrap();
        assert_eq!(r, DirRemoval::Removed);
        assert!(!root.join("a/b").exists() && root.join("a").is_dir());
        let r = remove_empty_dir_below(&dir, Path::new("c")).unwrap();
        assert_eq!(r, DirRemoval::NotEmpty);
        assert!(root.join("c/keep").exists());
        let r = remove_empty_dir_below(&dir, Path::new("a/b")).unwrap();
        assert_eq!(r, DirRemoval::Gone);
        let r = remove_empty_dir_below(&dir, Path::new("x/y")).unwrap();
        assert_eq!(r, DirRemoval::Gone);
    }

    #[test]
    fn no_symlink_is_followed_on_the_way_or_at_the_end() {
        let (_d, root, dir) = root();
        let (_o, outside, _) = super::tests::root();
        std::fs::create_dir_all(outside.join("victim")).unwrap();
        // A symlinked parent: refused, the directory it leads to stays.
        symlink(&outside, root.join("link")).unwrap();
        let e = remove_empty_dir_below(&dir, Path::new("link/victim")).unwrap_err();
        assert!(matches!(e, FsError::SymlinkEscape { .. }), "{e:?}");
        assert!(outside.join("victim").is_dir());
        // A symlink at the name itself: not a directory, left alone.
        symlink(outside.join("victim"), root.join("leaf")).unwrap();
        let r = remove_empty_dir_below(&dir, Path::new("leaf")).unwrap();
        assert_eq!(r, DirRemoval::NotADirectory);
        assert!(outside.join("victim").is_dir() && root.join("leaf").is_symlink());
        // Anything but plain names is a caller bug.
        for rel in ["../victim", "", "/victim", "./victim", "a/../victim"] {
            let e = remove_empty_dir_below(&dir, Path::new(rel)).unwrap_err();
            assert!(matches!(e, FsError::InvalidInput { .. }), "{rel}: {e:?}");
        }
        assert!(outside.join("victim").is_dir());
    }
}
