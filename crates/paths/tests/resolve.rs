//! The workspace resolver (SPEC 5) over real directories and symlinks.

mod common;

use std::ffi::OsStr;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use common::Fx;
use writegate_paths::{FileKind, MAX_SYMLINK_HOPS, OsView, ResolveError, resolve};
use writegate_testkit::{assert_err, is_root};

#[test]
fn parse_errors_for_empty_nul_and_relative() {
    let fx = Fx::new();
    assert_err!(fx.resolve(""), ResolveError::ParseError(_));
    let nul = fx.root.join(OsStr::from_bytes(b"a\0b"));
    assert_err!(fx.resolve(nul), ResolveError::ParseError(_));
    assert_err!(fx.resolve("rel/x.txt"), ResolveError::ParseError(_));
    assert_err!(fx.resolve("./x.txt"), ResolveError::ParseError(_));
}

#[test]
fn plain_new_and_existing_files() {
    let fx = Fx::new();
    fx.file("root/a.txt", b"a");
    let r = fx.resolve(fx.root.join("a.txt")).unwrap();
    assert_eq!(r.canonical, fx.root.join("a.txt"));
    assert_eq!(r.root, fx.root);
    assert!(r.exists);
    assert_eq!(r.kind, Some(FileKind::File));

    let r = fx.resolve(fx.root.join("new.txt")).unwrap();
    assert_eq!(r.canonical, fx.root.join("new.txt"));
    assert!(!r.exists);
    assert_eq!(r.kind, None);

    let r = fx.resolve(&fx.root).unwrap();
    assert_eq!(r.canonical, fx.root);
    assert_eq!(r.kind, Some(FileKind::Dir));
}

#[test]
fn case_p01_lookalike_sibling() {
    let fx = Fx::new();
    fx.dir("root-evil");
    let r = fx.resolve(fx.p("root-evil/x.txt"));
    assert_err!(r, ResolveError::OutsideWorkspace(_));
    assert!(!fx.p("root-evil/x.txt").exists());
}

#[test]
fn proj_evil_is_not_inside_proj() {
    // Pure form: nothing of this exists.
    let roots = [PathBuf::from("/nonexistent-writegate/a/proj")];
    let r = resolve(
        &OsView,
        Path::new("/nonexistent-writegate/a/proj-evil/x.txt"),
        &roots,
    );
    assert_err!(r, ResolveError::OutsideWorkspace(_));

    // Real form.
    let fx = Fx::new();
    let proj = fx.dir("a/proj");
    fx.dir("a/proj-evil");
    let r = fx.resolve_with_roots(fx.p("a/proj-evil/x.txt"), std::slice::from_ref(&proj));
    assert_err!(r, ResolveError::OutsideWorkspace(_));
    let r = fx.resolve_with_roots(fx.p("a/proj/x.txt"), std::slice::from_ref(&proj));
    assert_eq!(r.unwrap().canonical, proj.join("x.txt"));
}

#[test]
fn case_p02_symlink_to_outside_file() {
    let fx = Fx::new();
    fx.dir("outside");
    fx.file("outside/secret.txt", b"s3cret\n");
    fx.symlink("root/link.txt", fx.p("outside/secret.txt"));
    let r = fx.resolve(fx.root.join("link.txt"));
    assert_err!(r, ResolveError::SymlinkEscape(_));
    assert_eq!(fs::read(fx.p("outside/secret.txt")).unwrap(), b"s3cret\n");
    assert!(fx.root.join("link.txt").is_symlink());
}

#[test]
fn case_p04_dangling_outside() {
    let fx = Fx::new();
    fx.dir("outside");
    fx.symlink("root/dangle.txt", fx.p("outside/created.txt"));
    let r = fx.resolve(fx.root.join("dangle.txt"));
    assert_err!(r, ResolveError::SymlinkEscape(_));
    assert!(!fx.p("outside/created.txt").exists());
}

