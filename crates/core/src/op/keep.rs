//! The history step of a commit (ADR 0020): the replaced file kept as the
//! operation's before-image and recorded, just before the rename; and the
//! commit of an undo that takes back a creation (the file removed; the
//! directories the operation made are the undo's, `history::dirs`).

use super::{Committed, Loaded, Op, Target};
use crate::config::HistoryConfig;
use crate::error::{ErrorKind, Failure, Refusal};
use crate::history::{History, Record, new_record};
use std::ffi::OsStr;
use std::sync::{Arc, OnceLock};
use writegate_fs::{CreatedDirs, Dir, LeafStat};

impl Op<'_> {
    /// The history record this commit will keep, or `None` when history is
    /// off (or the store could not be opened at start), or when the file
    /// it replaces is larger than `max_write_bytes`: undo could never write
    /// such an image back (it is refused `file_too_large`), so keeping it
    /// would only fill the store, and refusing the write for want of room
    /// would make a huge file unwritable.
    pub(super) fn before_image(
        &self,
        target: &Target,
        identity: Option<LeafStat>,
        made: &CreatedDirs,
    ) -> Option<Record> {
        if !self.cfg.history.enabled || identity.is_some_and(|st| st.len > self.cfg.max_write_bytes)
        {
            return None;
        }
        self.svc.history()?;
        let e = self.event.as_ref()?;
        let mut r = new_record(&e.op_id, &target.canonical, e.intent, e.writer);
        r.session_id.clone_from(&e.session_id);
        r.workspace.clone_from(&e.workspace);
        r.created = identity.is_none();
        r.created_dirs = made.paths().into_iter().map(crate::path_text).collect();
        if let Some(st) = identity {
            r.mode = Some((st.mode, st.uid, st.gid));
            r.bytes_before = st.len;
        }
        r.hash_before.clone_from(&e.hash_before);
        r.bytes_after = e.size_bytes.unwrap_or(0);
        r.undoes.clone_from(&e.undoes);
        Some(r)
    }

    /// The commit of an undo that takes back a creation: keeps the file as
    /// this operation's before-image (so the undo can be undone), records
    /// it, journals the intent and removes the file (which must still be
    /// the one read inside the lock).
    pub(crate) fn remove(
        &mut self,
        target: &Target,
        mut loaded: Loaded,
    ) -> Result<Committed, Failure> {
        let (_, leaf) = target.split()?;
        let dir = loaded.dir.take();
        let existing = loaded.existing.take();
        let (Some(dir), Some(existing)) = (dir, existing) else {
            return Err(Refusal::new(ErrorKind::PathNotFound, "the file is already gone").into());
        };
        let stat = existing.stat;
        let hash_before = Some(crate::sha256_tagged(existing.content.bytes()));
        self.event().hash_before.clone_from(&hash_before);
        let audit = self.svc.audit();
        let draft = self.event.as_ref().expect("drafted until finish");
        let intent = audit.prepare(
            draft,
            &crate::audit::CommitFacts {
                target: &target.canonical,
                before: Some((stat.dev, stat.ino)),
                bytes_after: 0,
                hash_after: "",
                raw_path: &self.raw_path,
            },
            self.start.elapsed(),
        )?;
        self.intent = intent;
        audit.intent_durable(self.intent.as_ref())?;
        let mut rec = self.before_image(target, Some(stat), &CreatedDirs::default());
        if let (Some(rec), Some(h)) = (rec.as_mut(), self.svc.history()) {
            rec.removed = true;
            rec.bytes_after = 0;
            rec.hash_before = hash_before;
            keep_before(h, &dir, leaf, Some(&stat), rec, &self.cfg.history)?;
        }
        let removed = writegate_fs::unlink_leaf(&dir, leaf, &stat).map_err(Refusal::from);
        if let (Some(rec), Some(h)) = (rec.as_ref(), self.svc.history()) {
            after_publish(h, rec, removed.is_ok());
            if removed.is_ok() {
                settle(
                    h,
                    &rec.op_id,
                    false,
                    None,
                    &self.cfg.history,
                    self.svc.releaser(),
                );
            }
        }
        removed?;
        let e = self.event();
        e.created = Some(false);
        e.bytes_after = Some(0);
        Ok(Committed {
            created: false,
            bytes_before: stat.len,
            bytes_after: 0,
            hash_after: String::new(),
        })
    }
}

