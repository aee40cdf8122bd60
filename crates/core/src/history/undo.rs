//! Undo: a before-image put back through the pipeline of a write
//! (resolver, approval gate, path lock, atomic durable publish, one audit
//! event with intent `undo`), and the history a front end lists.

use super::dirs::{self, SkippedDir};
use super::{HistoryEntry, Reach, Record, Status};
use crate::api::OpCtx;
use crate::audit::{Intent, Writer};
use crate::error::{ErrorKind, Failure, Refusal};
use crate::op::{Op, ReadMode};
use crate::service::Service;
use crate::sha256_tagged;
use std::io::Read;
use std::path::Path;
use writegate_fs::Content;

/// What to undo.
#[derive(Debug, Clone)]
pub struct UndoParams {
    /// The operation to take back.
    pub op_id: String,
    /// Put the before-image back even though the file changed since that
    /// operation.
    pub force: bool,
    /// Only check and say what would be done.
    pub dry_run: bool,
    /// Only an operation of this session may be taken back: any other is
    /// answered as an unknown `opId` (`not_undoable`, the same words), so
    /// the caller learns nothing of other sessions' operations. `None`:
    /// any session (ACP's `_writegate/undo`, limited by workspace instead).
    pub session: Option<String>,
    /// Only an operation recorded in the context's own workspace
    /// (`ctx.runtime`) may be taken back, any other answered as an unknown
    /// `opId`, and the undo runs in that workspace: its file must resolve
    /// inside that root, or, for an operation of the external writer, pass
    /// the external checks of that connection. ACP's `_writegate/undo`
    /// (the CLI reaches each workspace through a connection of its own).
    /// `false`: any workspace, the undo running in the one that holds the
    /// file (in-process callers; MCP's `undo`, limited by session).
    pub own_workspace: bool,
}

/// What an undo did to the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum UndoAction {
    /// The old bytes are back (`restored`).
    Restored,
    /// The operation had created the file, and it is removed (`removed`).
    Removed,
}

/// What an undo did (or, for a dry run, would do). Serialised (camelCase,
/// empty members left out) as every front end shows it: ACP's
/// `_writegate/undo` result, MCP's `undo` `structuredContent`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct UndoOutcome {
    /// The undo's own `opId` (undo it to redo).
    pub op_id: String,
    /// The operation taken back.
    pub undone: String,
    /// The canonical path.
    pub path: String,
    /// `restored` (the old bytes are back) or `removed` (the operation had
    /// created the file).
    pub action: UndoAction,
    /// Bytes of the file now (0 when removed).
    pub bytes: u64,
    /// `sha256:<hex>` of the file now (`None` when removed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    /// The permission bits the restored file gets, in octal (`0640`);
    /// absent for a removal.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// The bits of the old mode that were not put back, and why: an undo
    /// never adds setuid, setgid or other-write bits the file does not
    /// have now (see `restored_mode`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode_dropped: Option<String>,
    /// Directories the operation had created that were removed (empty).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub removed_dirs: Vec<String>,
    /// Directories the operation is recorded to have created that were
    /// left alone, each with the reason: not empty, or failing the checks
    /// an entry of the history index must pass (see `history::dirs`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped_dirs: Vec<SkippedDir>,
    /// The file had changed since the operation and `force` put the image
    /// back anyway.
    pub forced: bool,
    /// Nothing was written.
    pub dry_run: bool,
}

/// The bits an undo puts back only when the file has them now: setuid,
/// setgid and other-write.
const RISKY_BITS: [(u32, &str); 3] = [
    (0o4000, "setuid"),
    (0o2000, "setgid"),
    (0o0002, "other-write"),
];

