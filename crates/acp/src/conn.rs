//! One connection's loop, whatever it serves: reads lines (with the line
//! limit, the per-connection `MAX_OUTSTANDING` and the daemon-wide
//! [`Budget`]), parses each into a typed message, hands requests and
//! notifications to a [`Handler`], matches responses against the
//! connection's own outgoing requests (`Outgoing`) and gives the rest to
//! the handler, and drains everything it owes before returning.
//!
//! `serve` (answer ACP itself, `Serve`) and a proxy are two
//! handlers over this one loop.

use crate::budget::{Budget, PARTIAL_FREE};
use crate::message::{
    self, ErrorObject, Incoming, Message, Notification, Parsed, RawNotification, RawRequest,
    Request, Response,
};
use crate::outbox::{MAX_OUTSTANDING, Outbox};
use crate::outgoing::Outgoing;
use agent_client_protocol::v1::schema::RequestId;
use serde::Serialize;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use writegate_core::Service;
use writegate_jsonscan::{Checked, StringsAhead};
use writegate_stdio::NonBlockingFd;
use writegate_stdio::lines::{Frame, LineReader, READ_CHUNK, READ_MAX};

/// The most a long line's buffer is presized to (`max_frame_bytes` and
/// its `\r\n` up to this): a larger limit still works, its buffer doubling
/// past this size as before.
const PRESIZE_MAX: usize = 64 * 1024 * 1024;

/// How long a line under a fresh reservation may go before the
/// [`Shared::line_min_rate`] floor applies.
pub const LINE_RATE_GRACE: Duration = Duration::from_secs(1);

/// State every connection shares: the service, the daemon-wide shutdown
/// token, the in-flight byte budget and the worker slots.
pub struct Shared {
    /// The service.
    pub service: Arc<Service>,
    /// Cancelled at shutdown.
    pub shutdown: CancellationToken,
    /// The in-flight byte budget.
    pub budget: Budget,
    /// How long a connection may hold a [`Budget::reservation`] for a long
    /// line without a byte arriving (`line_stall_timeout_ms`): then the
    /// reservation is released and the connection closed, so a peer that
    /// stops in the middle of a long line cannot keep other connections'
    /// long lines waiting. `None`: no limit (the proxy, whose two sides
    /// each have a budget of their own, shared with no one).
    pub line_stall: Option<Duration>,
    /// The slowest a long line may arrive under a reservation, in bytes a
    /// second (`line_min_bytes_per_sec`), after [`LINE_RATE_GRACE`]: a
    /// line whose bytes since the reservation fall behind it loses the
    /// reservation and its connection, as a stalled one does, so peers
    /// that trickle a byte every few seconds cannot hold the budget's room
    /// either. `None`: no floor (with `line_stall` `None`, the proxy).
    pub line_min_rate: Option<u64>,
    /// How many requests may run on the runtime's own workers at once (see
    /// `writegate_stdio::run::INLINE_MAX`); the server gives it one less
    /// than the number of workers, so one worker always stays free for
    /// reading, accepting and signals.
    pub worker_slots: Arc<Semaphore>,
}

/// What a line read costs until it is answered: its share of
/// `MAX_OUTSTANDING` (released once the answer is written) and of the
/// daemon's [`Budget`] (released once the answer is built).
pub struct Ticket {
    permit: OwnedSemaphorePermit,
    held: Option<OwnedSemaphorePermit>,
    /// Another whole line is already buffered behind this one.
    pub more: bool,
    /// The line's length in bytes.
    pub len: usize,
}

impl Ticket {
    /// Releases the budget share (the answer is built; only its writing is
    /// left).
    pub fn built(&mut self) {
        self.held = None;
    }
}

/// A connection's outward side: sends lines, sends requests of its own and
/// gets their answers, and runs tasks the loop waits for before it ends.
pub struct Link {
    /// The shared daemon state.
    pub shared: Arc<Shared>,
    out: Outbox,
    outgoing: Outgoing,
    tasks: TaskTracker,
}

impl Link {
    /// Answers a request: `line` is its response line; the ticket's
    /// permits are released.
    pub fn answer(&self, line: Vec<u8>, ticket: Ticket) {
        let Ticket { permit, held, .. } = ticket;
        drop(held);
        self.out.send(line, Some(permit));
    }

    /// Sends a line that answers nothing (a notification, a forwarded
    /// message).
    pub fn send(&self, line: Vec<u8>) {
        self.out.send(line, None);
    }

