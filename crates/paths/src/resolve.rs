//! The side-effect-free workspace resolver (SPEC 5).

use std::borrow::Cow;
use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Component, Path, PathBuf};

use crate::error::{ResolveError, io_error};
use crate::suspicious::{is_suspicious, is_suspicious_component};
use crate::view::{FileKind, FsView};

/// The most symlinks one resolution may follow (like Linux's `MAXSYMLINKS`);
/// following one more is [`ResolveError::SymlinkEscape`] (SPEC 5).
pub const MAX_SYMLINK_HOPS: u32 = 40;

/// Linux's `PATH_MAX`: the kernel takes a path only when it is shorter than
/// this (the count includes the terminating NUL), so a path is at most
/// `PATH_MAX - 1` = 4095 bytes. A longer one is [`ResolveError::ParseError`].
pub const PATH_MAX: usize = 4096;

/// Linux's `NAME_MAX`: the most bytes one component (a file or directory
/// name) may have. A longer one is [`ResolveError::ParseError`].
pub const NAME_MAX: usize = 255;

/// Classified target of the workspace resolver ([`resolve`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// Every symlink resolved, no `.`/`..`; the leaf (and possibly some
    /// directories above it) may not exist yet. Writers lock and write this.
    pub canonical: PathBuf,
    /// The canonical root (one of the `roots` passed in) that contains it.
    pub root: PathBuf,
    /// The canonical leaf exists (as a regular file, directory or other kind).
    pub exists: bool,
    /// Kind of the existing canonical leaf (never [`FileKind::Symlink`]);
    /// `None` when it does not exist.
    pub kind: Option<FileKind>,
    /// Permission bits (`st_mode & 0o7777`) of the existing canonical leaf,
    /// as the resolver's own `lstat` of it saw them; `None` when it does not
    /// exist or was not looked at (a path that names the root itself).
    pub mode: Option<u32>,
}

/// Whether `path` is `root` or inside it, comparing whole path components
/// (never a string prefix: `/a/proj-evil` is not within `/a/proj`). Both are
/// taken as given (no filesystem access, no `..` resolution).
pub fn is_within(path: &Path, root: &Path) -> bool {
    let (p, r) = (
        path.as_os_str().as_encoded_bytes(),
        root.as_os_str().as_encoded_bytes(),
    );
    // Absolute paths in normal form (every path the resolver builds, every
    // canonical root) compare as bytes: a whole-component prefix is a byte
    // prefix followed by the end or a separator. Component parsing costs
    // about 1,200 instructions a call and a write makes several (ADR 0009).
    if cfg!(unix) && is_plain_absolute(p) && is_plain_absolute(r) {
        return r == b"/" || (p.starts_with(r) && (p.len() == r.len() || p[r.len()] == b'/'));
    }
    path.starts_with(root)
}

/// Absolute and in the form `Path::components` would give back: no empty
/// component (`//`), no `.` component, no trailing separator (except `/`
/// itself). `..` is an ordinary name to both comparisons.
fn is_plain_absolute(b: &[u8]) -> bool {
    match b {
        [b'/'] => true,
        [b'/', rest @ ..] => rest
            .split(|c| *c == b'/')
            .all(|name| !name.is_empty() && name != b"."),
        _ => false,
    }
}