/// The permission bits an undo gives the file: the old file's `recorded`
/// mode, less each setuid, setgid and other-write bit the file does not
/// have `now` (`None`: there is no file now, so it has none of them).
/// The mode comes from the history index, which any process of the user
/// can rewrite; an undo must not make a file setuid, or writable by
/// everyone, that is not so already. Returns the mode and, when bits were
/// left out, the words that say which and why.
pub(crate) fn restored_mode(recorded: u32, now: Option<u32>) -> (u32, Option<String>) {
    let now = now.unwrap_or(0);
    let mut mode = recorded & 0o7777;
    let mut dropped = Vec::new();
    for (bit, name) in RISKY_BITS {
        if mode & bit != 0 && now & bit == 0 {
            mode &= !bit;
            dropped.push(name);
        }
    }
    let words = (!dropped.is_empty()).then(|| {
        format!(
            "the old mode {:04o} had {} that the file does not have now; an undo never adds those bits, so it gets {mode:04o} (chmod it yourself if it needs them)",
            recorded & 0o7777,
            dropped.join(" and ")
        )
    });
    (mode, words)
}

/// The most an undo of `rec` reads and writes: `max_write_bytes`, or the
/// size the operation left when larger (the file must be read whole to
/// compare it with that).
pub(crate) fn max_bytes(max_write_bytes: u64, rec: &Record) -> u64 {
    max_write_bytes.max(rec.bytes_after)
}

/// Why an undo of `rec` is refused as too large (`history` lists it so).
pub(crate) fn too_large_words(max_write_bytes: u64, rec: &Record) -> String {
    too_large_words_len(rec.image_len, max_bytes(max_write_bytes, rec))
}

fn too_large_words_len(len: u64, max: u64) -> String {
    format!(
        "too large to undo: its before-image is {len} bytes, over the limit of {max} bytes (max_write_bytes in the writegate config); raise it to undo this operation"
    )
}

/// `not_undoable` with `hint`.
fn not_undoable(hint: impl Into<String>) -> Failure {
    Refusal::new(ErrorKind::NotUndoable, hint).into()
}

impl Service {
    /// The history, newest first, optionally only of `path` (canonical),
    /// and only what `reach` sees (a session, a workspace by runtime id):
    /// a reason never names an operation outside it.
    ///
    /// Errors: no store (`not_undoable`), or it cannot be read (`io_error`).
    pub fn history_entries(
        &self,
        path: Option<&Path>,
        reach: Reach<'_>,
    ) -> Result<Vec<HistoryEntry>, Failure> {
        let h = self.history().ok_or_else(no_store)?;
        let all = h
            .entries(
                self.config().history.enabled,
                self.config().max_write_bytes,
                reach,
            )
            .map_err(Refusal::from)?;
        Ok(all
            .into_iter()
            .filter(|e| path.is_none_or(|p| e.record.canonical() == p))
            .collect())
    }