#[test]
fn dangling_inside_resolves_to_would_be_target() {
    let fx = Fx::new();
    fx.symlink("root/dangle.txt", "new.txt");
    let r = fx.resolve(fx.root.join("dangle.txt")).unwrap();
    assert_eq!(r.canonical, fx.root.join("new.txt"));
    assert!(!r.exists);
    // Dangling into a missing directory inside the root: still inside.
    fx.symlink("root/deep.txt", fx.root.join("nope/deeper/x.txt"));
    let r = fx.resolve(fx.root.join("deep.txt")).unwrap();
    assert_eq!(r.canonical, fx.root.join("nope/deeper/x.txt"));
    assert!(!r.exists);
}

#[test]
fn case_p07_in_root_link_followed() {
    let fx = Fx::new();
    fx.file("root/real.txt", b"old\n");
    fx.symlink("root/link.txt", "real.txt");
    let r = fx.resolve(fx.root.join("link.txt")).unwrap();
    assert_eq!(r.canonical, fx.root.join("real.txt"));
    assert!(r.exists);
    assert_eq!(r.kind, Some(FileKind::File));
    assert!(fx.root.join("link.txt").is_symlink());
}

#[test]
fn directory_links_inside_root_are_followed() {
    let fx = Fx::new();
    fx.dir("root/sub/deeper");
    fx.file("root/real.txt", b"r");
    fx.symlink("root/rel", "sub");
    fx.symlink("root/abs", fx.root.join("sub/deeper"));
    fx.symlink("root/sub/up", "../real.txt");
    fx.symlink("root/sub/dot", "./deeper/./");
    assert_eq!(
        fx.resolve(fx.root.join("rel/x.txt")).unwrap().canonical,
        fx.root.join("sub/x.txt")
    );
    assert_eq!(
        fx.resolve(fx.root.join("abs/x.txt")).unwrap().canonical,
        fx.root.join("sub/deeper/x.txt")
    );
    assert_eq!(
        fx.resolve(fx.root.join("rel/up")).unwrap().canonical,
        fx.root.join("real.txt")
    );
    assert_eq!(
        fx.resolve(fx.root.join("sub/dot/y")).unwrap().canonical,
        fx.root.join("sub/deeper/y")
    );
}

#[test]
fn intermediate_location_outside_is_an_escape() {
    // root/out -> W/outside; W/outside/back -> root/real.txt. The final
    // location is inside, but `root/out` already left the root.
    let fx = Fx::new();
    fx.dir("outside");
    fx.file("root/real.txt", b"r");
    fx.symlink("root/out", fx.p("outside"));
    fx.symlink("outside/back", fx.root.join("real.txt"));
    assert_err!(
        fx.resolve(fx.root.join("out/back")),
        ResolveError::SymlinkEscape(_)
    );
    assert_err!(
        fx.resolve(fx.root.join("out/new.txt")),
        ResolveError::SymlinkEscape(_)
    );
    assert_err!(
        fx.resolve(fx.root.join("out")),
        ResolveError::SymlinkEscape(_)
    );
}

#[test]
fn link_target_is_judged_by_where_it_lands() {
    // Inside a single link target, transit through `..` is fine as long as the
    // link itself resolves inside.
    let fx = Fx::new();
    fx.dir("outside");
    fx.file("root/real.txt", b"r");
    fx.symlink("root/l", fx.p("outside/../root/real.txt"));
    let r = fx.resolve(fx.root.join("l")).unwrap();
    assert_eq!(r.canonical, fx.root.join("real.txt"));
}

#[test]
fn case_x14_relative_escape_is_outside() {
    let fx = Fx::new();
    fx.dir("root/sub");
    let input = PathBuf::from(format!("{}/sub/../../rel.txt", fx.root.display()));
    assert_err!(fx.resolve(&input), ResolveError::OutsideWorkspace(_));
    // Even when the lexical result is a link back into the root.
    fx.file("root/in.txt", b"i");
    fx.symlink("back.txt", fx.root.join("in.txt"));
    let input = PathBuf::from(format!("{}/sub/../../back.txt", fx.root.display()));
    assert_err!(fx.resolve(&input), ResolveError::OutsideWorkspace(_));
    assert!(!fx.p("rel.txt").exists());
}

