//! The sink: opens the log and the journal, appends events in order, keeps
//! them in memory while the log fails, and closes. It composes the parts:
//! each of `reserve.rs`, `journal.rs`, `flusher.rs` and `recovery.rs` owns
//! its own state and knows nothing of the sink.

use super::AuditError;
use super::event::GapEvent;
use super::flusher::{Flusher, GroupSync};
use super::journal::{IntentJournal, journal_dir};
use super::line::event_line;
use super::recovery::{log_recovery, recover};
use super::reserve::{
    CommitFacts, EVENT_SLACK, ReserveState, committed_event, intent, refuse_or_warn,
};
use super::{AuditEvent, CommitIntent, GrantEvent, Recovery, Reservation, lock, now_rfc3339};
use crate::api::OpCtx;
use crate::config::{AuditConfig, FlushMode};
use crate::error::Refusal;
use crate::policy::{GrantForm, GrantOutcome};
use crate::{hex, path_hash};
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::collections::VecDeque;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;
use writegate_fs::AppendLog;

/// Events kept in memory while the log cannot take them; beyond this they
/// are counted as lost (and an `audit.gap` line says how many once the log
/// works again).
pub const MAX_BACKLOG: usize = 10_000;

/// An event waiting for the log to work again.
struct Queued {
    line: Vec<u8>,
    intent: Option<CommitIntent>,
    promised: u64,
}

#[derive(Default)]
struct LogState {
    log: Option<Arc<AppendLog>>,
    /// Why the log is not open, while it is not.
    open_error: Option<String>,
    backlog: VecDeque<Queued>,
    lost: u64,
    /// Space promised to future events, and the disk allocated for it.
    reserve: ReserveState,
    /// The last `fdatasync` of the log failed.
    flush_failed: bool,
}

/// The sink's parts, shared with its flusher thread.
struct Shared {
    path: PathBuf,
    required: bool,
    raw_paths: bool,
    flush: FlushMode,
    tag: String,
    next_op: AtomicU64,
    log: Mutex<LogState>,
    failing: AtomicBool,
    failures: AtomicU64,
    log_sync: GroupSync,
    journal: IntentJournal,
    flusher: Flusher,
}

/// Where events go: a 0600 JSON-lines file (see the module doc for what is
/// guaranteed). One per process; shareable between threads.
pub struct AuditSink {
    shared: Arc<Shared>,
    flusher: Mutex<Option<JoinHandle<()>>>,
    recovery: Recovery,
    closed: AtomicBool,
}

