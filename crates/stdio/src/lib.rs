//! A connection's ends over descriptors: how `serve --stdio` talks to the
//! host that spawned it, how `writegate proxy` talks to its editor, how
//! `writegate mcp` talks to its client, and how the daemon reads and
//! writes an accepted socket. A pipe or socket is read and written through
//! descriptors registered with the runtime, not through tokio's
//! `stdin()`/`stdout()`, which hand every read and write to a blocking
//! thread, and without changing a flag of a description the host shares
//! ([`NonBlockingFd`], [`StdioEnds`]). A stdin pipe is enlarged. Each end
//! is registered only for what it waits for ([`ReadEnd`], [`WriteEnd`]).
//!
//! [`lines`] is the one bounded line reader every front end frames its
//! input with (ACP's connection loop, MCP's transport), and the one line
//! writer under their output (`lines::LineWriter`: whole lines from
//! pieces, an output pipe enlarged before the first large line). [`run`]
//! is what they share about running a call: the inline threshold and the
//! signals that stop them.
//!
//! This crate moves bytes and splits them into lines; it never decides
//! what to write, never parses anything, and knows no protocol: the front
//! ends parse.

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use tokio::io::{AsyncRead, AsyncWrite};

mod ends;
pub mod lines;
pub mod run;
pub mod sandboxed;
pub use ends::{NonBlockingFd, ReadEnd, WriteEnd};

/// Size the stdin pipe is enlarged to (the unprivileged maximum by
/// default): a 5 MiB request then crosses in a few pipe-fulls instead of
/// 80 (each one a wake-up of the reader and of the writing host).
pub const STDIN_PIPE_BYTES: usize = 1024 * 1024;

/// Enlarges the pipe `fd` to [`STDIN_PIPE_BYTES`] when it is smaller (a
/// socket, or a pipe the kernel will not enlarge, stays as it is). An
/// output pipe is enlarged before its first large line
/// ([`lines::EnlargeOnce`]), not at start: each enlarged pipe takes its
/// size from the user's pipe quota (`/proc/sys/fs/pipe-user-pages-soft`,
/// 64 MiB by default), past which every new pipe of the user's is small.
pub fn enlarge_pipe(fd: &NonBlockingFd) {
    if !fd.is_socket() && rustix::pipe::fcntl_getpipe_size(fd).is_ok_and(|n| n < STDIN_PIPE_BYTES) {
        let _ = rustix::pipe::fcntl_setpipe_size(fd, STDIN_PIPE_BYTES);
    }
}

/// The stdio connection's ends. A pipe or socket on stdin/stdout is read
/// and written through descriptors registered with the runtime, not
/// through tokio's `stdin()`/`stdout()`, which hand every read and write
/// to a blocking thread (one thread hand-off per pipe-full: thousands for a
/// 5 MiB write, ADR 0007). Anything else (a file, a terminal, `/dev/null`)
/// keeps tokio's.
///
/// The open file descriptions behind stdin and stdout are shared with the
/// process that spawned us, and `O_NONBLOCK` is a flag of the description:
/// set on it, the parent (a shell, an editor) would find its own reads and
/// writes failing with `EAGAIN`, for as long as we run and for good if we
/// are killed. So no flag of a shared description is changed: a socket is
/// read and written with `MSG_DONTWAIT` ([`NonBlockingFd`]), and a pipe is
/// reopened through `/proc/self/fd/N`, which gives a description of its own
/// that is made non-blocking. Only when a pipe cannot be reopened (a named
/// FIFO on stdin, no `/proc`, a pipe of another user) is the shared
/// description made non-blocking, recorded in [`StdioEnds::restore`] to be
/// put back (not after SIGKILL), and then never for a pipe that is also
/// stderr's (log lines would fail).
pub struct StdioEnds {
    /// Reads the peer's lines.
    pub reader: Box<dyn AsyncRead + Unpin + Send>,
    /// Writes lines to the peer.
    pub writer: Box<dyn AsyncWrite + Unpin + Send>,
    /// Another handle on the writer's descriptor
    /// ([`NonBlockingFd::share`]) for direct, non-blocking line writes (the
    /// ACP front end's outbox writes whole lines with it when it can);
    /// `None` when stdout is not a pipe or socket.
    pub direct: Option<NonBlockingFd>,
    /// The file status flags to put back when the connection ends (empty
    /// unless a pipe could not be reopened).
    pub restore: Restore,
}

