//! The workspaces a connection routes to: the roots registered before the
//! client connected (`--workspace`, `[[workspace]]`), plus the client's MCP
//! roots (`roots/list`, again on `notifications/roots/list_changed`) when
//! it offers them and `[mcp] client_roots` is not `ignore`; and, when
//! neither gives the connection a workspace, the directory the agent
//! started writegate in (`--cwd-workspace`), with the trust of client
//! roots, unless it is `/`, the home directory or above it (see
//! [`cwd_workspace`]). Registration and its rules (canonical roots, no
//! nesting) are the core registry's.

use rmcp::service::{Peer, RoleServer};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use writegate_core::config::ClientRoots;
use writegate_core::{Runtime, Service};

/// How long `roots/list` may take before the client's roots are left as
/// they were (a client that never answers must not hold up tool calls).
const ROOTS_TIMEOUT: Duration = Duration::from_secs(10);

/// One connection's workspaces.
pub(crate) struct Workspaces {
    service: Arc<Service>,
    /// Canonical roots registered before the client connected.
    fixed: Vec<PathBuf>,
    /// The client's current roots that are registered (a client root equal
    /// to a fixed root is the same runtime).
    client: Mutex<Vec<Arc<Runtime>>>,
    /// One `roots/list` at a time.
    sync_lock: tokio::sync::Mutex<()>,
    /// Set once the first `roots/list` is done (or was not possible).
    first: tokio::sync::OnceCell<()>,
    /// The directory writegate was started in, as `--cwd-workspace` asks:
    /// the workspace of a connection that has no other (`None`: not asked).
    cwd: Option<Result<PathBuf, String>>,
    /// That directory registered (on first need), or why it is not.
    cwd_runtime: OnceLock<Result<Arc<Runtime>, String>>,
    /// See [`Workspaces::cwd_first`].
    cwd_first: bool,
}

/// What the directory writegate was started in may become, for
/// `--cwd-workspace`: `Ok` with the directory (canonical), or the reason it
/// is no workspace. `/`, the home directory and any directory above it are
/// refused: the agent was started there, not in a project, and a workspace
/// there would let it write anywhere in the person's files.
pub(crate) fn cwd_workspace(cwd: &Path, home: Option<&Path>) -> Result<PathBuf, String> {
    let dir = std::fs::canonicalize(cwd).map_err(|e| {
        format!(
            "the directory it was started in ({}) cannot be resolved: {e}",
            cwd.display()
        )
    })?;
    if dir.parent().is_none() {
        return Err(format!(
            "it was started in {}, the root of the file system, which it takes as no workspace",
            dir.display()
        ));
    }
    let home = home.map(|h| std::fs::canonicalize(h).unwrap_or_else(|_| h.to_path_buf()));
    if let Some(home) = home.filter(|h| h.starts_with(&dir)) {
        let what = if home == dir {
            "the home directory".to_string()
        } else {
            format!("above the home directory {}", home.display())
        };
        return Err(format!(
            "it was started in {} ({what}), which it takes as no workspace: the agent would write anywhere in the user's files",
            dir.display()
        ));
    }
    Ok(dir)
}

/// A path's workspace, and whether it came only from the client's roots.
pub(crate) struct Picked {
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) client_root: bool,
}

impl Workspaces {
    /// The workspaces of a connection to `service`; what is registered now
    /// is fixed.
    pub(crate) fn new(service: Arc<Service>, cwd: Option<Result<PathBuf, String>>) -> Workspaces {
        let fixed = service
            .registry()
            .all()
            .iter()
            .map(|r| r.root.clone())
            .collect();
        Workspaces {
            service,
            fixed,
            client: Mutex::new(Vec::new()),
            sync_lock: tokio::sync::Mutex::new(()),
            first: tokio::sync::OnceCell::new(),
            cwd,
            cwd_runtime: OnceLock::new(),
            cwd_first: false,
        }
    }

