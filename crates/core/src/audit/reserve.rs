//! Before a commit: disk space promised to its event, its intent journaled
//! (and made durable with `flush = "sync"`), or the refusal when that
//! cannot be done and `audit.required` is on.

use super::AuditError;
use super::journal::intent_line;
use super::line::{AsCommitted, committed_event_line};
use super::sink::{LogState, Shared};
use super::{AuditEvent, AuditSink, lock, now_rfc3339};
use crate::config::FlushMode;
use crate::error::{ErrorKind, Refusal};
use crate::hex;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;
use writegate_fs::{AppendLog, Reserved};

/// Disk reserved beyond what pending events need, so that a reservation is
/// not renewed for every operation.
const RESERVE_AHEAD: u64 = 16 * 1024;

/// Bytes an event may grow between its intent and its line (`ts`,
/// `durationMs`, an errorKind), plus a hint when raw paths are on.
const EVENT_SLACK: u64 = 512;

/// What [`AuditSink::prepare`] needs to know about the commit it precedes.
pub struct CommitFacts<'a> {
    /// The canonical target.
    pub target: &'a Path,
    /// `(dev, ino)` of the file the commit replaces, `None` when it creates.
    pub before: Option<(u64, u64)>,
    /// Bytes it writes.
    pub bytes_after: u64,
    /// `sha256:<hex>` of them.
    pub hash_after: &'a str,
    /// The path as the request named it (kept in the event only with
    /// `audit.raw_paths`).
    pub raw_path: &'a str,
}

/// A journaled intent to commit (from [`AuditSink::prepare`]); hand it to
/// [`AuditSink::intent_durable`] just before the commit and to
/// [`AuditSink::record_op`] with the operation's event.
#[derive(Debug)]
pub struct CommitIntent {
    pub(super) need: u64,
    /// The journal append's number, while it may not be on disk yet
    /// (`flush = "sync"`).
    journal_seq: Option<u64>,
}

/// Disk space promised to one event (from [`AuditSink::reserve_event`]).
#[derive(Debug)]
pub struct Reservation {
    pub(super) need: u64,
}

/// Whether the log's filesystem can reserve space.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum CanReserve {
    Unknown,
    Yes,
    No,
}

impl AuditSink {
    /// The refusal of an operation the log cannot record, with `why`.
    fn refusal(why: &str) -> Refusal {
        Refusal::new(
            ErrorKind::IoError,
            format!(
                "the audit log cannot record this operation ({why}) and audit.required is on, so nothing was done; free space for the audit log or fix it, then retry"
            ),
        )
    }

    /// Before a commit: reserves disk space for the event of the
    /// operation whose draft event is `draft`, then appends its intent to
    /// the journal (and, with `flush = "sync"`, makes the intent durable).
    /// The intent is what lets the next start write the event if this
    /// process dies between the commit and the event.
    ///
    /// Errors: with `audit.required`, any failure is an `io_error` refusal
    /// (the caller must not commit). Without it, a failure is logged and
    /// `Ok(None)`: the operation proceeds without that protection.
    pub fn prepare(
        &self,
        draft: &AuditEvent,
        facts: &CommitFacts<'_>,
        elapsed: Duration,
    ) -> Result<Option<CommitIntent>, Refusal> {
        let s = &self.shared;
        // The event as it will read once committed, serialised once (no
        // copy of the draft): its length is the estimate, its bytes go into
        // the intent.
        let ts = now_rfc3339();
        let event = committed_event_line(
            draft,
            &AsCommitted {
                ts: &ts,
                created: facts.before.is_none(),
                bytes_after: facts.bytes_after,
                hash_after: facts.hash_after,
                duration_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
                path: s.raw_paths.then_some(facts.raw_path),
            },
        );
        let need = event.len() as u64 + EVENT_SLACK + if s.raw_paths { 8192 } else { 0 };
        let (offset, log_id) = match s.promise(need) {
            Ok(at) => at,
            Err(why) => return self.refuse_or_warn(&why),
        };
        let target = hex(facts.target.as_os_str().as_bytes());
        let mut line = intent_line(offset, log_id, &target, facts.before, &event);
        line.push(b'\n');
        let seq = match s.journal_append(&line) {
            Ok((_, seq)) => seq,
            Err(why) => {
                s.release(need);
                return self.refuse_or_warn(&why);
            }
        };
        let journal_seq = (s.flush == FlushMode::Sync).then(|| {
            // Start its fdatasync now, on the flusher, so that it overlaps
            // the caller's own writing and fsync of the new file;
            // `intent_durable` waits for it just before the rename.
            let mut f = lock(&s.flusher);
            f.journal_kick = true;
            if f.idle {
                s.wake.notify_one();
            }
            seq
        });
        Ok(Some(CommitIntent { need, journal_seq }))
    }

