//! The commit step: the size check, the hashes, the atomic durable publish
//! and the record of what changed.

use super::{Committed, Loaded, Op, PARALLEL_HASH_MIN, Target, too_large};
use crate::audit::CommitFacts;
use crate::config::NewFileMode;
use crate::error::{Failure, Refusal};
use crate::{path_hash, sha256_tagged};
use std::cell::{Cell, OnceCell};
use std::sync::OnceLock;
use std::thread::{Scope, ScopedJoinHandle};
use writegate_fs::{Dir, Existing, Publish, PublishOptions};

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
        // A file only opened (a skim learned its format) is read for its
        // hash through a descriptor of its own: its own descriptor goes to
        // the publish (see `publish_bytes`).
        let reader = match (&existing, &slot) {
            (Some(e), Some(slot)) if matches!(e.content, writegate_fs::Content::Unread) => {
                let reader = e.duplicate(&target.canonical).ok();
                // No descriptor to spare: the hash is taken now, through
                // the file's own.
                if reader.is_none() {
                    super::fill_hash(slot, e, Some(self.svc.read_hashes()));
                }
                reader
            }
            _ => None,
        };
        // The old file's read descriptor (see `publish_bytes`).
        let handle = existing.as_mut().and_then(Existing::take_handle);
        // The old file's hash, when it was left for now: its slot and the
        // file it is taken of.
        let old = OldHash {
            slot: slot.as_deref(),
            file: reader.as_ref().or(existing.as_ref()),
            cache: self.svc.read_hashes(),
        };
        let (hash_after, created) = if dry_run {
            old.take();
            (sha256_tagged(bytes), existing.is_none())
        } else {
            // The new bytes' hash goes into the intent journal before the
            // rename (recovery matches it). A large write's is taken on a helper
            // thread while this one writes the temp file and waits for the
            // disk (as is a large old file's, left for now); a small one's
            // inline, first.
            let ((hash, check), published) = std::thread::scope(|scope| {
                let hashes = Hashes::start(scope, old, bytes);
                let published =
                    self.publish_bytes(target, dir, identity, handle, bytes, &hashes, &mut || {
                        hashes.on_written();
                    });
                (hashes.join(), published)
            });
            // The second descriptor's blocks are freed off this path too.
            if let Some(fd) = reader.and_then(|mut r| r.take_handle()) {
                self.svc.releaser().release(fd);
            }
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
            let published = published?;
            // The file as written is recorded with its hash, as a read of
            // it would record it: its next write (or read) takes the hash
            // from there when its bytes are still these.
            if let Some(check) = check {
                let (dev, ino) = published.identity;
                self.svc.read_hashes().record(
                    crate::read_hash::FileKey { dev, ino, len },
                    check,
                    &hash,
                );
            }
            (hash, published.created)
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
    /// written when `hashes` has it ready, else (a large write hashed on a
    /// helper thread) just before the rename. `written` runs once the bytes
    /// are in the temp file, before its fsync (where the hash helpers of a
    /// large overwrite start). Returns what the publish did.
    #[allow(clippy::too_many_arguments)] // the old file's and the hashes' parts; a struct would only rename them
    fn publish_bytes(
        &mut self,
        target: &Target,
        dir: Option<Dir>,
        identity: Option<writegate_fs::LeafStat>,
        mut handle: Option<std::os::fd::OwnedFd>,
        bytes: &[u8],
        hashes: &Hashes<'_, '_>,
        written: &mut dyn FnMut(),
    ) -> Result<writegate_fs::Published, Failure> {
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
        let mut intent = match hashes.ready() {
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
                intent = Some(prepare(hashes.after())?);
            }
            // With audit.flush = "sync" the intent is on disk before the
            // rename.
            audit.intent_durable(intent.as_ref().and_then(Option::as_ref))?;
            if let (Some(rec), Some(h)) = (keep.as_mut(), history) {
                rec.hash_after = Some(hashes.after().to_string());
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
        let published = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let publish = Publish::new(&dir, leaf, bytes, &opts)
                .on_written(written)
                .precommit(&mut precommit);
            match restore {
                Some((mode, uid, gid)) => publish.restore(mode, Some((uid, gid))).run(),
                None => publish.run(),
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
        Ok(published)
    }
}

/// The old file's `hashBefore`, when its hash was left for now (a large
/// file): the slot it goes into and the file it is taken of (its bytes, or
/// a descriptor to read them through).
#[derive(Clone, Copy)]
struct OldHash<'a> {
    /// Where the hash goes; `None` when it was taken when the file was read
    /// (or there is no old file).
    slot: Option<&'a OnceLock<String>>,
    /// The old file.
    file: Option<&'a Existing>,
    /// Where a file writegate wrote last has its hash on record.
    cache: &'a crate::read_hash::ReadHashes,
}

impl OldHash<'_> {
    /// Whether the old hash is likely to cost little: a file only opened
    /// (skimmed) is first looked up in the read hash cache, which holds
    /// the file writegate last wrote (an XXH3-64 of its bytes, about a
    /// twentieth of a SHA-256). Its helper then need not keep the new
    /// hash's from starting before the write.
    fn cheap(self) -> bool {
        self.file
            .is_some_and(|f| matches!(f.content, writegate_fs::Content::Unread))
    }

    /// Takes the hash into its slot, unless it is there already.
    fn take(self) {
        if let (Some(slot), Some(file)) = (self.slot, self.file) {
            super::fill_hash(slot, file, Some(self.cache));
        }
    }
}

