//! What every front end shares about running a call at the edge: which
//! calls may run on the runtime worker that read them ([`INLINE_MAX`]),
//! and the signals that stop a front end ([`Signals`]). A panic in a call
//! is caught by `writegate_core::guarded`, answered with
//! `Failure::internal`.

use std::io;
use tokio::signal::unix::{Signal as Stream, SignalKind, signal};

/// Most bytes a request may carry (ACP: its line; MCP: its file content)
/// and still run on the runtime worker that read it, when nothing else of
/// its connection is running: a small call costs no thread hand-off, which
/// on a small VM costs about as much as the rest of its IPC
/// (docs/decisions/0002-small-write-latency.md); a larger one runs on a
/// blocking thread, so reading goes on meanwhile.
pub const INLINE_MAX: usize = 64 * 1024;

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
