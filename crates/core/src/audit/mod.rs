//! Audit events (SPEC 10): exactly one `fs.access` or `fs.denied` per
//! operation that reached routing, and one `approval.grant` per approval
//! granted, appended as one JSON line each.
//!
//! What the sink guarantees (docs/behaviour.md, "Audit"):
//!
//! - **Whole lines only.** Appends go through [`writegate_fs::AppendLog`]:
//!   a line is wholly in the file or not at all (a short write is rolled
//!   back; a torn tail left by a crash is cut before the next line).
//! - **Nothing commits unrecorded when `audit.required`.** Before a write
//!   or edit commits, [`AuditSink::prepare`] reserves disk space for its
//!   event and appends the operation's intent to this process's journal;
//!   if either fails the operation is refused and nothing is written.
//!   While the log is failing, writes, edits and approvals are refused.
//! - **Exactly one event after a crash.** Every event carries an `opId`.
//!   At start-up, the journals of dead processes are read: an intent
//!   whose `opId` is not in the log gets its event then, marked
//!   `recovered` (`committed` when the file holds what the operation
//!   wrote, `not_committed` when the file is still the one it replaced,
//!   `unconfirmed` when the file changed again since).
//! - **Durability** per `audit.flush` ([`FlushMode`]).
//! - **Nothing dropped silently.** An event that cannot be appended waits
//!   in memory (at most [`MAX_BACKLOG`]) and is retried; events beyond
//!   that are counted and an `audit.gap` line says how many were lost.

use crate::api::OpCtx;
use crate::config::{AuditConfig, FlushMode};
use crate::error::{ErrorKind, Refusal};
use crate::event_line::{AsCommitted, committed_event_line, event_line};
use crate::policy::{GrantOutcome, Scope};
use crate::{hex, path_hash, sha256_tagged};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::borrow::Cow;
use std::collections::{HashSet, VecDeque};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use writegate_fs::{AppendLog, FsError, Journal, Reserved};

/// In `flush = "interval"` mode, an event is `fdatasync`ed at most this
/// long after it was appended (plus the time the `fdatasync` takes).
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(20);

/// Events kept in memory while the log cannot take them; beyond this they
/// are counted as lost (and an `audit.gap` line says how many once the log
/// works again).
pub const MAX_BACKLOG: usize = 10_000;

/// While the log is failing, appending is retried this often.
const RETRY_EVERY: Duration = Duration::from_millis(250);

/// A journal longer than this is cleared before more intents are added:
/// new operations wait at [`AuditSink::prepare`] until the pending ones
/// are recorded.
const JOURNAL_LIMIT: u64 = 1 << 20;

/// When the last pending intent is retired, the journal is emptied
/// (`ftruncate`) only if it is longer than this; otherwise [`RETIRED`] is
/// appended, and recovery reads a journal from after its last such line.
/// Issue 12: an `ftruncate` per write freed the journal's block and the
/// next intent allocated it again, about 5 µs of CPU (a loop of a
/// 620-byte `write` and an `ftruncate` took 6.7 µs, the `write` alone
/// 1.7 µs); the short line retires the same intents at the same moment.
const JOURNAL_CLEAR_AT: u64 = 64 * 1024;

/// The journal line that retires every intent above it (nothing was
/// pending when it was written). Recovery takes any line that ends with it
/// for one (an intent line ends with its event's `}}`), so that it still
/// counts after a fragment of a failed append.
const RETIRED: &[u8] = b"{\"retired\":true}\n";

/// How many times (of [`RETRY_EVERY`]) an operation waits for room in a
/// journal over [`JOURNAL_LIMIT`] before it is refused: 10 s.
const JOURNAL_WAITS: u32 = 40;

/// Disk reserved beyond what pending events need, so that a reservation is
/// not renewed for every operation.
const RESERVE_AHEAD: u64 = 16 * 1024;

/// Bytes an event may grow between its intent and its line (`ts`,
/// `durationMs`, an errorKind), plus a hint when raw paths are on.
const EVENT_SLACK: u64 = 512;

