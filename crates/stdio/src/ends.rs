//! One connection's two ends over non-blocking descriptors, each registered
//! with the runtime only for what it waits for.
//!
//! tokio's `UnixStream` (and its halves) registers the socket for reading
//! and writing at once. Every time the peer reads an answer, the socket's
//! send space grows and the kernel wakes whoever polls it for writing, so a
//! daemon whose socket is registered that way is woken once per answer for
//! nothing: no task waits to write (answers go out with a direct
//! `write(2)`), yet a runtime worker leaves `epoll_wait`, which on a small
//! VM means an inter-processor interrupt and a vCPU waking from halt (see
//! docs/decisions/0007-connection-ends.md). A pipe's write end is the
//! same: the host reading it wakes its writer's poller.
//!
//! [`ReadEnd`] is registered for reading only. [`WriteEnd`] writes with
//! plain non-blocking calls and is registered for writing only from a
//! write that would block until the next flush: a peer that keeps up never
//! makes it register at all.
//!
//! Both work on a [`NonBlockingFd`], which never blocks whatever the flags
//! of the open file description it refers to: a socket is read and written
//! with `MSG_DONTWAIT`, so a description shared with the process that
//! spawned us (stdin, stdout) never has its flags changed.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

/// A descriptor read and written without ever blocking: a socket, whose
/// every `recv`/`send` passes `MSG_DONTWAIT` (and `MSG_NOSIGNAL`), whatever
/// its description's flags; or anything else whose open file description
/// is `O_NONBLOCK` (a pipe reopened through `/proc/self/fd`, a pipe this
/// process created).
///
/// [`NonBlockingFd::share`] gives another handle on the same descriptor
/// (no `dup`): a connection's writer and its direct writes use one
/// descriptor, closed when the last handle goes.
#[derive(Debug)]
pub struct NonBlockingFd {
    fd: std::sync::Arc<OwnedFd>,
    socket: bool,
}

impl NonBlockingFd {
    /// Wraps `fd`: a stream socket as it is, anything else only when its
    /// description is already `O_NONBLOCK`.
    ///
    /// # Errors
    /// `fstat`, `getsockopt` or `fcntl` failed; `fd` is a socket but not a
    /// stream (`InvalidInput`: a datagram or packet socket is read a
    /// message at a time, so a short read does not mean it is empty, and
    /// [`ReadEnd`] would wait with messages queued); or it is not a socket
    /// and would block (`InvalidInput`: set `O_NONBLOCK` on a description
    /// of your own first).
    pub fn new(fd: OwnedFd) -> io::Result<NonBlockingFd> {
        let st = rustix::fs::fstat(&fd)?;
        if rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Socket {
            if rustix::net::sockopt::socket_type(&fd)? != rustix::net::SocketType::STREAM {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "a socket that is not a stream",
                ));
            }
            return Ok(NonBlockingFd {
                fd: fd.into(),
                socket: true,
            });
        }
        if !rustix::fs::fcntl_getfl(&fd)?.contains(rustix::fs::OFlags::NONBLOCK) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "descriptor would block: not a socket and not O_NONBLOCK",
            ));
        }
        Ok(NonBlockingFd {
            fd: fd.into(),
            socket: false,
        })
    }

    /// Wraps `fd` after making its description `O_NONBLOCK`. The flag is
    /// the description's, so every holder sees it: use this on a
    /// description no other process uses (a pipe this process created and
    /// whose other end it gave away), or record its old flags to put back
    /// ([`crate::Restore`], the stdio fallback).
    ///
    /// # Errors
    /// `fcntl` failed.
    pub fn own(fd: OwnedFd) -> io::Result<NonBlockingFd> {
        let flags = rustix::fs::fcntl_getfl(&fd)?;
        rustix::fs::fcntl_setfl(&fd, flags | rustix::fs::OFlags::NONBLOCK)?;
        NonBlockingFd::new(fd)
    }

    /// Whether it is a socket.
    pub fn is_socket(&self) -> bool {
        self.socket
    }

    /// One `read(2)` (`recv` with `MSG_DONTWAIT` for a socket) into `buf`;
    /// returns how many bytes it initialised. `EINTR` is retried;
    /// `WouldBlock` when nothing is there.
    ///
    /// # Errors
    /// The system call's error.
    pub fn read(&self, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
        loop {
            let r = if self.socket {
                rustix::net::recv(&*self.fd, &mut *buf, rustix::net::RecvFlags::DONTWAIT)
                    .map(|((read, _), _)| read.len())
            } else {
                rustix::io::read(&*self.fd, &mut *buf).map(|(read, _)| read.len())
            };
            match r {
                Err(rustix::io::Errno::INTR) => {}
                r => return r.map_err(io::Error::from),
            }
        }
    }

    /// One `write(2)` (`send` with `MSG_DONTWAIT | MSG_NOSIGNAL` for a
    /// socket) of `buf`; returns how many bytes went. `EINTR` is retried;
    /// `WouldBlock` when there is no room.
    ///
    /// # Errors
    /// The system call's error (`BrokenPipe` once the peer is gone).
    pub fn write(&self, buf: &[u8]) -> io::Result<usize> {
        loop {
            let r = if self.socket {
                rustix::net::send(
                    &*self.fd,
                    buf,
                    rustix::net::SendFlags::DONTWAIT | rustix::net::SendFlags::NOSIGNAL,
                )
            } else {
                rustix::io::write(&*self.fd, buf)
            };
            match r {
                Err(rustix::io::Errno::INTR) => {}
                r => return r.map_err(io::Error::from),
            }
        }
    }

    /// A duplicate (close-on-exec) that behaves the same: another
    /// descriptor number, as a second registration with the same epoll
    /// instance needs (a reader and a writer of one socket).
    ///
    /// # Errors
    /// `dup` failed (out of descriptors).
    pub fn try_clone(&self) -> io::Result<NonBlockingFd> {
        Ok(NonBlockingFd {
            fd: rustix::io::fcntl_dupfd_cloexec(&*self.fd, 0)?.into(),
            socket: self.socket,
        })
    }

    /// Another handle on this very descriptor (no new descriptor): for
    /// direct writes beside a [`WriteEnd`] that owns it.
    #[must_use]
    pub fn share(&self) -> NonBlockingFd {
        NonBlockingFd {
            fd: self.fd.clone(),
            socket: self.socket,
        }
    }
}

