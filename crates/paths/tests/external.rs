//! SPEC 7.1 steps 2-3: the external target check, over real files, symlinks
//! and sockets, plus a wrapper view that swaps the file between the lstat and
//! the realpath.

mod common;

use std::cell::Cell;
use std::ffi::OsStr;
use std::fs;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use common::Fx;
use writegate_paths::{ExternalTarget, FsView, OsView, ResolveError, Stat, resolve_external};
use writegate_testkit::assert_err;

fn ext(p: impl AsRef<Path>) -> Result<ExternalTarget, ResolveError> {
    resolve_external(&OsView, p.as_ref())
}

#[test]
fn new_leaf_in_existing_directory() {
    // X01's target.
    let fx = Fx::new();
    fx.dir("outside");
    let before = fx.snapshot();
    let t = ext(fx.p("outside/ext.txt")).unwrap();
    assert_eq!(fx.snapshot(), before);
    assert_eq!(t.canonical, fx.p("outside/ext.txt"));
    assert_eq!(t.existing, None);
}

#[test]
fn existing_regular_file_carries_dev_and_ino() {
    let fx = Fx::new();
    fx.dir("outside");
    let f = fx.file("outside/f.txt", b"x");
    let t = ext(&f).unwrap();
    let m = fs::symlink_metadata(&f).unwrap();
    assert_eq!(t.canonical, f);
    assert_eq!(t.existing, Some((m.dev(), m.ino())));
}

#[test]
fn case_x07_leaf_symlink() {
    let fx = Fx::new();
    fx.dir("outside");
    fx.file("outside/real.txt", b"real\n");
    fx.symlink("outside/link.txt", "real.txt");
    assert_err!(
        ext(fx.p("outside/link.txt")),
        ResolveError::SymlinkEscape(_)
    );
    assert_eq!(fs::read(fx.p("outside/real.txt")).unwrap(), b"real\n");
    assert!(fx.p("outside/link.txt").is_symlink());
}

#[test]
fn dangling_leaf_symlink_is_an_escape() {
    let fx = Fx::new();
    fx.dir("outside");
    fx.symlink("outside/dangle.txt", "created.txt");
    assert_err!(
        ext(fx.p("outside/dangle.txt")),
        ResolveError::SymlinkEscape(_)
    );
    assert!(!fx.p("outside/created.txt").exists());
}

#[test]
fn case_x16_parent_alias() {
    let fx = Fx::new();
    fx.dir("outside/real");
    fx.symlink("alias", fx.p("outside/real"));
    let t = ext(fx.p("alias/n.txt")).unwrap();
    assert_eq!(t.canonical, fx.p("outside/real/n.txt"));
    assert_eq!(t.existing, None);
    // An existing file through the alias resolves to its real path too.
    let f = fx.file("outside/real/e.txt", b"e");
    let t = ext(fx.p("alias/e.txt")).unwrap();
    assert_eq!(t.canonical, f);
}

#[test]
fn case_x20_socket_leaf() {
    let mut fx = Fx::new();
    fx.dir("outside");
    fx.socket("outside/s.sock");
    assert_err!(ext(fx.p("outside/s.sock")), ResolveError::ParseError(_));
}

#[test]
fn directory_leaf_is_not_a_file() {
    let fx = Fx::new();
    fx.dir("outside/d");
    assert_err!(ext(fx.p("outside/d")), ResolveError::NotAFile(_));
}

#[test]
fn missing_parent_is_not_found() {
    let fx = Fx::new();
    assert_err!(ext(fx.p("nope/x.txt")), ResolveError::NotFound(_));
    // A dangling parent alias is a missing parent as well.
    fx.symlink("dangling-dir", fx.p("gone"));
    assert_err!(ext(fx.p("dangling-dir/x.txt")), ResolveError::NotFound(_));
}

#[test]
fn parent_not_a_directory_is_parse_error() {
    let fx = Fx::new();
    fx.file("f.txt", b"f");
    fx.symlink("flink", "f.txt");
    assert_err!(ext(fx.p("f.txt/x")), ResolveError::ParseError(_));
    assert_err!(ext(fx.p("flink/x")), ResolveError::ParseError(_));
}

#[test]
fn shape_errors_come_first() {
    assert_err!(ext(""), ResolveError::ParseError(_));
    assert_err!(ext("rel/x.txt"), ResolveError::ParseError(_));
    assert_err!(ext("../x.txt"), ResolveError::ParseError(_));
    assert_err!(
        ext(Path::new(OsStr::from_bytes(b"/tmp/a\0b"))),
        ResolveError::ParseError(_)
    );
}

#[test]
fn dot_and_dot_dot_components_are_outside() {
    let fx = Fx::new();
    fx.dir("outside/sub");
    let w = fx.w.display();
    for p in [
        format!("{w}/outside/./x.txt"),
        format!("{w}/outside/sub/../x.txt"),
        format!("{w}/outside/x.txt/."),
        format!("{w}/outside/sub/.."),
    ] {
        assert_err!(ext(&p), ResolveError::OutsideWorkspace(_), "{p}");
    }
}

#[test]
fn case_x14_relative_escape() {
    let fx = Fx::new();
    fx.dir("root/sub");
    let p = format!("{}/sub/../../rel.txt", fx.root.display());
    assert_err!(fx.resolve(&p), ResolveError::OutsideWorkspace(_));
    assert_err!(ext(&p), ResolveError::OutsideWorkspace(_));
    assert!(!fx.p("rel.txt").exists());
}

