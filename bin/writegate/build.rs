//! Build script: records the git commit the binary is built from, for
//! `writegate --version` (`0.1.0 (1a2b3c4)`).
//!
//! It asks `git rev-parse --short HEAD` in the workspace root and sets
//! `BUILD_GIT_COMMIT` for the compiler. When git is not installed, the source
//! is not a git checkout (a release tarball), or the enclosing repository is
//! some other project's (a tarball unpacked inside another checkout), the
//! commit is `unknown`. This script never fails the build.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    // bin/writegate -> the workspace root.
    let root = manifest
        .parent()
        .and_then(Path::parent)
        .map_or_else(|| manifest.clone(), Path::to_path_buf);
    let commit = git_commit(&root).unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=BUILD_GIT_COMMIT={commit}");
}

/// Output of `git <args>` run in `dir`, trimmed; `None` if git is missing,
/// fails, or prints nothing.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env_remove("GIT_DIR")
        .env_remove("GIT_WORK_TREE")
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

/// The short commit of `root`'s own repository, and `rerun-if-changed` lines
/// for the files that move when a new commit is checked out (only files that
/// exist: a missing one would make cargo rerun this script every build).
fn git_commit(root: &Path) -> Option<String> {
    let top = PathBuf::from(git(root, &["rev-parse", "--show-toplevel"])?);
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    if !same(&top, root) {
        return None;
    }
    let commit = git(root, &["rev-parse", "--short", "HEAD"])?;
    let mut watch = vec![git(root, &["rev-parse", "--git-path", "HEAD"])];
    if let Some(branch) = git(root, &["symbolic-ref", "-q", "HEAD"]) {
        watch.push(git(root, &["rev-parse", "--git-path", &branch]));
    }
    watch.push(git(root, &["rev-parse", "--git-path", "packed-refs"]));
    for p in watch.into_iter().flatten() {
        let p = root.join(p);
        if p.exists() {
            println!("cargo:rerun-if-changed={}", p.display());
        }
    }
    Some(commit)
}
