//! The commit step: the size check, the hashes, the atomic durable publish
//! and the record of what changed.

use super::{Committed, Loaded, Op, PARALLEL_HASH_MIN, Target, too_large};
use crate::audit::CommitFacts;
use crate::config::NewFileMode;
use crate::error::{Failure, Refusal};
use crate::{path_hash, sha256_tagged};
use std::cell::RefCell;
use writegate_fs::{Dir, Existing, PublishOptions};

impl Op<'_> {
    /// Publishes `bytes` over the target atomically and durably (SPEC 7.3),
    /// or, for a dry run, only computes what would change. Checks the
    /// encoded size against `max_write_bytes` first. Records the outcome in
    /// the event and, when written, a receipt for the session.
    pub(crate) fn commit(
        &mut self,
        target: &Target,
        mut loaded: Loaded,
        bytes: &[u8],
        dry_run: bool,
    ) -> Result<Committed, Failure> {
        let len = bytes.len() as u64;
        if len > self.cfg.max_write_bytes {
            return Err(too_large(len, self.cfg.max_write_bytes, "max_write_bytes"));
        }
        let dir = loaded.dir.take();
        let mut existing = loaded.existing.take();
        let slot = loaded.hash_before.take();
        let bytes_before = existing.as_ref().map_or(0, |e| e.stat.len);
        let identity = existing.as_ref().map(|e| e.stat);
        // The old file's read descriptor (see `publish_bytes`).
        let handle = existing.as_mut().and_then(Existing::take_handle);
        // The old file's hash, when it was left for now.
        let hash_old = || {
            if let (Some(slot), Some(e)) = (&slot, &existing) {
                slot.get_or_init(|| sha256_tagged(e.content.bytes()));
            }
        };
        let (hash_after, created) = if dry_run {
            hash_old();
            (sha256_tagged(bytes), existing.is_none())
        } else {
            // The new bytes' hash goes into the intent journal before the
            // rename (recovery matches it). A large write's is taken on a helper
            // thread while this one writes the temp file and waits for the
            // disk (as is a large old file's, left for now); a small one's
            // inline, first.
            let large = bytes.len() >= PARALLEL_HASH_MIN;
            let (hash, published) = std::thread::scope(|s| {
                let old = RefCell::new(None);
                // At most one helper runs while this thread writes the temp
                // file (two CPUs is the machine to serve well). With no old
                // hash left to take (a new file, or an old one small enough
                // to be hashed when read), the new bytes' hash starts at
                // once; else (an overwrite of a large file) both start once
                // the bytes are in the temp file (see
                // `writegate_fs::publish_overlapping`) and have the CPUs
                // while this thread waits for the disk. Measured
                // (docs/decisions/0005-hashes-beside-the-publish.md): a new
                // 5 MiB file through `writegate mcp` 14.3-14.4 ms against
                // 15.1-16.9 with the hash started after the write; a 5 MiB
                // overwrite 0.5-2 ms slower with two helpers racing the
                // write.
                let early = large && slot.is_none();
                let new = RefCell::new(early.then(|| s.spawn(|| sha256_tagged(bytes))));
                let mut written = || {
                    if slot.is_some() {
                        *old.borrow_mut() = Some(s.spawn(hash_old));
                        if large {
                            *new.borrow_mut() = Some(s.spawn(|| sha256_tagged(bytes)));
                        }
                    }
                };
                let mut hash = if large {
                    NewHash::Helper {
                        bytes,
                        thread: &new,
                    }
                } else {
                    NewHash::Ready(sha256_tagged(bytes))
                };
                let published = self.publish_bytes(
                    target,
                    dir,
                    identity,
                    handle,
                    bytes,
                    &mut hash,
                    &mut written,
                );
                // `hashBefore` is in the event whatever happened.
                match old.borrow_mut().take() {
                    Some(h) => joined(h),
                    None => hash_old(),
                }
                (hash.take(), published)
            });
            if let (Some(pending), Some(h)) = (self.history_pending.take(), self.svc.history()) {
                let op_id = self
                    .event
                    .as_ref()
                    .map(|e| e.op_id.clone())
                    .unwrap_or_default();
                super::keep::settle(
                    h,
                    &op_id,
                    pending,
                    slot.as_ref(),
                    &self.cfg.history,
                    self.svc.releaser(),
                );
            }
            (hash, published?)
        };
        let e = self.event();
        e.created = Some(created);
        e.bytes_after = Some(len);
        e.hash_after = Some(hash_after.clone());
        let done = Committed {
            created,
            bytes_before,
            bytes_after: len,
            hash_after,
        };
        if !dry_run {
            let mode = self
                .event
                .as_ref()
                .and_then(|e| e.mode)
                .unwrap_or(writegate_text::EditMode::Write);
            self.svc
                .add_receipt(self.ctx, mode, &target.canonical, &done);
        }
        Ok(done)
    }

    /// Publishes `bytes` over the target (SPEC 7.3) relative to `dir`, or
    /// creates the missing parents of a workspace write first.
    /// `identity` is the stat of the file read inside the lock (its inode
    /// must still be at the leaf; its mode and owner go to the new file),
    /// `handle` its read descriptor: kept across the rename only where that
    /// just delays freeing its blocks (local disks), then handed to the
    /// releaser; elsewhere closed first (NFS and FUSE would rename it to a
    /// hidden name while it is open). `hash_after` (of `bytes`) goes into
    /// the commit's intent journal: journaled before the temp file is
    /// written when it is ready, else (a large write hashed on a helper
    /// thread) just before the rename. `written` runs once the bytes are in
    /// the temp file, before its fsync (where the hash helpers of a large
    /// overwrite start). Returns
    /// whether the file was created.
    #[allow(clippy::too_many_arguments)] // the old file's and the hashes' parts; a struct would only rename them
    fn publish_bytes(
        &mut self,
        target: &Target,
        dir: Option<Dir>,
        identity: Option<writegate_fs::LeafStat>,
        mut handle: Option<std::os::fd::OwnedFd>,
        bytes: &[u8],
        hash_after: &mut NewHash<'_, '_>,
        written: &mut dyn FnMut(),
    ) -> Result<bool, Failure> {
        let (parent, leaf) = target.split()?;
        // The missing parents of a workspace write, created now that
        // everything else has been checked.
        let (dir, made) = match dir {
            Some(d) => (d, writegate_fs::CreatedDirs::default()),
            None => {
                writegate_fs::open_creating(&self.ctx.runtime.root, parent, self.cfg.new_dir_mode)
                    .map_err(Refusal::from)?
            }
        };
        let opts = PublishOptions {
            new_file_mode: match self.cfg.new_file_mode {
                NewFileMode::Owner => writegate_fs::NewFileMode::Owner,
                NewFileMode::System => writegate_fs::NewFileMode::System,
            },
            expect_existing: identity,
        };
        if !dir.can_defer_frees() {
            drop(handle.take());
        }
        // Space for the event and the intent to commit are on
        // record before the rename (refused when they cannot be and
        // audit.required is on): journaled now when the new bytes' hash is
        // ready, so that with audit.flush = "sync" the intent's fdatasync
        // overlaps the temp file's; else in the pre-commit step, once the
        // helper thread has the hash.
        let audit = self.svc.audit();
        let draft = self.event.as_ref().expect("drafted until finish");
        let (raw_path, start) = (self.raw_path.as_str(), self.start);
        let prepare = |hash: &str| {
            audit.prepare(
                draft,
                &CommitFacts {
                    target: &target.canonical,
                    before: opts.expect_existing.map(|st| (st.dev, st.ino)),
                    bytes_after: bytes.len() as u64,
                    hash_after: hash,
                    raw_path,
                },
                start.elapsed(),
            )
        };
        let mut intent = match hash_after.ready() {
            Some(hash) => match prepare(hash) {
                Ok(i) => Some(i),
                Err(r) => {
                    made.remove();
                    return Err(r.into());
                }
            },
            None => None,
        };
        let guard = &self.ctx.runtime.guard;
        // What this commit replaces, kept and recorded in the
        // history store just before the rename (see `keep.rs`).
        let mut keep = self.before_image(target, identity, &made);
        let mut kept = false;
        let history = self.svc.history();
        let limits = &self.cfg.history;
        let slot = &self.hash_before;
        // Its refusal (a closed generation, an intent the audit log cannot
        // take) is what the publish returns, typed as it is.
        let mut precommit = || -> Result<(), Refusal> {
            if !guard.is_open() {
                // What `Refusal::from` makes of `publish`'s abort:
                // `generation_closed`, naming the target.
                return Err(writegate_fs::FsError::Aborted {
                    path: dir.path().join(leaf),
                    reason: "generation closed".to_string(),
                }
                .into());
            }
            if intent.is_none() {
                intent = Some(prepare(hash_after.get())?);
            }
            // With audit.flush = "sync" the intent is on disk before the
            // rename.
            audit.intent_durable(intent.as_ref().and_then(Option::as_ref))?;
            if let (Some(rec), Some(h)) = (keep.as_mut(), history) {
                rec.hash_after = Some(hash_after.get().to_string());
                // The bytes published (encoded, endings kept), not the
                // request's text.
                rec.bytes_after = bytes.len() as u64;
                if rec.hash_before.is_none() {
                    rec.hash_before = slot.as_ref().and_then(|s| s.get()).cloned();
                }
                super::keep::keep_before(h, &dir, leaf, identity.as_ref(), rec, limits)?;
                kept = true;
            }
            Ok(())
        };
        // A panic while publishing (a bug) still hands the intent to the
        // operation, whose `Drop` records its event with it: otherwise the
        // intent would never be retired, and the journal would fill up.
        let restore = self.restore;
        let published = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| match restore {
            Some((mode, uid, gid)) => writegate_fs::publish_restoring(
                &dir,
                leaf,
                bytes,
                mode,
                Some((uid, gid)),
                opts.expect_existing.as_ref(),
                written,
                &mut precommit,
            ),
            None => {
                writegate_fs::publish_overlapping(&dir, leaf, bytes, &opts, written, &mut precommit)
            }
        }));
        let mut settle = None;
        if let (Some(rec), Some(h)) = (keep.as_ref().filter(|_| kept), history) {
            let ok = published.as_ref().is_ok_and(Result::is_ok);
            let pending = super::keep::after_publish(h, rec, ok);
            if ok {
                settle = Some(pending);
            }
        }
        self.history_pending = settle;
        self.intent = intent.flatten();
        let published = published.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        let published = match published {
            Ok(p) => p,
            Err(r) => {
                // A refused write leaves nothing behind, the directories it
                // made included.
                made.remove();
                return Err(r.into());
            }
        };
        if !made.is_empty() {
            self.event().created_dirs = Some(made.paths().into_iter().map(path_hash).collect());
        }
        // The replaced file's last reference goes to the releaser: its
        // blocks are freed there, not on this request's path.
        if let Some(fd) = handle {
            self.svc.releaser().release(fd);
        }
        Ok(published.created)
    }
}

