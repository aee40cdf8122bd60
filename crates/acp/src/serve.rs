//! The `serve` handler: answers every request itself through the method
//! table, each request concurrently (SPEC 1), on a runtime worker or a
//! blocking thread.

use crate::conn::{Handler, Link, Shared, Ticket, run_connection};
use crate::message::{Notification, RawRequest, Request};
use crate::methods::{self, CANCEL_REQUEST, Call, Params};
use crate::state::ConnState;
use crate::transport::Transport;
use agent_client_protocol::v1::schema::RequestId;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};
use writegate_core::Runtime;
use writegate_stdio::NonBlockingFd;
use writegate_stdio::run::INLINE_MAX;

/// The `serve` handler of one connection.
pub(crate) struct Serve {
    state: Arc<ConnState>,
}

impl Serve {
    /// A handler for a connection over `transport`, owned by `primary`.
    pub(crate) fn new(shared: &Shared, transport: Transport, primary: Arc<Runtime>) -> Serve {
        Serve {
            state: Arc::new(ConnState::new(shared.service.clone(), transport, primary)),
        }
    }
}

impl Serve {
    /// Answers a request: an inline method at once, anything else as a task
    /// of its own on this worker or a blocking thread.
    fn run(
        &self,
        link: &Arc<Link>,
        id: RequestId,
        method: String,
        params: Params,
        mut ticket: Ticket,
    ) {
        let first = self.state.take_first();
        let entry = methods::find(&method);
        if let Some(e) = entry.filter(|e| e.inline) {
            let call = Call {
                conn: &self.state,
                cancel: Arc::default(),
                first,
                approver: None,
            };
            let line = e.answer(&call, &id, params);
            link.answer(line, ticket);
            return;
        }
        let (flag, alone) = self.state.begin(&id, link.shared.shutdown.is_cancelled());
        // Which requests run on a runtime worker instead of a blocking thread.
        //
        // A request runs on the worker that read it only when that is safe to
        // block on for a moment: its line is at most
        // `INLINE_MAX` long, no other request of its
        // connection is in flight or already buffered behind it (so the
        // connection's requests still run concurrently), no path lock is held
        // anywhere in the daemon, and one of `workers - 1` worker slots is free
        // (one worker always stays free for reading, accepting and signals).
        // Everything else goes to the blocking pool. Either way the reader task
        // is not blocked: the request is a task of its own.
        let slot = if alone
            && !ticket.more
            && ticket.len <= INLINE_MAX
            && link.shared.service.live_locks() == 0
        {
            link.shared.worker_slots.clone().try_acquire_owned().ok()
        } else {
            None
        };
        let state = self.state.clone();
        let out = link.clone();
        // Whoever runs the request also writes its answer. A panic anywhere
        // in the method (not only inside a file operation, which the table
        // already catches) is still answered once, and the request still
        // leaves the in-flight map.
        let answer = move || {
            let call = Call {
                conn: &state,
                cancel: flag,
                first,
                approver: None,
            };
            let line = methods::answer_guarded(&id, &method, || {
                methods::answer(&call, &id, &method, params)
            });
            ticket.built();
            state.end(&id);
            out.answer(line, ticket);
        };
        match slot {
            // A task of its own on this worker (see INLINE_MAX).
            Some(slot) => {
                link.tasks().spawn(async move {
                    answer();
                    drop(slot);
                });
            }
            None => {
                link.tasks().spawn_blocking(answer);
            }
        }
    }
}

impl Handler for Serve {
    fn request(&self, link: &Arc<Link>, req: Request, _raw: &[u8], ticket: Ticket) {
        let Request { id, method, params } = req;
        self.run(link, id, method, Params::Value(params), ticket);
    }

    /// Params go to the method unparsed: it deserializes them straight
    /// from the line into its own types (no intermediate `Value`).
    fn raw_request(&self, link: &Arc<Link>, req: RawRequest, ticket: Ticket) {
        let RawRequest { id, method, params } = req;
        self.run(link, id, method, Params::Raw(params), ticket);
    }

    fn notification(&self, _link: &Arc<Link>, n: Notification, _raw: &[u8]) {
        if n.method == CANCEL_REQUEST {
            methods::cancel_request::handle(&self.state, n.params);
        }
    }

    fn shutdown(&self) {
        // Anything that has not begun to commit is answered -32800.
        self.state.cancel_all();
    }
}

/// Serves one connection of the daemon itself (see [`run_connection`]).
pub async fn serve_connection<R, W>(
    shared: Arc<Shared>,
    primary: Arc<Runtime>,
    reader: R,
    writer: W,
    transport: Transport,
    direct: Option<NonBlockingFd>,
) where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let handler = Arc::new(Serve::new(&shared, transport, primary));
    run_connection(shared, handler, reader, writer, direct).await;
}
