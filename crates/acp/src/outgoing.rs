//! The table of requests this side sent and still waits for (like
//! lsp-server's request queue, outgoing half): each gets an id of its own
//! that cannot collide with the peer's ids, and its response is handed to
//! whoever sent it. A response whose id is not in the table is not ours
//! (a proxy forwards it).

use crate::message::{ErrorObject, Response};
use agent_client_protocol::v1::schema::RequestId;
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::sync::oneshot;

/// Pending outgoing requests of one connection.
pub struct Outgoing {
    /// Prefix of every id: `writegate-<pid>-<n>`, a string no agent or
    /// editor generates by accident.
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
    pub fn new() -> Outgoing {
        Outgoing {
            prefix: format!("writegate-{}-", std::process::id()),
            next: AtomicU64::new(1),
            pending: Mutex::new(HashMap::new()),
        }
    }

    /// Allocates an id for a new request and the receiver of its answer.
    pub fn register(
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
    pub fn forget(&self, id: &RequestId) {
        if let RequestId::Str(s) = id {
            self.lock().remove::<str>(s);
        }
    }

    /// Hands `response` to the request it answers. Returns it back when
    /// it answers none of ours.
    pub fn complete(&self, response: Response) -> Option<Response> {
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
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Drops every pending request: their receivers see the channel closed
    /// (the peer went away).
    pub fn clear(&self) {
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
}