#[test]
fn dot_dot_that_stays_inside_is_lexical() {
    let fx = Fx::new();
    fx.dir("root/sub");
    fx.dir("outside/deep");
    // `..` is resolved before any link is looked at: root/lnk/.. is root.
    fx.symlink("root/lnk", fx.p("outside/deep"));
    let r = fx
        .resolve(format!("{}/sub/./../x.txt", fx.root.display()))
        .unwrap();
    assert_eq!(r.canonical, fx.root.join("x.txt"));
    let r = fx
        .resolve(format!("{}/lnk/../x.txt", fx.root.display()))
        .unwrap();
    assert_eq!(r.canonical, fx.root.join("x.txt"));
}

#[test]
fn symlink_cycle_is_an_escape() {
    let fx = Fx::new();
    fx.symlink("root/a", "b");
    fx.symlink("root/b", "a");
    fx.symlink("root/self", "self");
    fx.symlink("root/dirloop", "dirloop/x");
    for name in ["a", "b", "self", "dirloop", "a/x.txt"] {
        let e = fx.resolve(fx.root.join(name)).unwrap_err();
        assert!(matches!(e, ResolveError::SymlinkEscape(_)), "{name}: {e}");
        assert!(e.to_string().contains("cycle"), "{e}");
    }
}

fn chain(fx: &Fx, links: u32) -> PathBuf {
    // root/l0 -> l1 -> ... -> l{links-1} -> real.txt: `links` hops.
    fx.file("root/real.txt", b"r");
    let dir = fx.dir(&format!("root/chain{links}"));
    for i in 0..links {
        let target = if i + 1 == links {
            "../real.txt".to_string()
        } else {
            format!("l{}", i + 1)
        };
        std::os::unix::fs::symlink(target, dir.join(format!("l{i}"))).unwrap();
    }
    dir.join("l0")
}

#[test]
fn chain_of_41_hops_is_an_escape() {
    let fx = Fx::new();
    let start = chain(&fx, MAX_SYMLINK_HOPS + 1);
    let e = fx.resolve(start).unwrap_err();
    assert!(matches!(e, ResolveError::SymlinkEscape(_)), "{e:?}");
    assert!(e.to_string().contains("more than 40"), "{e}");
}

#[test]
fn chain_of_40_hops_is_fine() {
    let fx = Fx::new();
    let start = chain(&fx, MAX_SYMLINK_HOPS);
    let r = fx.resolve(start).unwrap();
    assert_eq!(r.canonical, fx.root.join("real.txt"));
}

#[test]
fn non_directory_in_the_middle_is_parse_error() {
    let mut fx = Fx::new();
    fx.file("root/file.txt", b"f");
    fx.symlink("root/flink", "file.txt");
    fx.socket("root/s.sock");
    assert_err!(
        fx.resolve(fx.root.join("file.txt/x")),
        ResolveError::ParseError(_)
    );
    assert_err!(
        fx.resolve(fx.root.join("flink/x")),
        ResolveError::ParseError(_)
    );
    assert_err!(
        fx.resolve(fx.root.join("s.sock/x")),
        ResolveError::ParseError(_)
    );
    // A link whose target goes through a file.
    fx.symlink("root/through", "file.txt/..");
    assert_err!(
        fx.resolve(fx.root.join("through")),
        ResolveError::ParseError(_)
    );
}

#[test]
fn missing_tail_is_resolved_through_deepest_existing_ancestor() {
    let fx = Fx::new();
    fx.dir("root/sub");
    let r = fx.resolve(fx.root.join("missing/deeper/x.txt")).unwrap();
    assert_eq!(r.canonical, fx.root.join("missing/deeper/x.txt"));
    assert!(!r.exists);
    fx.symlink("root/sublink", "sub");
    let r = fx.resolve(fx.root.join("sublink/missing/x.txt")).unwrap();
    assert_eq!(r.canonical, fx.root.join("sub/missing/x.txt"));
}