impl AsFd for NonBlockingFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl AsRawFd for NonBlockingFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// The reading end: a [`NonBlockingFd`] (socket or pipe) registered for
/// readability only. A read of 0 bytes is end of input.
pub struct ReadEnd {
    fd: AsyncFd<NonBlockingFd>,
}

impl ReadEnd {
    /// Registers `fd` for reading.
    ///
    /// # Errors
    /// The runtime could not register it (no reactor, `epoll_ctl` failed).
    pub fn new(fd: NonBlockingFd) -> io::Result<ReadEnd> {
        Ok(ReadEnd {
            fd: register(fd, Interest::READABLE)?,
        })
    }
}

impl AsyncRead for ReadEnd {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            let mut guard = ready!(self.fd.poll_read_ready(cx))?;
            // SAFETY: `read(2)` only writes into the slice; the bytes it
            // reports as read are initialised, and only those are marked
            // so below.
            let spare: &mut [MaybeUninit<u8>] = unsafe { buf.unfilled_mut() };
            let asked = spare.len();
            match guard.try_io(|fd| fd.get_ref().read(spare)) {
                Ok(Ok(n)) => {
                    // A short read emptied the descriptor: the next read
                    // waits for the next edge instead of asking the kernel
                    // for an EAGAIN first (tokio's own streams do the same).
                    if n > 0 && n < asked {
                        guard.clear_ready();
                    }
                    // SAFETY: `read(2)` initialised the first `n` bytes.
                    unsafe { buf.assume_init(n) };
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                // Not readable after all: readiness cleared, poll again.
                Err(_would_block) => {}
            }
        }
    }
}

/// The writing end: non-blocking writes on a [`NonBlockingFd`] (socket or
/// pipe), registered for writability only from a write that would block
/// until the next flush. The descriptor itself is registered (no
/// duplicate), so waiting needs no new descriptor and cannot fail for want
/// of one. Shutting it down ends a socket's write direction; a pipe has
/// none (its peer sees end of input once every write descriptor is
/// closed).
pub struct WriteEnd {
    state: WriteState,
}

enum WriteState {
    /// Written directly; not registered.
    Plain(NonBlockingFd),
    /// A write blocked since the last flush: registered for writability.
    Waiting(AsyncFd<NonBlockingFd>),
    /// Only while moving between the two (a registration that fails hands
    /// the descriptor back).
    Moving,
}

impl WriteEnd {
    /// A writer over `fd`.
    pub fn new(fd: NonBlockingFd) -> WriteEnd {
        WriteEnd {
            state: WriteState::Plain(fd),
        }
    }