    /// Takes back the operation `p.op_id` (see the module doc): the file
    /// must be byte-identical to what that operation left (else
    /// `file_changed`, unless `p.force`), and its before-image must still
    /// be what was kept (else `file_changed`, always). An operation that
    /// created the file is taken back by removing it, and the directories
    /// it created if they are empty.
    pub fn undo(&self, ctx: &OpCtx, p: &UndoParams) -> Result<UndoOutcome, Failure> {
        let h = self.history().ok_or_else(no_store)?;
        let reach = Reach {
            session: p.session.as_deref(),
            workspace: p.own_workspace.then_some(ctx.runtime.id.as_str()),
        };
        // Before anything else: an operation out of reach is answered
        // exactly as an unknown one (no status, no path).
        let (rec, status) = h
            .find(&p.op_id)
            .map_err(Refusal::from)?
            .filter(|(rec, _)| reach.sees(rec))
            .ok_or_else(|| not_undoable(unknown_op(&p.op_id)))?;
        match status {
            Status::Live => {}
            Status::Evicted => {
                return Err(not_undoable(format!(
                    "the before-image of {} was evicted (history.max_bytes, history.max_age_days); it cannot be put back",
                    p.op_id
                )));
            }
            Status::Void => {
                return Err(not_undoable(format!(
                    "operation {} never committed; there is nothing to take back",
                    p.op_id
                )));
            }
        }
        if let Some(why) = rec.disagreement() {
            return Err(not_undoable(super::inconsistent(&rec.op_id, &why)));
        }
        let canonical = rec.canonical();
        // The connection's own workspace when the undo is limited to it;
        // else the workspace that holds the file, else the connection's.
        let runtime = if p.own_workspace {
            ctx.runtime.clone()
        } else {
            self.registry()
                .containing(&canonical)
                .unwrap_or_else(|| ctx.runtime.clone())
        };
        let ctx = OpCtx {
            runtime,
            session_id: ctx.session_id.clone(),
            allows: ctx.allows,
            route: ctx.route,
            cancel: ctx.cancel.clone(),
            approver: ctx.approver.clone(),
            client_root: false,
        };
        let mut op = Op::begin(self, &ctx, Intent::Undo, None, &canonical);
        op.note_undoes(&p.op_id);
        op.note_request(rec.bytes_before, p.dry_run);
        let own_id = op.op_id();
        let result = (|| {
            op.admit_write(0)?;
            let target = op.resolve_undo(&canonical, rec.writer == Writer::External)?;
            op.approve(&target, crate::api::OpMode::Undo)?;
            op.lock(&target)?;
            let max = max_bytes(op.cfg.max_write_bytes, &rec);
            let loaded = op.read(&target, ReadMode::Whole(max))?;
            let now = match loaded.existing.as_ref() {
                None => None,
                Some(e) if matches!(e.content, Content::Whole(_)) => loaded.hash_before(),
                Some(_) => Some("(too large to compare)".to_string()),
            };
            let changed = now.as_deref() != rec.after();
            if changed && !p.force {
                return Err(file_changed(h, &rec, now.as_deref(), reach));
            }
            let mut out = UndoOutcome {
                op_id: own_id.clone(),
                undone: rec.op_id.clone(),
                // The file written, as the resolver found it (the record's
                // `path` is checked to name it: `Record::disagreement`).
                path: crate::path_text(&target.canonical),
                action: if rec.created {
                    UndoAction::Removed
                } else {
                    UndoAction::Restored
                },
                bytes: if rec.created { 0 } else { rec.bytes_before },
                hash: if rec.created {
                    None
                } else {
                    rec.hash_before.clone()
                },
                mode: None,
                mode_dropped: None,
                removed_dirs: Vec::new(),
                skipped_dirs: Vec::new(),
                forced: changed,
                dry_run: p.dry_run,
            };
            if rec.created {
                if loaded.existing.is_none() {
                    return Err(Refusal::new(
                        ErrorKind::PathNotFound,
                        format!("{} is already gone; there is nothing to remove", rec.path),
                    )
                    .into());
                }
                let (dirs, skipped) = dirs::removable(&rec, &target.canonical, &ctx.runtime);
                out.skipped_dirs = skipped;
                if p.dry_run {
                    return Ok(out);
                }
                op.remove(&target, loaded)?;
                // The file is gone (committed): a directory that fails its
                // checks now is reported, not an error.
                out.removed_dirs = dirs::remove(&ctx.runtime.root, &dirs, &mut out.skipped_dirs);
                return Ok(out);
            }
            let bytes = image_bytes(h, &rec, max)?;
            // What is shown is what is put back: the image's own size and
            // hash, and the mode it gets.
            out.bytes = bytes.len() as u64;
            out.hash = Some(sha256_tagged(&bytes));
            let now_mode = loaded.existing.as_ref().map(|e| e.stat.mode);
            let restore = rec.mode.map(|(mode, uid, gid)| {
                let (mode, dropped) = restored_mode(mode, now_mode);
                out.mode = Some(format!("{mode:04o}"));
                out.mode_dropped = dropped;
                (mode, uid, gid)
            });
            if p.dry_run {
                return Ok(out);
            }
            op.restore = restore;
            let done = op.commit(&target, loaded, &bytes, false)?;
            out.bytes = done.bytes_after;
            out.hash = Some(done.hash_after);
            Ok(out)
        })();
        op.finish(result)
    }
}