    /// Sends a line that answers nothing and may wait to be written with
    /// the next ones (one system call for a batch of forwarded lines read
    /// together): it goes out with the next line sent any other way, at
    /// [`Link::flush`], or once 64 KiB are held. Whoever holds lines back
    /// flushes them when its batch ends ([`Handler::batch_end`]).
    pub fn send_held(&self, line: Vec<u8>) {
        self.out.send_held(line);
    }

    /// Writes the lines [`Link::send_held`] held back.
    pub fn flush(&self) {
        self.out.flush();
    }

    /// Sends a request of this side's own, with an id that cannot collide
    /// with the peer's; the receiver gets its `result` or `error`, or is
    /// closed when the connection ends first.
    pub fn request<P: Serialize>(
        &self,
        method: &str,
        params: &P,
    ) -> (
        RequestId,
        oneshot::Receiver<Result<serde_json::Value, ErrorObject>>,
    ) {
        let (id, rx) = self.outgoing.register();
        self.out
            .send(message::request_line(&id, method, params), None);
        (id, rx)
    }

    /// Ends this side's output: the lines already sent are written and
    /// flushed, then the writer is shut down and dropped, so the peer reads
    /// end of input (a proxy closes its agent's stdin this way). Lines sent
    /// after it are dropped. Reading goes on until the peer closes its side.
    pub fn close(&self) {
        self.out.close();
    }

    /// Stops waiting for an outgoing request (its answer, if it comes, is
    /// handed to the handler as not ours).
    pub fn forget(&self, id: &RequestId) {
        self.outgoing.forget(id);
    }

    /// The tasks the connection waits for before it ends.
    pub fn tasks(&self) -> &TaskTracker {
        &self.tasks
    }
}

/// What a connection does with the messages it reads.
pub trait Handler: Send + Sync + 'static {
    /// The connection's link exists and nothing has been read yet (a proxy
    /// keeps it to forward the other side's messages here).
    fn started(&self, _link: &Arc<Link>) {}

    /// The loop stopped reading (end of input, a read error, or daemon
    /// shutdown): nothing more will be handed over. Called once, before the
    /// loop waits for the connection's tasks. A proxy closes the other
    /// side's input here.
    fn input_ended(&self, _link: &Arc<Link>) {}

    /// A request: answer it exactly once, through [`Link::answer`] with
    /// `ticket` (now or from a task). `raw` is the line as read.
    fn request(&self, link: &Arc<Link>, req: Request, raw: &[u8], ticket: Ticket);

    /// A well-formed request with its params still unparsed (the loop
    /// hands every request here first). By default the params are parsed
    /// into a `Value` and the request goes to [`Handler::request`] (a line
    /// whose params turn out malformed is answered here, as the loop would
    /// have). A handler that deserializes params into its own types
    /// overrides this to skip the intermediate `Value` (a whole file can
    /// travel in params); it must then answer exactly once too.
    fn raw_request(&self, link: &Arc<Link>, req: RawRequest, ticket: Ticket) {
        let line = req.params.line_bytes();
        match req.into_request() {
            Ok(r) => self.request(link, r, &line, ticket),
            Err(m) => link.answer(message::error_line(&m.id, &m.error), ticket),
        }
    }

    /// A notification (never answered). `raw` is the line as read.
    fn notification(&self, link: &Arc<Link>, n: Notification, raw: &[u8]);

    /// A well-formed notification with its params still unparsed (the loop
    /// hands every such notification here first). By default the params
    /// are parsed into a `Value` and it goes to [`Handler::notification`].
    /// A proxy overrides this to forward the line as read, building
    /// nothing (ADR 0011).
    fn raw_notification(&self, link: &Arc<Link>, n: RawNotification) {
        let line = n.params.line_bytes();
        if let Some(n) = n.into_notification() {
            self.notification(link, n, &line);
        }
    }

    /// A response to none of this side's own requests. Dropped by default.
    fn response(&self, _link: &Arc<Link>, _r: Response, _raw: &[u8]) {}

    /// The loop has handed over every line it had read and is about to
    /// wait (for input, or for a permit), or stops reading: whatever the
    /// handler held back for the batch ([`Link::send_held`]) must go now.
    fn batch_end(&self, _link: &Arc<Link>) {}

    /// The loop stops reading because the daemon shuts down: cancel what
    /// has not begun to commit.
    fn shutdown(&self) {}
}