/// Keeps the file at `leaf` (the inode `identity`; none: the commit creates
/// the file and there is nothing to keep) and appends `rec`. A failure is
/// the commit's refusal: nothing is published, nothing is left in the store.
///
/// `cfg` bounds the store: the image must fit within `history.max_bytes`
/// beside the images younger than `history.min_age_minutes` (which no
/// eviction takes), else the write is refused ([`full`]). An undo's own
/// image is kept regardless: the person must be able to take back an
/// agent's writes however full the agent made the store.
pub(super) fn keep_before(
    h: &History,
    dir: &Dir,
    leaf: &OsStr,
    identity: Option<&LeafStat>,
    rec: &mut Record,
    cfg: &HistoryConfig,
) -> Result<(), Refusal> {
    let limit = (rec.intent != crate::audit::Intent::Undo).then_some(cfg);
    let refuse = |e: writegate_fs::FsError| {
        // The file swapped or gone while it was being kept is the same
        // refusal as a swap the publish catches (`symlink_escape`), not a
        // failure of the store.
        if matches!(e, writegate_fs::FsError::SymlinkEscape { .. }) {
            return Refusal::from(e);
        }
        Refusal::new(
            ErrorKind::IoError,
            format!(
                "the history store cannot keep what this write replaces ({}), so nothing was written; free space for {}, or turn history off (history = false) to write without a way back",
                crate::error::with_causes(&e),
                h.root().display()
            ),
        )
    };
    if let Some(st) = identity {
        if let Some(cfg) = limit {
            h.room(cfg, st.len).map_err(|f| full(f, cfg))?;
        }
        let kept = h.keep_image(dir, leaf, st, &rec.op_id).map_err(refuse)?;
        rec.image = Some(kept.kind.as_str().to_string());
        rec.image_len = kept.len;
        rec.image_mtime_ns = i64::try_from(kept.mtime_ns).unwrap_or(i64::MAX);
    }
    match h.record(rec, limit) {
        Ok(Ok(())) => Ok(()),
        Ok(Err(f)) => Err(full(f, cfg)),
        Err(e) => Err(refuse(e)),
    }
}

/// The refusal of a write whose before-image does not fit in the store:
/// `io_error` (as a full disk under the store is), naming the settings.
fn full(f: crate::history::Full, cfg: &HistoryConfig) -> Refusal {
    Refusal::new(
        ErrorKind::IoError,
        format!(
            "the history store is full: the before-images of the last {} minutes (history.min_age_minutes), which are never evicted, take {} bytes, and keeping the {} bytes this write replaces would pass history.max_bytes ({}); nothing was written. Writes that replace a file are refused until those images are older than history.min_age_minutes; to write now, raise history.max_bytes or lower history.min_age_minutes in the config (or turn history off, history = false, to write without a way back)",
            cfg.min_age_minutes, f.young, f.need, cfg.max_bytes
        ),
    )
}

/// After the publish (or removal): a commit that did not happen voids its
/// record; for one that did, whether the old file's hash is still to be
/// recorded (computed beside the publish: see [`record_hash`]).
pub(super) fn after_publish(h: &History, rec: &Record, committed: bool) -> bool {
    if !committed {
        h.void(&rec.op_id);
        return false;
    }
    rec.hash_before.is_none() && rec.image.is_some()
}

/// Once the commit is over: the old file's hash (when it was left for
/// later) goes into the store, then the store is brought back within its
/// bounds; the evicted images' blocks are freed by `releaser`, off the
/// request's path (as a replaced file's are).
pub(super) fn settle(
    h: &History,
    op_id: &str,
    pending: bool,
    slot: Option<&Arc<OnceLock<String>>>,
    cfg: &HistoryConfig,
    releaser: &writegate_fs::Releaser,
) {
    if pending && let Some(hash) = slot.and_then(|s| s.get()) {
        h.done(op_id, Some(hash.clone()));
    }
    for fd in h.evict(cfg, op_id) {
        releaser.release(fd);
    }
}

impl Op<'_> {
    /// The operation's `opId`.
    pub(crate) fn op_id(&self) -> String {
        self.event
            .as_ref()
            .map(|e| e.op_id.clone())
            .unwrap_or_default()
    }

    /// Notes in the event which operation this undo takes back.
    pub(crate) fn note_undoes(&mut self, op_id: &str) {
        self.event().undoes = Some(op_id.to_string());
    }

    /// Resolves the canonical path an undo puts back: through the
    /// workspace resolver of the operation's runtime, or, for a path
    /// outside it that an external write changed, through the external
    /// checks (when the connection and the config still allow external
    /// writes). The path must resolve to itself: a symlink put on its way
    /// since the operation (a parent swapped for a link, whether it leads
    /// inside the workspace or out) is `symlink_escape`, never followed,
    /// so an undo writes or removes only the file the operation wrote.
    pub(crate) fn resolve_undo(
        &mut self,
        canonical: &std::path::Path,
        external: bool,
    ) -> Result<Target, Failure> {
        use writegate_paths::{OsView, ResolveError};
        let root = &self.ctx.runtime.root;
        let target = match writegate_paths::resolve(&OsView, canonical, std::slice::from_ref(root))
        {
            Ok(r) => Target {
                canonical: r.canonical,
                mode: r.mode,
            },
            Err(ResolveError::OutsideWorkspace(msg))
                if external
                    && self.ctx.allows.external_writer
                    && self.cfg.external_writes_enabled() =>
            {
                self.resolve_outside(canonical, msg, "write")?
            }
            Err(e) => return Err(super::gate::resolve_refusal(e, root, "write").into()),
        };
        if target.canonical != canonical {
            return Err(Refusal::new(
                ErrorKind::SymlinkEscape,
                format!(
                    "{} now resolves to {} (a symlink was put on its way since the operation); an undo puts back only the file the operation wrote, so nothing was changed: remove the symlink and undo again",
                    crate::path_text(canonical),
                    crate::path_text(&target.canonical)
                ),
            )
            .into());
        }
        self.hash_canonical(&target.canonical);
        self.check_open()?;
        Ok(target)
    }
}
