//! The table of requests this side sent and still waits for (like
//! lsp-server's request queue, outgoing half): each gets an id of its own
//! that no other party can predict, and its response is handed to whoever
//! sent it. A response whose id is not in the table is not ours.
//!
//! The ids are `writegate-<128 random bits in hex>-<n>`, the random part
//! drawn once per table from the operating system: a party that sees none
//! of them (a proxied agent, another connection) cannot forge an answer to
//! one, and a peer that sees one learns nothing about another table's.

use crate::message::{ErrorObject, Response};
use agent_client_protocol::v1::schema::RequestId;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::oneshot;

/// Pending outgoing requests of one connection.
pub(crate) struct Outgoing {
    /// Prefix of every id: `writegate-<random hex>-`, a string no peer
    /// generates by accident or can guess.
    prefix: String,
    next: AtomicU64,
    pending: Mutex<HashMap<String, oneshot::Sender<Result<serde_json::Value, ErrorObject>>>>,
}

impl Default for Outgoing {
    fn default() -> Self {
        Outgoing::new()
    }
}

impl Outgoing {
    /// An empty table.
    pub(crate) fn new() -> Outgoing {
        Outgoing {
            prefix: format!("writegate-{}-", writegate_core::unpredictable_hex()),
            next: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
        }
    }

    /// Allocates an id for a new request and the receiver of its answer.
    pub(crate) fn register(
        &self,
    ) -> (
        RequestId,
        oneshot::Receiver<Result<serde_json::Value, ErrorObject>>,
    ) {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let key = format!("{}{n}", self.prefix);
        let (tx, rx) = oneshot::channel();
        self.lock().insert(key.clone(), tx);
        (RequestId::Str(key), rx)
    }

    /// Forgets a request (its sender gave up); a late answer is then not
    /// ours.
    pub(crate) fn forget(&self, id: &RequestId) {
        if let RequestId::Str(s) = id {
            self.lock().remove::<str>(s);
        }
    }

    /// Hands `response` to the request it answers. Returns it back when
    /// it answers none of ours.
    pub(crate) fn complete(&self, response: Response) -> Option<Response> {
        let RequestId::Str(s) = &response.id else {
            return Some(response);
        };
        let Some(tx) = self.lock().remove::<str>(s) else {
            return Some(response);
        };
        // The sender may have stopped waiting; the answer is then dropped.
        let _ = tx.send(response.result);
        None
    }

    /// Number of requests waiting for an answer.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when nothing waits.
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every pending request: their receivers see the channel closed
    /// (the peer went away).
    pub(crate) fn clear(&self) {
        self.lock().clear();
    }

    fn lock(
        &self,
    ) -> std::sync::MutexGuard<
        '_,
        HashMap<String, oneshot::Sender<Result<serde_json::Value, ErrorObject>>>,
    > {
        self.pending
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ours_are_completed_others_returned() {
        let t = Outgoing::new();
        let (id, mut rx) = t.register();
        let (id2, _rx2) = t.register();
        assert_ne!(id, id2);
        assert_eq!(t.len(), 2);
        // The peer's own ids (numbers, other strings) are not ours.
        for other in [RequestId::Number(1), RequestId::Str("writegate-x".into())] {
            let r = Response {
                id: other.clone(),
                result: Ok(json!(1)),
            };
            assert_eq!(t.complete(r.clone()), Some(r));
        }
        assert_eq!(
            t.complete(Response {
                id: id.clone(),
                result: Ok(json!({"outcome": "selected"})),
            }),
            None
        );
        assert_eq!(rx.try_recv().unwrap(), Ok(json!({"outcome": "selected"})));
        // Answered once: a second answer with the same id is not ours.
        assert!(
            t.complete(Response {
                id,
                result: Ok(json!(2))
            })
            .is_some()
        );
        t.forget(&id2);
        assert!(t.is_empty());
    }

    /// A proxied agent approved its own held write by sending a question
    /// with the id the proxy's next question would get (`writegate-<pid>-1`):
    /// ids are no longer derived from anything another party knows.
    #[test]
    fn ids_are_unpredictable_not_pid_and_counter() {
        let a = Outgoing::new();
        let b = Outgoing::new();
        let (RequestId::Str(ia), _ra) = a.register() else {
            panic!("string ids")
        };
        let (RequestId::Str(ib), _rb) = b.register() else {
            panic!("string ids")
        };
        assert_ne!(ia, format!("writegate-{}-1", std::process::id()));
        assert!(ia.starts_with("writegate-") && ia.ends_with("-1"), "{ia}");
        let random = &ia["writegate-".len()..ia.len() - 2];
        assert_eq!(random.len(), 32, "{ia}");
        assert!(random.bytes().all(|c| c.is_ascii_hexdigit()), "{ia}");
        // Two tables in one process share nothing guessable.
        assert_ne!(ia, ib);
    }
}