    /// Whether the writer is registered for writability now (a write
    /// blocked since the last flush).
    #[cfg(test)]
    fn is_registered(&self) -> bool {
        matches!(self.state, WriteState::Waiting(_))
    }

    /// Back to direct writes, deregistered.
    fn settle(&mut self) {
        if let WriteState::Waiting(_) = self.state {
            let WriteState::Waiting(a) = std::mem::replace(&mut self.state, WriteState::Moving)
            else {
                unreachable!("matched above")
            };
            self.state = WriteState::Plain(a.into_inner());
        }
    }
}

/// Registers `fd` with the runtime's reactor for `interest` only; on
/// failure the descriptor comes back with the error.
#[allow(clippy::result_large_err)] // the descriptor must come back
fn register_or_return(
    fd: NonBlockingFd,
    interest: Interest,
) -> Result<AsyncFd<NonBlockingFd>, (NonBlockingFd, io::Error)> {
    // SAFETY: a `NonBlockingFd` holds its descriptor open (it and every
    // handle `share` gave keep it), and its `as_raw_fd` stays the same
    // number, until the `AsyncFd` drops it or gives it back.
    unsafe { AsyncFd::register_with_interest(fd, interest) }
        .map_err(tokio::io::unix::AsyncFdRegisterError::into_parts)
}

/// Registers `fd` with the runtime's reactor for `interest` only.
fn register(fd: NonBlockingFd, interest: Interest) -> io::Result<AsyncFd<NonBlockingFd>> {
    register_or_return(fd, interest).map_err(|(_, e)| e)
}

