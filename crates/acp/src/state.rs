//! Per-connection state of the `serve` front end: its transport, its
//! runtime (owning workspace), whether a request was seen yet, and the
//! cancellation flags of its requests in flight. The method table needs
//! only this, not the connection's IO, so it can be driven without one.

use crate::transport::Transport;
use agent_client_protocol::v1::schema::RequestId;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, PoisonError, RwLock};
use writegate_core::{Runtime, Service};
use writegate_stdio::run::InFlight;

/// One connection's state. See the module doc.
pub struct ConnState {
    /// The service every connection shares.
    pub service: Arc<Service>,
    /// The transport the connection came over.
    pub transport: Transport,
    runtime: RwLock<Arc<Runtime>>,
    first_seen: AtomicBool,
    inflight: InFlight<RequestId>,
}

impl ConnState {
    /// A fresh connection over `transport`, owned by `primary`.
    pub fn new(service: Arc<Service>, transport: Transport, primary: Arc<Runtime>) -> ConnState {
        ConnState {
            service,
            transport,
            runtime: RwLock::new(primary),
            first_seen: AtomicBool::new(false),
            inflight: InFlight::default(),
        }
    }

    /// The connection's runtime. If its generation was closed by a reload and
    /// the same root is registered again (trust changed), the connection
    /// moves to the fresh runtime for new requests; requests already holding
    /// the old one fail with `generation_closed`.
    pub fn runtime(&self) -> Arc<Runtime> {
        let current = self
            .runtime
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        if current.guard.is_open() {
            return current;
        }
        let fresh = self
            .service
            .registry()
            .all()
            .into_iter()
            .find(|r| r.root == current.root);
        match fresh {
            Some(f) => {
                *self.runtime.write().unwrap_or_else(PoisonError::into_inner) = f.clone();
                f
            }
            None => current,
        }
    }

    /// Binds the connection to another runtime (socket `initialize`).
    pub fn set_runtime(&self, rt: Arc<Runtime>) {
        *self.runtime.write().unwrap_or_else(PoisonError::into_inner) = rt;
    }

    /// True only for the first request on this connection.
    pub fn take_first(&self) -> bool {
        !self.first_seen.swap(true, Ordering::SeqCst)
    }

    /// Registers a request in flight; returns its cancellation flag
    /// (already set when `cancelled`) and whether it is the only one.
    pub fn begin(&self, id: &RequestId, cancelled: bool) -> (Arc<AtomicBool>, bool) {
        let flag = Arc::new(AtomicBool::new(cancelled));
        let alone = self.inflight.begin(id, flag.clone());
        (flag, alone)
    }

    /// The request left the in-flight map (answered).
    pub fn end(&self, id: &RequestId) {
        self.inflight.end(id);
    }

    /// Flags one request in flight as cancelled (`$/cancel_request`).
    pub fn cancel(&self, id: &RequestId) {
        self.inflight.cancel(id);
    }

    /// Flags every request in flight as cancelled (shutdown).
    pub fn cancel_all(&self) {
        self.inflight.cancel_all();
    }
}