/// Descriptors whose file status flags were changed (made non-blocking),
/// with the flags they had: the open file description may be shared with
/// the process that spawned us, which must get it back as it was.
pub struct Restore(Vec<(OwnedFd, rustix::fs::OFlags)>);

impl Restore {
    /// Puts the flags back (call it once the connection has ended), last
    /// change first: when stdin and stdout are one pipe description, the
    /// flags recorded first are the ones it had before either was changed,
    /// and they are the ones left.
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
        let reader = match nonblocking_end(rustix::stdio::stdin(), Side::Read, &mut restore) {
            Ok(Some(fd)) => {
                enlarge_pipe(&fd);
                ReadEnd::new(fd)
                    .map_err(|e| {
                        // tokio's blocking stdin needs the flags it had.
                        Restore(std::mem::take(&mut restore)).put_back();
                        tracing::debug!(error = %e, "stdin read through tokio's stdin");
                    })
                    .ok()
            }
            Ok(None) => None,
            Err(e) => {
                tracing::debug!(error = %e, "stdin read through tokio's stdin");
                None
            }
        };
        let reader: Box<dyn AsyncRead + Unpin + Send> = match reader {
            Some(r) => Box::new(r),
            None => Box::new(tokio::io::stdin()),
        };
        let (writer, direct) =
            match nonblocking_end(rustix::stdio::stdout(), Side::Write, &mut restore) {
                Ok(Some(fd)) => {
                    let direct = Some(fd.share());
                    let writer: Box<dyn AsyncWrite + Unpin + Send> = Box::new(WriteEnd::new(fd));
                    (writer, direct)
                }
                Ok(None) => (
                    Box::new(tokio::io::stdout()) as Box<dyn AsyncWrite + Unpin + Send>,
                    None,
                ),
                Err(e) => {
                    tracing::debug!(error = %e, "stdout written through tokio's stdout");
                    (Box::new(tokio::io::stdout()) as _, None)
                }
            };
        StdioEnds {
            reader,
            writer,
            direct,
            restore: Restore(restore),
        }
    }
}

/// Which way a standard descriptor carries the connection.
#[derive(Clone, Copy)]
enum Side {
    Read,
    Write,
}

/// A non-blocking end over standard descriptor `fd` when it is a pipe or a
/// socket (`None` otherwise), changing no flag of a shared description if
/// it can help it (see [`StdioEnds`]). A flag it did change is recorded in
/// `restore`.
fn nonblocking_end(
    fd: BorrowedFd<'_>,
    side: Side,
    restore: &mut Vec<(OwnedFd, rustix::fs::OFlags)>,
) -> io::Result<Option<NonBlockingFd>> {
    match std_kind(fd) {
        StdKind::Other => Ok(None),
        StdKind::Socket => Ok(Some(NonBlockingFd::new(rustix::io::fcntl_dupfd_cloexec(
            fd, 0,
        )?)?)),
        StdKind::Pipe => match reopen(fd, side) {
            Ok(own) => Ok(Some(NonBlockingFd::new(own)?)),
            Err(e) => {
                tracing::debug!(error = %e, "pipe not reopened; its shared description is made non-blocking");
                shared_nonblocking(fd, restore).map(Some)
            }
        },
    }
}

/// Opens the pipe `fd` refers to anew through `/proc/self/fd`, with a
/// description of its own (non-blocking, close-on-exec), and checks it is
/// the same pipe. Not a named FIFO to read: a FIFO opened for reading
/// while it has no writer never reports their hang-up on the new
/// description, so end of input would never come (a FIFO's write side is
/// fine: it still learns that the reader left). Not a descriptor open the
/// other way (that would open the pipe's other side).
fn reopen(fd: BorrowedFd<'_>, side: Side) -> io::Result<OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    let (access, usable) = match side {
        Side::Read => (OFlags::RDONLY, [OFlags::RDONLY, OFlags::RDWR]),
        Side::Write => (OFlags::WRONLY, [OFlags::WRONLY, OFlags::RDWR]),
    };
    let mode = rustix::fs::fcntl_getfl(fd)? & OFlags::ACCMODE;
    if !usable.contains(&mode) {
        return Err(io::Error::other("open the other way"));
    }
    let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd));
    let target = std::fs::read_link(&path)?;
    let anonymous = target.as_os_str().as_encoded_bytes().starts_with(b"pipe:");
    if !anonymous && matches!(side, Side::Read) {
        return Err(io::Error::other("a named FIFO to read"));
    }
    let own = rustix::fs::open(
        path.as_str(),
        access | OFlags::NONBLOCK | OFlags::CLOEXEC | OFlags::NOCTTY,
        Mode::empty(),
    )?;
    if identity(own.as_fd()) != identity(fd) {
        return Err(io::Error::other("reopened something else"));
    }
    Ok(own)
}