/// One audit event, serialised as one JSON line with camelCase keys.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    /// Always 1.
    pub v: u32,
    /// RFC 3339 UTC time the outcome was known, millisecond precision.
    pub ts: String,
    /// `fs.access` or `fs.denied`.
    #[serde(rename = "type")]
    pub kind: EventKind,
    /// Unique id of the operation (`<12 hex of the process>-<n>`): the key
    /// that makes crash recovery write an event only when it is missing.
    #[serde(default)]
    pub op_id: String,
    /// `write`, `edit` or `read`.
    pub intent: Intent,
    /// The front end's name for the method or tool: `ACP writeTextFile`,
    /// `edit`, `ACP readTextFile`, `read_lines`, ...
    pub route: Cow<'static, str>,
    /// `workspace` or `external`.
    pub writer: Writer,
    /// The request's session, if it named one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Runtime id of the connection's workspace.
    pub workspace: String,
    /// First 16 hex of sha256 of the canonical path (or of the raw input when
    /// refused before resolving).
    pub path_hash: String,
    /// Bytes of the request's content.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// The edit mode (`write` for whole-file writes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// Whether the write created the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<bool>,
    /// Size of the file before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_before: Option<u64>,
    /// Size of the file after.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_after: Option<u64>,
    /// `sha256:<hex>` of the file before (when read whole).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hash_before: Option<String>,
    /// `sha256:<hex>` of the file after.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hash_after: Option<String>,
    /// Why it was refused (SPEC 11).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<Cow<'static, str>>,
    /// The refusal's hint, only with `audit.raw_paths`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// Whole milliseconds from the start of the operation.
    pub duration_ms: u64,
    /// The marker's source on the external route.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<Cow<'static, str>>,
    /// When the gate held the operation and a person was asked: the answer
    /// (`allowed_once`, `allowed_always`, `denied`, `cancelled`,
    /// `unanswered`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<Cow<'static, str>>,
    /// The parent directories a workspace write created (issue 10), outermost
    /// first, each as the `pathHash` of its canonical path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_dirs: Option<Vec<String>>,
    /// True for an edit's `dryRun` (nothing was written).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
    /// Raw path, only with `audit.raw_paths`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Set only on an event written at start-up for an operation of a
    /// process that died before recording it (see [`Recovered`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovered: Option<Recovered>,
}

/// An event's `type`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum EventKind {
    /// `fs.access`: the operation succeeded.
    #[serde(rename = "fs.access")]
    Access,
    /// `fs.denied`: it was refused or failed.
    #[serde(rename = "fs.denied")]
    Denied,
}

/// What an operation meant to do (`intent`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Intent {
    /// A whole-file write.
    Write,
    /// An edit (any mode of SPEC 8).
    Edit,
    /// A read.
    Read,
}

/// Which writer handled (or would have handled) an operation (`writer`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Writer {
    /// The workspace writer.
    Workspace,
    /// The external host writer.
    External,
}

/// `recovered`: what start-up found for an operation of a dead process
/// that had journaled its intent to commit but left no event.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Recovered {
    /// The file holds exactly what the operation wrote: it committed
    /// (`fs.access`).
    Committed,
    /// The file is still the one the operation would have replaced (or
    /// still missing): it did not commit (`fs.denied`, `internal_error`).
    NotCommitted,
    /// The file changed again since (or cannot be looked at): the operation
    /// may have committed before that. Recorded as `fs.access` so that no
    /// committed change is left without an event.
    Unconfirmed,
}

/// An `approval.grant` event: an approval was granted (SPEC 12).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GrantEvent {
    /// Always 1.
    pub v: u32,
    /// RFC 3339 UTC time of the grant.
    pub ts: String,
    /// Always `approval.grant`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Unique id of the operation.
    pub op_id: String,
    /// The front end's name for the method or tool.
    pub route: Cow<'static, str>,
    /// The granting request's session, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Runtime id of the connection's workspace.
    pub workspace: String,
    /// `once`, `session`, `workspace` or `persistent`.
    pub scope: Scope,
    /// `command` (one literal synthetic command) or `pattern` (a glob).
    pub form: &'static str,
    /// The mode part of `edit_file <mode> <path>`, when the text has that
    /// shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// First 16 hex of sha256 of the path part of the command (for a
    /// pattern, of its glob text after `edit_file <mode> `); of the whole
    /// text when it has no such part.
    pub path_hash: String,
    /// Seconds until it expires (`once`, `session`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_in_secs: Option<u64>,
    /// The command, only with `audit.raw_paths`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The pattern, only with `audit.raw_paths`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
}

/// An `audit.gap` line: events that could not be kept (the log was failing
/// and more than [`MAX_BACKLOG`] were waiting).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GapEvent {
    v: u32,
    ts: String,
    #[serde(rename = "type")]
    kind: &'static str,
    lost: u64,
}

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
    need: u64,
    /// The journal append's number, while it may not be on disk yet
    /// (`flush = "sync"`).
    journal_seq: Option<u64>,
}

