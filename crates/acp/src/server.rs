//! The daemon's edges (SPEC 1): the stdio connection, the Unix-socket
//! listener with its peer-UID check, signals (SIGTERM/SIGINT shut down
//! gracefully, SIGHUP reloads), and the shutdown sequence.

use crate::budget::Budget;
use crate::conn::Shared;
use crate::serve::serve_connection;
use crate::transport::Transport;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::UnixListener;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use writegate_core::Service;

/// What `serve` listens on.
pub struct ServeOptions {
    /// Serve one connection on stdin/stdout.
    pub stdio: bool,
    /// Listen on this Unix socket.
    pub socket: Option<PathBuf>,
    /// Called on SIGHUP (reload the config); errors are the callee's to log.
    pub on_reload: Option<Arc<dyn Fn() + Send + Sync>>,
}

/// The default socket path: `$XDG_RUNTIME_DIR/writegate/writegate.sock`, or
/// `/tmp/writegate-<uid>/writegate.sock` when that variable is unset.
pub fn default_socket_path(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    match env("XDG_RUNTIME_DIR").filter(|d| d.starts_with('/')) {
        Some(d) => PathBuf::from(d).join("writegate/writegate.sock"),
        None => PathBuf::from(format!(
            "/tmp/writegate-{}/writegate.sock",
            rustix::process::geteuid().as_raw()
        )),
    }
}

/// Binds the socket: its directory is created 0700 (an existing one must be
/// ours and 0700), a stale socket file is replaced only when nothing answers
/// on it, and the socket is made 0600 (no other user can reach it in
/// between: the directory is already private).
pub fn bind_socket(path: &Path) -> io::Result<UnixListener> {
    let dir = path
        .parent()
        .ok_or_else(|| io::Error::other("socket path has no directory"))?;
    writegate_fs::prepare_private_dir(dir).map_err(|e| fs_error(&e))?;
    match std::fs::symlink_metadata(path) {
        Ok(meta) => {
            use std::os::unix::fs::FileTypeExt;
            if !meta.file_type().is_socket() {
                return Err(io::Error::other(format!(
                    "{} exists and is not a socket; refusing to replace it",
                    path.display()
                )));
            }
            match std::os::unix::net::UnixStream::connect(path) {
                Ok(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::AddrInUse,
                        format!("a daemon is already answering on {}", path.display()),
                    ));
                }
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    tracing::info!(socket = %path.display(), "replacing stale socket");
                    writegate_fs::remove_socket_file(path).map_err(|e| fs_error(&e))?;
                }
                Err(e) => return Err(e),
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = UnixListener::bind(path)?;
    writegate_fs::set_socket_mode(path, 0o600).map_err(|e| fs_error(&e))?;
    Ok(listener)
}

/// An `FsError` of the socket set-up as an `io::Error` whose message carries
/// the operating system's reason too.
fn fs_error(e: &writegate_fs::FsError) -> io::Error {
    io::Error::other(writegate_core::error::with_causes(e))
}

/// Runs the daemon until SIGTERM/SIGINT (or, with only `--stdio`, until
/// stdin ends): in-flight operations finish within `shutdown_grace_ms`,
/// anything not yet started is answered `-32800`, the socket file is
/// removed. Returns after the last response was written.
pub async fn serve(service: Arc<Service>, opts: ServeOptions) -> io::Result<()> {
    let primary = service
        .registry()
        .primary()
        .ok_or_else(|| io::Error::other("no workspace registered: pass --workspace DIR"))?;
    // Handlers first, so a signal sent as soon as the socket answers is ours.
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut hup = signal(SignalKind::hangup())?;
    let shared = Arc::new(Shared {
        service: service.clone(),
        shutdown: CancellationToken::new(),
        budget: Budget::new(service.config().max_inflight_bytes),
        worker_slots: Arc::new(Semaphore::new(
            tokio::runtime::Handle::current()
                .metrics()
                .num_workers()
                .saturating_sub(1),
        )),
    });
    let conns = TaskTracker::new();
    let listener = match &opts.socket {
        Some(p) => Some((bind_socket(p)?, p.clone())),
        None => None,
    };
    let socket_ino = match &opts.socket {
        Some(p) => std::fs::symlink_metadata(p).ok().map(|m| {
            use std::os::unix::fs::MetadataExt;
            (m.dev(), m.ino())
        }),
        None => None,
    };
    if let Some((listener, path)) = listener {
        tracing::info!(socket = %path.display(), "listening");
        let shared = shared.clone();
        let conns2 = conns.clone();
        let primary = primary.clone();
        conns.spawn(async move {
            accept_loop(listener, shared, conns2, primary).await;
        });
    }
    if opts.stdio {
        let shared2 = shared.clone();
        let stdio_only = opts.socket.is_none();
        let primary = primary.clone();
        conns.spawn(async move {
            serve_connection(
                shared2.clone(),
                primary,
                tokio::io::stdin(),
                tokio::io::stdout(),
                Transport::Stdio,
                None,
            )
            .await;
            tracing::debug!("stdio connection ended");
            if stdio_only {
                shared2.shutdown.cancel();
            }
        });
    }
    loop {
        tokio::select! {
            () = shared.shutdown.cancelled() => break,
            _ = term.recv() => { tracing::info!("SIGTERM: shutting down"); shared.shutdown.cancel(); }
            _ = int.recv() => { tracing::info!("SIGINT: shutting down"); shared.shutdown.cancel(); }
            _ = hup.recv() => {
                tracing::info!("SIGHUP: reloading config");
                if let Some(r) = &opts.on_reload { r(); }
            }
        }
    }
    conns.close();
    let grace = Duration::from_millis(service.config().shutdown_grace_ms);
    if tokio::time::timeout(grace, conns.wait()).await.is_err() {
        tracing::warn!(
            grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX),
            "shutdown grace elapsed with operations still running"
        );
    }
    if let (Some(p), Some(ino)) = (&opts.socket, socket_ino) {
        use std::os::unix::fs::MetadataExt;
        // Remove the socket only if it is still ours.
        if let Ok(m) = std::fs::symlink_metadata(p)
            && (m.dev(), m.ino()) == ino
        {
            let _ = writegate_fs::remove_socket_file(p);
        }
    }
    tracing::info!("stopped");
    Ok(())
}

async fn accept_loop(
    listener: UnixListener,
    shared: Arc<Shared>,
    conns: TaskTracker,
    primary: Arc<writegate_core::Runtime>,
) {
    let me = rustix::process::geteuid().as_raw();
    loop {
        let accepted = tokio::select! {
            () = shared.shutdown.cancelled() => return,
            a = listener.accept() => a,
        };
        let (stream, _) = match accepted {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let peer = stream.peer_cred().map(|c| c.uid());
        match peer {
            Ok(uid) if uid == me => {}
            Ok(uid) => {
                tracing::warn!(
                    peer_uid = uid,
                    daemon_uid = me,
                    "refused socket peer with another UID"
                );
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "refused socket peer: cannot read its credentials");
                continue;
            }
        }
        // A duplicate descriptor for direct, non-blocking response writes.
        let direct = {
            use std::os::fd::AsFd;
            stream.as_fd().try_clone_to_owned().ok()
        };
        let (r, w) = stream.into_split();
        let shared = shared.clone();
        let primary = primary.clone();
        conns.spawn(async move {
            serve_connection(shared, primary, r, w, Transport::Socket, direct).await;
        });
    }
}
