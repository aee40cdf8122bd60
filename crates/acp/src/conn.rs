//! One connection: reads frames, answers each request exactly once
//! (concurrently, in any order), honours `$/cancel_request`, and drains its
//! responses before returning (SPEC 1, 2).

use crate::frame::{Frame, LineCodec};
use crate::jsonrpc::{self, Incoming};
use crate::methods;
use agent_client_protocol_schema::v1::{CancelRequestNotification, RequestId};
use futures::StreamExt;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tokio_util::codec::FramedRead;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use writegate_core::{Runtime, Service};

/// Which transport a connection came over; decides its default runtime and
/// whether `initialize` may pick another workspace (SPEC 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// stdin/stdout of a host that spawned the daemon.
    Stdio,
    /// A same-UID Unix-socket peer.
    Socket,
}

/// State every connection shares: the service, the daemon-wide shutdown
/// token, the in-flight byte budget and the worker slots.
pub struct Shared {
    pub service: Arc<Service>,
    pub shutdown: CancellationToken,
    pub budget: Budget,
    /// How many requests may run on the runtime's own workers at once (see
    /// [`WORKER_LINE_MAX`]); the server gives it one less than the number
    /// of workers, so one worker always stays free for reading, accepting
    /// and signals.
    pub worker_slots: Arc<Semaphore>,
}

/// Longest request line that may run directly on a runtime worker instead
/// of a blocking thread.
///
/// The hand-off to a blocking thread wakes a sleeping thread, which on a
/// small VM costs about as much as the rest of the request's IPC together
/// (a `_writegate/receipt` round trip: ~35 µs on a worker, 60-100 µs through
/// the blocking pool; docs/performance.md). A request runs on the worker
/// that read it only when that is safe to block on for a moment: its line
/// is at most this long (a small write, an edit's parameters, a receipt),
/// no other request of its connection is in flight or already buffered
/// behind it (so the connection's requests still run concurrently: the
/// next one goes to a blocking thread), no path lock is held anywhere in the daemon (so it will not
/// queue behind another write), and a worker slot is free. Everything else
/// goes to the blocking pool as before. Either way the reader task is not
/// blocked: the request is a task of its own.
///
/// What this trades: a request on a worker blocks that worker while it
/// runs. Its line is small, but the operation need not be (an edit of a
/// large file), and between the lock check and its own lock another
/// connection may take the same path, so it can wait behind that write.
/// Either way it holds one of at most `workers - 1` slots, so one worker is
/// always free for reading, accepting and signals.
pub const WORKER_LINE_MAX: usize = 64 * 1024;

/// The daemon-wide budget of request bytes in flight (`max_inflight_bytes`),
/// counted in KiB: a request line longer than [`BUDGET_FREE_LINE`] holds
/// `ceil(len / 1 KiB)` units (at most the whole budget) from the moment it
/// is read until its answer is built. A connection whose line does not fit
/// waits before handling it and reads nothing more meanwhile, so all
/// connections together hold at most the budget plus one waiting line each.
/// Answers are not counted (a small `_writegate/read_lines` can have a large
/// answer); the per-connection [`MAX_OUTSTANDING`] bounds those.
pub struct Budget {
    units: Arc<Semaphore>,
    total: u32,
}

/// Lines at most this long (cancels, receipts, reads, edits' parameters,
/// small writes) never wait for the budget. The semaphore is fair, so a big
/// line queued for it would otherwise hold up every connection's small
/// lines, `$/cancel_request` included; small lines are bounded anyway by
/// [`MAX_OUTSTANDING`] per connection.
pub const BUDGET_FREE_LINE: usize = 4 * 1024;

impl Budget {
    /// A budget of `bytes`, rounded up to whole KiB, at least 1 KiB, at most
    /// what the semaphore can count (2^29 KiB on 32-bit targets).
    pub fn new(bytes: u64) -> Budget {
        let cap = u64::try_from(Semaphore::MAX_PERMITS)
            .unwrap_or(u64::MAX)
            .min(u64::from(u32::MAX));
        let total = u32::try_from(bytes.div_ceil(1024).clamp(1, cap)).unwrap_or(u32::MAX);
        Budget {
            units: Arc::new(Semaphore::new(total as usize)),
            total,
        }
    }

    /// Units a line of `len` bytes costs: 0 up to [`BUDGET_FREE_LINE`],
    /// else whole KiB, at most the whole budget (so an oversized line waits
    /// for an idle daemon instead of forever).
    pub fn cost(&self, len: usize) -> u32 {
        if len <= BUDGET_FREE_LINE {
            return 0;
        }
        u32::try_from(len.div_ceil(1024))
            .unwrap_or(u32::MAX)
            .min(self.total)
    }

    /// Units free right now (for tests and logs).
    pub fn available(&self) -> usize {
        self.units.available_permits()
    }
}