/// The hint of `not_undoable` for an `opId` not in the history (or, for
/// an undo limited to a session, not of that session).
pub(crate) fn unknown_op(op_id: &str) -> String {
    format!(
        "no operation {op_id} in the history; `writegate history` lists the operations that can be undone"
    )
}

/// The store is not open.
fn no_store() -> Failure {
    not_undoable(
        "this daemon keeps no history (the history store could not be opened, or history is off); nothing can be undone",
    )
}

/// `file_changed` for an undo of `rec` whose file now holds `now`; a later
/// operation out of `reach` is not named.
fn file_changed(h: &super::History, rec: &Record, now: Option<&str>, reach: Reach<'_>) -> Failure {
    let now = now.unwrap_or("no file");
    let left = rec.after().unwrap_or("no file");
    let later = match h.later_on(rec) {
        Some(l) if reach.sees(&l) => format!(
            "; a later operation ({}) changed it: undo that one first",
            l.op_id
        ),
        Some(_) => "; a later operation changed it".to_string(),
        None => "; it was changed outside writegate".to_string(),
    };
    Refusal::new(
        ErrorKind::FileChanged,
        format!(
            "{} is no longer what operation {} left (it holds {now}, the operation left {left}){later}, or pass --force to put the before-image back anyway; nothing was changed",
            rec.path, rec.op_id
        ),
    )
    .into()
}

/// The before-image of `rec`, checked against what was kept: its hash
/// against `hashBefore`, or, without one, its size and modification time.
fn image_bytes(h: &super::History, rec: &Record, max: u64) -> Result<Vec<u8>, Failure> {
    let Some((file, stat, mtime)) = h.image(&rec.op_id).map_err(Refusal::from)? else {
        return Err(not_undoable(format!(
            "the before-image of {} is gone from the store; it cannot be put back",
            rec.op_id
        )));
    };
    if stat.len > max {
        return Err(
            Refusal::new(ErrorKind::FileTooLarge, too_large_words_len(stat.len, max)).into(),
        );
    }
    let mut bytes = Vec::with_capacity(usize::try_from(stat.len).unwrap_or(0));
    file.take(max + 1).read_to_end(&mut bytes).map_err(|e| {
        Refusal::new(
            ErrorKind::IoError,
            format!("cannot read the before-image: {e}"),
        )
    })?;
    let intact = match &rec.hash_before {
        Some(h) => sha256_tagged(&bytes) == *h,
        None => stat.len == rec.image_len && i64::try_from(mtime).ok() == Some(rec.image_mtime_ns),
    };
    if !intact {
        return Err(Refusal::new(
            ErrorKind::FileChanged,
            format!(
                "the before-image of {} is not what was kept (the old file was changed through another hard link to it); it is not put back, and nothing was changed",
                rec.op_id
            ),
        )
        .into());
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::restored_mode;

    /// A planted 06777 never makes a 0644 file setuid, setgid or writable
    /// by everyone; bits the file has now stay; the rest of the old mode
    /// comes back as it was.
    #[test]
    fn a_restore_never_adds_setuid_setgid_or_other_write() {
        let (mode, why) = restored_mode(0o6777, Some(0o644));
        assert_eq!(mode, 0o775);
        let why = why.unwrap();
        assert!(
            why.contains("setuid") && why.contains("setgid") && why.contains("other-write"),
            "{why}"
        );
        assert_eq!(restored_mode(0o6777, None).0, 0o775);
        assert_eq!(restored_mode(0o4755, Some(0o4700)), (0o4755, None));
        assert_eq!(restored_mode(0o640, Some(0o600)), (0o640, None));
        assert_eq!(restored_mode(0o666, Some(0o644)).0, 0o664);
        assert_eq!(restored_mode(0o100_644, Some(0o644)), (0o644, None));
    }
}
