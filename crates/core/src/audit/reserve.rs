//! Before a commit: disk space promised to its event, its intent's
//! journal line, or the refusal when that cannot be done and
//! `audit.required` is on.

use super::AuditError;
use super::journal::intent_line;
use super::line::{AsCommitted, committed_event_line};
use super::{AuditEvent, now_rfc3339};
use crate::error::{ErrorKind, Refusal};
use crate::hex;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;
use writegate_fs::{AppendLog, Reserved};

/// Disk reserved beyond what pending events need, so that a reservation is
/// not renewed for every operation.
const RESERVE_AHEAD: u64 = 16 * 1024;

/// Bytes an event may grow between its intent and its line (`ts`,
/// `durationMs`, an errorKind), plus a hint when raw paths are on.
pub(super) const EVENT_SLACK: u64 = 512;

/// What [`AuditSink::prepare`](super::AuditSink::prepare) needs to know
/// about the commit it precedes.
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

/// A journaled intent to commit (from
/// [`AuditSink::prepare`](super::AuditSink::prepare)); hand it to
/// [`AuditSink::intent_durable`](super::AuditSink::intent_durable) just
/// before the commit and to [`AuditSink::record_op`](super::AuditSink::record_op)
/// with the operation's event.
#[derive(Debug)]
pub struct CommitIntent {
    pub(super) need: u64,
    /// The journal append's number, while it may not be on disk yet
    /// (`flush = "sync"`).
    pub(super) journal_seq: Option<u64>,
}

/// Disk space promised to one event (from
/// [`AuditSink::reserve_event`](super::AuditSink::reserve_event)).
#[derive(Debug)]
pub struct Reservation {
    pub(super) need: u64,
}

/// Whether the log's filesystem can reserve space.
#[derive(Clone, Copy, PartialEq, Eq, Default)]
enum CanReserve {
    #[default]
    Unknown,
    Yes,
    No,
}

/// The space promised to future events of the log and the disk allocated
/// for it. Kept under the log's lock.
#[derive(Default)]
pub(super) struct ReserveState {
    /// Bytes promised to events of prepared operations and reservations.
    promised: u64,
    /// Disk is allocated up to this offset of the log.
    reserved_to: u64,
    can_reserve: CanReserve,
}

impl ReserveState {
    /// Promises `need` bytes of `log` to one future event: cuts a torn
    /// tail, then makes sure disk is reserved for every promised byte.
    /// Returns the log's length (a lower bound on where the event will
    /// start: [`AppendLog::whole_len`]) and identity.
    ///
    /// The log's lock is taken only when its last byte is not a line
    /// break, to cut a torn tail; a log that ends with a whole line (every
    /// operation's case) is only looked at (ADR 0009: two `flock` calls and
    /// an `fstat` fewer per write).
    pub(super) fn promise(
        &mut self,
        log: &AppendLog,
        path: &Path,
        need: u64,
    ) -> Result<(u64, (u64, u64)), AuditError> {
        let size = if let Some(len) = log.whole_len()? {
            len
        } else {
            let mut guard = log.lock()?;
            if guard.repair_tail()? > 0 {
                self.reserved_to = 0;
            }
            log.len()?
        };
        self.grow(log, path, size, need)?;
        self.promised += need;
        Ok((size, log.identity()))
    }

    /// Before a line of `len` bytes is appended: a line nobody promised
    /// space to (`promised == 0`) must not use the space promised to a
    /// committed operation's event, so disk is allocated for it too.
    pub(super) fn make_room(
        &mut self,
        log: &AppendLog,
        path: &Path,
        len: u64,
        promised: u64,
    ) -> Result<(), AuditError> {
        if promised == 0 && self.promised > 0 && self.can_reserve != CanReserve::No {
            let size = log.len()?;
            self.grow(log, path, size, len)?;
        }
        Ok(())
    }

    /// Makes sure disk is allocated for `size + promised + extra` bytes.
    fn grow(
        &mut self,
        log: &AppendLog,
        path: &Path,
        size: u64,
        extra: u64,
    ) -> Result<(), AuditError> {
        if self.can_reserve == CanReserve::No || size + self.promised + extra <= self.reserved_to {
            return Ok(());
        }
        let want = self.promised + extra + RESERVE_AHEAD;
        match log.reserve(size, want) {
            Ok(Reserved::Yes) => {
                self.can_reserve = CanReserve::Yes;
                self.reserved_to = size + want;
                Ok(())
            }
            Ok(Reserved::Unsupported) => {
                tracing::warn!(path = %path.display(),
                    "the audit log's filesystem cannot reserve space; an event may still fail after its operation committed (it then stays in the intent journal)");
                self.can_reserve = CanReserve::No;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// `need` promised bytes are used or given back.
    pub(super) fn release(&mut self, need: u64) {
        self.promised = self.promised.saturating_sub(need);
    }

    /// The allocation is gone (a rollback truncation frees the reserved
    /// blocks too; a reopened log is another file).
    pub(super) fn forget_allocation(&mut self) {
        self.reserved_to = 0;
    }
}

/// The event of the commit that `draft` precedes, as it will read once
/// committed, serialised once (no copy of the draft), and the bytes to
/// promise it: its length is the estimate, its bytes go into the intent.
pub(super) fn committed_event(
    draft: &AuditEvent,
    facts: &CommitFacts<'_>,
    elapsed: Duration,
    raw_paths: bool,
) -> (Vec<u8>, u64) {
    let ts = now_rfc3339();
    let event = committed_event_line(
        draft,
        &AsCommitted {
            ts: &ts,
            created: facts.before.is_none(),
            bytes_after: facts.bytes_after,
            hash_after: facts.hash_after,
            duration_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            path: raw_paths.then_some(facts.raw_path),
        },
    );
    let need = event.len() as u64 + EVENT_SLACK + if raw_paths { 8192 } else { 0 };
    (event, need)
}

/// The journal line (with its `\n`) of the intent to commit `facts`, whose
/// event is `event`, promised at `offset` of the log `log_id`.
pub(super) fn intent(
    offset: u64,
    log_id: (u64, u64),
    facts: &CommitFacts<'_>,
    event: &[u8],
) -> Vec<u8> {
    let target = hex(facts.target.as_os_str().as_bytes());
    let mut line = intent_line(offset, log_id, &target, facts.before, event);
    line.push(b'\n');
    line
}

/// An operation the log at `path` cannot record, for `why`: with
/// `required`, an `io_error` refusal; without, logged and `Ok(None)`.
pub(super) fn refuse_or_warn<T>(
    path: &Path,
    required: bool,
    why: &AuditError,
) -> Result<Option<T>, Refusal> {
    if required {
        tracing::error!(path = %path.display(), error = %why,
            "audit log cannot record an operation; refused (audit.required)");
        Err(refusal(&why.to_string()))
    } else {
        tracing::error!(path = %path.display(), error = %why,
            "audit log cannot record an operation; going ahead (audit.required = false)");
        Ok(None)
    }
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
