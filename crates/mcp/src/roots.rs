//! The workspaces a connection routes to: the roots registered before the
//! client connected (`--workspace`, `[[workspace]]`), plus the client's MCP
//! roots (`roots/list`, again on `notifications/roots/list_changed`) when
//! it offers them and `[mcp] client_roots` is not `ignore`. Registration
//! and its rules (canonical roots, no nesting) are the core registry's.

use rmcp::service::{Peer, RoleServer};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
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
}

/// A path's workspace, and whether it came only from the client's roots.
pub(crate) struct Picked {
    pub(crate) runtime: Arc<Runtime>,
    pub(crate) client_root: bool,
}

impl Workspaces {
    /// The workspaces of a connection to `service`; what is registered now
    /// is fixed.
    pub(crate) fn new(service: Arc<Service>) -> Workspaces {
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
        }
    }

    /// Every workspace this connection routes to, the primary (first
    /// registered) first.
    pub(crate) fn all(&self) -> Vec<Arc<Runtime>> {
        let client = self
            .client
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.service
            .registry()
            .all()
            .into_iter()
            .filter(|r| self.fixed.contains(&r.root) || client.iter().any(|c| c.root == r.root))
            .collect()
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
        let runtime = all
            .iter()
            .filter(|r| writegate_paths::is_within(path, &r.root))
            .max_by_key(|r| r.root.as_os_str().len())
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
}
