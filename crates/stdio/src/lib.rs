//! A connection's ends over descriptors: how `serve --stdio` talks to the
//! host that spawned it, how `writegate proxy` talks to its editor, how
//! `writegate mcp` talks to its client, and how the daemon reads and
//! writes an accepted socket. A pipe or socket is read and written through
//! duplicates of its descriptor registered with the runtime, not through
//! tokio's `stdin()`/`stdout()`, which hand every read and write to a
//! blocking thread; the descriptors' flags are put back afterwards. A stdin
//! pipe is enlarged. Each end is registered only for what it waits for
//! ([`ReadEnd`], [`WriteEnd`]).
//!
//! This crate moves bytes it is given and hands over the bytes it reads;
//! it never decides what to read or write, never parses anything, and
//! knows no protocol: the front ends frame and parse.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use tokio::io::{AsyncRead, AsyncWrite};

mod ends;
pub use ends::{ReadEnd, WriteEnd};

/// Size the stdin pipe is enlarged to (the unprivileged maximum by
/// default): a 5 MiB request then crosses in a few pipe-fulls instead of
/// 80 (each one a wake-up of the reader and of the writing host).
pub const STDIN_PIPE_BYTES: usize = 1024 * 1024;

/// The stdio connection's ends. A pipe or socket on stdin/stdout is read
/// and written through duplicates of its descriptor registered with the
/// runtime (non-blocking), not through tokio's `stdin()`/`stdout()`, which
/// hand every read and write to a blocking thread (one thread hand-off per
/// pipe-full: thousands for a 5 MiB write, issue 12). Anything else (a
/// file, a terminal, `/dev/null`) keeps tokio's.
pub struct StdioEnds {
    /// Reads the peer's lines.
    pub reader: Box<dyn AsyncRead + Unpin + Send>,
    /// Writes lines to the peer.
    pub writer: Box<dyn AsyncWrite + Unpin + Send>,
    /// A duplicate of stdout for direct, non-blocking line writes (the ACP
    /// front end's outbox writes whole lines with it when it can); `None`
    /// when stdout is not a pipe or socket of its own.
    pub direct: Option<OwnedFd>,
    /// The file status flags to put back when the connection ends.
    pub restore: Restore,
}

/// Descriptors whose file status flags were changed (made non-blocking),
/// with the flags they had: the open file description may be shared with
/// the process that spawned us, which must get it back as it was.
pub struct Restore(Vec<(OwnedFd, rustix::fs::OFlags)>);

impl Restore {
    /// Puts the flags back (call it once the connection has ended), last
    /// change first: when stdin and stdout are one socket, the flags
    /// recorded first are the ones it had before either was changed, and
    /// they are the ones left.
    pub fn put_back(self) {
        for (fd, flags) in self.0.into_iter().rev() {
            let _ = rustix::fs::fcntl_setfl(&fd, flags);
        }
    }
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
    /// This process's stdin and stdout as a connection's ends. Never
    /// fails: whatever cannot be registered keeps tokio's handles.
    pub fn open() -> StdioEnds {
        let mut restore = Vec::new();
        // O_NONBLOCK is a flag of the open file description, which a
        // descriptor shares with every duplicate: one that is stderr's
        // pipe or socket too (inetd, systemd `Accept=yes`, `socat` with
        // stderr) stays blocking, or log lines would fail with EAGAIN.
        let stderr = identity(rustix::stdio::stderr());
        let shares_stderr = |fd: BorrowedFd<'_>| stderr.is_some() && identity(fd) == stderr;
        let stdin = rustix::stdio::stdin();
        let reader = if shares_stderr(stdin) {
            None
        } else {
            let mark = restore.len();
            match registered_reader(stdin, &mut restore) {
                Ok(r) => r,
                Err(e) => {
                    Restore(restore.split_off(mark)).put_back();
                    tracing::debug!(error = %e, "stdin read through tokio's stdin");
                    None
                }
            }
        };
        let reader = reader.unwrap_or_else(|| Box::new(tokio::io::stdin()));
        let stdout = rustix::stdio::stdout();
        let (writer, direct) = if shares_stderr(stdout) {
            (None, None)
        } else {
            let mark = restore.len();
            match registered_writer(stdout, &mut restore) {
                Ok(Some((w, d))) => (Some(w), d),
                Ok(None) => (None, None),
                Err(e) => {
                    Restore(restore.split_off(mark)).put_back();
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
            restore: Restore(restore),
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
    rustix::fs::fcntl_setfl(&dup, flags | rustix::fs::OFlags::NONBLOCK)?;
    if kind == StdKind::Pipe
        && rustix::pipe::fcntl_getpipe_size(&dup).is_ok_and(|n| n < STDIN_PIPE_BYTES)
    {
        let _ = rustix::pipe::fcntl_setpipe_size(&dup, STDIN_PIPE_BYTES);
    }
    Ok(Some(Box::new(ReadEnd::new(dup)?)))
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
    rustix::fs::fcntl_setfl(&dup, flags | rustix::fs::OFlags::NONBLOCK)?;
    let writer = WriteEnd::new(dup, kind == StdKind::Socket);
    Ok(Some((Box::new(writer), Some(direct))))
}