#[test]
fn suspicious_is_outside() {
    let fx = Fx::new();
    fx.dir("outside");
    assert_err!(ext(fx.p("outside/aux.ts")), ResolveError::ReservedName(_));
    for rel in ["outside/.../x", "outside/x.", "outside/x "] {
        assert_err!(ext(fx.p(rel)), ResolveError::OutsideWorkspace(_), "{rel}");
    }
    assert_err!(ext("//server/share/x"), ResolveError::OutsideWorkspace(_));
    assert!(ext(fx.p("outside/concat.txt")).is_ok());
}

#[test]
fn trailing_slash_is_parse_error() {
    let fx = Fx::new();
    fx.dir("outside");
    fx.file("outside/f.txt", b"f");
    assert_err!(
        ext(format!("{}/outside/f.txt/", fx.w.display())),
        ResolveError::ParseError(_)
    );
    assert_err!(ext("/"), ResolveError::ParseError(_));
}

/// The real filesystem, but run `swap` once, just before the `realpath` call
/// (that is, between the leaf lstat and the realpath of SPEC 7.1 step 3).
struct SwapBeforeRealpath<F: Fn()> {
    swap: F,
    done: Cell<bool>,
    /// Swap before every realpath, not only the first.
    every_time: bool,
}

impl<F: Fn()> FsView for SwapBeforeRealpath<F> {
    fn lstat(&self, path: &Path) -> io::Result<Stat> {
        OsView.lstat(path)
    }
    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        OsView.read_link(path)
    }
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        if !self.done.replace(true) || self.every_time {
            (self.swap)();
        }
        OsView.canonicalize(path)
    }
}

fn swapping<F: Fn()>(swap: F) -> SwapBeforeRealpath<F> {
    SwapBeforeRealpath {
        swap,
        done: Cell::new(false),
        every_time: false,
    }
}

#[test]
fn file_replaced_between_lstat_and_realpath_every_time_is_an_escape() {
    // A persistent swapper: a new inode lands at the leaf before every
    // realpath, so no attempt's lstat and realpath agree.
    let fx = Fx::new();
    fx.dir("outside");
    let target = fx.file("outside/t.txt", b"original");
    let spare = fx.p("outside/spare.txt");
    let view = SwapBeforeRealpath {
        swap: || {
            fs::write(&spare, b"other").unwrap();
            fs::rename(&spare, &target).unwrap();
        },
        done: Cell::new(false),
        every_time: true,
    };
    assert_err!(
        resolve_external(&view, &target),
        ResolveError::SymlinkEscape(_)
    );
}

#[test]
fn file_replaced_once_between_lstat_and_realpath_is_checked_again() {
    // What a concurrent legitimate write looks like: one rename over the
    // leaf. The check runs again and accepts the new regular file.
    let fx = Fx::new();
    fx.dir("outside");
    let target = fx.file("outside/t.txt", b"original");
    let other = fx.file("outside/other.txt", b"other");
    let view = swapping(|| fs::rename(&other, &target).unwrap());
    let t = resolve_external(&view, &target).unwrap();
    assert_eq!(t.canonical, target);
    let meta = fs::metadata(&target).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(t.existing, Some((meta.dev(), meta.ino())));
}

#[test]
fn file_replaced_by_symlink_between_lstat_and_realpath_is_an_escape() {
    let fx = Fx::new();
    fx.dir("outside");
    fx.dir("secret");
    let secret = fx.file("secret/key", b"k");
    let target = fx.file("outside/t.txt", b"original");
    let view = swapping(|| {
        fs::remove_file(&target).unwrap();
        std::os::unix::fs::symlink(&secret, &target).unwrap();
    });
    assert_err!(
        resolve_external(&view, &target),
        ResolveError::SymlinkEscape(_)
    );
}

#[test]
fn file_removed_between_lstat_and_realpath_is_checked_again_as_a_new_file() {
    let fx = Fx::new();
    fx.dir("outside");
    let target = fx.file("outside/t.txt", b"original");
    let view = swapping(|| fs::remove_file(&target).unwrap());
    let t = resolve_external(&view, &target).unwrap();
    assert_eq!(t.existing, None);
}

#[test]
fn no_swap_no_escape() {
    // The same wrapper with a harmless action still succeeds.
    let fx = Fx::new();
    fx.dir("outside");
    let target = fx.file("outside/t.txt", b"original");
    let view = swapping(|| ());
    assert_eq!(resolve_external(&view, &target).unwrap().canonical, target);
}

#[test]
fn permission_denied_while_looking() {
    if writegate_testkit::is_root() {
        eprintln!("skipped: root ignores directory permissions");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let fx = Fx::new();
    let locked = fx.dir("outside/locked");
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    let r = ext(locked.join("x.txt"));
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o700)).unwrap();
    assert_err!(r, ResolveError::PermissionDenied(_));
}

/// The external check reports an existing leaf's permission bits (the
/// approval gate holds read-only files by them); a new leaf has
/// none.
#[test]
fn an_existing_leaf_reports_its_permission_bits() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fx::new();
    fx.dir("outside");
    let f = fx.file("outside/ro.txt", b"x");
    fs::set_permissions(&f, fs::Permissions::from_mode(0o400)).unwrap();
    assert_eq!(ext(&f).unwrap().mode, Some(0o400));
    assert_eq!(ext(fx.p("outside/new.txt")).unwrap().mode, None);
}
