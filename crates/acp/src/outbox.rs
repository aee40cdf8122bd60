//! The write side of a connection: whole lines, written directly when the
//! peer keeps up, else through the connection's writer task, which writes
//! them with `writegate_stdio::lines::LineWriter` (the line writer under
//! every front end). Both paths apply the writer's one enlarge-once
//! policy, so an output pipe is enlarged before the first large answer
//! whichever path writes it.

use std::sync::{Arc, Mutex};
use tokio::io::AsyncWrite;
use tokio::sync::{OwnedSemaphorePermit, mpsc};
use tokio::task::JoinHandle;
use writegate_stdio::NonBlockingFd;
use writegate_stdio::lines::{EnlargeOnce, LineWriter};

/// The write side of a connection. A response is written straight from the
/// thread that produced it with one non-blocking `write(2)` on the
/// connection's write descriptor when nothing is queued (no hop back to the
/// async runtime, which is most of a small write's overhead); whatever does
/// not fit, and every later response until the queue drains, goes through
/// the connection's async writer task. Each line is written whole by one of
/// the two paths, never interleaved. Without a descriptor (a stdout that
/// is not a pipe or socket of its own) every line goes through the task.
/// Before a direct write of a large line the descriptor's pipe is
/// enlarged, by the policy the task's `LineWriter` applies to its own.
pub(crate) struct Outbox {
    state: Arc<Mutex<OutState>>,
    tx: mpsc::UnboundedSender<Queued>,
}

/// What an [`Outbox`] and its connection's writer task share.
struct OutState {
    /// The descriptor for direct writes (dropped at [`Outbox::close`], so
    /// the peer sees end of input once the writer task is done).
    direct: Option<NonBlockingFd>,
    /// The writer task's enlarge-once policy, for the direct writes.
    enlarge: EnlargeOnce,
    /// True while the writer task holds queued bytes: direct writes wait
    /// their turn in the queue.
    backlog: bool,
    /// Lines held back by [`Outbox::send_held`], written before anything
    /// else is.
    held: Vec<u8>,
}

/// Bytes [`Outbox::send_held`] holds back before it writes them anyway.
const HOLD_MAX: usize = 64 * 1024;

/// A line waiting for the writer task, with the connection's permit for it
/// (released once the line is written).
type Queued = (Vec<u8>, Option<OwnedSemaphorePermit>);

/// Lines a connection may have outstanding: read but not yet answered, or
/// answered but not yet written to the peer. At the limit the connection
/// stops reading, so a client that never reads its answers cannot make the
/// daemon buffer without bound.
pub(crate) const MAX_OUTSTANDING: usize = 64;

