//! The editor's end: this process's stdin and stdout as non-blocking
//! async IO when they are pipes or sockets (how editors spawn an agent),
//! so reading and writing them costs a system call each instead of a trip
//! through tokio's blocking pool (`tokio::io::stdin`/`stdout` hand every
//! read and write to a blocking thread, which made each forwarded line
//! several times dearer; docs/performance.md, "The proxy"). A terminal, a
//! file, or a stdout that is also stderr falls back to tokio's own handles.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use tokio::io::{AsyncRead, AsyncWrite};

/// The editor's input.
pub(crate) type EditorIn = Box<dyn AsyncRead + Unpin + Send>;
/// The editor's output.
pub(crate) type EditorOut = Box<dyn AsyncWrite + Unpin + Send>;

/// This process's stdin and stdout as the editor's connection.
pub(crate) fn editor_io() -> (EditorIn, EditorOut) {
    let input: EditorIn = match dup(&io::stdin()).and_then(reader) {
        Some(r) => r,
        None => Box::new(tokio::io::stdin()),
    };
    // Non-blocking mode belongs to the open file, which stderr may share
    // (`2>&1`): the agent inherits stderr and may not expect it.
    let output: EditorOut = match dup(&io::stdout())
        .filter(|out| !same_file(out, &io::stderr()))
        .and_then(writer)
    {
        Some(w) => w,
        None => Box::new(tokio::io::stdout()),
    };
    (input, output)
}

/// What kind of file a descriptor is.
enum Kind {
    Fifo,
    Socket,
    Other,
}

fn kind(fd: &OwnedFd) -> Kind {
    match rustix::fs::fstat(fd).map(|st| rustix::fs::FileType::from_raw_mode(st.st_mode)) {
        Ok(rustix::fs::FileType::Fifo) => Kind::Fifo,
        Ok(rustix::fs::FileType::Socket) => Kind::Socket,
        _ => Kind::Other,
    }
}

/// Whether two descriptors are the same pipe, socket or file.
fn same_file(a: &impl AsFd, b: &impl AsFd) -> bool {
    match (rustix::fs::fstat(a), rustix::fs::fstat(b)) {
        (Ok(x), Ok(y)) => x.st_dev == y.st_dev && x.st_ino == y.st_ino,
        _ => true,
    }
}

fn dup(f: &impl AsFd) -> Option<OwnedFd> {
    f.as_fd().try_clone_to_owned().ok()
}

fn reader(fd: OwnedFd) -> Option<EditorIn> {
    match kind(&fd) {
        Kind::Fifo => tokio::net::unix::pipe::Receiver::from_owned_fd(fd)
            .ok()
            .map(|r| Box::new(r) as EditorIn),
        Kind::Socket => socket(fd).map(|s| Box::new(s) as EditorIn),
        Kind::Other => None,
    }
}

fn writer(fd: OwnedFd) -> Option<EditorOut> {
    match kind(&fd) {
        Kind::Fifo => tokio::net::unix::pipe::Sender::from_owned_fd(fd)
            .ok()
            .map(|w| Box::new(w) as EditorOut),
        Kind::Socket => socket(fd).map(|s| Box::new(s) as EditorOut),
        Kind::Other => None,
    }
}

/// A Unix socket (what libuv-based editors give their children) as a
/// non-blocking stream used in one direction.
fn socket(fd: OwnedFd) -> Option<tokio::net::UnixStream> {
    let s = std::os::unix::net::UnixStream::from(fd);
    s.set_nonblocking(true).ok()?;
    tokio::net::UnixStream::from_std(s).ok()
}
