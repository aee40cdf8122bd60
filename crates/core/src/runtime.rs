//! Workspaces, runtimes and generation guards (SPEC 2).

use crate::sync;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

/// Open while the runtime is live; closed for good when the workspace is
/// removed or its trust changes (SPEC 2). Checked at the start of an
/// operation, after resolving, inside the path lock, and before the rename.
#[derive(Debug, Default)]
pub struct GenerationGuard {
    closed: AtomicBool,
}

impl GenerationGuard {
    /// `true` while the runtime is live.
    pub fn is_open(&self) -> bool {
        !self.closed.load(Ordering::SeqCst)
    }

    /// Closes the guard; it never reopens.
    pub fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
    }
}

/// A workspace's live state: id, canonical root, trust and generation guard.
#[derive(Debug)]
pub struct Runtime {
    /// First 12 hex digits of sha256 of the canonical root.
    pub id: String,
    /// Canonical root (`realpath`).
    pub root: PathBuf,
    /// Writes allowed (SPEC 2).
    pub trusted: bool,
    /// This runtime's generation guard.
    pub guard: GenerationGuard,
}

impl Runtime {
    /// A runtime for an already canonical root.
    pub fn new(root: PathBuf, trusted: bool) -> Runtime {
        Runtime {
            id: runtime_id(&root),
            root,
            trusted,
            guard: GenerationGuard::default(),
        }
    }
}

/// `sha256(canonical root)` cut to 12 hex digits.
pub fn runtime_id(root: &Path) -> String {
    let digest = Sha256::digest(root.as_os_str().as_encoded_bytes());
    crate::hex(&digest)[..12].to_string()
}

/// Why a workspace cannot be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// `realpath` failed (missing, permissions), with the reason.
    #[error("workspace root {0} cannot be resolved: {1}")]
    Unresolvable(PathBuf, String),
    /// The root is not a directory.
    #[error("workspace root {0} is not a directory")]
    NotADirectory(PathBuf),
    /// One root inside the other (SPEC 2).
    #[error("workspace root {0} is nested with registered workspace {1}")]
    Nested(PathBuf, PathBuf),
}

/// Every registered runtime; the first is the primary.
#[derive(Debug, Default)]
pub struct Registry {
    runtimes: RwLock<Vec<Arc<Runtime>>>,
}

/// What a reload changed, for logs and tests.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ReloadReport {
    /// Roots registered by the reload.
    pub added: Vec<PathBuf>,
    /// Roots no longer served (their generation closed).
    pub removed: Vec<PathBuf>,
    /// Roots whose trust changed (a fresh runtime each).
    pub retrusted: Vec<PathBuf>,
}

/// The one of `items` whose root (`root_of`) contains `path`, comparing
/// whole components as given (`writegate_paths::is_within`: `/a/proj-evil`
/// is not in `/a/proj`); the deepest when roots nest (a registry's never
/// do). Every front end and the CLI pick a path's workspace with this.
pub fn containing<'a, T>(
    items: &'a [T],
    root_of: impl Fn(&T) -> &Path,
    path: &Path,
) -> Option<&'a T> {
    items
        .iter()
        .filter(|i| writegate_paths::is_within(path, root_of(i)))
        .max_by_key(|i| root_of(i).as_os_str().len())
}

impl Registry {
    /// Canonicalises `root` and registers it. Registering the same canonical
    /// root again returns the existing runtime. Nested roots (one inside
    /// another, by components) are refused (SPEC 2).
    pub fn register(&self, root: &Path, trusted: bool) -> Result<Arc<Runtime>, RegisterError> {
        let canonical = std::fs::canonicalize(root)
            .map_err(|e| RegisterError::Unresolvable(root.to_path_buf(), e.to_string()))?;
        if !canonical.is_dir() {
            return Err(RegisterError::NotADirectory(canonical));
        }
        let mut all = sync::write(&self.runtimes);
        if let Some(rt) = all.iter().find(|r| r.root == canonical) {
            return Ok(rt.clone());
        }
        if let Some(other) = all
            .iter()
            .find(|r| canonical.starts_with(&r.root) || r.root.starts_with(&canonical))
        {
            return Err(RegisterError::Nested(canonical, other.root.clone()));
        }
        let rt = Arc::new(Runtime::new(canonical, trusted));
        all.push(rt.clone());
        Ok(rt)
    }

    /// The primary runtime (the first registered), if any.
    pub fn primary(&self) -> Option<Arc<Runtime>> {
        sync::read(&self.runtimes).first().cloned()
    }

