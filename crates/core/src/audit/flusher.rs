//! Durability: group `fdatasync` of the log and the journal, and the
//! background flusher (`audit.flush`, retries of a failing log).

use super::lock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};
use writegate_fs::FsError;

/// In `flush = "interval"` mode, an event is `fdatasync`ed at most this
/// long after it was appended (plus the time the `fdatasync` takes).
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(20);

/// While the log is failing, appending is retried this often.
pub(super) const RETRY_EVERY: Duration = Duration::from_millis(250);

/// Group commit over one file: appends are numbered; [`GroupSync::wait`]
/// returns once an `fdatasync` that started after append `seq` succeeded,
/// and concurrent waiters share one.
#[derive(Default)]
pub(super) struct GroupSync {
    state: Mutex<SyncState>,
    done: Condvar,
}

#[derive(Default)]
struct SyncState {
    appended: u64,
    synced: u64,
    syncing: bool,
}

impl GroupSync {
    pub(super) fn mark(&self) -> u64 {
        let mut s = lock(&self.state);
        s.appended += 1;
        s.appended
    }

    pub(super) fn latest(&self) -> (u64, u64) {
        let s = lock(&self.state);
        (s.appended, s.synced)
    }

    pub(super) fn wait(
        &self,
        seq: u64,
        sync: &dyn Fn() -> Result<(), FsError>,
    ) -> Result<(), FsError> {
        let mut s = lock(&self.state);
        // Nothing can be waited for beyond the last append.
        let seq = seq.min(s.appended);
        loop {
            if s.synced >= seq {
                return Ok(());
            }
            if s.syncing {
                s = self.done.wait(s).unwrap_or_else(PoisonError::into_inner);
                continue;
            }
            s.syncing = true;
            let target = s.appended;
            drop(s);
            let result = sync();
            s = lock(&self.state);
            s.syncing = false;
            if result.is_ok() {
                s.synced = s.synced.max(target);
            }
            self.done.notify_all();
            result?;
        }
    }
}

#[derive(Default)]
struct FlusherState {
    stop: bool,
    /// An intent was journaled in `sync` mode: `fdatasync` the journal now.
    journal_kick: bool,
    /// Time of the first append not yet covered by a flush (interval mode).
    dirty_since: Option<Instant>,
    next_retry: Option<Instant>,
    idle: bool,
}

/// The background flusher's state and its wake-up call. What it flushes
/// is the sink's: [`Flusher::run`] is handed the steps.
#[derive(Default)]
pub(super) struct Flusher {
    state: Mutex<FlusherState>,
    wake: Condvar,
}

impl Flusher {
    /// Wakes the flusher if it is idle (so that it retries a failing log).
    pub(super) fn nudge(&self) {
        let f = lock(&self.state);
        if f.idle {
            self.wake.notify_one();
        }
    }

    /// Asks for an `fdatasync` of the journal now (an intent was journaled
    /// in `sync` mode).
    pub(super) fn kick_journal(&self) {
        let mut f = lock(&self.state);
        f.journal_kick = true;
        if f.idle {
            self.wake.notify_one();
        }
    }

    /// Notes an append not yet flushed (interval mode): the flusher
    /// flushes within [`FLUSH_INTERVAL`] of the first one.
    pub(super) fn mark_dirty(&self) {
        let mut f = lock(&self.state);
        let wake = f.dirty_since.is_none() && f.idle;
        if f.dirty_since.is_none() {
            f.dirty_since = Some(Instant::now());
        }
        // Woken after the lock is dropped, the flusher does not wait
        // for it (the state it reads was set under the lock).
        drop(f);
        if wake {
            self.wake.notify_one();
        }
    }

    /// Makes [`Flusher::run`] return.
    pub(super) fn stop(&self) {
        let mut f = lock(&self.state);
        f.stop = true;
        self.wake.notify_all();
    }

    /// The background flusher: in interval mode, calls `flush` within
    /// [`FLUSH_INTERVAL`] of the first unflushed append; in both modes,
    /// calls it every [`RETRY_EVERY`] while `failing`; calls
    /// `sync_journal` when kicked; returns when stopped.
    pub(super) fn run(&self, failing: &AtomicBool, flush: &dyn Fn(), sync_journal: &dyn Fn()) {
        let mut f = lock(&self.state);
        loop {
            if f.stop {
                break;
            }
            if f.journal_kick {
                f.journal_kick = false;
                drop(f);
                sync_journal();
                f = lock(&self.state);
                continue;
            }
            let now = Instant::now();
            let mut due = f.dirty_since.map(|t| t + FLUSH_INTERVAL);
            if failing.load(Ordering::SeqCst) {
                let retry = *f.next_retry.get_or_insert(now + RETRY_EVERY);
                due = Some(due.map_or(retry, |d| d.min(retry)));
            } else {
                f.next_retry = None;
            }
            match due {
                None => {
                    f.idle = true;
                    f = self.wake.wait(f).unwrap_or_else(PoisonError::into_inner);
                    f.idle = false;
                }
                Some(d) if d > now => {
                    f.idle = true;
                    f = self
                        .wake
                        .wait_timeout(f, d - now)
                        .unwrap_or_else(PoisonError::into_inner)
                        .0;
                    f.idle = false;
                }
                Some(_) => {
                    f.dirty_since = None;
                    f.next_retry = None;
                    drop(f);
                    flush();
                    f = lock(&self.state);
                }
            }
        }
    }
}
