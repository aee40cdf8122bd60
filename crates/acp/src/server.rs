//! The daemon's edges (SPEC 1): the stdio connection, the Unix-socket
//! listener with its peer-UID check, signals (SIGTERM/SIGINT shut down
//! gracefully, SIGHUP reloads), and the shutdown sequence.

use crate::budget::Budget;
use crate::conn::Shared;
use crate::serve::serve_connection;
use crate::transport::Transport;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
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
            let ends = StdioEnds::open();
            serve_connection(
                shared2.clone(),
                primary,
                ends.reader,
                ends.writer,
                Transport::Stdio,
                ends.direct,
            )
            .await;
            restore_flags(ends.restore);
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

/// Size the stdin pipe is enlarged to (the unprivileged maximum by
/// default): a 5 MiB request then crosses in a few pipe-fulls instead of
/// 80 (each one a wake-up of the reader and of the writing host).
const STDIN_PIPE_BYTES: usize = 1024 * 1024;

/// The stdio connection's ends. A pipe or socket on stdin/stdout is read
/// and written through duplicates of its descriptor registered with the
/// runtime (non-blocking), not through tokio's `stdin()`/`stdout()`, which
/// hand every read and write to a blocking thread (one thread hand-off per
/// pipe-full: thousands for a 5 MiB write, issue 12). Anything else (a
/// file, a terminal, `/dev/null`) keeps tokio's.
struct StdioEnds {
    reader: Box<dyn AsyncRead + Unpin + Send>,
    writer: Box<dyn AsyncWrite + Unpin + Send>,
    /// A duplicate of stdout for direct answer writes (see `Outbox`).
    direct: Option<OwnedFd>,
    /// Descriptors whose file status flags were changed (made
    /// non-blocking), with the flags to put back when the connection ends:
    /// the open file description may be shared with the process that
    /// spawned us.
    restore: Vec<(OwnedFd, rustix::fs::OFlags)>,
}

/// What a standard descriptor is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum StdKind {
    Pipe,
    Socket,
    Other,
}

fn std_kind(fd: BorrowedFd<'_>) -> StdKind {
    match rustix::fs::fstat(fd).map(|st| rustix::fs::FileType::from_raw_mode(st.st_mode)) {
        Ok(rustix::fs::FileType::Fifo) => StdKind::Pipe,
        Ok(rustix::fs::FileType::Socket) => StdKind::Socket,
        _ => StdKind::Other,
    }
}

/// `(dev, ino)` of what `fd` refers to.
fn identity(fd: BorrowedFd<'_>) -> Option<(u64, u64)> {
    rustix::fs::fstat(fd).ok().map(|st| (st.st_dev, st.st_ino))
}

impl StdioEnds {
    fn open() -> StdioEnds {
        let mut restore = Vec::new();
        let reader: Box<dyn AsyncRead + Unpin + Send> =
            match registered_reader(rustix::stdio::stdin(), &mut restore) {
                Ok(Some(r)) => r,
                Ok(None) => Box::new(tokio::io::stdin()),
                Err(e) => {
                    tracing::debug!(error = %e, "stdin read through tokio's stdin");
                    Box::new(tokio::io::stdin())
                }
            };
        let stdout = rustix::stdio::stdout();
        // Never make stdout non-blocking when stderr is the same pipe or
        // socket: log lines would then fail with EAGAIN.
        let shared_with_stderr =
            identity(stdout).is_some() && identity(stdout) == identity(rustix::stdio::stderr());
        let (writer, direct) = if shared_with_stderr {
            (None, None)
        } else {
            match registered_writer(stdout, &mut restore) {
                Ok(Some((w, d))) => (Some(w), d),
                Ok(None) => (None, None),
                Err(e) => {
                    tracing::debug!(error = %e, "stdout written through tokio's stdout");
                    (None, None)
                }
            }
        };
        let writer = writer.unwrap_or_else(|| Box::new(tokio::io::stdout()));
        StdioEnds {
            reader,
            writer,
            direct,
            restore,
        }
    }
}

/// A reader over a duplicate of `fd` when it is a pipe (enlarged to
/// [`STDIN_PIPE_BYTES`] where allowed) or a socket; `None` otherwise.
fn registered_reader(
    fd: BorrowedFd<'_>,
    restore: &mut Vec<(OwnedFd, rustix::fs::OFlags)>,
) -> io::Result<Option<Box<dyn AsyncRead + Unpin + Send>>> {
    let kind = std_kind(fd);
    if kind == StdKind::Other {
        return Ok(None);
    }
    let flags = rustix::fs::fcntl_getfl(fd)?;
    let dup = rustix::io::fcntl_dupfd_cloexec(fd, 0)?;
    restore.push((rustix::io::fcntl_dupfd_cloexec(fd, 0)?, flags));
    if kind == StdKind::Socket {
        let s = std::os::unix::net::UnixStream::from(dup);
        s.set_nonblocking(true)?;
        return Ok(Some(Box::new(tokio::net::UnixStream::from_std(s)?)));
    }
    if rustix::pipe::fcntl_getpipe_size(&dup).is_ok_and(|n| n < STDIN_PIPE_BYTES) {
        let _ = rustix::pipe::fcntl_setpipe_size(&dup, STDIN_PIPE_BYTES);
    }
    Ok(Some(Box::new(
        tokio::net::unix::pipe::Receiver::from_owned_fd(dup)?,
    )))
}

/// A writer over a duplicate of `fd` when it is a pipe or a socket, and
/// another duplicate for direct writes; `None` otherwise.
#[allow(clippy::type_complexity)] // a writer and a descriptor, once
fn registered_writer(
    fd: BorrowedFd<'_>,
    restore: &mut Vec<(OwnedFd, rustix::fs::OFlags)>,
) -> io::Result<Option<(Box<dyn AsyncWrite + Unpin + Send>, Option<OwnedFd>)>> {
    let kind = std_kind(fd);
    if kind == StdKind::Other {
        return Ok(None);
    }
    let flags = rustix::fs::fcntl_getfl(fd)?;
    let dup = rustix::io::fcntl_dupfd_cloexec(fd, 0)?;
    let direct = rustix::io::fcntl_dupfd_cloexec(fd, 0)?;
    restore.push((rustix::io::fcntl_dupfd_cloexec(fd, 0)?, flags));
    let writer: Box<dyn AsyncWrite + Unpin + Send> = if kind == StdKind::Socket {
        let s = std::os::unix::net::UnixStream::from(dup);
        s.set_nonblocking(true)?;
        Box::new(tokio::net::UnixStream::from_std(s)?)
    } else {
        Box::new(tokio::net::unix::pipe::Sender::from_owned_fd(dup)?)
    };
    Ok(Some((writer, Some(direct))))
}

/// Puts back the file status flags [`StdioEnds`] changed.
fn restore_flags(restore: Vec<(OwnedFd, rustix::fs::OFlags)>) {
    for (fd, flags) in restore {
        let _ = rustix::fs::fcntl_setfl(&fd, flags);
    }
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