    /// The started-in directory, when it is a workspace and the client
    /// shares no roots, goes first (the primary, where relative paths
    /// start) even when other workspaces are registered: a connection to
    /// the daemon, whose own workspaces are the daemon's, not this agent's.
    pub(crate) fn cwd_first(mut self) -> Workspaces {
        self.cwd_first = true;
        self
    }

    /// The directory writegate was started in, registered with the trust
    /// of client roots, once the client's roots are known and gave nothing
    /// (`Err`: why it is no workspace; `None`: `--cwd-workspace` not given).
    fn cwd_runtime(&self) -> Option<&Result<Arc<Runtime>, String>> {
        let dir = self.cwd.as_ref()?;
        Some(self.cwd_runtime.get_or_init(|| {
            let dir = dir.clone()?;
            let mode = self.service.config().mcp.client_roots;
            if mode == ClientRoots::Ignore {
                return Err(format!(
                    "client_roots is `ignore`, so the directory the agent started it in ({}) is no workspace either",
                    dir.display()
                ));
            }
            let trusted = mode == ClientRoots::Trusted;
            match self.service.registry().register(&dir, trusted) {
                Ok(rt) => {
                    tracing::info!(
                        root = %rt.root.display(),
                        client_roots = mode.as_str(),
                        "the client shared no roots: the directory writegate was started in is the workspace"
                    );
                    Ok(rt)
                }
                Err(e) => Err(format!("the directory it was started in is no workspace: {e}")),
            }
        }))
    }

    /// Why the connection has no workspace, when `--cwd-workspace` was
    /// given and the directory writegate was started in is refused.
    pub(crate) fn why_no_cwd(&self) -> Option<String> {
        match self.cwd_runtime()? {
            Ok(_) => None,
            Err(why) => Some(why.clone()),
        }
    }

    /// Every workspace this connection routes to, the primary (first
    /// registered) first.
    pub(crate) fn all(&self) -> Vec<Arc<Runtime>> {
        let client = self
            .client
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let all: Vec<_> = self
            .service
            .registry()
            .all()
            .into_iter()
            .filter(|r| self.fixed.contains(&r.root) || client.iter().any(|c| c.root == r.root))
            .collect();
        let no_client_roots = client.is_empty();
        drop(client);
        // The started-in directory stands in for the roots the client did
        // not share, once it is known that it shared none.
        if (all.is_empty() || (self.cwd_first && no_client_roots))
            && self.first.initialized()
            && let Some(Ok(rt)) = self.cwd_runtime()
        {
            let mut first = vec![rt.clone()];
            first.extend(all.into_iter().filter(|r| r.root != rt.root));
            return first;
        }
        all
    }

    /// The roots as text, the primary first.
    pub(crate) fn roots(&self) -> Vec<String> {
        self.all()
            .iter()
            .map(|r| r.root.display().to_string())
            .collect()
    }

    /// The workspace whose root contains `path` (compared by components,
    /// as given), else the primary, where core refuses the path with
    /// `path_outside_workspace` naming that root. `None`: no workspace.
    pub(crate) fn pick(&self, path: &Path) -> Option<Picked> {
        let all = self.all();
        let runtime = writegate_core::runtime::containing(&all, |r| &r.root, path)
            .or_else(|| all.first())?
            .clone();
        let client_root = !self.fixed.contains(&runtime.root);
        Some(Picked {
            runtime,
            client_root,
        })
    }

    /// Waits for the first `roots/list` (running it if nobody has yet).
    pub(crate) async fn ready(&self, peer: &Peer<RoleServer>) {
        self.first.get_or_init(|| self.sync(peer)).await;
    }

