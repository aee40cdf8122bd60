//! The write side of a connection: whole lines, written directly when the
//! peer keeps up, else through the connection's writer task.

use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use tokio::sync::{OwnedSemaphorePermit, mpsc};

/// The write side of a connection. A response is written straight from the
/// thread that produced it with one non-blocking `write(2)` on a duplicate
/// of the socket's descriptor when nothing is queued (no hop back to the
/// async runtime, which is most of a small write's overhead); whatever does
/// not fit, and every later response until the queue drains, goes through
/// the connection's async writer task. Each line is written whole by one of
/// the two paths, never interleaved. Without a descriptor (stdio) every
/// response goes through the task.
pub struct Outbox {
    direct: Option<OwnedFd>,
    /// True while the writer task holds queued bytes: direct writes wait
    /// their turn in the queue.
    backlog: Arc<Mutex<bool>>,
    tx: mpsc::UnboundedSender<Queued>,
}

/// A line waiting for the writer task, with the connection's permit for it
/// (released once the line is written).
pub(crate) type Queued = (Vec<u8>, Option<OwnedSemaphorePermit>);

/// Lines a connection may have outstanding: read but not yet answered, or
/// answered but not yet written to the peer. At the limit the connection
/// stops reading, so a client that never reads its answers cannot make the
/// daemon buffer without bound.
pub const MAX_OUTSTANDING: usize = 64;

impl Outbox {
    /// A new outbox: `direct` is a duplicate of the connection's
    /// (non-blocking) descriptor for direct writes, `None` for stdio; `tx`
    /// feeds the writer task, which clears `backlog` through [`drained`].
    pub(crate) fn new(
        direct: Option<OwnedFd>,
        backlog: Arc<Mutex<bool>>,
        tx: mpsc::UnboundedSender<Queued>,
    ) -> Outbox {
        Outbox {
            direct,
            backlog,
            tx,
        }
    }

    /// Sends one `\n`-terminated line (a whole JSON-RPC message); `permit`
    /// (the line's share of [`MAX_OUTSTANDING`]) is released once the line
    /// is written.
    pub fn send(&self, mut line: Vec<u8>, permit: Option<OwnedSemaphorePermit>) {
        let mut backlog = self
            .backlog
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !*backlog && let Some(fd) = &self.direct {
            let mut written = 0;
            while written < line.len() {
                match rustix::io::write(fd, &line[written..]) {
                    Ok(n) => written += n,
                    Err(rustix::io::Errno::INTR) => {}
                    Err(_) => break, // EAGAIN (full) or a broken peer: the task takes over
                }
            }
            if written == line.len() {
                return;
            }
            line.drain(..written);
        }
        *backlog = true;
        let _ = self.tx.send((line, permit));
    }
}

impl Outbox {
    /// Ends the output after the lines already sent: queues the end marker
    /// (an empty line, which [`Outbox::send`] never sends: every line ends
    /// in `\n`) for the writer task, which then shuts the writer down. The
    /// backlog flag stays set, so no direct write can overtake the marker,
    /// and later lines find the queue closed and are dropped.
    pub fn close(&self) {
        let mut backlog = self
            .backlog
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *backlog = true;
        let _ = self.tx.send((Vec::new(), None));
    }
}

/// Called by the writer task when its queue is empty: direct writes may
/// resume. Checked under the lock so a line queued meanwhile keeps the
/// backlog on. (The task holds only the flag, never a sender, so the queue
/// closes when the last [`Outbox`] is dropped.)
pub(crate) fn drained(backlog: &Mutex<bool>, rx: &mpsc::UnboundedReceiver<Queued>) {
    let mut b = backlog
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if rx.is_empty() {
        *b = false;
    }
}