/// Resolve `input` against the canonical workspace `roots` of one runtime
/// (SPEC 5), looking only through `view` (lstat and readlink; it never calls
/// `realpath`, it walks the components itself so it can classify).
///
/// Order of checks:
/// 1. empty, NUL byte, not absolute, or a component over [`NAME_MAX`]
///    bytes: [`ResolveError::ParseError`];
/// 2. suspicious (SPEC 6, [`is_suspicious`]): [`ResolveError::OutsideWorkspace`];
/// 3. `.` and `..` are resolved lexically; a lexical path of [`PATH_MAX`]
///    bytes or more is `ParseError`; containment in a root is judged by
///    components ([`is_within`]);
/// 4. the lexical path is walked component by component from `/`, following
///    symlinks (relative targets from the link's directory, absolute ones from
///    `/`; `..` inside a link target means the parent of the canonical
///    directory reached so far). After every component of the input, the
///    location reached must stay inside the root, else
///    [`ResolveError::SymlinkEscape`] (also for a dangling link whose
///    would-be target is outside). A link cycle, or more than
///    [`MAX_SYMLINK_HOPS`] links in total, is `SymlinkEscape`. A regular file
///    or other non-directory with components after it is `ParseError`.
///    `EACCES` is [`ResolveError::PermissionDenied`].
/// 5. A missing entry starts the missing tail: the rest is appended
///    lexically to the deepest existing ancestor (a `..` there, which can only
///    come from a link target, pops lexically and must stay inside; popping
///    back into existing directories continues the real walk from there).
/// 6. The canonical path must be shorter than [`PATH_MAX`] bytes and, when a
///    symlink was followed, each of its components at most [`NAME_MAX`]
///    bytes, else `ParseError`: nothing is ever created at a path the kernel
///    would refuse to look up afterwards. A trailing `/` (or final `.`/`..`)
///    requires the result to be an existing directory, else `ParseError`.
/// 7. The part of the canonical path below the root must not hold a
///    suspicious component (so a link cannot smuggle in `aux.ts` or `a.`):
///    `OutsideWorkspace`. Checked when the walk followed a symlink; without
///    one, every name below the root came from the input, judged in step 2.
///
/// Lexically inside a root: the walk must reach the root exactly when it
/// has consumed the root's components, else `SymlinkEscape` (the registered
/// root is no longer canonical, e.g. an ancestor was replaced by a symlink);
/// a missing root (no existing ancestor inside the workspace) is
/// [`ResolveError::NotFound`].
///
/// Lexically outside every root (decision where SPEC 5 is silent, for inputs
/// that spell a root through an alias such as macOS `/tmp` ->
/// `/private/tmp`): if the input held a `..` component, it is
/// `OutsideWorkspace` at once (SPEC 4 case X14: `/w/root/../x` never counts
/// as inside, whatever the links say). Otherwise its canonical form is
/// computed by the same walk; the first *existing* location that lies inside a
/// root makes the path a workspace path of that root, and from there on every
/// location must stay inside it (`SymlinkEscape` otherwise). If no location
/// enters a root, or the walk fails before entering one, the result is
/// `OutsideWorkspace`, and the external check ([`crate::resolve_external`])
/// judges the path on its own terms.
///
/// Roots that are not absolute are ignored. Roots must be canonical and
/// must not nest (SPEC 2).
pub fn resolve(
    view: &dyn FsView,
    input: &Path,
    roots: &[PathBuf],
) -> Result<Resolved, ResolveError> {
    check_shape(input)?;
    if let Some(reason) = is_suspicious(input) {
        return Err(crate::suspicious::refusal(input, &reason));
    }
    let lex = Lexical::of(input);
    check_length(&lex.path, input)?;
    let roots: Vec<&PathBuf> = roots.iter().filter(|r| r.is_absolute()).collect();
    let mut walker = Walker::new(view);

    let (loc, root) = match roots.iter().find(|r| is_within(&lex.path, r)) {
        Some(root) => (
            walk_inside(&mut walker, &lex, input, root)?,
            (*root).clone(),
        ),
        None => walk_outside(&mut walker, &lex, input, &roots)?,
    };

    let (canonical, kind, mode) = match loc {
        Loc::Exists { path, kind, mode } => (path, Some(kind), mode),
        Loc::Missing { base, tail } => {
            let mut p = base;
            p.extend(tail);
            (p, None, None)
        }
    };
    check_length(&canonical, input)?;
    if walker.hops > 0 {
        check_names(&canonical, input)?;
    }
    if lex.dir_required && kind != Some(FileKind::Dir) {
        return Err(ResolveError::ParseError(format!(
            "{} ends in `/` but {} is not an existing directory",
            input.display(),
            canonical.display()
        )));
    }
    // With no symlink followed, every name below the root came from the
    // input, which step 2 already judged: `is_suspicious` applies the same
    // rule to each of its components (a test in suspicious.rs ties them).
    let below_root = (walker.hops > 0)
        .then(|| canonical.strip_prefix(&root).ok())
        .flatten();
    if let Some(c) = below_root.and_then(|b| b.iter().find(|c| is_suspicious_component(c))) {
        let what = format!(
            "{} resolves to a suspicious name {:?}",
            input.display(),
            c.to_string_lossy()
        );
        return Err(if crate::suspicious::is_device_component(c) {
            ResolveError::ReservedName(what)
        } else {
            ResolveError::OutsideWorkspace(what)
        });
    }
    Ok(Resolved {
        canonical,
        root,
        exists: kind.is_some(),
        kind,
        mode,
    })
}

