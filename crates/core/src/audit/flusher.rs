//! Durability: group `fdatasync` of the log and the journal, and the
//! background flusher (`audit.flush`, retries of a failing log).

use super::AuditError;
use super::lock;
use super::sink::Shared;
use crate::config::FlushMode;
use std::sync::atomic::Ordering;
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
pub(super) struct FlusherState {
    pub(super) stop: bool,
    /// An intent was journaled in `sync` mode: `fdatasync` the journal now.
    pub(super) journal_kick: bool,
    /// Time of the first append not yet covered by a flush (interval mode).
    dirty_since: Option<Instant>,
    next_retry: Option<Instant>,
    pub(super) idle: bool,
}

impl Shared {
    /// After appends: flush them (sync mode) or mark the log dirty
    /// (interval mode), then retire `intents` intents.
    pub(super) fn after_append(&self, intents: usize) {
        if self.flush == FlushMode::Sync {
            let (latest, _) = self.log_sync.latest();
            if let Err(e) = self.sync_log(latest) {
                // The events are in the log, maybe not on disk; the log is
                // failing until a flush succeeds (audit.required refuses
                // operations meanwhile). Their intents are retired all the
                // same: a killed process loses nothing in the log.
                tracing::error!(path = %self.path.display(), error = %e, "audit flush failed");
            }
        } else {
            let mut f = lock(&self.flusher);
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
        for _ in 0..intents {
            self.journal_done();
        }
    }

    /// `fdatasync`s the log up to append `seq` (group commit); a failure
    /// marks the log failing until a flush succeeds.
    fn sync_log(&self, seq: u64) -> Result<(), AuditError> {
        let Some(log) = lock(&self.log).log.clone() else {
            return Err(AuditError::LogNotOpen);
        };
        let result = self.log_sync.wait(seq, &|| log.sync());
        let mut st = lock(&self.log);
        match result {
            Ok(()) => {
                if st.flush_failed {
                    tracing::info!(path = %self.path.display(), "audit log flushes again");
                }
                st.flush_failed = false;
                self.update_failing(&st);
                Ok(())
            }
            Err(e) => {
                self.failures.fetch_add(1, Ordering::SeqCst);
                st.flush_failed = true;
                self.update_failing(&st);
                Err(e.into())
            }
        }
    }

    /// A flush by the flusher: catch up, then `fdatasync` what was appended.
    pub(super) fn flush_now(&self) {
        self.catch_up();
        let (appended, synced) = self.log_sync.latest();
        if appended > synced
            && let Err(e) = self.sync_log(appended)
        {
            tracing::error!(path = %self.path.display(), error = %e, "audit flush failed");
        }
    }

    /// The background flusher: in interval mode, flushes within
    /// [`FLUSH_INTERVAL`] of the first unflushed append; in both modes,
    /// retries a failing log every [`RETRY_EVERY`]; flushes once more when
    /// stopped.
    pub(super) fn run_flusher(&self) {
        let mut f = lock(&self.flusher);
        loop {
            if f.stop {
                break;
            }
            if f.journal_kick {
                f.journal_kick = false;
                drop(f);
                self.sync_journal();
                f = lock(&self.flusher);
                continue;
            }
            let now = Instant::now();
            let mut due = f.dirty_since.map(|t| t + FLUSH_INTERVAL);
            if self.failing.load(Ordering::SeqCst) {
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
                    self.flush_now();
                    f = lock(&self.flusher);
                }
            }
        }
    }
}