impl AsyncWrite for WriteEnd {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            match &this.state {
                WriteState::Plain(fd) => match fd.write(buf) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        let WriteState::Plain(fd) =
                            std::mem::replace(&mut this.state, WriteState::Moving)
                        else {
                            unreachable!("matched above")
                        };
                        // Registering polls the descriptor's state at
                        // once, so space freed since the write above is
                        // not missed.
                        match register_or_return(fd, Interest::WRITABLE) {
                            Ok(a) => this.state = WriteState::Waiting(a),
                            Err((fd, e)) => {
                                this.state = WriteState::Plain(fd);
                                return Poll::Ready(Err(e));
                            }
                        }
                    }
                    r => return Poll::Ready(r),
                },
                WriteState::Waiting(a) => {
                    let mut guard = ready!(a.poll_write_ready(cx))?;
                    if let Ok(r) = guard.try_io(|fd| fd.get_ref().write(buf)) {
                        return Poll::Ready(r);
                    }
                }
                WriteState::Moving => {
                    return Poll::Ready(Err(io::Error::other("writer without its descriptor")));
                }
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Every byte accepted went out with its write(2): nothing is
        // buffered here. The peer keeps up again: stop polling for space.
        self.get_mut().settle();
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.settle();
        match &this.state {
            WriteState::Plain(fd) if fd.is_socket() => {
                rustix::net::shutdown(fd, rustix::net::Shutdown::Write)?;
            }
            WriteState::Plain(_) => {}
            WriteState::Waiting(_) | WriteState::Moving => {
                return Poll::Ready(Err(io::Error::other("writer without its descriptor")));
            }
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::{UnixDatagram, UnixStream};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A socket pair left blocking: the ends must not block anyway.
    fn blocking_pair() -> (NonBlockingFd, NonBlockingFd) {
        let (a, b) = UnixStream::pair().unwrap();
        (
            NonBlockingFd::new(OwnedFd::from(a)).unwrap(),
            NonBlockingFd::new(OwnedFd::from(b)).unwrap(),
        )
    }

    fn is_nonblocking(fd: &impl AsFd) -> bool {
        rustix::fs::fcntl_getfl(fd)
            .unwrap()
            .contains(rustix::fs::OFlags::NONBLOCK)
    }

    #[tokio::test]
    async fn lines_cross_both_ways_and_a_peer_that_keeps_up_never_registers_the_writer() {
        let (a, b) = blocking_pair();
        let mut w = WriteEnd::new(a);
        let mut r = ReadEnd::new(b).unwrap();
        for k in 0..100u32 {
            let line = format!("line {k}\n");
            w.write_all(line.as_bytes()).await.unwrap();
            assert!(!w.is_registered(), "a write that did not block registered");
            w.flush().await.unwrap();
            let mut got = vec![0u8; line.len()];
            r.read_exact(&mut got).await.unwrap();
            assert_eq!(got, line.as_bytes());
        }
        w.shutdown().await.unwrap();
        let mut rest = Vec::new();
        r.read_to_end(&mut rest).await.unwrap();
        assert!(rest.is_empty(), "end of input after shutdown");
    }

    #[tokio::test]
    async fn a_write_larger_than_the_socket_buffer_waits_for_the_reader_and_loses_nothing() {
        let (a, b) = blocking_pair();
        let watch = a.try_clone().unwrap();
        let mut w = WriteEnd::new(a);
        let mut r = ReadEnd::new(b).unwrap();
        let big: Vec<u8> = (0..8 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
        let expect = big.clone();
        let reader = tokio::spawn(async move {
            // Start late, so the writer fills the buffer and must wait.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            let mut got = Vec::new();
            r.read_to_end(&mut got).await.unwrap();
            got
        });
        w.write_all(&big).await.unwrap();
        assert!(w.is_registered(), "the write blocked, so it registered");
        assert!(!is_nonblocking(&watch), "the socket's flags are untouched");
        w.flush().await.unwrap();
        assert!(!w.is_registered(), "flush drops the registration");
        w.shutdown().await.unwrap();
        drop(w);
        assert_eq!(reader.await.unwrap(), expect);
    }

    /// A write that blocks while the process has no descriptor left still
    /// waits and delivers every byte: waiting registers the writer's own
    /// descriptor, never a new one (a duplicate made then failed with
    /// EMFILE and ended the connection's output). Runs in
    /// a child process of this test binary, since it uses up the process's
    /// descriptors.
    #[test]
    fn a_blocked_write_needs_no_new_descriptor() {
        if std::env::var_os("WG_STDIO_EMFILE_CHILD").is_some() {
            return emfile_child();
        }
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "ends::tests::a_blocked_write_needs_no_new_descriptor",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("WG_STDIO_EMFILE_CHILD", "1")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("EMFILE-CHILD-OK"),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[allow(clippy::print_stdout)] // the parent looks for the marker
    fn emfile_child() {
        use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
        // A low soft limit, so using it up is quick.
        let max = getrlimit(Resource::Nofile).maximum;
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(256),
                maximum: max,
            },
        )
        .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let (a, b) = blocking_pair();
            let mut w = WriteEnd::new(a);
            let mut r = ReadEnd::new(b).unwrap();
            let mut hog = Vec::new();
            loop {
                match rustix::fs::open(
                    "/dev/null",
                    rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
                    rustix::fs::Mode::empty(),
                ) {
                    Ok(fd) => hog.push(fd),
                    Err(rustix::io::Errno::MFILE) => break,
                    Err(e) => panic!("{e}"),
                }
            }
            assert!(
                rustix::io::fcntl_dupfd_cloexec(&hog[0], 0).is_err(),
                "no descriptor left"
            );
            let big: Vec<u8> = (0..8 * 1024 * 1024u32).map(|i| (i % 253) as u8).collect();
            let writer = async {
                w.write_all(&big).await.unwrap();
                assert!(w.is_registered(), "the write blocked");
                w.flush().await.unwrap();
                w.shutdown().await.unwrap();
            };
            let reader = async {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                let mut got = Vec::new();
                r.read_to_end(&mut got).await.unwrap();
                got
            };
            let ((), got) = tokio::join!(writer, reader);
            assert!(got == big, "{} of {} bytes", got.len(), big.len());
            drop(hog);
        });
        println!("EMFILE-CHILD-OK");
    }

    #[tokio::test]
    async fn pipes_work_too_and_the_write_end_closing_is_end_of_input() {
        let (rx, tx) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::NONBLOCK).unwrap();
        let mut w = WriteEnd::new(NonBlockingFd::new(tx).unwrap());
        let mut r = ReadEnd::new(NonBlockingFd::new(rx).unwrap()).unwrap();
        w.write_all(b"hello\n").await.unwrap();
        w.shutdown().await.unwrap();
        drop(w);
        let mut got = String::new();
        r.read_to_string(&mut got).await.unwrap();
        assert_eq!(got, "hello\n");
    }

    #[test]
    fn a_socket_that_is_not_a_stream_is_refused() {
        let (a, _b) = UnixDatagram::pair().unwrap();
        let e = NonBlockingFd::new(OwnedFd::from(a)).unwrap_err();
        assert_eq!(e.to_string(), "a socket that is not a stream");
    }

    #[test]
    fn a_blocking_pipe_is_refused() {
        let (rx, _tx) = rustix::pipe::pipe().unwrap();
        let e = NonBlockingFd::new(rx).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