/// At most the first 80 and the last 40 bytes of a long path or name, for
/// a message (a path over the limits can be many kilobytes).
fn shown(path: &Path) -> String {
    shorten(&path.to_string_lossy())
}

fn shorten(s: &str) -> String {
    if s.len() <= 160 {
        return s.to_string();
    }
    let mut head = 80;
    while !s.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = s.len() - 40;
    while !s.is_char_boundary(tail) {
        tail += 1;
    }
    format!("{}...{}", &s[..head], &s[tail..])
}

/// `path` (which `input` named) must be shorter than [`PATH_MAX`] bytes:
/// the kernel refuses every later lookup of a longer one (`ENAMETOOLONG`).
pub(crate) fn check_length(path: &Path, input: &Path) -> Result<(), ResolveError> {
    let len = path.as_os_str().len();
    if len < PATH_MAX {
        return Ok(());
    }
    let what = if path == input {
        format!("{} is {len} bytes long", shown(input))
    } else {
        format!("{} is {len} bytes long as {}", shown(input), shown(path))
    };
    Err(ResolveError::ParseError(format!(
        "{what}; Linux takes paths of at most {} bytes (PATH_MAX, {PATH_MAX}, counts the terminating NUL): use a shorter path (fewer or shorter directory names)",
        PATH_MAX - 1
    )))
}

/// Every component of `path` (which `input` named) must be at most
/// [`NAME_MAX`] bytes.
fn check_names(path: &Path, input: &Path) -> Result<(), ResolveError> {
    let bytes = path.as_os_str().as_encoded_bytes();
    match bytes.split(|b| *b == b'/').find(|c| c.len() > NAME_MAX) {
        None => Ok(()),
        Some(name) => {
            let whose = if path == input {
                String::new()
            } else {
                format!(" (as {})", shown(path))
            };
            Err(ResolveError::ParseError(format!(
                "{}{whose} has a name of {} bytes, {}; Linux takes names of at most {NAME_MAX} bytes (NAME_MAX): choose a shorter name",
                shown(input),
                name.len(),
                shorten(&String::from_utf8_lossy(name))
            )))
        }
    }
}

/// Empty, NUL byte, relative, or a component over [`NAME_MAX`] bytes:
/// `ParseError` (shared with the external check).
pub(crate) fn check_shape(input: &Path) -> Result<(), ResolveError> {
    let bytes = input.as_os_str().as_encoded_bytes();
    if bytes.is_empty() {
        return Err(ResolveError::ParseError("empty path".into()));
    }
    if bytes.contains(&0) {
        return Err(ResolveError::ParseError("path holds a NUL byte".into()));
    }
    if !input.is_absolute() {
        return Err(ResolveError::ParseError(format!(
            "{} is not an absolute path",
            input.display()
        )));
    }
    check_names(input, input)
}

/// The input with `.` and `..` resolved lexically.
struct Lexical<'a> {
    /// Absolute, no `.`/`..`.
    path: PathBuf,
    /// The names below `/`, in order (borrowed from the input: only the
    /// ones a walk takes are copied, into its pieces).
    names: Vec<&'a OsStr>,
    /// The input held a `..` component.
    had_dot_dot: bool,
    /// The input ended in `/`, `/.` or `/..` (and is not just `/`).
    dir_required: bool,
}

