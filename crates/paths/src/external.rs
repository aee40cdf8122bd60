//! SPEC 7.1 steps 2-3: the target check of the external host writer.

use std::io;
use std::path::{Path, PathBuf};

use crate::error::{ResolveError, io_error};
use crate::resolve::{check_length, check_shape};
use crate::suspicious::is_suspicious;
use crate::view::{FileKind, FsView};

/// The target of an external write (SPEC 7.1 step 3), for a path that
/// [`crate::resolve`] classified as [`ResolveError::OutsideWorkspace`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalTarget {
    /// Where the write goes: the realpath of an existing leaf, or the realpath
    /// of the direct parent joined with the new leaf's name. Writers lock and
    /// write this path.
    pub canonical: PathBuf,
    /// `(dev, ino)` of the lstat'd existing regular leaf (equal to those of
    /// its realpath when this was computed); `None` for a new leaf.
    pub existing: Option<(u64, u64)>,
    /// Permission bits (`st_mode & 0o7777`) of that existing leaf; `None`
    /// for a new leaf.
    pub mode: Option<u32>,
}

/// SPEC 7.1 steps 2-3, in exactly this order:
///
/// 1. empty, NUL byte, not absolute, a component over [`crate::NAME_MAX`]
///    bytes, or [`crate::PATH_MAX`] bytes or more:
///    [`ResolveError::ParseError`];
/// 2. a `.` or `..` component anywhere: [`ResolveError::OutsideWorkspace`]
///    (an approved path must say where it really goes);
/// 3. suspicious (SPEC 6): `OutsideWorkspace`;
/// 4. a trailing `/` (no leaf name): `ParseError`;
/// 5. lstat the leaf (symlinks in the parent directories are followed by the
///    kernel, so aliases such as `/tmp` are fine):
///    - missing: realpath only the direct parent (missing parent:
///      [`ResolveError::NotFound`]; a parent that is not a directory:
///      `ParseError`); the target is that parent plus the leaf name;
///    - a symlink leaf, dangling or not: [`ResolveError::SymlinkEscape`];
///    - a directory: [`ResolveError::NotAFile`];
///    - anything else but a regular file (socket, FIFO, device):
///      `ParseError`;
///    - a regular file: realpath it and lstat the result; the result must be a
///      regular file with the same device and inode as the first lstat, else
///      `SymlinkEscape` (the file was swapped meanwhile; also when it vanished
///      in between).
///
/// The target's canonical path must be shorter than [`crate::PATH_MAX`]
/// bytes too (`ParseError`).
///
/// `EACCES` anywhere is [`ResolveError::PermissionDenied`]; `ENOTDIR` from the
/// leaf lstat (a parent component is a file) is `ParseError`.
///
/// A device/inode mismatch in step 5 is also what a legitimate concurrent
/// write looks like (it renames a new file over the leaf), so the whole check
/// is run again, from the lstat, up to [`EXTERNAL_CHECK_ATTEMPTS`] times; an
/// attempt is accepted only when its own lstat and realpath agree, so a
/// persistent swapper still gets `SymlinkEscape`.
pub fn resolve_external(view: &dyn FsView, input: &Path) -> Result<ExternalTarget, ResolveError> {
    let mut attempt = 1;
    loop {
        let changed = std::cell::Cell::new(false);
        match check_once(view, input, &changed) {
            Err(_) if changed.get() && attempt < EXTERNAL_CHECK_ATTEMPTS => attempt += 1,
            result => return result,
        }
    }
}

/// How many times [`resolve_external`] runs the leaf check when the file
/// changed between its lstat and its realpath.
pub const EXTERNAL_CHECK_ATTEMPTS: u32 = 3;

/// One run of the check; `changed` is set when it failed because the leaf
/// changed between its lstat and its realpath.
fn check_once(
    view: &dyn FsView,
    input: &Path,
    changed: &std::cell::Cell<bool>,
) -> Result<ExternalTarget, ResolveError> {
    check_shape(input)?;
    check_length(input, input)?;
    let bytes = input.as_os_str().as_encoded_bytes();
    if bytes
        .split(|b| *b == b'/')
        .any(|piece| piece == b"." || piece == b"..")
    {
        return Err(ResolveError::OutsideWorkspace(format!(
            "{} holds a `.` or `..` component; an external path must say where it really goes",
            input.display()
        )));
    }
    if let Some(reason) = is_suspicious(input) {
        return Err(crate::suspicious::refusal(input, &reason));
    }
    let (Some(parent), Some(leaf), false) =
        (input.parent(), input.file_name(), bytes.ends_with(b"/"))
    else {
        return Err(ResolveError::ParseError(format!(
            "{} does not name a file",
            input.display()
        )));
    };

    let first = match view.lstat(input) {
        Ok(st) => st,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let canonical_parent = view
                .canonicalize(parent)
                .map_err(|e| io_error(&e, "realpath of the parent", parent))?;
            let st = view
                .lstat(&canonical_parent)
                .map_err(|e| io_error(&e, "lstat", &canonical_parent))?;
            if st.kind != FileKind::Dir {
                return Err(ResolveError::ParseError(format!(
                    "the parent {} is not a directory",
                    parent.display()
                )));
            }
            let canonical = canonical_parent.join(leaf);
            check_length(&canonical, input)?;
            return Ok(ExternalTarget {
                canonical,
                existing: None,
                mode: None,
            });
        }
        Err(e) => return Err(io_error(&e, "lstat", input)),
    };

    match first.kind {
        FileKind::Symlink => {
            return Err(ResolveError::SymlinkEscape(format!(
                "{} is a symlink; an external write never goes through a leaf symlink",
                input.display()
            )));
        }
        FileKind::File => {}
        FileKind::Dir => {
            return Err(ResolveError::NotAFile(format!(
                "{} is a directory",
                input.display()
            )));
        }
        FileKind::Other => {
            return Err(ResolveError::ParseError(format!(
                "{} is not a regular file",
                input.display()
            )));
        }
    }

    let swapped = || {
        changed.set(true);
        ResolveError::SymlinkEscape(format!(
            "{} changed while it was being resolved",
            input.display()
        ))
    };
    let canonical = view.canonicalize(input).map_err(|e| match e.kind() {
        io::ErrorKind::PermissionDenied => io_error(&e, "realpath", input),
        _ => swapped(),
    })?;
    let second = view.lstat(&canonical).map_err(|e| match e.kind() {
        io::ErrorKind::PermissionDenied => io_error(&e, "lstat", &canonical),
        _ => swapped(),
    })?;
    if second.kind != FileKind::File || (second.dev, second.ino) != (first.dev, first.ino) {
        return Err(swapped());
    }
    check_length(&canonical, input)?;
    Ok(ExternalTarget {
        canonical,
        existing: Some((first.dev, first.ino)),
        mode: Some(second.mode),
    })
}
