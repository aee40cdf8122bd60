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
//! docs/performance.md, "Wake-ups per answer"). A pipe's write end is the
//! same: the host reading it wakes its writer's poller.
//!
//! [`ReadEnd`] is registered for reading only. [`WriteEnd`] writes with
//! plain non-blocking `write(2)` calls and is registered for writing only
//! while a write would block, until the next flush: a peer that keeps up
//! never makes it register at all.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite, Interest, ReadBuf};

/// The reading end: a non-blocking descriptor (socket or pipe) registered
/// for readability only. `read(2)` returning 0 is end of input.
pub struct ReadEnd {
    fd: AsyncFd<OwnedFd>,
}

impl ReadEnd {
    /// Registers `fd`, which must already be non-blocking, for reading.
    ///
    /// # Errors
    /// The runtime could not register it (no reactor, `epoll_ctl` failed).
    pub fn new(fd: OwnedFd) -> io::Result<ReadEnd> {
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
            match guard.try_io(|fd| {
                rustix::io::read(fd.get_ref(), spare)
                    .map(|(read, _)| read.len())
                    .map_err(io::Error::from)
            }) {
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
                Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
                Ok(Err(e)) => return Poll::Ready(Err(e)),
                // Not readable after all: readiness cleared, poll again.
                Err(_would_block) => {}
            }
        }
    }
}

/// The writing end: `write(2)` on a non-blocking descriptor (socket or
/// pipe), with a registration for writability (on a duplicate) made only
/// when a write would block and dropped at the next flush.
pub struct WriteEnd {
    fd: OwnedFd,
    /// Present while a write has blocked since the last flush.
    waiting: Option<AsyncFd<OwnedFd>>,
    /// A socket: shutdown ends its write direction. A pipe has none (its
    /// peer sees end of input once every write descriptor is closed).
    socket: bool,
}

impl WriteEnd {
    /// A writer over `fd`, which must already be non-blocking; `socket`
    /// says whether [`AsyncWrite::poll_shutdown`] shuts its write direction
    /// down (for a pipe it does nothing).
    pub fn new(fd: OwnedFd, socket: bool) -> WriteEnd {
        WriteEnd {
            fd,
            waiting: None,
            socket,
        }
    }

    /// Whether the writer is registered for writability now (a write
    /// blocked since the last flush); for tests.
    pub fn is_registered(&self) -> bool {
        self.waiting.is_some()
    }
}

/// Registers `fd` with the runtime's reactor for `interest` only.
fn register(fd: OwnedFd, interest: Interest) -> io::Result<AsyncFd<OwnedFd>> {
    // SAFETY: an `OwnedFd` is an open descriptor that stays open, and whose
    // `as_raw_fd` stays the same number, until the `AsyncFd` drops it.
    Ok(unsafe { AsyncFd::register_with_interest(fd, interest) }?)
}

/// One `write(2)`, retried on `EINTR`.
fn write_once(fd: &OwnedFd, buf: &[u8]) -> io::Result<usize> {
    loop {
        match rustix::io::write(fd, buf) {
            Err(rustix::io::Errno::INTR) => {}
            r => return r.map_err(io::Error::from),
        }
    }
}

impl AsyncWrite for WriteEnd {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.waiting.is_none() {
            match write_once(&this.fd, buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // Registering polls the descriptor's state at once, so
                    // space freed since the write above is not missed.
                    let dup = this.fd.as_fd().try_clone_to_owned()?;
                    this.waiting = Some(register(dup, Interest::WRITABLE)?);
                }
                r => return Poll::Ready(r),
            }
        }
        let Some(waiting) = &this.waiting else {
            unreachable!("registered above")
        };
        loop {
            let mut guard = ready!(waiting.poll_write_ready(cx))?;
            match guard.try_io(|fd| write_once(fd.get_ref(), buf)) {
                Ok(r) => return Poll::Ready(r),
                Err(_would_block) => {}
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Every byte accepted went out with its write(2): nothing is
        // buffered here. The peer keeps up again: stop polling for space.
        self.get_mut().waiting = None;
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.waiting = None;
        if this.socket {
            rustix::net::shutdown(&this.fd, rustix::net::Shutdown::Write)?;
        }
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn nonblocking_pair() -> (UnixStream, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        b.set_nonblocking(true).unwrap();
        (a, b)
    }

    #[tokio::test]
    async fn lines_cross_both_ways_and_a_peer_that_keeps_up_never_registers_the_writer() {
        let (a, b) = nonblocking_pair();
        let mut w = WriteEnd::new(OwnedFd::from(a.try_clone().unwrap()), true);
        let mut r = ReadEnd::new(OwnedFd::from(b)).unwrap();
        for k in 0..100u32 {
            let line = format!("line {k}\n");
            w.write_all(line.as_bytes()).await.unwrap();
            w.flush().await.unwrap();
            assert!(!w.is_registered());
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
        let (a, b) = nonblocking_pair();
        let mut w = WriteEnd::new(OwnedFd::from(a), true);
        let mut r = ReadEnd::new(OwnedFd::from(b)).unwrap();
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
        w.flush().await.unwrap();
        assert!(!w.is_registered(), "flush drops the registration");
        w.shutdown().await.unwrap();
        drop(w);
        assert_eq!(reader.await.unwrap(), expect);
    }

    #[tokio::test]
    async fn pipes_work_too_and_the_write_end_closing_is_end_of_input() {
        let (rx, tx) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::NONBLOCK).unwrap();
        let mut w = WriteEnd::new(tx, false);
        let mut r = ReadEnd::new(rx).unwrap();
        w.write_all(b"hello\n").await.unwrap();
        w.shutdown().await.unwrap();
        drop(w);
        let mut got = String::new();
        r.read_to_string(&mut got).await.unwrap();
        assert_eq!(got, "hello\n");
    }
}
