//! Session workspaces (SPEC 2) for front ends whose client names a working
//! directory per session (`writegate proxy`: the `cwd` of ACP's
//! `session/new`, `session/load` and `session/resume`). The rule lives here,
//! once: the canonical `cwd` is the session's workspace, registered on the
//! fly when `[proxy] roots` allows it; it is trusted per `[proxy] trusted`
//! unless a `[[workspace]]` entry for the same root says otherwise; a root
//! nested with one already registered is refused, as everywhere.

use crate::config::Config;
use crate::runtime::{RegisterError, Runtime};
use crate::service::Service;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why a session's `cwd` cannot be its workspace. Each message is one
/// sentence saying what to do.
#[derive(Debug, thiserror::Error)]
pub enum SessionWorkspaceError {
    /// The `cwd` is relative.
    #[error(
        "the session cwd {} is not an absolute path; the editor must send an absolute cwd",
        .0.display()
    )]
    NotAbsolute(PathBuf),
    /// `realpath` failed (missing, no permission).
    #[error(
        "the session cwd {} cannot be resolved ({source}); open an existing directory",
        .path.display()
    )]
    Unresolvable {
        /// The `cwd` as given.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The `cwd` is not a directory.
    #[error("the session cwd {} is not a directory; open a directory", .0.display())]
    NotADirectory(PathBuf),
    /// `[proxy] roots` is set and the `cwd` is inside none of them.
    #[error(
        "the session cwd {} is outside the directories this proxy allows ([proxy] roots: {}); open a directory inside one of them, or add it to [proxy] roots",
        .cwd.display(),
        .roots.iter().map(|r| r.display().to_string()).collect::<Vec<_>>().join(", ")
    )]
    OutsideRoots {
        /// The canonical `cwd`.
        cwd: PathBuf,
        /// The allowed roots, canonical where they resolve.
        roots: Vec<PathBuf>,
    },
    /// The `cwd` contains, or is inside, a workspace already registered (by
    /// another session of this process).
    #[error(
        "the session cwd {} is nested with {}, the workspace of another session here; writegate does not nest workspaces: open the same directory, or start the agent for it separately",
        .cwd.display(),
        .other.display()
    )]
    Nested {
        /// The canonical `cwd`.
        cwd: PathBuf,
        /// The registered root it nests with.
        other: PathBuf,
    },
}

impl Service {
    /// The runtime of a session whose client named `cwd` as its working
    /// directory: `cwd` canonicalised, checked against `[proxy] roots`, and
    /// registered (or found, when another session already uses that root),
    /// trusted per [`session_trust`]. Sessions with the same `cwd` share one
    /// runtime.
    pub fn register_session_workspace(
        &self,
        cwd: &Path,
    ) -> Result<Arc<Runtime>, SessionWorkspaceError> {
        if !cwd.is_absolute() {
            return Err(SessionWorkspaceError::NotAbsolute(cwd.to_path_buf()));
        }
        let canonical =
            std::fs::canonicalize(cwd).map_err(|source| SessionWorkspaceError::Unresolvable {
                path: cwd.to_path_buf(),
                source,
            })?;
        let cfg = self.config();
        if !cfg.proxy.roots.is_empty() {
            let roots: Vec<PathBuf> = cfg
                .proxy
                .roots
                .iter()
                .map(|r| std::fs::canonicalize(r).unwrap_or_else(|_| r.clone()))
                .collect();
            if !roots.iter().any(|r| canonical.starts_with(r)) {
                return Err(SessionWorkspaceError::OutsideRoots {
                    cwd: canonical,
                    roots,
                });
            }
        }
        self.registry()
            .register(&canonical, session_trust(&cfg, &canonical))
            .map_err(|e| match e {
                RegisterError::Unresolvable(path, why) => SessionWorkspaceError::Unresolvable {
                    path,
                    source: std::io::Error::other(why),
                },
                RegisterError::NotADirectory(p) => SessionWorkspaceError::NotADirectory(p),
                RegisterError::Nested(cwd, other) => SessionWorkspaceError::Nested { cwd, other },
            })
    }
}

/// Whether a session workspace at `canonical` is trusted: as its
/// `[[workspace]]` entry says when there is one for that root, else
/// `[proxy] trusted`.
pub fn session_trust(cfg: &Config, canonical: &Path) -> bool {
    cfg.workspace
        .iter()
        .find(|w| std::fs::canonicalize(&w.root).ok().as_deref() == Some(canonical))
        .map_or(cfg.proxy.trusted, |w| w.trusted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::WorkspaceConfig;
    use crate::runtime::Registry;

    fn service(cfg: Config, state: &Path) -> Service {
        Service::new(
            cfg,
            Registry::default(),
            &state.join("audit.jsonl"),
            state.join("approvals.json"),
        )
    }

    #[test]
    fn a_cwd_becomes_a_trusted_workspace_shared_by_its_sessions() {
        let d = tempfile::tempdir().unwrap();
        let a = d.path().join("a");
        std::fs::create_dir_all(a.join("sub")).unwrap();
        let svc = service(Config::default(), d.path());
        let rt = svc.register_session_workspace(&a.join("sub/..")).unwrap();
        assert_eq!(rt.root, std::fs::canonicalize(&a).unwrap());
        assert!(rt.trusted);
        let again = svc.register_session_workspace(&a).unwrap();
        assert!(Arc::ptr_eq(&rt, &again));
        let err = svc.register_session_workspace(&a.join("sub")).unwrap_err();
        assert!(matches!(err, SessionWorkspaceError::Nested { .. }), "{err}");
        assert!(err.to_string().contains("does not nest"), "{err}");
    }

    #[test]
    fn roots_and_trust_come_from_the_config() {
        let d = tempfile::tempdir().unwrap();
        let allowed = d.path().join("allowed");
        let other = d.path().join("other");
        std::fs::create_dir_all(allowed.join("p")).unwrap();
        std::fs::create_dir_all(allowed.join("q")).unwrap();
        std::fs::create_dir(&other).unwrap();
        let mut cfg = Config::default();
        cfg.proxy.roots = vec![allowed.clone()];
        cfg.workspace = vec![WorkspaceConfig {
            root: allowed.join("q"),
            trusted: false,
        }];
        let svc = service(cfg, d.path());
        assert!(
            svc.register_session_workspace(&allowed.join("p"))
                .unwrap()
                .trusted
        );
        assert!(
            !svc.register_session_workspace(&allowed.join("q"))
                .unwrap()
                .trusted
        );
        let err = svc.register_session_workspace(&other).unwrap_err();
        assert!(
            matches!(err, SessionWorkspaceError::OutsideRoots { .. }),
            "{err}"
        );
        assert!(err.to_string().contains("[proxy] roots"), "{err}");
        assert!(matches!(
            svc.register_session_workspace(Path::new("rel")),
            Err(SessionWorkspaceError::NotAbsolute(_))
        ));
        assert!(matches!(
            svc.register_session_workspace(&d.path().join("missing")),
            Err(SessionWorkspaceError::Unresolvable { .. })
        ));
        let file = allowed.join("f");
        std::fs::write(&file, "x").unwrap();
        assert!(matches!(
            svc.register_session_workspace(&file),
            Err(SessionWorkspaceError::NotADirectory(_))
        ));
    }
}