    /// Lists the client's roots and registers them as the config says; a
    /// root that cannot be registered (missing, not a directory, nested in
    /// another workspace) is logged and skipped. Roots the client no longer
    /// lists are no longer routed to.
    #[allow(deprecated)] // roots are deprecated by the 2026 protocol; clients of today use them
    pub(crate) async fn sync(&self, peer: &Peer<RoleServer>) {
        let _one = self.sync_lock.lock().await;
        let mode = self.service.config().mcp.client_roots;
        let offered = peer
            .peer_info()
            .is_some_and(|i| i.capabilities.roots.is_some());
        if mode == ClientRoots::Ignore || !offered {
            return;
        }
        let list = match tokio::time::timeout(ROOTS_TIMEOUT, peer.list_roots()).await {
            Ok(Ok(list)) => list,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "roots/list failed; keeping the client's roots as they were");
                return;
            }
            Err(_) => {
                tracing::warn!(
                    timeout_s = ROOTS_TIMEOUT.as_secs(),
                    "roots/list got no answer in time; keeping the client's roots as they were"
                );
                return;
            }
        };
        let trusted = mode == ClientRoots::Trusted;
        let mut now = Vec::new();
        for root in list.roots {
            let Some(path) = file_uri_path(&root.uri) else {
                tracing::warn!(uri = %root.uri, "client root is not a file:// URI; ignored");
                continue;
            };
            match self.service.registry().register(&path, trusted) {
                Ok(rt) => {
                    if !now.iter().any(|r: &Arc<Runtime>| r.root == rt.root) {
                        now.push(rt);
                    }
                }
                Err(e) => tracing::warn!(uri = %root.uri, error = %e, "client root not registered"),
            }
        }
        let roots: Vec<_> = now
            .iter()
            .map(|r| {
                format!(
                    "{}{}",
                    r.root.display(),
                    if r.trusted { "" } else { " (untrusted)" }
                )
            })
            .collect();
        tracing::info!(roots = %roots.join(", "), client_roots = mode.as_str(), "client roots");
        *self
            .client
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = now;
    }
}

/// The local path of a `file://` URI (percent-decoded), if it is one.
pub(crate) fn file_uri_path(uri: &str) -> Option<PathBuf> {
    let url = url::Url::parse(uri).ok()?;
    if url.scheme() != "file" {
        return None;
    }
    url.to_file_path().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_uris() {
        assert_eq!(
            file_uri_path("file:///home/me/my%20proj"),
            Some(PathBuf::from("/home/me/my proj"))
        );
        assert_eq!(file_uri_path("file:///"), Some(PathBuf::from("/")));
        assert_eq!(file_uri_path("https://example.com/x"), None);
        assert_eq!(file_uri_path("not a uri"), None);
        assert_eq!(file_uri_path("file://otherhost/x"), None);
    }

    #[test]
    fn the_started_in_directory_is_no_workspace_at_the_root_the_home_or_above() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("home/me");
        let project = home.join("src/project");
        std::fs::create_dir_all(&project).unwrap();
        let canon = |p: &Path| std::fs::canonicalize(p).unwrap();
        assert_eq!(cwd_workspace(&project, Some(&home)), Ok(canon(&project)));
        assert_eq!(cwd_workspace(&project, None), Ok(canon(&project)));
        let at_home = cwd_workspace(&home, Some(&home)).unwrap_err();
        assert!(at_home.contains("the home directory"), "{at_home}");
        let above = cwd_workspace(&t.path().join("home"), Some(&home)).unwrap_err();
        assert!(above.contains("above the home directory"), "{above}");
        let root = cwd_workspace(Path::new("/"), Some(&home)).unwrap_err();
        assert!(root.contains("root of the file system"), "{root}");
        assert!(cwd_workspace(Path::new("/"), None).is_err());
        // The home directory named through a symlink is still the home.
        let link = t.path().join("link");
        std::os::unix::fs::symlink(&home, &link).unwrap();
        assert!(cwd_workspace(&link, Some(&home)).is_err());
        assert!(cwd_workspace(&home, Some(&link)).is_err());
        assert!(cwd_workspace(&t.path().join("missing"), Some(&home)).is_err());
    }
}