/// Serves one connection with `handler` until end of input or daemon
/// shutdown, then waits for its tasks and flushes their output. Returns
/// when everything it owed has been written (or the peer is gone) and no
/// one holds its [`Link`] any more (the writer ends with the last one).
///
/// `direct`: a handle on the connection's (non-blocking) write descriptor
/// for direct response writes (see `Outbox`); `None` when there is none
/// (stdout a terminal or a file).
pub async fn run_connection<H, R, W>(
    shared: Arc<Shared>,
    handler: Arc<H>,
    reader: R,
    writer: W,
    direct: Option<NonBlockingFd>,
) where
    H: Handler,
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let max = usize::try_from(shared.service.config().max_frame_bytes).unwrap_or(usize::MAX);
    let (out, writer_task) = Outbox::open(writer, direct);
    let link = Arc::new(Link {
        shared: shared.clone(),
        out,
        outgoing: Outgoing::new(),
        tasks: TaskTracker::new(),
    });
    handler.started(&link);
    let mut input = LineReader::new(reader, max);
    // Budget held for the long line being read (see `Budget`).
    let mut reserved: Option<OwnedSemaphorePermit> = None;
    // When the reservation was taken and how much of the line was buffered
    // then (the rate floor counts the bytes since).
    let mut reserved_at: Option<(Instant, usize)> = None;
    let permits = Arc::new(Semaphore::new(MAX_OUTSTANDING));
    // The peer stopped sending a long line (see `Shared::line_stall`).
    let mut stalled_out = false;
    // The long line arriving, its strings checked so far.
    let mut ahead: Option<StringsAhead> = None;
    'lines: loop {
        // Backpressure: no permit, no read.
        let permit = if let Ok(p) = permits.clone().try_acquire_owned() {
            p
        } else {
            handler.batch_end(&link);
            tokio::select! {
                () = shared.shutdown.cancelled() => break,
                p = permits.clone().acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => break,
                },
            }
        };
        let frame = loop {
            if let Some(frame) = input.next_buffered() {
                break frame;
            }
            handler.batch_end(&link);
            if input.at_eof() {
                break 'lines;
            }
            // A long line is read on only with budget for all of it.
            if reserved.is_none() && input.partial() >= PARTIAL_FREE {
                let units = shared.budget.reservation(max);
                reserved = tokio::select! {
                    biased;
                    () = shared.shutdown.cancelled() => break 'lines,
                    p = shared.budget.units.clone().acquire_many_owned(units) => p.ok(),
                };
                // Room for the longest line, `\r\n` included: no copies
                // while it grows (see `LineReader::presize`).
                if reserved.is_some() {
                    reserved_at = Some((Instant::now(), input.partial()));
                    input.presize(max.saturating_add(2).min(PRESIZE_MAX));
                }
            }
            // Without a reservation a read stops at `PARTIAL_FREE` bytes of
            // the line, so a connection waiting for room holds at most
            // that much of it (hundreds of waiting connections each held
            // up to twice that).
            let limit = if reserved.is_some() {
                READ_MAX
            } else {
                READ_CHUNK
                    .min(PARTIAL_FREE.saturating_sub(input.partial()))
                    .max(1)
            };
            // Under a reservation, a read that brings nothing for
            // `line_stall` ends the connection (the time spent waiting for
            // the reservation is not counted: the clock starts at each read).
            // And a line that falls behind `line_min_rate` ends it too.
            let pace = reserved.as_ref().and(shared.line_stall).map(|stall| {
                pace_deadline(stall, shared.line_min_rate, reserved_at, input.partial())
            });
            // `biased`: bytes already waiting are read before the deadline
            // is looked at, so the daemon's own scheduling delays never
            // count against a peer.
            let read = tokio::select! {
                biased;
                () = shared.shutdown.cancelled() => break 'lines,
                r = input.fill(limit) => r,
                () = until(pace.map(|p| p.0)) => {
                    let too_slow = pace.is_some_and(|p| p.1);
                    if too_slow {
                        tracing::warn!(
                            buffered = input.partial(),
                            min_bytes_per_sec = shared.line_min_rate.unwrap_or(0),
                            "closing a connection: its long line arrives slower than line_min_bytes_per_sec; its budget reservation is released"
                        );
                    } else {
                        tracing::warn!(
                            buffered = input.partial(),
                            stall_ms = shared.line_stall.map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
                            "closing a connection: its long line made no progress (line_stall_timeout_ms); its budget reservation is released"
                        );
                    }
                    stalled_out = true;
                    break 'lines;
                }
            };
            if let Err(e) = read {
                tracing::warn!(error = %e, "connection read failed");
                break 'lines;
            }
            // A long line's strings are checked as its pieces arrive, while
            // the peer is still sending (see `StringsAhead`).
            if reserved.is_some() {
                ahead
                    .get_or_insert_with(StringsAhead::new)
                    .feed(input.partial_bytes());
            }
        };
        let checked = ahead.take().map(StringsAhead::finish).unwrap_or_default();
        match frame {
            Frame::TooLong => {
                reserved = None;
                reserved_at = None;
                let error = ErrorObject::invalid_request(
                    "frame too long",
                    format!("a line may hold at most {max} bytes (max_frame_bytes)"),
                );
                link.out
                    .send(message::error_line(&RequestId::Null, &error), Some(permit));
            }
            Frame::Line(line) => {
                let cost = shared.budget.cost(line.len()) as usize;
                reserved_at = None;
                let held = match reserved.take() {
                    // The line was read under a reservation: keep its cost,
                    // give back the rest.
                    Some(mut r) => {
                        if r.num_permits() > cost {
                            drop(r.split(r.num_permits() - cost));
                        }
                        (cost > 0).then_some(r)
                    }
                    None if cost == 0 => None,
                    // At shutdown the line is handled without budget: it is
                    // answered -32800 at once (its cancel flag starts set).
                    None => tokio::select! {
                        biased;
                        p = shared.budget.units.clone().acquire_many_owned(
                            u32::try_from(cost).unwrap_or(u32::MAX)
                        ) => p.ok(),
                        () = shared.shutdown.cancelled() => None,
                    },
                };
                let ticket = Ticket {
                    permit,
                    held,
                    more: input.has_line(),
                    len: line.len(),
                };
                on_line(&link, &*handler, line.freeze(), &checked, ticket);
            }
        }
    }
    drop(reserved);
    if stalled_out {
        // The stalled half-line goes now, not after the connection's tasks,
        // and so does the reading end.
        drop(input);
    }
    handler.batch_end(&link);
    handler.input_ended(&link);
    if shared.shutdown.is_cancelled() {
        handler.shutdown();
    }
    link.tasks.close();
    link.tasks.wait().await;
    link.outgoing.clear();
    // The last sender goes with the link; the writer task then drains and ends.
    drop(link);
    let _ = writer_task.await;
}