/// The new bytes' `hashAfter`: taken inline before the commit, or on a
/// helper thread started once they are in the temp file (see
/// [`PARALLEL_HASH_MIN`]) and joined when first needed (computed here if
/// the helper never started).
enum NewHash<'scope, 'b> {
    /// Computed.
    Ready(String),
    /// Left to a helper thread.
    Helper {
        /// The bytes (hashed here if no helper was started).
        bytes: &'b [u8],
        /// The helper, once started.
        thread: &'b RefCell<Option<std::thread::ScopedJoinHandle<'scope, String>>>,
    },
}

impl NewHash<'_, '_> {
    /// The hash if it is computed already.
    fn ready(&self) -> Option<&str> {
        match self {
            NewHash::Ready(h) => Some(h),
            NewHash::Helper { .. } => None,
        }
    }

    /// The hash, waiting for the helper thread if need be.
    fn get(&mut self) -> &str {
        if let NewHash::Helper { bytes, thread } = self {
            let h = match thread.borrow_mut().take() {
                Some(h) => joined(h),
                None => sha256_tagged(bytes),
            };
            *self = NewHash::Ready(h);
        }
        match self {
            NewHash::Ready(h) => h,
            NewHash::Helper { .. } => unreachable!("computed above"),
        }
    }

    /// The hash, owned.
    fn take(mut self) -> String {
        self.get();
        match self {
            NewHash::Ready(h) => h,
            NewHash::Helper { .. } => unreachable!("computed above"),
        }
    }
}

/// The result of a helper thread; its panic goes on in this thread.
fn joined<T>(h: std::thread::ScopedJoinHandle<'_, T>) -> T {
    h.join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}
