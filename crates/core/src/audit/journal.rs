//! The intent journal: one per process, an intent appended before each
//! commit and retired once its event is in the log.

use super::AuditError;
use super::flusher::{GroupSync, RETRY_EVERY};
use super::{AuditEvent, lock};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use writegate_fs::{FsError, Journal};

/// A journal longer than this is cleared before more intents are added:
/// new operations wait at [`AuditSink::prepare`](super::AuditSink::prepare)
/// until the pending ones are recorded.
const JOURNAL_LIMIT: u64 = 1 << 20;

/// When the last pending intent is retired, the journal is emptied
/// (`ftruncate`) only if it is longer than this; otherwise [`RETIRED`] is
/// appended, and recovery reads a journal from after its last such line.
/// Why (ADR 0009): an `ftruncate` per write freed the journal's block and the
/// next intent allocated it again, about 5 µs of CPU (a loop of a
/// 620-byte `write` and an `ftruncate` took 6.7 µs, the `write` alone
/// 1.7 µs); the short line retires the same intents at the same moment.
const JOURNAL_CLEAR_AT: u64 = 64 * 1024;

/// The journal line that retires every intent above it (nothing was
/// pending when it was written). Recovery takes any line that ends with it
/// for one (an intent line ends with its event's `}}`), so that it still
/// counts after a fragment of a failed append.
pub(super) const RETIRED: &[u8] = b"{\"retired\":true}\n";

/// How many times (of [`RETRY_EVERY`]) an operation waits for room in a
/// journal over [`JOURNAL_LIMIT`] before it is refused: 10 s.
const JOURNAL_WAITS: u32 = 40;

/// The journal line of an intent.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct IntentRecord {
    /// Log length when the intent was written: its event comes after.
    pub(super) log_offset: u64,
    /// `(dev, ino)` of the log then.
    pub(super) log_id: (u64, u64),
    /// Hex of the canonical target's bytes.
    pub(super) target: String,
    /// The file the commit replaces.
    pub(super) before: Option<(u64, u64)>,
    /// The event to write if the process dies before it does (`fs.access`
    /// as the commit would record it).
    pub(super) event: AuditEvent,
}

/// The bytes `serde_json::to_vec` gives for an [`IntentRecord`] of these
/// fields, with `event` the event already serialised (so an intent costs
/// one serialisation of its event, not two): `{"logOffset":N,"logId":[D,I],
/// "target":"<hex>","before":null|[D,I],"event":<event>}`. `target` must be
/// lowercase hex (no character JSON escapes). A unit test holds it to
/// serde's bytes.
pub(super) fn intent_line(
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

/// The journal, its room and its group `fdatasync`: one per sink.
#[derive(Default)]
pub(super) struct IntentJournal {
    state: Mutex<JournalState>,
    /// Signalled when a full journal is emptied.
    room: Condvar,
    sync: GroupSync,
}

#[derive(Default)]
struct JournalState {
    journal: Option<Arc<Journal>>,
    /// Why there is no journal, while there is none.
    error: Option<String>,
    len: u64,
    pending: usize,
    /// Operations waiting in [`IntentJournal::append`] for room.
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
    /// the log by `opId` (the same as after a failed `ftruncate`).
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

impl IntentJournal {
    /// Creates this process's journal in `dir`; a failure is logged and
    /// kept as [`IntentJournal::error`].
    pub(super) fn create(&self, dir: &Path) {
        let mut j = lock(&self.state);
        match Journal::create(dir) {
            Ok(journal) => j.journal = Some(Arc::new(journal)),
            Err(e) => {
                let e = crate::error::with_causes(&e);
                tracing::error!(error = %e, "cannot create the audit intent journal");
                j.error = Some(e);
            }
        }
    }

    /// Why there is no journal, while there is none.
    pub(super) fn error(&self) -> Option<String> {
        lock(&self.state).error.clone()
    }

    /// Appends an intent line; returns the append's number. Waits for room
    /// in a journal over its limit, unless the log is `failing`.
    pub(super) fn append(&self, line: &[u8], failing: &AtomicBool) -> Result<u64, AuditError> {
        let mut j = lock(&self.state);
        let mut waits = 0;
        while j.len > JOURNAL_LIMIT && j.pending > 0 {
            // Pending intents are retired as their events are written; not
            // while the log is failing. A wait that does not end (an
            // intent that is never retired) is a refusal, not a hang.
            if failing.load(Ordering::SeqCst) {
                return Err(AuditError::JournalFullWhileFailing);
            }
            if waits == JOURNAL_WAITS {
                return Err(AuditError::JournalFull { pending: j.pending });
            }
            waits += 1;
            j.waiting += 1;
            j = self
                .room
                .wait_timeout(j, RETRY_EVERY)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
            j.waiting -= 1;
        }
        let journal = match &j.journal {
            Some(journal) => journal.clone(),
            None => {
                return Err(AuditError::NoJournal(j.error.clone()));
            }
        };
        if let Err(e) = journal.append(line, j.len) {
            j.damaged = true;
            return Err(e.into());
        }
        j.len += line.len() as u64;
        j.pending += 1;
        Ok(self.sync.mark())
    }

    /// One pending intent is retired; when none is left, so is every
    /// intent in the journal ([`JournalState::retire_all`]).
    pub(super) fn done(&self) {
        let mut j = lock(&self.state);
        j.pending = j.pending.saturating_sub(1);
        if j.pending == 0 && j.len > 0 {
            j.retire_all();
            // A notify is a system call even with nobody waiting.
            if j.waiting > 0 {
                self.room.notify_all();
            }
        }
    }

    /// `fdatasync`s every intent journaled so far (for `intent_durable`,
    /// which reports a failure to its operation).
    pub(super) fn sync_all(&self) {
        let Some(journal) = lock(&self.state).journal.clone() else {
            return;
        };
        let (appended, _) = self.sync.latest();
        let _ = self.sync.wait(appended, &|| journal.sync());
    }

    /// Waits until append `seq` is on disk (sharing the `fdatasync` with
    /// concurrent callers). `None` when there is no journal.
    pub(super) fn wait_synced(&self, seq: u64) -> Option<Result<(), FsError>> {
        let journal = lock(&self.state).journal.clone()?;
        Some(self.sync.wait(seq, &|| journal.sync()))
    }

    /// Removes the journal when nothing is pending (a journal with pending
    /// intents is left for the next start).
    pub(super) fn close(&self) {
        let mut j = lock(&self.state);
        if j.pending == 0
            && let Some(journal) = j.journal.take()
            && let Err(e) = journal.remove()
        {
            tracing::warn!(error = %crate::error::with_causes(&e), "cannot remove the intent journal");
        }
    }
}

/// `<log path>.intents`: the directory of the per-process journals.
pub fn journal_dir(log: &Path) -> PathBuf {
    let mut name = log.as_os_str().to_os_string();
    name.push(".intents");
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hex;

    /// The intent line written around an already serialised
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
}
