//! The proxy's ACP sessions: each has the state writegate's method table
//! needs (a `ConnState` over the proxy's agent transport, whose runtime is
//! the session's workspace) and the permission questions it has open with
//! the editor, so that `session/cancel` can cancel both.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio_util::sync::CancellationToken;
use writegate_acp::state::ConnState;
use writegate_acp::transport::Transport;
use writegate_core::{Runtime, Service};

/// One ACP session of the proxy.
pub(crate) struct Session {
    /// The ACP `sessionId`.
    pub(crate) id: String,
    /// What the method table runs the session's requests under: the agent
    /// transport's allowances, the session's runtime, the cancel flags of
    /// its requests in flight.
    pub(crate) state: ConnState,
    /// Permission questions waiting for the editor, by number.
    questions: Mutex<HashMap<u64, CancellationToken>>,
}

/// Numbers permission questions across sessions.
static QUESTIONS: AtomicU64 = AtomicU64::new(1);

/// The tool-call id of question `n`: `writegate-approval-<random>-<n>`, the
/// random part drawn once per process. The agent never sees it, so it
/// cannot send a `session/update` that retitles the question in the
/// editor's view.
pub(crate) fn tool_call_id(n: u64) -> String {
    static PREFIX: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    let prefix = PREFIX.get_or_init(writegate_acp::unpredictable_hex);
    format!("writegate-approval-{prefix}-{n}")
}

impl Session {
    /// Opens a permission question: its number and the token that
    /// `session/cancel` cancels.
    pub(crate) fn open_question(&self) -> (u64, CancellationToken) {
        let n = QUESTIONS.fetch_add(1, Ordering::Relaxed);
        let token = CancellationToken::new();
        lock(&self.questions).insert(n, token.clone());
        (n, token)
    }

    /// The question was answered (or given up).
    pub(crate) fn close_question(&self, n: u64) {
        lock(&self.questions).remove(&n);
    }

    /// `session/cancel`: the session's requests in flight stop before they
    /// begin to commit, and its open questions are answered "cancelled".
    pub(crate) fn cancel(&self) {
        self.state.cancel_all();
        for token in lock(&self.questions).values() {
            token.cancel();
        }
    }
}

/// Every session the editor opened through the proxy, by `sessionId`.
#[derive(Default)]
pub(crate) struct Sessions {
    map: Mutex<HashMap<String, Arc<Session>>>,
}

impl Sessions {
    /// The session `id`, if the editor opened it here.
    pub(crate) fn get(&self, id: &str) -> Option<Arc<Session>> {
        lock(&self.map).get(id).cloned()
    }

    /// Binds `id` to `runtime` (a `session/new` answered, a `session/load`
    /// or `session/resume` accepted). A session bound again to another
    /// workspace gets fresh state; bound again to the same one, it is kept.
    pub(crate) fn bind(&self, id: &str, runtime: Arc<Runtime>, service: &Arc<Service>) {
        let mut map = lock(&self.map);
        if map
            .get(id)
            .is_some_and(|s| s.state.runtime().root == runtime.root)
        {
            return;
        }
        tracing::info!(session = id, workspace = %runtime.root.display(), "session bound");
        map.insert(
            id.to_string(),
            Arc::new(Session {
                id: id.to_string(),
                state: ConnState::new(service.clone(), Transport::ProxyAgent, runtime),
                questions: Mutex::new(HashMap::new()),
            }),
        );
    }

    /// Cancels one session (see [`Session::cancel`]).
    pub(crate) fn cancel(&self, id: &str) {
        if let Some(s) = self.get(id) {
            s.cancel();
        }
    }

    /// Cancels every session (the agent is gone).
    pub(crate) fn cancel_all(&self) {
        let all: Vec<Arc<Session>> = lock(&self.map).values().cloned().collect();
        for s in all {
            s.cancel();
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
