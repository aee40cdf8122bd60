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
use writegate_text::Format;

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
        let mut dir = loaded.dir.take();
        let mut existing = loaded.existing.take();
        let slot = loaded.hash_before.take();
        let unverified = loaded.unverified;
        let bytes_before = existing.as_ref().map_or(0, |e| e.stat.len);
        let identity = existing.as_ref().map(|e| e.stat);
        // A file only opened (a skim learned its format) is read for its
        // hash through a descriptor of its own: its own descriptor goes to
        // the publish (see `publish_bytes`).
        let mut inline_check = None;
        let reader = match (&existing, &slot) {
            (Some(e), Some(slot)) if matches!(e.content, writegate_fs::Content::Unread) => {
                let reader = e.duplicate(&target.canonical).ok();
                // No descriptor to spare: the hash is taken now, through
                // the file's own.
                if reader.is_none() {
                    inline_check = super::fill_hash_check(slot, e, Some(self.svc.read_hashes()));
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
                hashes.old_seen.set(inline_check);
                let published = self.publish_bytes(
                    target,
                    &mut dir,
                    (identity, handle, unverified),
                    bytes,
                    &hashes,
                    &mut || hashes.on_written(),
                );
                (hashes.join(), published)
            });
            if self.format_stale
                && let Some(st) = identity
            {
                // Read again under the lock, through the directory it was
                // taken for.
                self.dir = dir;
                self.svc.read_hashes().forget(crate::read_hash::FileKey {
                    dev: st.dev,
                    ino: st.ino,
                    len: st.len,
                });
            }
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
            if let Some((check, format)) = check {
                let (dev, ino) = published.identity;
                self.svc.read_hashes().record(
                    crate::read_hash::FileKey { dev, ino, len },
                    check,
                    &hash,
                    format,
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
    /// creates the missing parents of a workspace write first (and leaves
    /// the directory made in `dir`).
    /// `old` is what the commit replaces: the stat of the file read inside
    /// the lock (its inode must still be at the leaf; its mode and owner go
    /// to the new file); its read descriptor, kept across the rename only
    /// where that just delays freeing its blocks (local disks), then handed
    /// to the releaser, elsewhere closed first (NFS and FUSE would rename
    /// it to a hidden name while it is open); and, when `bytes` were encoded
    /// for the format the read hash cache had for it, the check its bytes
    /// must have ([`super::Loaded::unverified`]): the old hash's helper
    /// reads them during the fsync, and when they do not have it nothing is
    /// published and [`Op::take_format_stale`] says so. `hash_after` (of
    /// `bytes`) goes into
    /// the commit's intent journal: journaled before the temp file is
    /// written when `hashes` has it ready, else (a large write hashed on a
    /// helper thread) just before the rename. `written` runs once the bytes
    /// are in the temp file, before its fsync (where the hash helpers of a
    /// large overwrite start). Returns what the publish did.
    #[allow(clippy::too_many_arguments)] // the old file's and the hashes' parts; a struct would only rename them
    fn publish_bytes(
        &mut self,
        target: &Target,
        dir: &mut Option<Dir>,
        old: (
            Option<writegate_fs::LeafStat>,
            Option<std::os::fd::OwnedFd>,
            Option<u64>,
        ),
        bytes: &[u8],
        hashes: &Hashes<'_, '_>,
        written: &mut dyn FnMut(),
    ) -> Result<writegate_fs::Published, Failure> {
        let (identity, mut handle, unverified) = old;
        let (parent, leaf) = target.split()?;
        // The missing parents of a workspace write, created now that
        // everything else has been checked.
        let mut made = writegate_fs::CreatedDirs::default();
        if dir.is_none() {
            let (d, m) =
                writegate_fs::open_creating(&self.ctx.runtime.root, parent, self.cfg.new_dir_mode)
                    .map_err(Refusal::from)?;
            *dir = Some(d);
            made = m;
        }
        let dir = dir.as_ref().expect("opened or created above");
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
        // Nothing is journaled before bytes encoded for a format still to be
        // checked are known to be right for the file.
        let mut intent = match hashes.ready().filter(|_| unverified.is_none()) {
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
        let stale = Cell::new(false);
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
            if let Some(want) = unverified
                && hashes.old_check() != Some(want)
            {
                stale.set(true);
                return Err(Refusal::new(
                    crate::error::ErrorKind::FileChanged,
                    format!(
                        "{} changed while it was being written; nothing was written, retry",
                        dir.path().join(leaf).display()
                    ),
                ));
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
                super::keep::keep_before(h, dir, leaf, identity.as_ref(), rec, limits)?;
                kept = true;
            }
            Ok(())
        };
        // A panic while publishing (a bug) still hands the intent to the
        // operation, whose `Drop` records its event with it: otherwise the
        // intent would never be retired, and the journal would fill up.
        let restore = self.restore;
        let published = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let publish = Publish::new(dir, leaf, bytes, &opts)
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
        self.format_stale = stale.get();
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

    /// Takes the hash into its slot, unless it is there already; returns
    /// the check of the bytes read for it, when they were.
    fn take(self) -> Option<u64> {
        match (self.slot, self.file) {
            (Some(slot), Some(file)) => super::fill_hash_check(slot, file, Some(self.cache)),
            _ => None,
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
    /// The old hash's helper, once started: it returns the check of the
    /// bytes it read.
    old_thread: Cell<Option<ScopedJoinHandle<'scope, Option<u64>>>>,
    /// The check of the old file's bytes, once read for its hash.
    old_seen: Cell<Option<u64>>,
    /// The old hash was taken (or its helper joined): it is not read again.
    old_done: Cell<bool>,
    /// The new hash's helper, once started ([`new_hashes`]): it hands the
    /// SHA-256 over as soon as it has it (the commit waits for it before
    /// the rename), then returns the rest.
    new_thread: Cell<Option<ScopedJoinHandle<'scope, Recorded>>>,
    /// Where the new hash's helper hands the SHA-256 over.
    new_hash: Cell<Option<std::sync::mpsc::Receiver<String>>>,
    /// The new hash, once computed or joined.
    new: OnceCell<String>,
    /// The new bytes' XXH3-64 and format, when a helper took them with their
    /// hash.
    check: Cell<Option<(u64, Option<Format>)>>,
}

/// What the written file is recorded under in the read hash cache besides
/// its hash: the XXH3-64 of its bytes and the format a skim gives for them
/// (`None`: not recorded).
type Recorded = Option<(u64, Option<Format>)>;

/// What a large write's new-hash helper takes: the SHA-256 first, handed
/// over on `sha` (the rename waits for it), then the XXH3-64 (about a
/// twentieth of its cost) and the format a skim gives for the bytes (`None`
/// when a skim cannot tell it), which the written file is recorded under in
/// the read hash cache: the next whole-file write of it then has its format
/// and its `hashBefore` without a look at it before the commit.
fn new_hashes(
    bytes: &[u8],
    cache: &crate::read_hash::ReadHashes,
    sha: &std::sync::mpsc::SyncSender<String>,
) -> Recorded {
    let _ = sha.send(sha256_tagged(bytes));
    // Only what the cache is told: a panic here (a bug) must not undo a
    // publish that may already have renamed.
    std::panic::catch_unwind(|| {
        let mut skim = writegate_text::FormatSkim::new();
        let format = if skim.feed(bytes) {
            skim.finish()
        } else {
            None
        };
        (cache.check(bytes), format)
    })
    .ok()
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
            old_seen: Cell::new(None),
            old_done: Cell::new(false),
            new_thread: Cell::new(None),
            new_hash: Cell::new(None),
            new: OnceCell::new(),
            check: Cell::new(None),
        };
        if !large {
            let _ = hashes.new.set(sha256_tagged(bytes));
        } else if old.slot.is_none() || old.cheap() {
            hashes.start_new();
        }
        hashes
    }

    /// Starts the new hash's helper.
    fn start_new(&self) {
        let (bytes, cache) = (self.bytes, self.old.cache);
        let (sha, hash) = std::sync::mpsc::sync_channel(1);
        self.new_hash.set(Some(hash));
        self.new_thread.set(Some(
            self.scope.spawn(move || new_hashes(bytes, cache, &sha)),
        ));
    }

    /// The bytes are in the temp file: with an old hash left to take, its
    /// helper starts, and a large write's new hash helper with it.
    fn on_written(&self) {
        if self.old.slot.is_some() {
            let old = self.old;
            self.old_thread
                .set(Some(self.scope.spawn(move || old.take())));
            if self.large && !self.old.cheap() {
                self.start_new();
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
        if let Some(hash) = self.new_hash.take() {
            match hash.recv() {
                Ok(hash) => return hash,
                // The helper ended without it: its panic goes on here.
                Err(_) => self.join_new(),
            }
        }
        sha256_tagged(self.bytes)
    }

    /// Waits for the new hash's helper to finish, if it was started.
    fn join_new(&self) {
        if let Some(h) = self.new_thread.take() {
            self.check.set(joined(h));
        }
    }

    /// The check of the old file's bytes, as its hash was taken of them
    /// (waiting for its helper, or taken here when none started); `None`
    /// when they were not read for one.
    fn old_check(&self) -> Option<u64> {
        if !self.old_done.replace(true) {
            let seen = match self.old_thread.take() {
                Some(h) => joined(h),
                None => self.old.take(),
            };
            if seen.is_some() {
                self.old_seen.set(seen);
            }
        }
        self.old_seen.get()
    }

    /// Waits for both: the old hash is in its slot (`hashBefore` is in the
    /// event whatever happened to the publish), and the new one is
    /// returned, with its XXH3-64 and format when a helper took them.
    fn join(mut self) -> (String, Option<(u64, Option<Format>)>) {
        self.old_check();
        let hash = match self.new.take() {
            Some(h) => h,
            None => self.wait_new(),
        };
        self.join_new();
        (hash, self.check.get())
    }
}

/// The result of a helper thread; its panic goes on in this thread.
fn joined<T>(h: std::thread::ScopedJoinHandle<'_, T>) -> T {
    h.join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}