/// Disk space promised to one event (from [`AuditSink::reserve_event`]).
#[derive(Debug)]
pub struct Reservation {
    need: u64,
}

/// The journal line of an intent.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct IntentRecord {
    /// Log length when the intent was written: its event comes after.
    log_offset: u64,
    /// `(dev, ino)` of the log then.
    log_id: (u64, u64),
    /// Hex of the canonical target's bytes.
    target: String,
    /// The file the commit replaces.
    before: Option<(u64, u64)>,
    /// The event to write if the process dies before it does (`fs.access`
    /// as the commit would record it).
    event: AuditEvent,
}

/// The bytes `serde_json::to_vec` gives for an [`IntentRecord`] of these
/// fields, with `event` the event already serialised (so an intent costs
/// one serialisation of its event, not two): `{"logOffset":N,"logId":[D,I],
/// "target":"<hex>","before":null|[D,I],"event":<event>}`. `target` must be
/// lowercase hex (no character JSON escapes). A unit test holds it to
/// serde's bytes.
fn intent_line(
    log_offset: u64,
    log_id: (u64, u64),
    target: &str,
    before: Option<(u64, u64)>,
    event: &[u8],
) -> Vec<u8> {
    use std::io::Write as _;
    debug_assert!(target.bytes().all(|b| b.is_ascii_hexdigit()));
    // Keys, brackets and five numbers of up to 20 digits each.
    let mut line = Vec::with_capacity(event.len() + target.len() + 192);
    // Writing to a Vec cannot fail.
    let _ = write!(
        line,
        "{{\"logOffset\":{log_offset},\"logId\":[{},{}],\"target\":\"{target}\",\"before\":",
        log_id.0, log_id.1
    );
    let _ = match before {
        Some((dev, ino)) => write!(line, "[{dev},{ino}]"),
        None => write!(line, "null"),
    };
    line.extend_from_slice(b",\"event\":");
    line.extend_from_slice(event);
    line.push(b'}');
    line
}

/// Just the `opId` of a log line.
#[derive(Deserialize)]
struct OpIdOnly {
    #[serde(rename = "opId", default)]
    op_id: Option<String>,
}

/// Group commit over one file: appends are numbered; [`GroupSync::wait`]
/// returns once an `fdatasync` that started after append `seq` succeeded,
/// and concurrent waiters share one.
#[derive(Default)]
struct GroupSync {
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
    fn mark(&self) -> u64 {
        let mut s = lock(&self.state);
        s.appended += 1;
        s.appended
    }

    fn latest(&self) -> (u64, u64) {
        let s = lock(&self.state);
        (s.appended, s.synced)
    }