impl<'a> Lexical<'a> {
    fn of(input: &'a Path) -> Lexical<'a> {
        // At most one name per separator (paths are short: no need for a
        // faster byte count).
        #[allow(clippy::naive_bytecount)]
        let slashes = input
            .as_os_str()
            .as_encoded_bytes()
            .iter()
            .filter(|b| **b == b'/')
            .count();
        let mut names: Vec<&'a OsStr> = Vec::with_capacity(slashes);
        let mut had_dot_dot = false;
        for c in input.components() {
            match c {
                Component::Normal(n) => names.push(n),
                Component::ParentDir => {
                    had_dot_dot = true;
                    names.pop();
                }
                Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            }
        }
        let bytes = input.as_os_str().as_encoded_bytes();
        let last_piece = bytes.rsplit(|b| *b == b'/').next().unwrap_or(b"");
        let dir_required = bytes.len() > 1
            && bytes.iter().any(|b| *b != b'/')
            && (bytes.ends_with(b"/") || last_piece == b"." || last_piece == b"..");
        // Sized once: the input is at least as long as its lexical form.
        let mut path = PathBuf::with_capacity(bytes.len() + 1);
        path.push("/");
        path.extend(&names);
        Lexical {
            path,
            names,
            had_dot_dot,
            dir_required,
        }
    }

    fn pieces(&self) -> VecDeque<Piece> {
        self.names
            .iter()
            .map(|n| Piece::Name(n.to_os_string()))
            .collect()
    }
}

/// Lexically inside `root`: walk from `/`, require the root to be reached
/// exactly, then stay inside it.
fn walk_inside(
    walker: &mut Walker<'_>,
    lex: &Lexical,
    input: &Path,
    root: &Path,
) -> Result<Loc, ResolveError> {
    // The root is registered canonical: the walk starts there and checks
    // the root and what lies below it. The root's ancestors are not re-checked
    // here; the writer opens the canonical target's directory with no
    // symlink allowed in any component (`writegate-fs`), so an ancestor
    // swapped for a symlink is refused at write time, not followed.
    let root_depth = root
        .components()
        .filter(|c| matches!(c, Component::Normal(_)))
        .count();
    let pieces: VecDeque<Piece> = lex
        .names
        .iter()
        .skip(root_depth)
        .map(|n| Piece::Name(n.to_os_string()))
        .collect();
    // One lstat of the root itself: it must still be a real directory.
    match walker.view.lstat(root) {
        Ok(st) if st.kind == FileKind::Dir => {}
        Ok(st) if st.kind == FileKind::Symlink => {
            return Err(ResolveError::SymlinkEscape(format!(
                "the workspace root {} is now a symlink",
                root.display()
            )));
        }
        Ok(_) => {
            return Err(ResolveError::ParseError(format!(
                "the workspace root {} is not a directory",
                root.display()
            )));
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ResolveError::NotFound(format!(
                "the workspace root {} does not exist",
                root.display()
            )));
        }
        Err(e) => return Err(io_error(&e, "lstat", root)),
    }
    let mut on_step = |p: &Path, exists: bool| -> Result<(), ResolveError> {
        check_inside(p, exists, root, input)
    };
    walker.walk(root.to_path_buf(), pieces, &mut on_step)
}

/// Lexically outside every root: `OutsideWorkspace`, unless a `..`-free input
/// is an alias whose canonical form enters a root (see [`resolve`]).
fn walk_outside(
    walker: &mut Walker<'_>,
    lex: &Lexical,
    input: &Path,
    roots: &[&PathBuf],
) -> Result<(Loc, PathBuf), ResolveError> {
    let outside = || {
        ResolveError::OutsideWorkspace(format!(
            "{} is outside every workspace root",
            input.display()
        ))
    };
    if lex.had_dot_dot || roots.is_empty() {
        return Err(outside());
    }
    let mut entered: Option<PathBuf> = None;
    let result = {
        let mut on_step = |p: &Path, exists: bool| -> Result<(), ResolveError> {
            if let Some(root) = &entered {
                return check_inside(p, exists, root, input);
            }
            if exists {
                entered = roots.iter().find(|r| is_within(p, r)).map(|r| (*r).clone());
            }
            Ok(())
        };
        walker.walk(PathBuf::from("/"), lex.pieces(), &mut on_step)
    };
    match entered {
        Some(root) => result.map(|loc| (loc, root)),
        None => Err(outside()),
    }
}

fn check_inside(p: &Path, exists: bool, root: &Path, input: &Path) -> Result<(), ResolveError> {
    if is_within(p, root) {
        return Ok(());
    }
    Err(ResolveError::SymlinkEscape(if exists {
        format!(
            "{} resolves to {}, outside the workspace root",
            input.display(),
            p.display()
        )
    } else {
        format!(
            "{} is a dangling symlink whose target {} would be outside the workspace root",
            input.display(),
            p.display()
        )
    }))
}