/// When a line under a reservation has taken too long, and whether that
/// is the rate floor (`true`) rather than a stall: `stall` from now (no
/// byte arrives meanwhile), or, with a floor of `rate` bytes a second, the
/// moment the bytes since the reservation (`at`: when it was taken and
/// what was buffered then; `partial` now) fall behind it, after
/// [`LINE_RATE_GRACE`], whichever comes first.
fn pace_deadline(
    stall: Duration,
    rate: Option<u64>,
    at: Option<(Instant, usize)>,
    partial: usize,
) -> (Instant, bool) {
    let by_stall = Instant::now() + stall;
    let (Some(rate), Some((start, before))) = (rate, at) else {
        return (by_stall, false);
    };
    let arrived = partial.saturating_sub(before) as u64;
    let earned = Duration::from_millis(arrived.saturating_mul(1000) / rate.max(1));
    let by_rate = start + LINE_RATE_GRACE + earned;
    if by_rate < by_stall {
        (by_rate, true)
    } else {
        (by_stall, false)
    }
}

/// Sleeps until `deadline`; never ends without one.
async fn until(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Parses one line (whose long strings `checked` were checked as it
/// arrived) and hands it on.
fn on_line<H: Handler>(
    link: &Arc<Link>,
    handler: &H,
    line: bytes::Bytes,
    checked: &Checked,
    ticket: Ticket,
) {
    // The line moves on whole (no second reference): a method may decode
    // a whole file in its memory.
    let (incoming, line) = match message::parse_line_checked(line, checked) {
        Parsed::Request(req) => return handler.raw_request(link, req, ticket),
        Parsed::Notification(n) => return handler.raw_notification(link, n),
        Parsed::Other(incoming, line) => (incoming, line),
    };
    match incoming {
        Incoming::Malformed { id, error } => link.answer(message::error_line(&id, &error), ticket),
        Incoming::Dropped => {}
        Incoming::Message(Message::Request(req)) => handler.request(link, req, &line, ticket),
        Incoming::Message(Message::Notification(n)) => handler.notification(link, n, &line),
        Incoming::Message(Message::Response(r)) => {
            if let Some(r) = link.outgoing.complete(r) {
                handler.response(link, r, &line);
            }
        }
    }
}