#[test]
fn missing_tail_with_dot_dot() {
    let fx = Fx::new();
    fx.dir("root/sub");
    fx.dir("outside");
    // In the input: lexical, before anything else.
    let r = fx
        .resolve(format!("{}/missing/../x.txt", fx.root.display()))
        .unwrap();
    assert_eq!(r.canonical, fx.root.join("x.txt"));
    assert_err!(
        fx.resolve(format!("{}/missing/../../x.txt", fx.root.display())),
        ResolveError::OutsideWorkspace(_)
    );
    // In a link target: lexical from the deepest existing ancestor, must stay inside.
    fx.symlink("root/ok", "nope/../ok.txt");
    assert_eq!(
        fx.resolve(fx.root.join("ok")).unwrap().canonical,
        fx.root.join("ok.txt")
    );
    fx.symlink("root/esc", "nope/../../escape.txt");
    assert_err!(
        fx.resolve(fx.root.join("esc")),
        ResolveError::SymlinkEscape(_)
    );
    fx.symlink("root/sub/deep", "a/b/../../../../escape.txt");
    assert_err!(
        fx.resolve(fx.root.join("sub/deep")),
        ResolveError::SymlinkEscape(_)
    );
    // Popping back into existing directories continues the real walk, links included.
    fx.symlink("root/out", fx.p("outside"));
    fx.symlink("root/via", "nope/../out/x.txt");
    assert_err!(
        fx.resolve(fx.root.join("via")),
        ResolveError::SymlinkEscape(_)
    );
    fx.symlink("root/via2", "nope/../sublink2/x.txt");
    fx.symlink("root/sublink2", "sub");
    assert_eq!(
        fx.resolve(fx.root.join("via2")).unwrap().canonical,
        fx.root.join("sub/x.txt")
    );
}

#[test]
fn missing_root_is_not_found() {
    let fx = Fx::new();
    let gone = fx.p("gone/root");
    let r = fx.resolve_with_roots(gone.join("x.txt"), std::slice::from_ref(&gone));
    assert_err!(r, ResolveError::NotFound(_));
}

#[test]
fn root_that_is_no_longer_canonical_is_an_escape() {
    // The registered root was replaced by a symlink (or was never canonical).
    let fx = Fx::new();
    fx.dir("elsewhere");
    let fake = fx.symlink("fake-root", fx.p("elsewhere"));
    let r = fx.resolve_with_roots(fake.join("x.txt"), std::slice::from_ref(&fake));
    assert_err!(r, ResolveError::SymlinkEscape(_));
}

#[test]
fn root_spelled_through_an_alias() {
    // Like macOS /tmp -> /private/tmp: the roots are canonical, the input is not.
    let fx = Fx::new();
    let real_root = fx.dir("real/proj");
    fx.dir("real/proj/sub");
    fx.dir("outside");
    fx.symlink("alias", fx.p("real"));
    fx.symlink("real/proj/out", fx.p("outside"));
    let roots = [real_root.clone()];

    let r = fx
        .resolve_with_roots(fx.p("alias/proj/sub/x.txt"), &roots)
        .unwrap();
    assert_eq!(r.canonical, real_root.join("sub/x.txt"));
    assert_eq!(r.root, real_root);
    assert!(!r.exists);

    // Entered the root through the alias, then left it: an escape.
    assert_err!(
        fx.resolve_with_roots(fx.p("alias/proj/out/x.txt"), &roots),
        ResolveError::SymlinkEscape(_)
    );
    // An alias spelled with `..` is never rescued.
    assert_err!(
        fx.resolve_with_roots(
            format!("{}/alias/proj/sub/../x.txt", fx.w.display()),
            &roots
        ),
        ResolveError::OutsideWorkspace(_)
    );
    // Outside, and the canonical form stays outside.
    assert_err!(
        fx.resolve_with_roots(fx.p("alias/other.txt"), &roots),
        ResolveError::OutsideWorkspace(_)
    );
}