impl AuditSink {
    /// Opens (creating 0600, parents 0700) the log at `path`, cuts a torn
    /// tail, recovers the events of dead processes' journals (directory
    /// `<path>.intents/`), creates this process's journal and starts the
    /// flusher. A failure is not fatal here: it is logged, the sink reports
    /// itself failing and [`AuditSink::startup_problem`] says why (the
    /// binary refuses to start on it when `audit.required`).
    pub fn open(path: &Path, cfg: &AuditConfig) -> AuditSink {
        let shared = Arc::new(Shared {
            path: path.to_path_buf(),
            required: cfg.required,
            raw_paths: cfg.raw_paths,
            flush: cfg.flush,
            tag: process_tag(),
            next_op: AtomicU64::new(1),
            log: Mutex::new(LogState::default()),
            failing: AtomicBool::new(true),
            failures: AtomicU64::new(0),
            log_sync: GroupSync::default(),
            journal: IntentJournal::default(),
            flusher: Flusher::default(),
        });
        let mut recovery = Recovery::default();
        match AppendLog::open(path) {
            Ok(log) => {
                let log = Arc::new(log);
                match recover(path, cfg.raw_paths, &log) {
                    Ok(r) => recovery = r,
                    Err(e) => {
                        tracing::error!(path = %path.display(), error = %e,
                            "cannot repair the audit log or recover the events of a previous run");
                        lock(&shared.log).open_error = Some(e.to_string());
                    }
                }
                lock(&shared.log).log = Some(log);
            }
            Err(e) => {
                let e = crate::error::with_causes(&e);
                tracing::error!(path = %path.display(), error = %e, "cannot open audit log");
                lock(&shared.log).open_error = Some(e);
            }
        }
        shared.journal.create(&journal_dir(path));
        // The log must be able to take at least one event now.
        shared.check_space();
        shared.update_failing(&lock(&shared.log));
        log_recovery(path, &recovery);
        if !cfg.required {
            tracing::warn!(
                path = %path.display(),
                "audit.required = false: writes are served even while the audit log cannot be written; operations may go unrecorded"
            );
        }
        let flusher = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("audit-flusher".into())
                .spawn(move || shared.run_flusher())
                .map_err(|e| tracing::error!(error = %e, "cannot start the audit flusher"))
                .ok()
        };
        AuditSink {
            shared,
            flusher: Mutex::new(flusher),
            recovery,
            closed: AtomicBool::new(false),
        }
    }

    /// The log file's path.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Whether raw paths go into events.
    pub fn raw_paths(&self) -> bool {
        self.shared.raw_paths
    }

    /// Whether `audit.required` is on.
    pub fn required(&self) -> bool {
        self.shared.required
    }

    /// The flush mode.
    pub fn flush_mode(&self) -> FlushMode {
        self.shared.flush
    }

    /// What start-up repaired and recovered.
    pub fn recovery(&self) -> &Recovery {
        &self.recovery
    }

    /// Why the log cannot be used, if it cannot: not open, not repairable,
    /// no journal, no space for an event. `None` when it works.
    pub fn startup_problem(&self) -> Option<String> {
        let log = lock(&self.shared.log);
        if let Some(e) = &log.open_error {
            return Some(e.clone());
        }
        if log.log.is_none() {
            return Some("the audit log is not open".into());
        }
        if let Some(e) = self.shared.journal.error() {
            return Some(format!("the intent journal cannot be created: {e}"));
        }
        if !log.backlog.is_empty() || log.flush_failed {
            return Some("the audit log cannot be written".into());
        }
        None
    }

    /// False when `audit.required` is on and the log is failing (not open,
    /// events waiting, the last flush failed). Tries to catch up first, so
    /// a log that works again is healthy at once.
    pub fn healthy(&self) -> bool {
        if !self.shared.failing.load(Ordering::SeqCst) {
            return true;
        }
        self.shared.catch_up();
        !(self.shared.required && self.shared.failing.load(Ordering::SeqCst))
    }

    /// Whether every event appended so far is on disk (`fdatasync`ed) and
    /// none is waiting.
    pub fn flushed(&self) -> bool {
        let (appended, synced) = self.shared.log_sync.latest();
        appended == synced && lock(&self.shared.log).backlog.is_empty()
    }

    /// Number of failed appends and flushes since start.
    pub fn failures(&self) -> u64 {
        self.shared.failures.load(Ordering::SeqCst)
    }

    /// A fresh operation id (`<12 hex>-<n>`, unique across processes).
    pub fn next_op_id(&self) -> String {
        let n = self.shared.next_op.fetch_add(1, Ordering::Relaxed);
        let mut digits = itoa::Buffer::new();
        let digits = digits.format(n);
        // `<tag>-<n>`, without the formatter (one per operation).
        let mut id = String::with_capacity(self.shared.tag.len() + 1 + digits.len());
        id.push_str(&self.shared.tag);
        id.push('-');
        id.push_str(digits);
        id
    }

    /// Appends one event as one line. Failures are logged and counted; the
    /// event waits in memory and is retried.
    pub fn record(&self, event: &AuditEvent) {
        self.record_op(event, None);
    }

    /// Appends an operation's event and, once it is in the log (on disk
    /// with `flush = "sync"`), retires its intent.
    pub fn record_op(&self, event: &AuditEvent, intent: Option<CommitIntent>) {
        self.shared.submit(event_line(event), intent, 0);
    }

    /// Records an approval grant (`approval.grant`) made under
    /// `reservation`.
    pub fn record_grant(
        &self,
        reservation: Option<Reservation>,
        ctx: &OpCtx,
        outcome: &GrantOutcome,
    ) {
        let text = outcome.grant.text();
        let (mode, path_text) = split_command(text);
        let raw = self.shared.raw_paths;
        let event = GrantEvent {
            v: 1,
            ts: now_rfc3339(),
            kind: "approval.grant",
            op_id: self.next_op_id(),
            route: Cow::Borrowed(ctx.route),
            session_id: ctx.session_id.clone(),
            workspace: ctx.runtime.id.clone(),
            scope: outcome.scope,
            form: outcome.grant.form(),
            mode: mode.map(str::to_string),
            path_hash: path_hash(Path::new(OsStr::from_bytes(path_text.as_bytes()))),
            expires_in_secs: outcome.expires_in_secs,
            command: (raw && outcome.grant.form() == GrantForm::Command).then(|| text.to_string()),
            pattern: (raw && outcome.grant.form() == GrantForm::Pattern).then(|| text.to_string()),
        };
        let promised = reservation.map_or(0, |r| r.need);
        match serde_json::to_vec(&event) {
            Ok(line) => self.shared.submit(line, None, promised),
            Err(e) => {
                self.shared.release(promised);
                tracing::error!(error = %e, "cannot serialise audit event");
            }
        }
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
        let (event, need) = committed_event(draft, facts, elapsed, s.raw_paths);
        let (offset, log_id) = match s.promise(need) {
            Ok(at) => at,
            Err(why) => return self.refuse_or_warn(&why),
        };
        let line = intent(offset, log_id, facts, &event);
        let seq = match s.journal.append(&line, &s.failing) {
            Ok(seq) => seq,
            Err(why) => {
                s.release(need);
                return self.refuse_or_warn(&why);
            }
        };
        let journal_seq = (s.flush == FlushMode::Sync).then(|| {
            // Start its fdatasync now, on the flusher, so that it overlaps
            // the caller's own writing and fsync of the new file;
            // `intent_durable` waits for it just before the rename.
            s.flusher.kick_journal();
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
        match s.journal.wait_synced(seq) {
            None => self
                .refuse_or_warn::<()>(&AuditError::NoJournal(None))
                .map(|_| ()),
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => {
                s.failures.fetch_add(1, Ordering::SeqCst);
                self.refuse_or_warn::<()>(&e.into()).map(|_| ())
            }
        }
    }

    fn refuse_or_warn<T>(&self, why: &AuditError) -> Result<Option<T>, Refusal> {
        refuse_or_warn(&self.shared.path, self.shared.required, why)
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

    /// Stops the flusher after a last flush, and removes this process's
    /// journal when nothing is pending (a journal with pending intents is
    /// left for the next start). Called at shutdown; idempotent.
    pub fn close(&self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        self.shared.flusher.stop();
        if let Some(h) = lock(&self.flusher).take() {
            let _ = h.join();
        }
        self.shared.flush_now();
        self.shared.journal.close();
        let (appended, synced) = self.shared.log_sync.latest();
        let log = lock(&self.shared.log);
        if log.backlog.is_empty() && appended == synced {
            tracing::info!(path = %self.shared.path.display(), "audit log flushed");
        } else {
            tracing::error!(
                path = %self.shared.path.display(),
                waiting = log.backlog.len(),
                "audit log not fully flushed at shutdown"
            );
        }
    }
}

impl Drop for AuditSink {
    fn drop(&mut self) {
        self.close();
    }
}

impl Shared {
    fn update_failing(&self, log: &LogState) {
        let failing = log.log.is_none() || !log.backlog.is_empty() || log.flush_failed;
        self.failing.store(failing, Ordering::SeqCst);
        if failing {
            // Make the flusher retry.
            self.flusher.nudge();
        }
    }

    /// Reserves space for the first event at start, so that a full disk is
    /// found before serving.
    fn check_space(&self) {
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

    /// Promises `need` bytes of the log to one future event
    /// ([`ReserveState::promise`]).
    fn promise(&self, need: u64) -> Result<(u64, (u64, u64)), AuditError> {
        let mut st = lock(&self.log);
        let log = match &st.log {
            Some(l) => l.clone(),
            None => return Err(AuditError::LogNotOpen),
        };
        st.reserve.promise(&log, &self.path, need)
    }

    fn release(&self, need: u64) {
        lock(&self.log).reserve.release(need);
    }

    /// Appends `line` (an event without its `\n`): after anything still
    /// waiting, in order. Then makes it durable in `sync` mode and retires
    /// its intent.
    fn submit(&self, mut line: Vec<u8>, intent: Option<CommitIntent>, promised: u64) {
        line.push(b'\n');
        let mut st = lock(&self.log);
        let mut written = self.drain(&mut st);
        let mut seq = None;
        if st.backlog.is_empty() {
            let need = intent.as_ref().map_or(promised, |i| i.need);
            match self.write_line(&mut st, &line, need) {
                Ok(n) => {
                    seq = Some(n);
                    if intent.is_some() {
                        written += 1;
                    }
                }
                Err(e) => {
                    self.failed(&mut st, &e.to_string());
                    self.enqueue(&mut st, line, intent, need);
                }
            }
        } else {
            let need = intent.as_ref().map_or(promised, |i| i.need);
            self.enqueue(&mut st, line, intent, need);
        }
        self.update_failing(&st);
        drop(st);
        if written == 0 && seq.is_none() {
            return;
        }
        self.after_append(written);
    }

    /// Writes one line now, keeping promised space for the events it was
    /// promised to. Returns the append's number.
    fn write_line(&self, st: &mut LogState, line: &[u8], promised: u64) -> Result<u64, AuditError> {
        let log = match &st.log {
            Some(l) => l.clone(),
            None => return Err(AuditError::LogNotOpen),
        };
        st.reserve
            .make_room(&log, &self.path, line.len() as u64, promised)?;
        match log.append(line) {
            Ok(_) => {
                st.reserve.release(promised);
                Ok(self.log_sync.mark())
            }
            Err(e) => {
                // A rollback truncation frees the reserved blocks too.
                st.reserve.forget_allocation();
                Err(e.into())
            }
        }
    }

    fn failed(&self, st: &mut LogState, e: &str) {
        self.failures.fetch_add(1, Ordering::SeqCst);
        if st.backlog.is_empty() {
            tracing::error!(path = %self.path.display(), error = %e,
                required = self.required, "audit append failed; events wait in memory until the log works again");
        }
    }

    fn enqueue(&self, st: &mut LogState, line: Vec<u8>, intent: Option<CommitIntent>, need: u64) {
        if st.backlog.len() >= MAX_BACKLOG {
            st.lost += 1;
            st.reserve.release(need);
            if st.lost == 1 || st.lost.is_power_of_two() {
                tracing::error!(
                    lost = st.lost,
                    "audit events lost: too many waiting for the log"
                );
            }
            if intent.is_some() {
                // Counted in the `audit.gap` line; its intent is retired
                // so that the journal can be cleared again.
                self.journal.done();
            }
            return;
        }
        st.backlog.push_back(Queued {
            line,
            intent,
            promised: need,
        });
    }

    /// Writes what is waiting (reopening the log if needed), in order, and
    /// an `audit.gap` line for what was lost. Returns how many intents'
    /// events it wrote. Stops at the first failure.
    fn drain(&self, st: &mut LogState) -> usize {
        let mut written = 0;
        if st.backlog.is_empty() && st.lost == 0 && st.log.is_some() {
            return written;
        }
        if st.log.is_none() {
            match AppendLog::open(&self.path) {
                Ok(l) => {
                    tracing::info!(path = %self.path.display(), "audit log opened");
                    st.log = Some(Arc::new(l));
                    st.open_error = None;
                    st.reserve.forget_allocation();
                }
                Err(_) => return written,
            }
        }
        while let Some(q) = st.backlog.front() {
            let (line, promised) = (q.line.clone(), q.promised);
            if self.write_line(st, &line, promised).is_err() {
                return written;
            }
            if let Some(q) = st.backlog.pop_front()
                && q.intent.is_some()
            {
                written += 1;
            }
        }
        if st.lost > 0 {
            let gap = GapEvent {
                v: 1,
                ts: now_rfc3339(),
                kind: "audit.gap",
                lost: st.lost,
            };
            if let Ok(mut line) = serde_json::to_vec(&gap) {
                line.push(b'\n');
                if self.write_line(st, &line, 0).is_ok() {
                    st.lost = 0;
                }
            }
        }
        if st.backlog.is_empty() {
            tracing::info!(path = %self.path.display(), "audit log writable again; waiting events written");
        }
        written
    }

    /// After appends: flush them (sync mode) or mark the log dirty
    /// (interval mode), then retire `intents` intents.
    fn after_append(&self, intents: usize) {
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
            self.flusher.mark_dirty();
        }
        for _ in 0..intents {
            self.journal.done();
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

    /// The flusher thread: flushes the log and retries it while it fails,
    /// and `fdatasync`s the journal when asked ([`Flusher::run`]).
    fn run_flusher(&self) {
        self.flusher.run(&self.failing, &|| self.flush_now(), &|| {
            self.journal.sync_all();
        });
    }

    /// A flush by the flusher (and at close): catch up, then `fdatasync`
    /// what was appended.
    fn flush_now(&self) {
        self.catch_up();
        let (appended, synced) = self.log_sync.latest();
        if appended > synced
            && let Err(e) = self.sync_log(appended)
        {
            tracing::error!(path = %self.path.display(), error = %e, "audit flush failed");
        }
    }

    /// Tries to write what waits (and to flush, if the last flush failed).
    fn catch_up(&self) {
        let mut st = lock(&self.log);
        let written = self.drain(&mut st);
        let retry_flush = st.flush_failed;
        self.update_failing(&st);
        drop(st);
        if written > 0 {
            self.after_append(written);
        } else if retry_flush {
            // A failed flush is retried with a fresh fdatasync, whatever the
            // counters say.
            let log = lock(&self.log).log.clone();
            if let Some(log) = log
                && log.sync().is_ok()
            {
                let mut st = lock(&self.log);
                st.flush_failed = false;
                self.update_failing(&st);
                tracing::info!(path = %self.path.display(), "audit log flushes again");
            }
        }
    }
}

/// 12 hex digits that tell this process's operation ids from any other's.
fn process_tag() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let seed = format!("{}-{}-{:p}", std::process::id(), now.as_nanos(), &now);
    hex(&Sha256::digest(seed.as_bytes()))[..12].to_string()
}

/// `(mode, path text)` of `edit_file <mode> <path>`; `(None, text)` for
/// other text.
fn split_command(text: &str) -> (Option<&str>, &str) {
    text.strip_prefix("edit_file ")
        .and_then(|rest| rest.split_once(' '))
        .map_or((None, text), |(mode, path)| (Some(mode), path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_split_into_mode_and_path() {
        assert_eq!(
            split_command("edit_file write /a b/c"),
            (Some("write"), "/a b/c")
        );
        assert_eq!(split_command("edit_file *"), (None, "edit_file *"));
        assert_eq!(split_command("x"), (None, "x"));
    }
}