/// The fallback for a pipe that cannot be reopened: its shared
/// description is made non-blocking (recorded in `restore`), unless it is
/// stderr's too: then log lines would fail with `EAGAIN`, so it keeps
/// tokio's handles.
fn shared_nonblocking(
    fd: BorrowedFd<'_>,
    restore: &mut Vec<(OwnedFd, rustix::fs::OFlags)>,
) -> io::Result<NonBlockingFd> {
    let stderr = identity(rustix::stdio::stderr());
    if stderr.is_some() && identity(fd) == stderr {
        return Err(io::Error::other("the pipe is stderr's too"));
    }
    let flags = rustix::fs::fcntl_getfl(fd)?;
    let dup = rustix::io::fcntl_dupfd_cloexec(fd, 0)?;
    restore.push((rustix::io::fcntl_dupfd_cloexec(fd, 0)?, flags));
    NonBlockingFd::own(dup).inspect_err(|_| {
        if let Some((fd, flags)) = restore.pop() {
            let _ = rustix::fs::fcntl_setfl(&fd, flags);
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn nonblocking(fd: &impl AsFd) -> bool {
        rustix::fs::fcntl_getfl(fd)
            .unwrap()
            .contains(rustix::fs::OFlags::NONBLOCK)
    }

    #[test]
    fn a_reopened_pipe_is_the_same_pipe_with_a_description_of_its_own() {
        let (r, w) = rustix::pipe::pipe().unwrap();
        let own = reopen(r.as_fd(), Side::Read).unwrap();
        assert_eq!(identity(own.as_fd()), identity(r.as_fd()));
        assert!(nonblocking(&own) && !nonblocking(&r));
        std::fs::File::from(w).write_all(b"through\n").unwrap();
        let mut got = [0u8; 8];
        std::fs::File::from(own).read_exact(&mut got).unwrap();
        assert_eq!(&got, b"through\n");
        let (_r, w) = rustix::pipe::pipe().unwrap();
        let own = reopen(w.as_fd(), Side::Write).unwrap();
        assert!(nonblocking(&own) && !nonblocking(&w));
    }

    #[test]
    fn a_named_fifo_or_a_pipe_open_the_other_way_is_not_reopened() {
        let d = std::env::temp_dir().join(format!("wg-fifo-{}", std::process::id()));
        let _ = std::fs::remove_file(&d);
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &d,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
        )
        .unwrap();
        let r = rustix::fs::open(
            &d,
            rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::NONBLOCK,
            rustix::fs::Mode::empty(),
        )
        .unwrap();
        let why = |r: io::Result<OwnedFd>| r.unwrap_err().to_string();
        assert_eq!(why(reopen(r.as_fd(), Side::Read)), "a named FIFO to read");
        // Its write side is reopened (the reader's leaving still shows).
        let w =
            rustix::fs::open(&d, rustix::fs::OFlags::WRONLY, rustix::fs::Mode::empty()).unwrap();
        let own = reopen(w.as_fd(), Side::Write).unwrap();
        assert!(nonblocking(&own) && !nonblocking(&w));
        std::fs::remove_file(&d).unwrap();
        let (r, w) = rustix::pipe::pipe().unwrap();
        assert_eq!(why(reopen(w.as_fd(), Side::Read)), "open the other way");
        assert_eq!(why(reopen(r.as_fd(), Side::Write)), "open the other way");
    }

    #[test]
    fn the_fallback_records_the_flags_it_changed_and_puts_them_back() {
        let (r, _w) = rustix::pipe::pipe().unwrap();
        let mut restore = Vec::new();
        let nb = shared_nonblocking(r.as_fd(), &mut restore).unwrap();
        assert!(!nb.is_socket());
        assert!(nonblocking(&r), "the shared description changed");
        Restore(restore).put_back();
        assert!(!nonblocking(&r), "and got its flags back");
    }
}