#[test]
fn outside_leaf_link_into_root_is_a_workspace_path() {
    // Judged by where the write lands (decision documented on `resolve`).
    let fx = Fx::new();
    fx.dir("outside");
    fx.file("root/in.txt", b"i");
    fx.symlink("outside/l", fx.root.join("in.txt"));
    let r = fx.resolve(fx.p("outside/l")).unwrap();
    assert_eq!(r.canonical, fx.root.join("in.txt"));
    // A dangling outside link into the root does not enter it: outside.
    fx.symlink("outside/d", fx.root.join("new.txt"));
    assert_err!(
        fx.resolve(fx.p("outside/d")),
        ResolveError::OutsideWorkspace(_)
    );
}

#[test]
fn outside_paths_with_broken_links_stay_outside() {
    // Failures before entering a root are left to the external check.
    let fx = Fx::new();
    fx.dir("outside");
    fx.symlink("outside/loop", "loop");
    fx.file("outside/f", b"f");
    assert_err!(
        fx.resolve(fx.p("outside/loop/x")),
        ResolveError::OutsideWorkspace(_)
    );
    assert_err!(
        fx.resolve(fx.p("outside/f/x")),
        ResolveError::OutsideWorkspace(_)
    );
    assert_err!(
        fx.resolve(fx.p("outside/new.txt")),
        ResolveError::OutsideWorkspace(_)
    );
}

#[test]
fn trailing_slash_requires_a_directory() {
    let fx = Fx::new();
    fx.file("root/real.txt", b"r");
    fx.dir("root/sub");
    fx.symlink("root/link", "real.txt");
    let s = |rel: &str| format!("{}/{rel}", fx.root.display());
    assert_err!(fx.resolve(s("real.txt/")), ResolveError::ParseError(_));
    assert_err!(fx.resolve(s("link/")), ResolveError::ParseError(_));
    assert_err!(fx.resolve(s("new/")), ResolveError::ParseError(_));
    assert_err!(fx.resolve(s("real.txt/.")), ResolveError::ParseError(_));
    let r = fx.resolve(s("sub/")).unwrap();
    assert_eq!(r.kind, Some(FileKind::Dir));
    assert_eq!(fx.resolve(s("sub/..")).unwrap().canonical, fx.root);
}

#[test]
fn socket_leaf_resolves_as_other() {
    let mut fx = Fx::new();
    fx.socket("root/s.sock");
    let r = fx.resolve(fx.root.join("s.sock")).unwrap();
    assert!(r.exists);
    assert_eq!(r.kind, Some(FileKind::Other));
}

#[test]
fn case_p12_three_dots() {
    let fx = Fx::new();
    let r = fx.resolve(fx.root.join(".../x"));
    assert_err!(r, ResolveError::OutsideWorkspace(_));
}

#[test]
fn case_p14_concat_fine_aux_refused() {
    let fx = Fx::new();
    let r = fx.resolve(fx.root.join("concat.txt")).unwrap();
    assert_eq!(r.canonical, fx.root.join("concat.txt"));
    // A DOS device name has its own kind, `reserved_name`, inside the root too.
    assert_err!(
        fx.resolve(fx.root.join("aux.ts")),
        ResolveError::ReservedName(_)
    );
    assert_err!(
        fx.resolve(fx.root.join("AUX")),
        ResolveError::ReservedName(_)
    );
    assert_err!(
        fx.resolve(fx.root.join("trail.")),
        ResolveError::OutsideWorkspace(_)
    );
    assert_err!(
        fx.resolve(fx.root.join("trail ")),
        ResolveError::OutsideWorkspace(_)
    );
    assert_err!(
        fx.resolve(format!("/{}/x", fx.root.display())),
        ResolveError::OutsideWorkspace(_)
    );
}

#[test]
fn suspicious_name_through_a_link_is_refused() {
    let fx = Fx::new();
    fx.symlink("root/innocent.ts", "aux.ts");
    fx.symlink("root/dir", "trail.");
    assert_err!(
        fx.resolve(fx.root.join("innocent.ts")),
        ResolveError::ReservedName(_)
    );
    assert_err!(
        fx.resolve(fx.root.join("dir/x")),
        ResolveError::OutsideWorkspace(_)
    );
}