    /// All live runtimes, primary first.
    pub fn all(&self) -> Vec<Arc<Runtime>> {
        sync::read(&self.runtimes).clone()
    }

    /// The runtime whose root contains `path` (see [`containing`]).
    pub fn containing(&self, path: &Path) -> Option<Arc<Runtime>> {
        containing(&sync::read(&self.runtimes), |r| &r.root, path).cloned()
    }

    /// Finds a runtime by runtime id or by (canonicalised) root path.
    pub fn find(&self, name: &str) -> Option<Arc<Runtime>> {
        let all = sync::read(&self.runtimes);
        if let Some(rt) = all.iter().find(|r| r.id == name) {
            return Some(rt.clone());
        }
        let canonical = std::fs::canonicalize(name).ok()?;
        all.iter().find(|r| r.root == canonical).cloned()
    }

    /// Replaces the set of runtimes with `wanted` (canonical roots and trust):
    /// a removed workspace or one whose trust changed gets its guard closed
    /// and (if still wanted) a fresh runtime; unchanged ones are kept.
    pub fn reload(&self, wanted: &[(PathBuf, bool)]) -> Result<ReloadReport, RegisterError> {
        let mut canon = Vec::new();
        for (root, trusted) in wanted {
            let c = std::fs::canonicalize(root)
                .map_err(|e| RegisterError::Unresolvable(root.clone(), e.to_string()))?;
            if !c.is_dir() {
                return Err(RegisterError::NotADirectory(c));
            }
            if let Some((other, _)) = canon.iter().find(|(o, _): &&(PathBuf, bool)| {
                *o != c && (c.starts_with(o) || o.starts_with(&c))
            }) {
                return Err(RegisterError::Nested(c, other.clone()));
            }
            if !canon.iter().any(|(o, _)| *o == c) {
                canon.push((c, *trusted));
            }
        }
        let mut all = sync::write(&self.runtimes);
        let mut report = ReloadReport::default();
        let mut next = Vec::new();
        for (root, trusted) in &canon {
            match all.iter().find(|r| &r.root == root) {
                Some(rt) if rt.trusted == *trusted => next.push(rt.clone()),
                Some(rt) => {
                    rt.guard.close();
                    report.retrusted.push(root.clone());
                    next.push(Arc::new(Runtime::new(root.clone(), *trusted)));
                }
                None => {
                    report.added.push(root.clone());
                    next.push(Arc::new(Runtime::new(root.clone(), *trusted)));
                }
            }
        }
        for rt in all.iter() {
            if !canon.iter().any(|(r, _)| *r == rt.root) {
                rt.guard.close();
                report.removed.push(rt.root.clone());
            }
        }
        *all = next;
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_roots_are_refused_by_components() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("proj");
        let evil = d.path().join("proj-evil");
        std::fs::create_dir_all(a.join("sub")).unwrap();
        std::fs::create_dir(&evil).unwrap();
        let reg = Registry::default();
        reg.register(&a, true).unwrap();
        assert!(matches!(
            reg.register(&a.join("sub"), true),
            Err(RegisterError::Nested(..))
        ));
        reg.register(&evil, true).unwrap();
        assert_eq!(reg.all().len(), 2);
        assert_eq!(
            reg.primary().unwrap().root,
            std::fs::canonicalize(&a).unwrap()
        );
    }

    #[test]
    fn reload_closes_removed_and_retrusted_runtimes() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        let b = d.path().join("b");
        std::fs::create_dir(&a).unwrap();
        std::fs::create_dir(&b).unwrap();
        let reg = Registry::default();
        let ra = reg.register(&a, true).unwrap();
        let rb = reg.register(&b, true).unwrap();
        let report = reg.reload(&[(a.clone(), false)]).unwrap();
        assert!(!ra.guard.is_open());
        assert!(!rb.guard.is_open());
        assert_eq!(report.removed.len(), 1);
        assert_eq!(report.retrusted.len(), 1);
        let fresh = reg.find(&ra.id).unwrap();
        assert!(fresh.guard.is_open());
        assert!(!fresh.trusted);
    }

    #[test]
    fn find_by_id_and_by_path() {
        let d = tempfile::tempdir().unwrap();
        let reg = Registry::default();
        let rt = reg.register(d.path(), true).unwrap();
        assert_eq!(rt.id.len(), 12);
        assert!(Arc::ptr_eq(&reg.find(&rt.id).unwrap(), &rt));
        assert!(Arc::ptr_eq(
            &reg.find(d.path().to_str().unwrap()).unwrap(),
            &rt
        ));
        assert!(reg.find("nope").is_none());
    }
}