/// Per-connection state.
pub struct Conn {
    pub shared: Arc<Shared>,
    pub transport: Transport,
    runtime: RwLock<Arc<Runtime>>,
    first_seen: AtomicBool,
    inflight: Mutex<HashMap<String, Arc<AtomicBool>>>,
}

impl Conn {
    /// The connection's runtime. If its generation was closed by a reload and
    /// the same root is registered again (trust changed), the connection
    /// moves to the fresh runtime for new requests; requests already holding
    /// the old one fail with `generation_closed`.
    pub fn runtime(&self) -> Arc<Runtime> {
        let current = self.runtime.read().unwrap().clone();
        if current.guard.is_open() {
            return current;
        }
        let fresh = self
            .shared
            .service
            .registry()
            .all()
            .into_iter()
            .find(|r| r.root == current.root);
        match fresh {
            Some(f) => {
                *self.runtime.write().unwrap() = f.clone();
                f
            }
            None => current,
        }
    }

    /// Binds the connection to another runtime (socket `initialize`).
    pub fn set_runtime(&self, rt: Arc<Runtime>) {
        *self.runtime.write().unwrap() = rt;
    }

    /// True only for the first request on this connection.
    pub fn take_first(&self) -> bool {
        !self.first_seen.swap(true, Ordering::SeqCst)
    }

    fn cancel(&self, id: &RequestId) {
        if let Some(flag) = self.inflight.lock().unwrap().get(&id_key(id)) {
            flag.store(true, Ordering::SeqCst);
        }
    }

    fn cancel_all(&self) {
        for flag in self.inflight.lock().unwrap().values() {
            flag.store(true, Ordering::SeqCst);
        }
    }
}

fn id_key(id: &RequestId) -> String {
    serde_json::to_string(id).unwrap_or_default()
}

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
type Queued = (Vec<u8>, Option<OwnedSemaphorePermit>);

/// Lines a connection may have outstanding: read but not yet answered, or
/// answered but not yet written to the peer. At the limit the connection
/// stops reading, so a client that never reads its answers cannot make the
/// daemon buffer without bound.
pub const MAX_OUTSTANDING: usize = 64;