#[test]
fn suspicious_check_comes_before_the_filesystem() {
    // A suspicious path is refused even where a lookup would fail differently.
    let fx = Fx::new();
    fx.file("root/file.txt", b"f");
    assert_err!(
        fx.resolve(fx.root.join("file.txt/.../x")),
        ResolveError::OutsideWorkspace(_)
    );
}

#[test]
fn permission_denied_while_looking() {
    if is_root() {
        eprintln!("skipped: root ignores directory permissions");
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let fx = Fx::new();
    let locked = fx.dir("root/locked");
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o000)).unwrap();
    let r = fx.resolve(locked.join("x.txt"));
    fs::set_permissions(&locked, fs::Permissions::from_mode(0o700)).unwrap();
    assert_err!(r, ResolveError::PermissionDenied(_));
}

#[test]
fn errors_carry_variant_and_hint() {
    let fx = Fx::new();
    let e: ResolveError = fx.resolve(fx.root.join("aux.ts")).unwrap_err();
    assert!(matches!(e, ResolveError::ReservedName(_)), "{e:?}");
    assert!(!e.hint().is_empty());
    assert!(!e.hint().contains(&*fx.w.to_string_lossy()));
}

#[test]
fn external_case_paths_are_outside_for_the_resolver() {
    // X01/X16/X20 first pass through the workspace resolver.
    let mut fx = Fx::new();
    fx.dir("outside/real");
    fx.symlink("alias", fx.p("outside/real"));
    fx.socket("outside/s.sock");
    for rel in ["outside/ext.txt", "alias/n.txt", "outside/s.sock"] {
        assert_err!(
            fx.resolve(fx.p(rel)),
            ResolveError::OutsideWorkspace(_),
            "{rel}"
        );
    }
}

/// The real filesystem, but `swap` runs once just before the first
/// `readlink` (between the resolver's `lstat` of a symlink and its read).
struct SwapBeforeReadlink<F: Fn()> {
    swap: F,
    done: std::cell::Cell<bool>,
}

impl<F: Fn()> writegate_paths::FsView for SwapBeforeReadlink<F> {
    fn lstat(&self, path: &Path) -> std::io::Result<writegate_paths::Stat> {
        OsView.lstat(path)
    }
    fn read_link(&self, path: &Path) -> std::io::Result<PathBuf> {
        if !self.done.replace(true) {
            (self.swap)();
        }
        OsView.read_link(path)
    }
}

/// Regression: a directory swapped with a symlink in a tight loop
/// while writes ran was sometimes answered `parse_error: readlink ...:
/// Invalid argument`, telling the agent its path was malformed. `readlink`
/// refuses (`EINVAL`) an entry that is no longer a symlink, which the
/// `lstat` just before saw as one: it was swapped while being checked, the
/// `symlink_escape` of errors.md.
#[test]
fn regression_a_symlink_replaced_before_its_readlink_is_an_escape() {
    let fx = Fx::new();
    fx.dir("root/real");
    let link = fx.symlink("root/d", "real");
    let view = SwapBeforeReadlink {
        swap: || {
            fs::remove_file(&link).unwrap();
            fs::create_dir(&link).unwrap();
        },
        done: std::cell::Cell::new(false),
    };
    let got = resolve(
        &view,
        &fx.root.join("d/f.txt"),
        std::slice::from_ref(&fx.root),
    );
    match got {
        Err(ResolveError::SymlinkEscape(m)) => assert!(m.contains("replaced"), "{m}"),
        other => panic!("{other:?}"),
    }
}