/// One step of a walk.
enum Piece {
    Cur,
    Parent,
    Name(OsString),
}

/// Where a walk stands.
enum Loc {
    /// An existing, canonical entry (never a symlink); `mode` its
    /// permission bits when it was looked at.
    Exists {
        path: PathBuf,
        kind: FileKind,
        mode: Option<u32>,
    },
    /// `base` is the deepest existing ancestor (a canonical directory); `tail`
    /// (non-empty, plain names) is missing below it.
    Missing { base: PathBuf, tail: Vec<OsString> },
}

impl Loc {
    fn full_path(&self) -> Cow<'_, Path> {
        match self {
            Loc::Exists { path, .. } => Cow::Borrowed(path),
            Loc::Missing { base, tail } => {
                let mut p = base.clone();
                p.extend(tail);
                Cow::Owned(p)
            }
        }
    }
}

type OnStep<'a> = dyn FnMut(&Path, bool) -> Result<(), ResolveError> + 'a;

struct Walker<'v> {
    view: &'v dyn FsView,
    hops: u32,
    /// The links whose targets are being resolved right now (nested); meeting
    /// one of them again is a cycle.
    active: Vec<PathBuf>,
}

impl<'v> Walker<'v> {
    fn new(view: &'v dyn FsView) -> Self {
        Walker {
            view,
            hops: 0,
            active: Vec::new(),
        }
    }

    /// Walk `pieces` from the canonical existing directory `start`. After each
    /// piece, `on_step` sees the location reached and whether it exists.
    fn walk(
        &mut self,
        start: PathBuf,
        mut pending: VecDeque<Piece>,
        on_step: &mut OnStep<'_>,
    ) -> Result<Loc, ResolveError> {
        let mut loc = Loc::Exists {
            path: start,
            kind: FileKind::Dir,
            mode: None,
        };
        while let Some(piece) = pending.pop_front() {
            loc = match loc {
                Loc::Exists { path, kind, .. } if kind != FileKind::Dir => {
                    return Err(ResolveError::ParseError(format!(
                        "{} is not a directory",
                        path.display()
                    )));
                }
                Loc::Exists {
                    mut path,
                    kind,
                    mode,
                } => match piece {
                    Piece::Cur => Loc::Exists { path, kind, mode },
                    Piece::Parent => {
                        path.pop();
                        Loc::Exists {
                            path,
                            kind,
                            mode: None,
                        }
                    }
                    Piece::Name(name) => self.step(path, name)?,
                },
                Loc::Missing { mut base, mut tail } => match piece {
                    Piece::Cur => Loc::Missing { base, tail },
                    Piece::Name(name) => {
                        tail.push(name);
                        Loc::Missing { base, tail }
                    }
                    Piece::Parent => {
                        tail.pop();
                        if tail.is_empty() {
                            // Back in existing territory: continue the real walk.
                            Loc::Exists {
                                path: std::mem::take(&mut base),
                                kind: FileKind::Dir,
                                mode: None,
                            }
                        } else {
                            Loc::Missing { base, tail }
                        }
                    }
                },
            };
            on_step(&loc.full_path(), matches!(loc, Loc::Exists { .. }))?;
        }
        Ok(loc)
    }