/// The commit's two hashes, taken beside its publish: the old file's (into
/// its slot, when it was left for now) and the new bytes' `hashAfter`. A
/// small write's new hash is taken inline, first. At most one helper runs
/// while the publishing thread writes the temp file (two CPUs is the
/// machine to serve well): with no old hash left to take (a new file, or
/// an old one small enough to be hashed when read), a large write's new
/// hash starts at once, and so it does over a skimmed file, whose old hash
/// is first looked up in the read hash cache ([`OldHash::cheap`]; its
/// helper starts in [`Hashes::on_written`]); else (an overwrite of a large
/// file read whole) both start in [`Hashes::on_written`], once the bytes
/// are in the temp file, and have the CPUs while the publisher waits for
/// the disk. Measured
/// (docs/decisions/0005-hashes-beside-the-publish.md): a new 5 MiB file
/// through `writegate mcp` 14.3-14.4 ms against 15.1-16.9 with the hash
/// started after the write; a 5 MiB overwrite 0.5-2 ms slower with two
/// helpers racing the write.
///
/// Its methods take `&self`: the publisher's `written` hook starts the
/// helpers while its precommit check may wait for the new hash.
struct Hashes<'scope, 'env> {
    /// Where the helpers run.
    scope: &'scope Scope<'scope, 'env>,
    /// The new bytes.
    bytes: &'env [u8],
    /// The old file's hash.
    old: OldHash<'env>,
    /// Whether the new bytes are hashed on a helper ([`PARALLEL_HASH_MIN`]).
    large: bool,
    /// The old hash's helper, once started.
    old_thread: Cell<Option<ScopedJoinHandle<'scope, ()>>>,
    /// The new hash's helper, once started: the SHA-256 and the XXH3-64
    /// check the read hash cache keeps it under.
    new_thread: Cell<Option<ScopedJoinHandle<'scope, (String, u64)>>>,
    /// The new hash, once computed or joined.
    new: OnceCell<String>,
    /// The new bytes' XXH3-64, when a helper took it with their hash.
    check: Cell<Option<u64>>,
}

/// What a large write's new-hash helper takes: the SHA-256 and the XXH3-64
/// (about a twentieth of its cost) the written file is recorded under in
/// the read hash cache, so that the next write of it has its `hashBefore`
/// without hashing it again.
fn new_hashes(bytes: &[u8], cache: &crate::read_hash::ReadHashes) -> (String, u64) {
    (sha256_tagged(bytes), cache.check(bytes))
}

impl<'scope, 'env> Hashes<'scope, 'env> {
    /// Starts what can start before the write: a small write's new hash
    /// inline, or a large one's helper when no old hash is left to take.
    fn start(scope: &'scope Scope<'scope, 'env>, old: OldHash<'env>, bytes: &'env [u8]) -> Self {
        let large = bytes.len() >= PARALLEL_HASH_MIN;
        let hashes = Hashes {
            scope,
            bytes,
            old,
            large,
            old_thread: Cell::new(None),
            new_thread: Cell::new(None),
            new: OnceCell::new(),
            check: Cell::new(None),
        };
        if !large {
            let _ = hashes.new.set(sha256_tagged(bytes));
        } else if old.slot.is_none() || old.cheap() {
            hashes
                .new_thread
                .set(Some(scope.spawn(move || new_hashes(bytes, old.cache))));
        }
        hashes
    }

    /// The bytes are in the temp file: with an old hash left to take, its
    /// helper starts, and a large write's new hash helper with it.
    fn on_written(&self) {
        if self.old.slot.is_some() {
            let old = self.old;
            self.old_thread
                .set(Some(self.scope.spawn(move || old.take())));
            if self.large && !self.old.cheap() {
                let (bytes, cache) = (self.bytes, self.old.cache);
                self.new_thread
                    .set(Some(self.scope.spawn(move || new_hashes(bytes, cache))));
            }
        }
    }

    /// The new hash if it is computed already.
    fn ready(&self) -> Option<&str> {
        self.new.get().map(String::as_str)
    }

    /// The new hash, waiting for its helper if need be (computed here if
    /// the helper never started).
    fn after(&self) -> &str {
        self.new.get_or_init(|| self.wait_new())
    }

    /// The new hash from its helper, or computed here if none started.
    fn wait_new(&self) -> String {
        match self.new_thread.take() {
            Some(h) => {
                let (hash, check) = joined(h);
                self.check.set(Some(check));
                hash
            }
            None => sha256_tagged(self.bytes),
        }
    }

    /// Waits for both: the old hash is in its slot (`hashBefore` is in the
    /// event whatever happened to the publish), and the new one is
    /// returned, with its XXH3-64 when a helper took it.
    fn join(mut self) -> (String, Option<u64>) {
        match self.old_thread.take() {
            Some(h) => joined(h),
            None => self.old.take(),
        }
        let hash = match self.new.take() {
            Some(h) => h,
            None => self.wait_new(),
        };
        (hash, self.check.get())
    }
}

/// The result of a helper thread; its panic goes on in this thread.
fn joined<T>(h: std::thread::ScopedJoinHandle<'_, T>) -> T {
    h.join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}