/// The resolver reports the permission bits of an existing leaf from its
/// own `lstat` (the approval gate holds read-only files by them),
/// through a symlink too; a new leaf has none.
#[test]
fn an_existing_leaf_reports_its_permission_bits() {
    use std::os::unix::fs::PermissionsExt;
    let fx = Fx::new();
    let f = fx.file("root/ro.txt", b"x");
    fs::set_permissions(&f, fs::Permissions::from_mode(0o444)).unwrap();
    fx.file("root/rw.txt", b"x");
    fs::set_permissions(fx.p("root/rw.txt"), fs::Permissions::from_mode(0o640)).unwrap();
    fx.symlink("root/link", "ro.txt");
    assert_eq!(fx.resolve(&f).unwrap().mode, Some(0o444));
    assert_eq!(fx.resolve(fx.p("root/link")).unwrap().mode, Some(0o444));
    assert_eq!(fx.resolve(fx.p("root/rw.txt")).unwrap().mode, Some(0o640));
    assert_eq!(fx.resolve(fx.p("root/new.txt")).unwrap().mode, None);
}

/// `base` followed by names of 200 bytes and a last one, `total` bytes in
/// all (every name within `NAME_MAX`).
fn path_of_len(base: &Path, total: usize) -> PathBuf {
    let mut p = base.to_path_buf();
    while total - p.as_os_str().len() > 1 + 255 {
        p.push("d".repeat(200));
    }
    let rest = total - p.as_os_str().len() - 1;
    p.push("f".repeat(rest));
    assert_eq!(p.as_os_str().len(), total);
    p
}

fn message(r: Result<writegate_paths::Resolved, ResolveError>) -> String {
    match r {
        Err(ResolveError::ParseError(m)) => m,
        other => panic!("expected a parse error, got {other:?}"),
    }
}

/// Defect pinned: a path over `PATH_MAX` was accepted (its missing tail is
/// never looked up), so the first write created it component by component
/// and every later write, edit or read of it failed with `ENAMETOOLONG`.
/// The resolver measures the path the kernel would see and refuses it,
/// naming the limit.
#[test]
fn a_path_over_path_max_is_refused() {
    let fx = Fx::new();
    let ok = path_of_len(&fx.root, writegate_paths::PATH_MAX - 1);
    assert!(fx.resolve(&ok).is_ok(), "4095 bytes is the longest path");
    for len in [writegate_paths::PATH_MAX, 4239, 10_000] {
        let m = message(fx.resolve(path_of_len(&fx.root, len)));
        assert!(m.contains(&format!("{len} bytes long")), "{m}");
        assert!(m.contains("4095 bytes (PATH_MAX"), "{m}");
        assert!(m.len() < 600, "the message does not repeat the path: {m}");
    }
    // Measured after `..`: a long spelling of a short path is fine.
    let mut detour = fx.root.clone();
    for _ in 0..30 {
        detour.push("x".repeat(200));
        detour.push("..");
    }
    detour.push("a.txt");
    assert!(detour.as_os_str().len() > 4096);
    assert_eq!(
        fx.resolve(&detour).unwrap().canonical,
        fx.root.join("a.txt")
    );
    // Measured on the canonical path: a short input that a symlink makes
    // too long.
    let far = path_of_len(&fx.root, 4000);
    fx.symlink("root/far", &far);
    let m = message(fx.resolve(fx.root.join("far").join("g".repeat(120))));
    assert!(m.contains("bytes long as "), "{m}");
    assert!(m.contains("PATH_MAX"), "{m}");
}

/// A name over `NAME_MAX` (255 bytes) is refused, naming the
/// limit, in the input and where a symlink's target puts it below a
/// missing directory (where nothing looks it up).
#[test]
fn a_name_over_name_max_is_refused() {
    let fx = Fx::new();
    let at_limit = fx.root.join("n".repeat(writegate_paths::NAME_MAX));
    assert!(fx.resolve(&at_limit).is_ok());
    for input in [
        fx.root.join("n".repeat(256)),
        fx.root.join("missing").join("n".repeat(256)).join("f.txt"),
        fx.root.join(format!("{}.txt", "é".repeat(127))),
    ] {
        let m = message(fx.resolve(&input));
        assert!(m.contains("at most 255 bytes (NAME_MAX)"), "{m}");
        assert!(m.contains("has a name of 25"), "{m}");
    }
    fx.symlink("root/link", fx.root.join("missing").join("n".repeat(300)));
    let m = message(fx.resolve(fx.root.join("link")));
    assert!(m.contains("has a name of 300 bytes"), "{m}");
}