impl Outbox {
    /// The write side of a new connection over `writer`, and its writer
    /// task: `direct` is a handle on the writer's (non-blocking)
    /// descriptor for direct writes, `None` when there is none. The task
    /// ends once the output is closed ([`Outbox::close`]), the peer is
    /// gone, or every `Outbox` is dropped and what they sent is written.
    pub(crate) fn open<W>(writer: W, direct: Option<NonBlockingFd>) -> (Outbox, JoinHandle<()>)
    where
        W: AsyncWrite + Unpin + Send + 'static,
    {
        let (tx, rx) = mpsc::unbounded_channel::<Queued>();
        let lines = LineWriter::new(writer, direct.as_ref().map(NonBlockingFd::share));
        let state = Arc::new(Mutex::new(OutState {
            direct,
            enlarge: lines.enlarge_once(),
            backlog: false,
            held: Vec::new(),
        }));
        let task = tokio::spawn(write_queued(lines, rx, state.clone()));
        (Outbox { state, tx }, task)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, OutState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sends one `\n`-terminated line (a whole JSON-RPC message), after
    /// any held ones; `permit` (the line's share of [`MAX_OUTSTANDING`]) is
    /// released once the line is written.
    pub(crate) fn send(&self, line: Vec<u8>, permit: Option<OwnedSemaphorePermit>) {
        let mut st = self.lock();
        self.send_locked(&mut st, line, permit);
    }

    /// Holds one `\n`-terminated line back to write it together with the
    /// next ones: it goes out with the next [`Outbox::send`], at
    /// [`Outbox::flush`], or once 64 KiB are held. Without a
    /// direct descriptor, or behind a backlog, it is simply sent (the
    /// writer task batches lines itself).
    pub(crate) fn send_held(&self, line: Vec<u8>) {
        let mut st = self.lock();
        if st.backlog || st.direct.is_none() {
            return self.send_locked(&mut st, line, None);
        }
        if st.held.is_empty() {
            st.held = line;
        } else {
            st.held.extend_from_slice(&line);
        }
        if st.held.len() >= HOLD_MAX {
            let held = std::mem::take(&mut st.held);
            self.send_locked(&mut st, held, None);
        }
    }

    /// Writes the lines [`Outbox::send_held`] holds, if any.
    pub(crate) fn flush(&self) {
        let mut st = self.lock();
        if !st.held.is_empty() {
            let held = std::mem::take(&mut st.held);
            self.send_locked(&mut st, held, None);
        }
    }

    fn send_locked(
        &self,
        st: &mut OutState,
        mut line: Vec<u8>,
        permit: Option<OwnedSemaphorePermit>,
    ) {
        if !st.held.is_empty() {
            let mut all = std::mem::take(&mut st.held);
            all.extend_from_slice(&line);
            line = all;
        }
        if !st.backlog
            && let Some(fd) = &st.direct
        {
            st.enlarge.before_line(fd, line.len());
            let mut written = 0;
            while written < line.len() {
                match fd.write(&line[written..]) {
                    Ok(n) => written += n,
                    Err(_) => break, // EAGAIN (full) or a broken peer: the task takes over
                }
            }
            if written == line.len() {
                return;
            }
            line.drain(..written);
        }
        st.backlog = true;
        let _ = self.tx.send((line, permit));
    }
}

impl Outbox {
    /// Ends the output after the lines already sent: queues the end marker
    /// (an empty line, which [`Outbox::send`] never sends: every line ends
    /// in `\n`) for the writer task, which then shuts the writer down. The
    /// backlog flag stays set, so no direct write can overtake the marker,
    /// and later lines find the queue closed and are dropped.
    pub(crate) fn close(&self) {
        let mut st = self.lock();
        st.backlog = true;
        st.direct = None;
        if !st.held.is_empty() {
            let _ = self.tx.send((std::mem::take(&mut st.held), None));
        }
        let _ = self.tx.send((Vec::new(), None));
    }
}

/// The connection's writer task: writes the queued lines in order,
/// flushing whenever the queue is empty (then direct writes may resume,
/// [`drained`]), until the end marker of [`Outbox::close`] (the writer is
/// shut down), a write fails, or the queue closes.
async fn write_queued<W: AsyncWrite + Unpin>(
    mut lines: LineWriter<W>,
    mut rx: mpsc::UnboundedReceiver<Queued>,
    state: Arc<Mutex<OutState>>,
) {
    while let Some((line, permit)) = rx.recv().await {
        if line.is_empty() {
            // Outbox::close: nothing more to write; end the output.
            let _ = lines.shutdown().await;
            break;
        }
        if lines.write_line(&[line]).await.is_err() {
            break;
        }
        drop(permit);
        if rx.is_empty() {
            if lines.flush().await.is_err() {
                break;
            }
            drained(&state, &rx);
        }
    }
    let _ = lines.flush().await;
}

/// Called by the writer task when its queue is empty: direct writes may
/// resume. Checked under the lock so a line queued meanwhile keeps the
/// backlog on. (The task holds only the flag, never a sender, so the queue
/// closes when the last [`Outbox`] is dropped.)
fn drained(state: &Mutex<OutState>, rx: &mpsc::UnboundedReceiver<Queued>) {
    let mut st = state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if rx.is_empty() {
        st.backlog = false;
    }
}
