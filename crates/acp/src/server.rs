//! The daemon's edges (SPEC 1): the stdio connection, the Unix-socket
//! listener with its peer-UID check (bound here, or passed by systemd's
//! socket activation), readiness for the service manager (`sd_notify`),
//! signals (SIGTERM/SIGINT shut down gracefully, SIGHUP reloads), and the
//! shutdown sequence.

use crate::budget::Budget;
use crate::conn::Shared;
use crate::serve::serve_connection;
use crate::transport::Transport;
use std::io;
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::net::UnixListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use writegate_core::Service;
use writegate_stdio::run::{Signal, Signals};
use writegate_stdio::{NonBlockingFd, StdioEnds};

/// What `serve` listens on.
pub struct ServeOptions {
    /// Serve one connection on stdin/stdout.
    pub stdio: bool,
    /// Listen on this Unix socket (bound by `bind_socket`, removed at
    /// shutdown). Ignored when `activated` is given.
    pub socket: Option<PathBuf>,
    /// A listening socket the service manager passed (socket activation,
    /// see [`activated_listener`]): served instead of `socket`, and left in
    /// place at shutdown (it belongs to the socket unit).
    pub activated: Option<std::os::unix::net::UnixListener>,
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

/// The first descriptor a service manager passes (`SD_LISTEN_FDS_START`).
const LISTEN_FDS_START: RawFd = 3;

/// Socket activation, the `sd_listen_fds(3)` protocol: when `LISTEN_PID`
/// is this process's pid and `LISTEN_FDS` is 1, descriptor 3 is a socket
/// the service manager (systemd's `writegate.socket`) opened and passed;
/// this takes it, once, and returns it as a listener. `Ok(None)` when the
/// variables are unset, `LISTEN_FDS` is 0, or `LISTEN_PID` names another
/// process (the variables were inherited, not meant for us).
///
/// Errors, each naming the variable or descriptor and what to change:
/// `LISTEN_FDS` not a number or above 1 (writegate serves one socket);
/// descriptor 3 not open, not a socket, not a listening stream socket, or
/// not a Unix socket. Call it before anything else opens descriptors
/// (nothing can take 3 while it is open, but a closed 3 would be reused).
/// The variables are left in the environment: the daemon starts no
/// processes that could inherit them.
pub fn activated_listener(
    env: &dyn Fn(&str) -> Option<String>,
) -> io::Result<Option<std::os::unix::net::UnixListener>> {
    static TAKEN: AtomicBool = AtomicBool::new(false);
    let (Some(pid), Some(fds)) = (env("LISTEN_PID"), env("LISTEN_FDS")) else {
        return Ok(None);
    };
    if pid.trim().parse::<u32>().ok() != Some(std::process::id()) {
        tracing::debug!(listen_pid = %pid, "LISTEN_FDS is meant for another process; ignored");
        return Ok(None);
    }
    let bad = |what: String| io::Error::new(io::ErrorKind::InvalidInput, what);
    match fds.trim().parse::<u32>() {
        Ok(0) => return Ok(None),
        Ok(1) => {}
        Ok(n) => {
            return Err(bad(format!(
                "LISTEN_FDS={n}: writegate serves exactly one socket; give writegate.socket one ListenStream="
            )));
        }
        Err(_) => return Err(bad(format!("LISTEN_FDS=`{fds}` is not a number"))),
    }
    if TAKEN.swap(true, Ordering::SeqCst) {
        return Err(bad("the activated socket was already taken".to_string()));
    }
    // SAFETY: only borrowed for the duration of the `fcntl` that checks
    // that descriptor 3 is open at all.
    let open = rustix::io::fcntl_getfd(unsafe { BorrowedFd::borrow_raw(LISTEN_FDS_START) });
    if open.is_err() {
        return Err(bad(
            "LISTEN_FDS=1 but descriptor 3 is not open: start writegate through its socket unit"
                .to_string(),
        ));
    }
    // SAFETY: descriptor 3 is open (checked above), LISTEN_PID names this
    // process, so the service manager passed it to us and nothing else in
    // this process owns it; `TAKEN` makes sure it is owned only once.
    let fd = unsafe { OwnedFd::from_raw_fd(LISTEN_FDS_START) };
    rustix::io::fcntl_setfd(&fd, rustix::io::FdFlags::CLOEXEC)?;
    let not_ours = |why: &str| {
        bad(format!(
            "descriptor 3 (LISTEN_FDS) is {why}; writegate.socket must have ListenStream=<a socket path>"
        ))
    };
    if rustix::fs::fstat(&fd).map(|st| rustix::fs::FileType::from_raw_mode(st.st_mode))?
        != rustix::fs::FileType::Socket
    {
        return Err(not_ours("not a socket"));
    }
    if rustix::net::sockopt::socket_type(&fd)? != rustix::net::SocketType::STREAM
        || !rustix::net::sockopt::socket_acceptconn(&fd)?
    {
        return Err(not_ours("not a listening stream socket"));
    }
    let listener = std::os::unix::net::UnixListener::from(fd);
    if listener.local_addr().is_err() {
        return Err(not_ours("not a Unix socket"));
    }
    Ok(Some(listener))
}

/// Tells the service manager `state` (the `sd_notify(3)` protocol: one
/// datagram to `$NOTIFY_SOCKET`, a path or, with a leading `@`, an
/// abstract name), e.g. `READY=1`. Without `NOTIFY_SOCKET` it does
/// nothing; a failure is logged, never fatal.
pub(crate) fn notify(state: &str) {
    let Some(target) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let sent = std::os::unix::net::UnixDatagram::unbound().and_then(|sock| {
        use std::os::unix::ffi::OsStrExt;
        match target.as_bytes().strip_prefix(b"@") {
            #[cfg(target_os = "linux")]
            Some(name) => {
                use std::os::linux::net::SocketAddrExt;
                let addr = std::os::unix::net::SocketAddr::from_abstract_name(name)?;
                sock.send_to_addr(state.as_bytes(), &addr)
            }
            _ => sock.send_to(state.as_bytes(), Path::new(&target)),
        }
    });
    if let Err(e) = sent {
        tracing::warn!(
            notify_socket = %Path::new(&target).display(),
            error = %e,
            "cannot notify the service manager"
        );
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
    let mut signals = Signals::watch()?;
    let shared = Arc::new(Shared {
        service: service.clone(),
        shutdown: CancellationToken::new(),
        budget: Budget::new(service.config().max_inflight_bytes),
        line_stall: Some(Duration::from_millis(
            service.config().line_stall_timeout_ms,
        )),
        line_min_rate: Some(service.config().line_min_bytes_per_sec),
        worker_slots: Arc::new(Semaphore::new(
            tokio::runtime::Handle::current()
                .metrics()
                .num_workers()
                .saturating_sub(1),
        )),
    });
    let conns = TaskTracker::new();
    // The socket we bind ourselves is ours to remove at shutdown; one the
    // service manager passed belongs to its socket unit and stays.
    let stdio_only = opts.activated.is_none() && opts.socket.is_none();
    let (listener, bound) = match (opts.activated, &opts.socket) {
        (Some(passed), socket) => {
            passed.set_nonblocking(true)?;
            let at = passed.local_addr()?;
            let shown = at
                .as_pathname()
                .map_or_else(|| "(unnamed)".to_string(), |p| p.display().to_string());
            if let Some(p) = socket
                .as_ref()
                .filter(|p| at.as_pathname() != Some(p.as_path()))
            {
                tracing::warn!(
                    socket = %p.display(),
                    "--socket is ignored: the service manager passed a socket"
                );
            }
            tracing::info!(socket = %shown, "listening on the socket the service manager passed (socket activation)");
            (Some(UnixListener::from_std(passed)?), None)
        }
        (None, Some(p)) => {
            let l = bind_socket(p)?;
            tracing::info!(socket = %p.display(), "listening");
            let ino = std::fs::symlink_metadata(p).ok().map(|m| {
                use std::os::unix::fs::MetadataExt;
                (m.dev(), m.ino())
            });
            (Some(l), ino.map(|i| (p.clone(), i)))
        }
        (None, None) => (None, None),
    };
    if let Some(listener) = listener {
        let shared = shared.clone();
        let conns2 = conns.clone();
        let primary = primary.clone();
        conns.spawn(async move {
            accept_loop(listener, shared, conns2, primary).await;
        });
    }
    if opts.stdio {
        let shared2 = shared.clone();
        let primary = primary.clone();
        conns.spawn(async move {
            let ends = StdioEnds::open();
            let restore = ends.restore;
            serve_connection(
                shared2.clone(),
                primary,
                ends.reader,
                ends.writer,
                Transport::Stdio,
                ends.direct,
            )
            .await;
            restore.put_back();
            tracing::debug!("stdio connection ended");
            if stdio_only {
                shared2.shutdown.cancel();
            }
        });
    }
    notify(&format!(
        "READY=1\nSTATUS=serving {} workspace(s)",
        service.registry().all().len()
    ));
    loop {
        tokio::select! {
            () = shared.shutdown.cancelled() => break,
            s = signals.next() => if s == Signal::Hup {
                tracing::info!("SIGHUP: reloading config");
                if let Some(r) = &opts.on_reload { r(); }
            } else {
                tracing::info!("{}: shutting down", s.name());
                shared.shutdown.cancel();
            },
        }
    }
    notify("STOPPING=1");
    conns.close();
    let grace = Duration::from_millis(service.config().shutdown_grace_ms);
    if tokio::time::timeout(grace, conns.wait()).await.is_err() {
        tracing::warn!(
            grace_ms = u64::try_from(grace.as_millis()).unwrap_or(u64::MAX),
            "shutdown grace elapsed with operations still running"
        );
    }
    if let Some((p, ino)) = bound {
        use std::os::unix::fs::MetadataExt;
        // Remove the socket only if it is still ours.
        if let Ok(m) = std::fs::symlink_metadata(&p)
            && (m.dev(), m.ino()) == ino
        {
            let _ = writegate_fs::remove_socket_file(&p);
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
        let peer = stream.peer_cred().map(|c| (c.uid(), c.pid()));
        let transport = match peer {
            Ok((uid, pid)) if uid == me => {
                if crate::sandboxed::peer_in_sandbox(pid) {
                    tracing::debug!(
                        peer_pid = pid.unwrap_or(0),
                        "socket peer inside a writegate run sandbox: no approvals"
                    );
                    Transport::SandboxedSocket
                } else {
                    Transport::Socket
                }
            }
            Ok((uid, _)) => {
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
        };
        // The socket's ends, each registered only for what it waits for
        // (see `writegate_stdio::WriteEnd`), and a handle on the writer's
        // descriptor for direct, non-blocking response writes.
        let (r, w, direct) = match socket_ends(stream) {
            Ok(ends) => ends,
            Err(e) => {
                tracing::warn!(error = %e, "refused socket peer: cannot register the connection");
                continue;
            }
        };
        let shared = shared.clone();
        let primary = primary.clone();
        conns.spawn(async move {
            serve_connection(shared, primary, r, w, transport, direct).await;
        });
    }
}

/// An accepted connection's ends: a reader registered for reading only, a
/// writer registered only while a write would block, and a handle on the
/// writer's descriptor for direct writes: two descriptors in all.
/// Registering the stream for both (tokio's halves) would wake a worker
/// each time the peer reads an answer.
fn socket_ends(
    stream: tokio::net::UnixStream,
) -> io::Result<(
    writegate_stdio::ReadEnd,
    writegate_stdio::WriteEnd,
    Option<NonBlockingFd>,
)> {
    let fd = NonBlockingFd::new(OwnedFd::from(stream.into_std()?))?;
    let direct = Some(fd.share());
    let reader = writegate_stdio::ReadEnd::new(fd.try_clone()?)?;
    Ok((reader, writegate_stdio::WriteEnd::new(fd), direct))
}
