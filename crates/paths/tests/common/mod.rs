//! The fixture of the resolver's tests: a real scratch directory `W`
//! (canonical) with the workspace root `W/root`, mirroring the conformance
//! runner's layout, and the resolver over it through a view that refuses
//! `realpath` and checks that nothing changed.

use std::fs;
use std::io;
use std::os::unix::fs::{MetadataExt, symlink};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};

use writegate_paths::{FsView, OsView, ResolveError, Resolved, Stat, resolve};

pub(crate) struct Fx {
    _tmp: tempfile::TempDir,
    /// Canonical scratch directory.
    pub(crate) w: PathBuf,
    /// Canonical workspace root, `W/root`.
    pub(crate) root: PathBuf,
    /// Sockets must stay bound for the test's lifetime.
    sockets: Vec<UnixListener>,
}

impl Fx {
    pub(crate) fn new() -> Fx {
        let tmp = tempfile::tempdir().unwrap();
        let w = fs::canonicalize(tmp.path()).unwrap();
        let root = w.join("root");
        fs::create_dir(&root).unwrap();
        Fx {
            _tmp: tmp,
            w,
            root,
            sockets: Vec::new(),
        }
    }

    /// `W/rel`.
    pub(crate) fn p(&self, rel: &str) -> PathBuf {
        self.w.join(rel)
    }

    pub(crate) fn dir(&self, rel: &str) -> PathBuf {
        let p = self.p(rel);
        fs::create_dir_all(&p).unwrap();
        p
    }

    pub(crate) fn file(&self, rel: &str, bytes: &[u8]) -> PathBuf {
        let p = self.p(rel);
        fs::write(&p, bytes).unwrap();
        p
    }

    /// A symlink at `W/rel` with the literal target `target`.
    pub(crate) fn symlink(&self, rel: &str, target: impl AsRef<Path>) -> PathBuf {
        let p = self.p(rel);
        symlink(target.as_ref(), &p).unwrap();
        p
    }

    pub(crate) fn socket(&mut self, rel: &str) -> PathBuf {
        let p = self.p(rel);
        self.sockets.push(UnixListener::bind(&p).unwrap());
        p
    }

    pub(crate) fn roots(&self) -> Vec<PathBuf> {
        vec![self.root.clone()]
    }

    /// The workspace resolver over the real filesystem, through a view that
    /// refuses `realpath` (the resolver must walk components itself), and
    /// checking that nothing under `W` changed.
    pub(crate) fn resolve(&self, input: impl AsRef<Path>) -> Result<Resolved, ResolveError> {
        self.resolve_with_roots(input, &self.roots())
    }

    pub(crate) fn resolve_with_roots(
        &self,
        input: impl AsRef<Path>,
        roots: &[PathBuf],
    ) -> Result<Resolved, ResolveError> {
        let before = self.snapshot();
        let r = resolve(&NoRealpath, input.as_ref(), roots);
        assert_eq!(
            before,
            self.snapshot(),
            "the resolver changed the filesystem"
        );
        r
    }

    /// Everything under `W`: names, kinds, sizes, modes, inodes, mtimes, link targets.
    pub(crate) fn snapshot(&self) -> Vec<String> {
        let mut out = Vec::new();
        walk(&self.w, &mut out);
        out.sort();
        out
    }
}

fn walk(dir: &Path, out: &mut Vec<String>) {
    let Ok(listing) = fs::read_dir(dir) else {
        out.push(format!("{} <unreadable>", dir.display()));
        return;
    };
    let mut entries: Vec<_> = listing.map(|e| e.unwrap().path()).collect();
    entries.sort();
    for p in entries {
        let m = fs::symlink_metadata(&p).unwrap();
        let target = fs::read_link(&p).ok();
        out.push(format!(
            "{} {:o} {} {} {} {:?}",
            p.display(),
            m.mode(),
            m.len(),
            m.ino(),
            m.mtime_nsec(),
            target
        ));
        if m.is_dir() {
            walk(&p, out);
        }
    }
}

/// The real filesystem, but `realpath` is forbidden.
pub(crate) struct NoRealpath;

impl FsView for NoRealpath {
    fn lstat(&self, path: &Path) -> io::Result<Stat> {
        OsView.lstat(path)
    }
    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        OsView.read_link(path)
    }
    fn canonicalize(&self, path: &Path) -> io::Result<PathBuf> {
        panic!(
            "the workspace resolver must not call realpath ({})",
            path.display()
        )
    }
}