impl Outbox {
    /// Sends one JSON-RPC message as one line; `permit` (the line's share of
    /// [`MAX_OUTSTANDING`]) is released once the line is written.
    pub fn send(&self, msg: &Value, permit: Option<OwnedSemaphorePermit>) {
        let mut line = serde_json::to_vec(msg).unwrap_or_default();
        line.push(b'\n');
        let mut backlog = self.backlog.lock().unwrap();
        if !*backlog && let Some(fd) = &self.direct {
            let mut written = 0;
            while written < line.len() {
                match rustix::io::write(fd, &line[written..]) {
                    Ok(n) => written += n,
                    Err(rustix::io::Errno::INTR) => continue,
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

/// Called by the writer task when its queue is empty: direct writes may
/// resume. Checked under the lock so a line queued meanwhile keeps the
/// backlog on. (The task holds only the flag, never a sender, so the queue
/// closes when the last [`Outbox`] is dropped.)
fn drained(backlog: &Mutex<bool>, rx: &mpsc::UnboundedReceiver<Queued>) {
    let mut b = backlog.lock().unwrap();
    if rx.is_empty() {
        *b = false;
    }
}

/// Serves one connection until end of input or daemon shutdown, then waits
/// for its in-flight requests and flushes their responses. Returns when
/// everything it owed has been written (or the peer is gone).
///
/// `direct`: a duplicate of the connection's (non-blocking) descriptor for
/// direct response writes (see [`Outbox`]); `None` for stdio.
pub async fn serve_connection<R, W>(
    shared: Arc<Shared>,
    primary: Arc<Runtime>,
    reader: R,
    writer: W,
    transport: Transport,
    direct: Option<OwnedFd>,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let max = shared.service.config().max_frame_bytes as usize;
    let (tx, mut rx) = mpsc::unbounded_channel::<Queued>();
    let backlog = Arc::new(Mutex::new(false));
    let out = Arc::new(Outbox {
        direct,
        backlog: backlog.clone(),
        tx,
    });
    let writer_task = {
        tokio::spawn(async move {
            let mut w = BufWriter::new(writer);
            while let Some((line, permit)) = rx.recv().await {
                if w.write_all(&line).await.is_err() {
                    break;
                }
                drop(permit);
                if rx.is_empty() {
                    if w.flush().await.is_err() {
                        break;
                    }
                    drained(&backlog, &rx);
                }
            }
            let _ = w.flush().await;
        })
    };
    let conn = Arc::new(Conn {
        shared: shared.clone(),
        transport,
        runtime: RwLock::new(primary),
        first_seen: AtomicBool::new(false),
        inflight: Mutex::new(HashMap::new()),
    });
    let requests = TaskTracker::new();
    let mut frames = FramedRead::new(reader, LineCodec::new(max));
    let permits = Arc::new(Semaphore::new(MAX_OUTSTANDING));
    loop {
        // Backpressure: no permit, no read.
        let permit = tokio::select! {
            _ = shared.shutdown.cancelled() => break,
            p = permits.clone().acquire_owned() => match p {
                Ok(p) => p,
                Err(_) => break,
            },
        };
        let next = tokio::select! {
            _ = shared.shutdown.cancelled() => break,
            next = frames.next() => next,
        };
        match next {
            None => break,
            Some(Err(e)) => {
                tracing::warn!(error = %e, "connection read failed");
                break;
            }
            Some(Ok(Frame::TooLong)) => {
                out.send(
                    &jsonrpc::error(
                        &RequestId::Null,
                        jsonrpc::INVALID_REQUEST,
                        "frame too long",
                        Some(json!(format!(
                            "a line may hold at most {max} bytes (max_frame_bytes)"
                        ))),
                    ),
                    Some(permit),
                );
            }
            Some(Ok(Frame::Line(line))) => {
                let cost = shared.budget.cost(line.len());
                // At shutdown the line is handled without budget: it is
                // answered -32800 at once (its cancel flag starts set).
                let held = if cost == 0 {
                    None
                } else {
                    tokio::select! {
                        biased;
                        p = shared.budget.units.clone().acquire_many_owned(cost) => p.ok(),
                        _ = shared.shutdown.cancelled() => None,
                    }
                };
                // Another whole line already read: this request is not alone
                // (see WORKER_LINE_MAX).
                let more = memchr::memchr(b'\n', frames.read_buffer()).is_some();
                on_line(&conn, &line, &out, &requests, permit, held, more);
            }
        }
    }
    if shared.shutdown.is_cancelled() {
        // Anything that has not begun to commit is answered -32800.
        conn.cancel_all();
    }
    requests.close();
    requests.wait().await;
    // The last sender goes with the outbox; the writer task then drains and ends.
    drop(out);
    let _ = writer_task.await;
}

/// Handles one line. `permit` is its share of [`MAX_OUTSTANDING`] (released
/// once the answer is written); `held` its share of the daemon's
/// [`Budget`] (released once the answer is built); `more` says whether
/// another complete line is already buffered behind it.
fn on_line(
    conn: &Arc<Conn>,
    line: &[u8],
    out: &Arc<Outbox>,
    requests: &TaskTracker,
    permit: OwnedSemaphorePermit,
    held: Option<OwnedSemaphorePermit>,
    more: bool,
) {
    match jsonrpc::classify(line) {
        Incoming::Error(v) => out.send(&v, Some(permit)),
        Incoming::Ignored => {}
        Incoming::Notification { method, params } => {
            if method == "$/cancel_request" {
                match serde_json::from_value::<CancelRequestNotification>(params) {
                    Ok(n) => conn.cancel(&n.request_id),
                    Err(e) => tracing::debug!(error = %e, "ignoring malformed $/cancel_request"),
                }
            }
        }
        Incoming::Request { id, method, params } => {
            let first = conn.take_first();
            if method == "initialize" {
                out.send(
                    &methods::initialize(conn, &id, &params, first),
                    Some(permit),
                );
                return;
            }
            let flag = Arc::new(AtomicBool::new(conn.shared.shutdown.is_cancelled()));
            let alone = {
                let mut inflight = conn.inflight.lock().unwrap_or_else(|p| p.into_inner());
                inflight.insert(id_key(&id), flag.clone());
                inflight.len() == 1
            };
            let slot = if alone
                && !more
                && line.len() <= WORKER_LINE_MAX
                && conn.shared.service.live_locks() == 0
            {
                conn.shared.worker_slots.clone().try_acquire_owned().ok()
            } else {
                None
            };
            let conn = conn.clone();
            let out = out.clone();
            // Whoever runs the request also writes its answer. A panic
            // anywhere in the method (not only inside a file operation,
            // which `methods::run` already catches) is still answered once,
            // and the request still leaves the in-flight map.
            let answer = move || {
                let key = id_key(&id);
                let response = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    methods::dispatch(&conn, &id, &method, params, flag)
                }))
                .unwrap_or_else(|_| {
                    tracing::error!(method = %method, "request panicked");
                    methods::internal_error(&id)
                });
                drop(held);
                conn.inflight
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&key);
                out.send(&response, Some(permit));
            };
            match slot {
                // A task of its own on this worker (see WORKER_LINE_MAX).
                Some(slot) => {
                    requests.spawn(async move {
                        answer();
                        drop(slot);
                    });
                }
                None => {
                    requests.spawn_blocking(answer);
                }
            }
        }
    }
}