    /// Just before the commit (the rename): with `flush = "sync"`, waits
    /// until the intent is on disk (sharing the `fdatasync` with concurrent
    /// operations). Errors as [`AuditSink::prepare`]; after an error with
    /// `audit.required` the caller must not commit (the intent is retired
    /// with the operation's `fs.denied` event).
    pub fn intent_durable(&self, intent: Option<&CommitIntent>) -> Result<(), Refusal> {
        let Some(seq) = intent.and_then(|i| i.journal_seq) else {
            return Ok(());
        };
        let s = &self.shared;
        let Some(journal) = lock(&s.journal).journal.clone() else {
            return self
                .refuse_or_warn::<()>(&AuditError::NoJournal(None))
                .map(|_| ());
        };
        match s.journal_sync.wait(seq, &|| journal.sync()) {
            Ok(()) => Ok(()),
            Err(e) => {
                s.failures.fetch_add(1, Ordering::SeqCst);
                self.refuse_or_warn::<()>(&e.into()).map(|_| ())
            }
        }
    }

    fn refuse_or_warn<T>(&self, why: &AuditError) -> Result<Option<T>, Refusal> {
        if self.shared.required {
            tracing::error!(path = %self.shared.path.display(), error = %why,
                "audit log cannot record an operation; refused (audit.required)");
            Err(Self::refusal(&why.to_string()))
        } else {
            tracing::error!(path = %self.shared.path.display(), error = %why,
                "audit log cannot record an operation; going ahead (audit.required = false)");
            Ok(None)
        }
    }

    /// Promises space for one event of about `len` bytes (an approval's),
    /// before the action it records. Errors as [`AuditSink::prepare`].
    pub fn reserve_event(&self, len: u64) -> Result<Option<Reservation>, Refusal> {
        let need = len + EVENT_SLACK;
        match self.shared.promise(need) {
            Ok(_) => Ok(Some(Reservation { need })),
            Err(why) => self.refuse_or_warn(&why),
        }
    }

    /// Gives back a reservation that will not be used (the action failed).
    pub fn release(&self, r: Option<Reservation>) {
        if let Some(r) = r {
            self.shared.release(r.need);
        }
    }
}

impl Shared {
    /// Reserves space for the first event at start, so that a full disk is
    /// found before serving.
    pub(super) fn check_space(&self) {
        if let Err(e) = self.promise(EVENT_SLACK * 2) {
            let mut log = lock(&self.log);
            if log.open_error.is_none() {
                tracing::error!(path = %self.path.display(), error = %e, "the audit log has no room for an event");
                log.open_error = Some(e.to_string());
            }
        } else {
            self.release(EVENT_SLACK * 2);
        }
    }

    /// Promises `need` bytes of the log to one future event: cuts a torn
    /// tail, then makes sure disk is reserved for every promised byte.
    /// Returns the log's length (a lower bound on where the event will
    /// start: [`AppendLog::whole_len`]) and identity.
    ///
    /// The log's lock is taken only when its last byte is not a line
    /// break, to cut a torn tail; a log that ends with a whole line (every
    /// operation's case) is only looked at (ADR 0009: two `flock` calls and
    /// an `fstat` fewer per write).
    fn promise(&self, need: u64) -> Result<(u64, (u64, u64)), AuditError> {
        let mut st = lock(&self.log);
        let log = match &st.log {
            Some(l) => l.clone(),
            None => return Err(AuditError::LogNotOpen),
        };
        let size = if let Some(len) = log.whole_len()? {
            len
        } else {
            let mut guard = log.lock()?;
            if guard.repair_tail()? > 0 {
                st.reserved_to = 0;
            }
            log.len()?
        };
        self.grow_reservation(&mut st, &log, size, need)?;
        st.promised += need;
        Ok((size, log.identity()))
    }

    /// Makes sure disk is allocated for `size + promised + extra` bytes.
    pub(super) fn grow_reservation(
        &self,
        st: &mut LogState,
        log: &AppendLog,
        size: u64,
        extra: u64,
    ) -> Result<(), AuditError> {
        if st.can_reserve == CanReserve::No || size + st.promised + extra <= st.reserved_to {
            return Ok(());
        }
        let want = st.promised + extra + RESERVE_AHEAD;
        match log.reserve(size, want) {
            Ok(Reserved::Yes) => {
                st.can_reserve = CanReserve::Yes;
                st.reserved_to = size + want;
                Ok(())
            }
            Ok(Reserved::Unsupported) => {
                tracing::warn!(path = %self.path.display(),
                    "the audit log's filesystem cannot reserve space; an event may still fail after its operation committed (it then stays in the intent journal)");
                st.can_reserve = CanReserve::No;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    pub(super) fn release(&self, need: u64) {
        let mut st = lock(&self.log);
        st.promised = st.promised.saturating_sub(need);
    }
}