    fn wait(&self, seq: u64, sync: &dyn Fn() -> Result<(), FsError>) -> Result<(), FsError> {
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

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// An event waiting for the log to work again.
struct Queued {
    line: Vec<u8>,
    intent: Option<CommitIntent>,
    promised: u64,
}

/// Whether the log's filesystem can reserve space.
#[derive(Clone, Copy, PartialEq, Eq)]
enum CanReserve {
    Unknown,
    Yes,
    No,
}

struct LogState {
    log: Option<Arc<AppendLog>>,
    /// Why the log is not open, while it is not.
    open_error: Option<String>,
    backlog: VecDeque<Queued>,
    lost: u64,
    /// Bytes promised to events of prepared operations and reservations.
    promised: u64,
    /// Disk is allocated up to this offset of the log.
    reserved_to: u64,
    can_reserve: CanReserve,
    /// The last `fdatasync` of the log failed.
    flush_failed: bool,
}

struct JournalState {
    journal: Option<Arc<Journal>>,
    /// Why there is no journal, while there is none.
    error: Option<String>,
    len: u64,
    pending: usize,
    /// Operations waiting in [`Shared::journal_append`] for room.
    waiting: usize,
    /// An append failed: the journal may end in a fragment (a short write
    /// whose rollback failed too), and `len` may be behind the file. The
    /// next retirement empties the journal instead of appending to it.
    damaged: bool,
}

impl JournalState {
    /// Retires every intent in the journal; only with nothing pending.
    /// Appends [`RETIRED`], or empties the journal (`ftruncate` to 0) once
    /// it is longer than [`JOURNAL_CLEAR_AT`]. A failure is logged: the
    /// intents then stay unretired, and recovery finds their events in
    /// the log by `opId` (the same as a failed emptying before issue 12).
    fn retire_all(&mut self) {
        debug_assert_eq!(self.pending, 0);
        let Some(journal) = self.journal.clone() else {
            return;
        };
        if self.len > JOURNAL_CLEAR_AT || self.damaged {
            match journal.clear() {
                Ok(()) => {
                    self.len = 0;
                    self.damaged = false;
                    return;
                }
                Err(e) => tracing::warn!(error = %crate::error::with_causes(&e),
                    "cannot clear the intent journal; retiring its intents with a line"),
            }
        }
        match journal.append(RETIRED, self.len) {
            Ok(()) => self.len += RETIRED.len() as u64,
            Err(e) => {
                self.damaged = true;
                tracing::warn!(error = %crate::error::with_causes(&e),
                    "cannot retire the intents of the journal");
            }
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
    journal: Mutex<JournalState>,
    journal_room: Condvar,
    journal_sync: GroupSync,
    flusher: Mutex<FlusherState>,
    wake: Condvar,
}

/// What [`AuditSink::open`] repaired and recovered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Bytes of a torn last line cut from the log.
    pub torn_bytes: u64,
    /// Journals of dead processes read (and removed).
    pub journals: usize,
    /// Events written for intents that had none, by outcome:
    /// `(committed, not_committed, unconfirmed)`.
    pub recovered: (u64, u64, u64),
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
            log: Mutex::new(LogState {
                log: None,
                open_error: None,
                backlog: VecDeque::new(),
                lost: 0,
                promised: 0,
                reserved_to: 0,
                can_reserve: CanReserve::Unknown,
                flush_failed: false,
            }),
            failing: AtomicBool::new(true),
            failures: AtomicU64::new(0),
            log_sync: GroupSync::default(),
            journal: Mutex::new(JournalState {
                journal: None,
                error: None,
                len: 0,
                pending: 0,
                waiting: 0,
                damaged: false,
            }),
            journal_room: Condvar::new(),
            journal_sync: GroupSync::default(),
            flusher: Mutex::new(FlusherState::default()),
            wake: Condvar::new(),
        });
        let mut recovery = Recovery::default();
        match AppendLog::open(path) {
            Ok(log) => {
                let log = Arc::new(log);
                match recover(&shared, &log) {
                    Ok(r) => recovery = r,
                    Err(e) => {
                        tracing::error!(path = %path.display(), error = %e,
                            "cannot repair the audit log or recover the events of a previous run");
                        lock(&shared.log).open_error = Some(e);
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
        {
            let mut j = lock(&shared.journal);
            match Journal::create(&journal_dir(path)) {
                Ok(journal) => j.journal = Some(Arc::new(journal)),
                Err(e) => {
                    let e = crate::error::with_causes(&e);
                    tracing::error!(error = %e, "cannot create the audit intent journal");
                    j.error = Some(e);
                }
            }
        }
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
        if let Some(e) = &lock(&self.shared.journal).error {
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

    /// The refusal of an operation the log cannot record, with `why`.
    fn refusal(why: &str) -> Refusal {
        Refusal::new(
            ErrorKind::IoError,
            format!(
                "the audit log cannot record this operation ({why}) and audit.required is on, so nothing was done; free space for the audit log or fix it, then retry"
            ),
        )
    }

    /// Before a commit (issue 13): reserves disk space for the event of the
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
            return self.refuse_or_warn::<()>("no intent journal").map(|_| ());
        };
        match s.journal_sync.wait(seq, &|| journal.sync()) {
            Ok(()) => Ok(()),
            Err(e) => {
                s.failures.fetch_add(1, Ordering::SeqCst);
                self.refuse_or_warn::<()>(&crate::error::with_causes(&e))
                    .map(|_| ())
            }
        }
    }

    fn refuse_or_warn<T>(&self, why: &str) -> Result<Option<T>, Refusal> {
        if self.shared.required {
            tracing::error!(path = %self.shared.path.display(), error = %why,
                "audit log cannot record an operation; refused (audit.required)");
            Err(Self::refusal(why))
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
            command: (raw && outcome.grant.form() == "command").then(|| text.to_string()),
            pattern: (raw && outcome.grant.form() == "pattern").then(|| text.to_string()),
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

    /// Stops the flusher after a last flush, and removes this process's
    /// journal when nothing is pending (a journal with pending intents is
    /// left for the next start). Called at shutdown; idempotent.
    pub fn close(&self) {
        if self.closed.swap(true, Ordering::SeqCst) {
            return;
        }
        {
            let mut f = lock(&self.shared.flusher);
            f.stop = true;
            self.shared.wake.notify_all();
        }
        if let Some(h) = lock(&self.flusher).take() {
            let _ = h.join();
        }
        self.shared.flush_now();
        let mut j = lock(&self.shared.journal);
        if j.pending == 0
            && let Some(journal) = j.journal.take()
            && let Err(e) = journal.remove()
        {
            tracing::warn!(error = %crate::error::with_causes(&e), "cannot remove the intent journal");
        }
        drop(j);
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
            let f = lock(&self.flusher);
            if f.idle {
                self.wake.notify_one();
            }
        }
    }

    /// Reserves space for the first event at start, so that a full disk is
    /// found before serving.
    fn check_space(&self) {
        if let Err(e) = self.promise(EVENT_SLACK * 2) {
            let mut log = lock(&self.log);
            if log.open_error.is_none() {
                tracing::error!(path = %self.path.display(), error = %e, "the audit log has no room for an event");
                log.open_error = Some(e);
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
    /// operation's case) is only looked at (issue 12: two `flock` calls and
    /// an `fstat` fewer per write).
    fn promise(&self, need: u64) -> Result<(u64, (u64, u64)), String> {
        let mut st = lock(&self.log);
        let log = match &st.log {
            Some(l) => l.clone(),
            None => return Err("the audit log is not open".into()),
        };
        let err = |e: FsError| crate::error::with_causes(&e);
        let size = if let Some(len) = log.whole_len().map_err(err)? {
            len
        } else {
            let mut guard = log.lock().map_err(err)?;
            if guard.repair_tail().map_err(err)? > 0 {
                st.reserved_to = 0;
            }
            log.len().map_err(err)?
        };
        self.grow_reservation(&mut st, &log, size, need)?;
        st.promised += need;
        Ok((size, log.identity()))
    }

    /// Makes sure disk is allocated for `size + promised + extra` bytes.
    fn grow_reservation(
        &self,
        st: &mut LogState,
        log: &AppendLog,
        size: u64,
        extra: u64,
    ) -> Result<(), String> {
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
            Err(e) => Err(crate::error::with_causes(&e)),
        }
    }

    fn release(&self, need: u64) {
        let mut st = lock(&self.log);
        st.promised = st.promised.saturating_sub(need);
    }

    /// Appends an intent line; returns the journal and the append's number.
    fn journal_append(&self, line: &[u8]) -> Result<(Arc<Journal>, u64), String> {
        let mut j = lock(&self.journal);
        let mut waits = 0;
        while j.len > JOURNAL_LIMIT && j.pending > 0 {
            // Pending intents are retired as their events are written; not
            // while the log is failing. A wait that does not end (an
            // intent that is never retired) is a refusal, not a hang.
            if self.failing.load(Ordering::SeqCst) {
                return Err("the intent journal is full while the audit log is failing".into());
            }
            if waits == JOURNAL_WAITS {
                return Err(format!(
                    "the intent journal is full: {} operations have not recorded their events",
                    j.pending
                ));
            }
            waits += 1;
            j.waiting += 1;
            j = self
                .journal_room
                .wait_timeout(j, RETRY_EVERY)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            j.waiting -= 1;
        }
        let journal = match &j.journal {
            Some(journal) => journal.clone(),
            None => {
                return Err(j
                    .error
                    .clone()
                    .unwrap_or_else(|| "no intent journal".into()));
            }
        };
        if let Err(e) = journal.append(line, j.len) {
            j.damaged = true;
            return Err(crate::error::with_causes(&e));
        }
        j.len += line.len() as u64;
        j.pending += 1;
        let seq = self.journal_sync.mark();
        Ok((journal, seq))
    }

    /// One pending intent is retired; when none is left, so is every
    /// intent in the journal ([`JournalState::retire_all`]).
    fn journal_done(&self) {
        let mut j = lock(&self.journal);
        j.pending = j.pending.saturating_sub(1);
        if j.pending == 0 && j.len > 0 {
            j.retire_all();
            // A notify is a system call even with nobody waiting.
            if j.waiting > 0 {
                self.journal_room.notify_all();
            }
        }
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
                        written.push(());
                    }
                }
                Err(e) => {
                    self.failed(&mut st, &e);
                    self.enqueue(&mut st, line, intent, need);
                }
            }
        } else {
            let need = intent.as_ref().map_or(promised, |i| i.need);
            self.enqueue(&mut st, line, intent, need);
        }
        self.update_failing(&st);
        drop(st);
        if written.is_empty() && seq.is_none() {
            return;
        }
        self.after_append(written.len());
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
    fn sync_log(&self, seq: u64) -> Result<(), String> {
        let Some(log) = lock(&self.log).log.clone() else {
            return Err("the audit log is not open".into());
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
                Err(crate::error::with_causes(&e))
            }
        }
    }

    /// Writes one line now, keeping promised space for the events it was
    /// promised to. Returns the append's number.
    fn write_line(&self, st: &mut LogState, line: &[u8], promised: u64) -> Result<u64, String> {
        let log = match &st.log {
            Some(l) => l.clone(),
            None => return Err("the audit log is not open".into()),
        };
        let len = line.len() as u64;
        if promised == 0 && st.promised > 0 && st.can_reserve != CanReserve::No {
            // A line nobody promised space to must not use the space
            // promised to a committed operation's event.
            let size = log.len().map_err(|e| crate::error::with_causes(&e))?;
            self.grow_reservation(st, &log, size, len)?;
        }
        match log.append(line) {
            Ok(_) => {
                st.promised = st.promised.saturating_sub(promised);
                Ok(self.log_sync.mark())
            }
            Err(e) => {
                // A rollback truncation frees the reserved blocks too.
                st.reserved_to = 0;
                Err(crate::error::with_causes(&e))
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
            st.promised = st.promised.saturating_sub(need);
            if st.lost == 1 || st.lost.is_power_of_two() {
                tracing::error!(
                    lost = st.lost,
                    "audit events lost: too many waiting for the log"
                );
            }
            if intent.is_some() {
                // Counted in the `audit.gap` line; its intent is retired
                // so that the journal can be cleared again.
                self.journal_done();
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
    /// an `audit.gap` line for what was lost. Returns one entry per intent
    /// written. Stops at the first failure.
    fn drain(&self, st: &mut LogState) -> Vec<()> {
        let mut written = Vec::new();
        if st.backlog.is_empty() && st.lost == 0 && st.log.is_some() {
            return written;
        }
        if st.log.is_none() {
            match AppendLog::open(&self.path) {
                Ok(l) => {
                    tracing::info!(path = %self.path.display(), "audit log opened");
                    st.log = Some(Arc::new(l));
                    st.open_error = None;
                    st.reserved_to = 0;
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
                written.push(());
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

    /// Tries to write what waits (and to flush, if the last flush failed).
    fn catch_up(&self) {
        let mut st = lock(&self.log);
        let written = self.drain(&mut st);
        let retry_flush = st.flush_failed;
        self.update_failing(&st);
        drop(st);
        if !written.is_empty() {
            self.after_append(written.len());
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

    /// `fdatasync`s every intent journaled so far (for `intent_durable`,
    /// which reports a failure to its operation).
    fn sync_journal(&self) {
        let Some(journal) = lock(&self.journal).journal.clone() else {
            return;
        };
        let (appended, _) = self.journal_sync.latest();
        let _ = self.journal_sync.wait(appended, &|| journal.sync());
    }

    /// A flush by the flusher: catch up, then `fdatasync` what was appended.
    fn flush_now(&self) {
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
    fn run_flusher(&self) {
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

/// `<log path>.intents`: the directory of the per-process journals.
pub fn journal_dir(log: &Path) -> PathBuf {
    let mut name = log.as_os_str().to_os_string();
    name.push(".intents");
    PathBuf::from(name)
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

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn log_recovery(path: &Path, r: &Recovery) {
    if r.torn_bytes > 0 {
        tracing::warn!(path = %path.display(), bytes = r.torn_bytes,
            "the audit log ended in a torn line (a crash or a full disk); it was cut back to the last whole line");
    }
    let (c, n, u) = r.recovered;
    if c + n + u > 0 {
        tracing::warn!(path = %path.display(), committed = c, not_committed = n, unconfirmed = u,
            "wrote the audit events of operations a previous run did not record (marked \"recovered\")");
    }
}

/// Start-up repair: cuts a torn tail, then writes the missing events of the
/// journals of dead processes and removes those journals.
fn recover(s: &Shared, log: &AppendLog) -> Result<Recovery, String> {
    let err = |e: FsError| crate::error::with_causes(&e);
    let mut report = Recovery::default();
    let mut guard = log.lock().map_err(err)?;
    report.torn_bytes = guard.repair_tail().map_err(err)?;
    let orphans = writegate_fs::orphan_journals(&journal_dir(&s.path)).map_err(err)?;
    let mut intents = Vec::new();
    for o in &orphans {
        let bytes = o.read().map_err(err)?;
        // Only whole lines: a torn last one was never followed by a commit.
        let whole = match bytes.iter().rposition(|&b| b == b'\n') {
            Some(i) => &bytes[..i],
            None => &[][..],
        };
        // Every intent above the last retiring line was retired.
        let lines: Vec<&[u8]> = whole.split(|&b| b == b'\n').collect();
        let from = lines
            .iter()
            .rposition(|l| RETIRED.strip_suffix(b"\n").is_some_and(|r| l.ends_with(r)))
            .map_or(0, |i| i + 1);
        for l in lines[from..].iter().filter(|l| !l.is_empty()) {
            match serde_json::from_slice::<IntentRecord>(l) {
                Ok(r) => intents.push(r),
                Err(e) => tracing::warn!(journal = %o.path().display(), error = %e,
                    "skipping an unreadable intent"),
            }
        }
    }
    report.journals = orphans.len();
    if intents.is_empty() {
        drop(guard);
    } else {
        let from = intents
            .iter()
            .map(|r| {
                if r.log_id == log.identity() {
                    r.log_offset
                } else {
                    0
                }
            })
            .min()
            .unwrap_or(0);
        let mut seen = HashSet::new();
        guard
            .lines_from(from, &mut |l| {
                if let Ok(OpIdOnly { op_id: Some(id) }) = serde_json::from_slice(l) {
                    seen.insert(id);
                }
            })
            .map_err(err)?;
        for r in intents {
            if !seen.insert(r.event.op_id.clone()) {
                continue;
            }
            let outcome = inspect(&r);
            let mut event = r.event;
            event.recovered = Some(outcome);
            match outcome {
                Recovered::Committed => report.recovered.0 += 1,
                Recovered::NotCommitted => {
                    report.recovered.1 += 1;
                    event.kind = EventKind::Denied;
                    event.error_kind = Some(Cow::Borrowed(ErrorKind::InternalError.as_str()));
                    event.created = None;
                    event.bytes_after = None;
                    event.hash_after = None;
                    if s.raw_paths {
                        event.hint = Some(
                            "the daemon stopped before this write committed; nothing was written"
                                .into(),
                        );
                    }
                }
                Recovered::Unconfirmed => report.recovered.2 += 1,
            }
            guard.append(&event_line(&event)).map_err(err)?;
        }
        drop(guard);
        log.sync().map_err(err)?;
    }
    for o in orphans {
        let path = o.path().to_path_buf();
        o.remove()
            .map_err(|e| format!("{}: {}", path.display(), err(e)))?;
    }
    Ok(report)
}

/// Did the journaled commit happen? Looks at the target read-only.
fn inspect(r: &IntentRecord) -> Recovered {
    let Some(bytes) = unhex(&r.target) else {
        return Recovered::Unconfirmed;
    };
    let target = PathBuf::from(OsStr::from_bytes(&bytes));
    let (Some(parent), Some(leaf)) = (target.parent(), target.file_name()) else {
        return Recovered::Unconfirmed;
    };
    let Ok(dir) = writegate_fs::Dir::open_canonical(parent) else {
        return Recovered::Unconfirmed;
    };
    let max = r.event.bytes_after.unwrap_or(0);
    match writegate_fs::read_existing(&dir, leaf, Some(max), writegate_fs::Atime::Keep) {
        Ok(None) if r.before.is_none() => Recovered::NotCommitted,
        Ok(Some(e)) if Some((e.dev, e.ino)) == r.before => Recovered::NotCommitted,
        Ok(Some(e))
            if !e.truncated && r.event.hash_after.as_deref() == Some(&sha256_tagged(&e.bytes)) =>
        {
            Recovered::Committed
        }
        _ => Recovered::Unconfirmed,
    }
}

/// Current UTC time as RFC 3339 with milliseconds (`2026-11-30T01:02:03.456Z`).
pub fn now_rfc3339() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
    rfc3339(secs, now.subsec_millis())
}

/// `secs` seconds and `ms` milliseconds after the epoch as RFC 3339 in
/// UTC (`2026-11-30T01:02:03.456Z`). Written digit by digit for years
/// 0-9999 (a write takes three timestamps; with `format!` they were about
/// 0.6 % of a 1 KiB write's daemon CPU, issue 12); other years through
/// `format!`.
fn rfc3339(secs: i64, ms: u32) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    // In range by construction: 0..86_400 seconds.
    let [hh, mm, ss] =
        [rem / 3600, (rem % 3600) / 60, rem % 60].map(|v| u32::try_from(v).unwrap_or(0));
    let Some(year) = u32::try_from(y).ok().filter(|y| *y <= 9999) else {
        return format!("{y:04}-{m:02}-{d:02}T{hh:02}:{mm:02}:{ss:02}.{ms:03}Z");
    };
    let mut out = String::with_capacity(24);
    let mut put = |value: u32, width: u32, then: char| {
        for place in (0..width).rev() {
            let digit = (value / 10u32.pow(place)) % 10;
            out.push(char::from_digit(digit, 10).unwrap_or('0'));
        }
        out.push(then);
    };
    put(year, 4, '-');
    put(m, 2, '-');
    put(d, 2, 'T');
    put(hh, 2, ':');
    put(mm, 2, ':');
    put(ss, 2, '.');
    put(ms.min(999), 3, 'Z');
    out
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    // Both are small and positive by construction (1..=31, 1..=12).
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_written_by_hand_match_format() {
        let by_format = |secs: i64, ms: u32| {
            let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
            let rem = secs.rem_euclid(86_400);
            format!(
                "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
                rem / 3600,
                (rem % 3600) / 60,
                rem % 60
            )
        };
        let mut secs: i64 = -62_167_219_200; // 0000-01-01
        while secs < 253_402_300_800 + 86_400 * 400 {
            for ms in [0, 7, 59, 999] {
                assert_eq!(rfc3339(secs, ms), by_format(secs, ms), "{secs} {ms}");
            }
            secs += 7_919_993; // about three months, every time of day in turn
        }
        assert_eq!(rfc3339(0, 0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(1_795_900_000, 456), "2026-11-28T21:06:40.456Z");
    }

    /// Issue 12: the intent line written around an already serialised
    /// event is byte for byte what serde writes for the record, so recovery
    /// reads it as before; with a `before` identity and without one, and
    /// with an event holding characters JSON escapes.
    #[test]
    fn intent_lines_are_serdes_bytes() {
        let event: AuditEvent = serde_json::from_str(
            r#"{"v":1,"ts":"2026-12-02T11:22:17.638Z","type":"fs.access","opId":"2944fdb83859-3064","intent":"write","route":"ACP writeTextFile","writer":"workspace","sessionId":"s \"q\" \u0001 é","workspace":"75ed145fb819","pathHash":"247f7c5a352d9785","sizeBytes":1024,"mode":"write","created":false,"bytesBefore":1024,"bytesAfter":1024,"hashAfter":"sha256:38b9","durationMs":0,"path":"/w/\n\\x"}"#,
        )
        .unwrap();
        for before in [None, Some((66_306, 1_234_567_890_123)), Some((0, u64::MAX))] {
            let record = IntentRecord {
                log_offset: 25_383,
                log_id: (u64::MAX, 7),
                target: hex(b"/w/a b\n\xff"),
                before,
                event: event.clone(),
            };
            let by_serde = serde_json::to_vec(&record).unwrap();
            let by_hand = intent_line(
                record.log_offset,
                record.log_id,
                &record.target,
                before,
                &serde_json::to_vec(&event).unwrap(),
            );
            assert_eq!(
                String::from_utf8_lossy(&by_hand),
                String::from_utf8_lossy(&by_serde)
            );
            let back: IntentRecord = serde_json::from_slice(&by_hand).unwrap();
            assert_eq!(back.event, event);
            assert_eq!(back.before, before);
        }
    }

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_422), (2025, 11, 30));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn timestamp_shape() {
        let ts = now_rfc3339();
        assert_eq!(ts.len(), 24, "{ts}");
        assert!(ts.ends_with('Z'));
    }

    #[test]
    fn commands_split_into_mode_and_path() {
        assert_eq!(
            split_command("edit_file write /a b/c"),
            (Some("write"), "/a b/c")
        );
        assert_eq!(split_command("edit_file *"), (None, "edit_file *"));
        assert_eq!(split_command("x"), (None, "x"));
    }

    #[test]
    fn hex_round_trips() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(unhex(&hex(&all)).unwrap(), all);
        assert_eq!(unhex("0"), None);
        assert_eq!(unhex("zz"), None);
    }
}
