//! What every front end shares about running a call at the edge: which
//! calls may run on the runtime worker that read them ([`INLINE_MAX`]),
//! the calls of a connection that are running, with their cancel flags
//! ([`InFlight`]), and the signals that stop a front end ([`Signals`]). A panic in a call
//! is caught by `writegate_core::guarded`, answered with
//! `Failure::internal`.

use std::collections::HashMap;
use std::hash::Hash;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use tokio::signal::unix::{Signal as Stream, SignalKind, signal};

/// Most bytes a request may carry (ACP: its line; MCP: its file content)
/// and still run on the runtime worker that read it, when nothing else of
/// its connection is running: a small call costs no thread hand-off, which
/// on a small VM costs about as much as the rest of its IPC
/// (docs/decisions/0002-small-write-latency.md); a larger one runs on a
/// blocking thread, so reading goes on meanwhile.
pub const INLINE_MAX: usize = 64 * 1024;

/// The calls of one connection that are running, each with the cancel
/// flag its operation checks, by request id: ACP's connection state and
/// MCP's server keep one each (over their own id types), so a cancel, a
/// shutdown and the inline decision work alike in every front end.
pub struct InFlight<Id> {
    calls: Mutex<HashMap<Id, Arc<AtomicBool>>>,
}

impl<Id> Default for InFlight<Id> {
    fn default() -> Self {
        InFlight {
            calls: Mutex::new(HashMap::new()),
        }
    }
}

impl<Id: Eq + Hash + Clone> InFlight<Id> {
    /// Registers call `id` with its cancel `flag`; returns whether no
    /// other call was running (a small call may then run inline,
    /// [`INLINE_MAX`]).
    pub fn begin(&self, id: &Id, flag: Arc<AtomicBool>) -> bool {
        let mut calls = self.calls();
        let alone = calls.is_empty();
        calls.insert(id.clone(), flag);
        alone
    }

    /// Call `id` was answered.
    pub fn end(&self, id: &Id) {
        self.calls().remove(id);
    }

    /// Flags call `id` cancelled, if it is running.
    pub fn cancel(&self, id: &Id) {
        if let Some(flag) = self.calls().get(id) {
            flag.store(true, Ordering::SeqCst);
        }
    }

    /// Flags every running call cancelled (shutdown).
    pub fn cancel_all(&self) {
        for flag in self.calls().values() {
            flag.store(true, Ordering::SeqCst);
        }
    }

    fn calls(&self) -> MutexGuard<'_, HashMap<Id, Arc<AtomicBool>>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A signal a front end acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM: stop.
    Term,
    /// SIGINT: stop.
    Int,
    /// SIGHUP: stop, or reload where the front end reloads (`serve`).
    Hup,
}

impl Signal {
    /// Its name, for the log: `SIGTERM`, `SIGINT`, `SIGHUP`.
    pub fn name(self) -> &'static str {
        match self {
            Signal::Term => "SIGTERM",
            Signal::Int => "SIGINT",
            Signal::Hup => "SIGHUP",
        }
    }
}

/// SIGTERM, SIGINT and SIGHUP, watched from [`Signals::watch`] on: a
/// signal sent after that is this process's, not the default action's.
pub struct Signals {
    term: Stream,
    int: Stream,
    hup: Stream,
}

impl Signals {
    /// Starts watching the three signals. Call it before the front end
    /// becomes reachable (before a socket is bound or a child started).
    pub fn watch() -> io::Result<Signals> {
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// The next signal to arrive. Cancel-safe: a `select!` may drop it.
    pub async fn next(&mut self) -> Signal {
        tokio::select! {
            Some(()) = self.term.recv() => Signal::Term,
            Some(()) = self.int.recv() => Signal::Int,
            Some(()) = self.hup.recv() => Signal::Hup,
            else => std::future::pending().await,
        }
    }
}

/// Waits for the first SIGTERM, SIGINT or SIGHUP and returns its name
/// (forever, logged, if they cannot be watched: the front end then stops
/// only when its input ends).
pub async fn stop_signal() -> &'static str {
    let Ok(mut signals) = Signals::watch() else {
        tracing::warn!("cannot watch signals; stopping only when the input ends");
        return std::future::pending().await;
    };
    signals.next().await.name()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[test]
    fn a_call_is_cancelled_by_its_id_and_alone_only_when_nothing_else_runs() {
        let calls = super::InFlight::default();
        let (a, b) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        assert!(calls.begin(&1, a.clone()));
        assert!(!calls.begin(&2, b.clone()));
        calls.cancel(&2);
        assert!(!a.load(Ordering::SeqCst) && b.load(Ordering::SeqCst));
        calls.end(&2);
        calls.cancel(&2);
        calls.cancel_all();
        assert!(a.load(Ordering::SeqCst));
        calls.end(&1);
        assert!(calls.begin(&3, Arc::new(AtomicBool::new(false))));
    }
}