    /// Resolve the single name `name` in the canonical directory `dir`
    /// (both taken over: the common steps then copy no path).
    fn step(&mut self, dir: PathBuf, name: OsString) -> Result<Loc, ResolveError> {
        let mut path = dir;
        path.push(&name);
        match self.view.lstat(&path) {
            Ok(st) => match st.kind {
                FileKind::Symlink => {
                    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
                    self.follow(path, &dir)
                }
                kind => Ok(Loc::Exists {
                    path,
                    kind,
                    mode: Some(st.mode),
                }),
            },
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                // `name` is one normal component: popping it gives `dir`.
                path.pop();
                Ok(Loc::Missing {
                    base: path,
                    tail: vec![name],
                })
            }
            Err(e) => Err(io_error(&e, "lstat", &path)),
        }
    }

    /// Follow the symlink `link`, which lives in the canonical directory `dir`.
    fn follow(&mut self, link: PathBuf, dir: &Path) -> Result<Loc, ResolveError> {
        if self.active.contains(&link) {
            return Err(ResolveError::SymlinkEscape(format!(
                "symlink cycle through {}",
                link.display()
            )));
        }
        self.hops += 1;
        if self.hops > MAX_SYMLINK_HOPS {
            return Err(ResolveError::SymlinkEscape(format!(
                "more than {MAX_SYMLINK_HOPS} symlinks (at {})",
                link.display()
            )));
        }
        let target = self.view.read_link(&link).map_err(|e| {
            // `EINVAL`: no longer a symlink. It was one at the `lstat` just
            // before, so it was swapped while being checked (errors.md:
            // `symlink_escape`), not a malformed path.
            if e.raw_os_error() == Some(rustix::io::Errno::INVAL.raw_os_error()) {
                ResolveError::SymlinkEscape(format!(
                    "{} was replaced while it was being resolved (a symlink, then not)",
                    link.display()
                ))
            } else {
                io_error(&e, "readlink", &link)
            }
        })?;
        if target.as_os_str().is_empty() {
            return Err(ResolveError::ParseError(format!(
                "symlink {} has an empty target",
                link.display()
            )));
        }
        let start = if target.has_root() {
            PathBuf::from("/")
        } else {
            dir.to_path_buf()
        };
        let pieces = target
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(Piece::Name(n.to_os_string())),
                Component::ParentDir => Some(Piece::Parent),
                Component::CurDir => Some(Piece::Cur),
                Component::RootDir | Component::Prefix(_) => None,
            })
            .collect();
        self.active.push(link);
        let result = self.walk(start, pieces, &mut |_, _| Ok(()));
        self.active.pop();
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The byte comparison agrees with `Path::starts_with` on every pair of
    /// paths built from a few names, `.`, `..`, empty components and
    /// trailing separators, absolute or not.
    #[test]
    fn is_within_agrees_with_component_prefixes() {
        let names = ["", ".", "..", "a", "ab", "b"];
        let mut paths = vec![String::new(), "/".to_string()];
        let mut layer = vec![String::new()];
        for _ in 0..3 {
            layer = layer
                .iter()
                .flat_map(|p| names.iter().map(move |n| format!("{p}/{n}")))
                .collect();
            for p in &layer {
                paths.push(p.clone());
                paths.push(format!("{p}/"));
                paths.push(p.trim_start_matches('/').to_string());
            }
        }
        paths.sort();
        paths.dedup();
        for p in &paths {
            for r in &paths {
                assert_eq!(
                    is_within(Path::new(p), Path::new(r)),
                    Path::new(p).starts_with(r),
                    "{p:?} within {r:?}"
                );
            }
        }
    }

    #[test]
    fn lexical_resolution() {
        let l = Lexical::of(Path::new("/a/./b/../c"));
        assert_eq!(l.path, Path::new("/a/c"));
        assert!(l.had_dot_dot);
        assert!(!l.dir_required);
        let l = Lexical::of(Path::new("/../../x"));
        assert_eq!(l.path, Path::new("/x"));
        assert!(Lexical::of(Path::new("/a/b/")).dir_required);
        assert!(Lexical::of(Path::new("/a/b/.")).dir_required);
        assert!(Lexical::of(Path::new("/a/b/..")).dir_required);
        assert!(!Lexical::of(Path::new("/")).dir_required);
        assert!(!Lexical::of(Path::new("//")).dir_required);
        assert!(!Lexical::of(Path::new("/a/b")).had_dot_dot);
    }

    #[test]
    fn containment_is_by_component() {
        assert!(is_within(Path::new("/a/proj/x"), Path::new("/a/proj")));
        assert!(is_within(Path::new("/a/proj"), Path::new("/a/proj")));
        assert!(!is_within(Path::new("/a/proj-evil"), Path::new("/a/proj")));
        assert!(!is_within(
            Path::new("/a/proj-evil/x"),
            Path::new("/a/proj")
        ));
        assert!(!is_within(Path::new("/a"), Path::new("/a/proj")));
    }
}
