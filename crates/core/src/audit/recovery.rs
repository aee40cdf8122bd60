//! Start-up repair: a torn tail cut, and the events written that dead
//! processes journaled but never recorded.

use super::AuditError;
use super::journal::{IntentRecord, RETIRED, journal_dir};
use super::line::event_line;
use super::{EventKind, Recovered};
use crate::error::ErrorKind;
use crate::sha256_tagged;
use serde::Deserialize;
use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use writegate_fs::{AppendLog, Content, Existing};

/// Just the `opId` of a log line.
#[derive(Deserialize)]
struct OpIdOnly {
    #[serde(rename = "opId", default)]
    op_id: Option<String>,
}

/// What [`AuditSink::open`](super::AuditSink::open) repaired and recovered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Recovery {
    /// Bytes of a torn last line cut from the log.
    pub torn_bytes: u64,
    /// Journals of dead processes read (and removed).
    pub journals: usize,
    /// Events written for intents that had none, by outcome:
    /// `(committed, not_committed, unconfirmed)`.
    pub recovered: (u64, u64, u64),
    /// The `opId`s of the intents found not committed (their before-images,
    /// if any were kept, are void: see `crate::history`).
    pub not_committed: Vec<String>,
}

pub(crate) fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

pub(super) fn log_recovery(path: &Path, r: &Recovery) {
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
/// journals of dead processes (beside `path`) and removes those journals.
/// With `raw_paths`, an event found not committed says so in its hint.
pub(super) fn recover(
    path: &Path,
    raw_paths: bool,
    log: &AppendLog,
) -> Result<Recovery, AuditError> {
    let mut report = Recovery::default();
    let mut guard = log.lock()?;
    report.torn_bytes = guard.repair_tail()?;
    let orphans = writegate_fs::orphan_journals(&journal_dir(path))?;
    let mut intents = Vec::new();
    for o in &orphans {
        let bytes = o.read()?;
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
        guard.lines_from(from, &mut |l| {
            if let Ok(OpIdOnly { op_id: Some(id) }) = serde_json::from_slice(l) {
                seen.insert(id);
            }
        })?;
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
                    report.not_committed.push(event.op_id.clone());
                    event.kind = EventKind::Denied;
                    event.error_kind = Some(ErrorKind::InternalError);
                    event.created = None;
                    event.bytes_after = None;
                    event.hash_after = None;
                    if raw_paths {
                        event.hint = Some(
                            "the daemon stopped before this write committed; nothing was written"
                                .into(),
                        );
                    }
                }
                Recovered::Unconfirmed => report.recovered.2 += 1,
            }
            guard.append(&event_line(&event))?;
        }
        drop(guard);
        log.sync()?;
    }
    for o in orphans {
        let path = o.path().to_path_buf();
        o.remove()
            .map_err(|source| AuditError::RemoveJournal { path, source })?;
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
        // A removal (an undo of a creation) that happened: the file it
        // would remove is gone.
        Ok(None) if is_removal(r) => Recovered::Committed,
        Ok(Some(e)) if Some((e.stat.dev, e.stat.ino)) == r.before => Recovered::NotCommitted,
        Ok(Some(Existing {
            content: Content::Whole(bytes),
            ..
        })) if r.event.hash_after.as_deref() == Some(&sha256_tagged(&bytes)) => {
            Recovered::Committed
        }
        _ => Recovered::Unconfirmed,
    }
}

/// Whether the intent is that of a removal: an undo of a creation, which
/// replaces a file with nothing (no `hashAfter`, no bytes after).
fn is_removal(r: &IntentRecord) -> bool {
    r.before.is_some()
        && r.event.intent == super::Intent::Undo
        && r.event.hash_after.is_none()
        && r.event.bytes_after == Some(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hex;

    #[test]
    fn hex_round_trips() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(unhex(&hex(&all)).unwrap(), all);
        assert_eq!(unhex("0"), None);
        assert_eq!(unhex("zz"), None);
    }
}
