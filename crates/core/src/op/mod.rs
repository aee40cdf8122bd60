//! The operation pipeline as named steps (SPEC 2, 4, 7, 10, 12):
//!
//! ```text
//! begin → admit → resolve → approve → lock → read → commit → finish
//! ```
//!
//! One [`Op`] value carries an operation through them. It owns the config
//! snapshot (one per operation: a reload in between cannot mix two
//! configs), the audit event being drafted, and, from [`Op::lock`] on, the
//! path lock's guard. [`Op::finish`] consumes it: it writes the one audit
//! event and only then releases the lock, so "the path lock is held until
//! the audit event is written" (SPEC 7.4) and "exactly one event per
//! operation" (SPEC 10) hold by construction, not by each caller's care.
//! An `Op` dropped without `finish` (a panic in a step) still writes one
//! `fs.denied` event with `internal_error`, before its guard is released.
//!
//! A method is a short sequence of these steps (see `service.rs`); a later
//! delete or rename reuses them with a different commit.

use crate::api::{OpCtx, OpMode};
use crate::audit::{AuditEvent, CommitIntent, EventKind, Intent, Writer, now_rfc3339};
use crate::config::Config;
use crate::error::{Detail, ErrorKind, Failure, Refusal};
use crate::policy::is_read_only;
use crate::read_hash::{FileKey, ReadHashes};
use crate::routing::{MarkerSource, external_route};
use crate::service::Service;
use crate::{path_hash, sha256_tagged};
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Instant;
use writegate_fs::{Atime, Content, Dir, Existing, LockKey, PathGuard};
use writegate_paths::{OsView, ResolveError};
use writegate_text::EditMode;

mod commit;
mod gate;
mod keep;

use gate::{asked, resolve_refusal};

/// How much of the existing file is read inside the lock.
#[derive(Clone, Copy)]
pub(crate) enum ReadMode {
    /// All of it, or nothing ([`Content::TooLarge`], then refused by the
    /// caller) when over the limit.
    Whole(u64),
    /// At most this many bytes: enough to learn the format of a file a
    /// whole-file write replaces (SPEC 7.2 allows replacing a file over the
    /// cap), without ever loading a huge or sparse file.
    Prefix(u64),
    /// A whole-file write's read: a file of [`SKIM_MIN`] to this many
    /// bytes has its format learned without being held: from the read hash
    /// cache when writegate wrote the file last (checked against its bytes
    /// before the rename, [`Loaded::unverified`]), else a piece at a time
    /// ([`writegate_text::FormatSkim`]); its `hashBefore` is taken by
    /// reading it on a helper during the commit. Any other file, and one
    /// the skim cannot tell (a BOM, a `\r`, bytes that are not UTF-8), is
    /// read as [`ReadMode::Prefix`] of this many bytes.
    Skim(u64),
}

/// The smallest file [`ReadMode::Skim`] skims: a smaller one is read
/// whole, which costs less than reading it twice.
pub(crate) const SKIM_MIN: u64 = PARALLEL_HASH_MIN as u64;

/// Bytes a skim reads at a time: small enough to stay in the CPU's cache
/// between the read and the look at them, large enough for few system
/// calls.
const SKIM_PIECE: usize = 256 * 1024;

/// A canonical target: where the operation really goes.
pub(crate) struct Target {
    pub(crate) canonical: PathBuf,
    /// Permission bits of the existing file as the resolver's `lstat` saw
    /// them (`None`: no file there yet). The gate judges by them; what
    /// [`Op::read`] finds inside the lock is checked again.
    pub(crate) mode: Option<u32>,
}

impl Target {
    /// The parent directory and the leaf name.
    fn split(&self) -> Result<(&Path, &OsStr), Failure> {
        match (self.canonical.parent(), self.canonical.file_name()) {
            (Some(p), Some(l)) => Ok((p, l)),
            _ => Err(Refusal::new(ErrorKind::ParseError, "the path names no file").into()),
        }
    }
}

/// Files at least this large are hashed on a helper thread while the commit
/// writes and fsyncs (the old file's `hashBefore` and the new bytes'
/// `hashAfter`): sha256 of 5 MiB takes milliseconds of CPU, and the
/// committing thread mostly waits for the disk meanwhile. Smaller ones are
/// hashed inline (a thread costs more than their hash).
pub(crate) const PARALLEL_HASH_MIN: usize = 1024 * 1024;

/// The target's directory handle and the existing file, read inside the
/// lock.
pub(crate) struct Loaded {
    /// `None`: the parent directory does not exist yet; a workspace write
    /// creates it at commit.
    pub(crate) dir: Option<Dir>,
    pub(crate) existing: Option<Existing>,
    /// The old file's hash when it is not computed yet (a large file read
    /// whole): shared with the op's event. The commit fills it in parallel
    /// with the publish; any other path fills it when this is dropped, so
    /// the event has `hashBefore` either way.
    hash_before: Option<Arc<OnceLock<String>>>,
    /// The existing file's format when a skim learned it
    /// ([`ReadMode::Skim`]; `existing` is then [`Content::Unread`]).
    pub(crate) format: Option<writegate_text::Format>,
    /// When `format` is the read hash cache's (the format the file had
    /// when writegate wrote it): the check its bytes must still have. The
    /// commit reads them on a helper while it writes the temp file, and
    /// publishes nothing unless they do ([`Op::take_format_stale`]).
    unverified: Option<u64>,
}

impl Loaded {
    /// `sha256:<hex>` of the existing file read whole (computed once);
    /// `None` when there is none or it was read only in part.
    pub(crate) fn hash_before(&self) -> Option<String> {
        let e = self.existing.as_ref()?;
        match &self.hash_before {
            Some(slot) => fill_hash(slot, e, None).cloned(),
            None => existing_hash(e, None),
        }
    }
}

impl Drop for Loaded {
    fn drop(&mut self) {
        if let (Some(slot), Some(e)) = (&self.hash_before, &self.existing) {
            fill_hash(slot, e, None);
        }
    }
}

/// `sha256:<hex>` of an existing file: of the bytes read when it was read
/// whole, or, when it was only opened ([`Content::Unread`]), of what
/// reading it through its descriptor now gives. `None` for a file read in
/// part, one that cannot be read, and one that grew past the size it had
/// when it was skimmed (a sparse file can claim any size: it is never read
/// further than that). With `cache`, a file only opened is first read for
/// its check: when its entry in the read hash cache has that check (the
/// bytes writegate last wrote or read), the entry's hash is the file's,
/// and the SHA-256 is not taken.
pub(crate) fn existing_hash(e: &Existing, cache: Option<&ReadHashes>) -> Option<String> {
    existing_hash_check(e, cache).0
}

/// [`existing_hash`], with the check of the bytes read when `cache` had
/// them read for one (a file only opened, read to its recorded size).
fn existing_hash_check(e: &Existing, cache: Option<&ReadHashes>) -> (Option<String>, Option<u64>) {
    match &e.content {
        Content::Whole(bytes) => (Some(sha256_tagged(bytes)), None),
        Content::Unread => {
            let mut seen = None;
            if let Some(cache) = cache {
                let mut check = cache.checker();
                if let Some(len) = stream_upto(e, |piece| check.update(piece)) {
                    let key = FileKey {
                        dev: e.stat.dev,
                        ino: e.stat.ino,
                        len,
                    };
                    let check = check.digest();
                    if let Some(hash) = cache.lookup_check(key, check) {
                        return (Some(hash), Some(check));
                    }
                    seen = Some(check);
                }
            }
            let mut hash = crate::hash::StreamHash::default();
            let hash = stream_upto(e, |piece| hash.update(piece)).map(|_| hash.finish());
            (hash, seen)
        }
        Content::Prefix(_) | Content::TooLarge => (None, None),
    }
}

/// Reads an opened file through its descriptor to its end, handing each
/// piece to `each`; the bytes read, or `None` when it cannot be read or
/// holds more than its recorded size.
fn stream_upto(e: &Existing, mut each: impl FnMut(&[u8])) -> Option<u64> {
    use std::ops::ControlFlow;
    let mut seen = 0u64;
    let read = e.stream(Path::new(""), HASH_PIECE, |piece| {
        seen += piece.len() as u64;
        if seen > e.stat.len {
            return ControlFlow::Break(());
        }
        each(piece);
        ControlFlow::Continue(())
    });
    match read {
        Ok(ControlFlow::Continue(len)) => Some(len),
        _ => None,
    }
}

/// Bytes [`existing_hash`] reads at a time.
const HASH_PIECE: usize = 1024 * 1024;

/// The slot's hash, taken of `e` unless it is there already (and left
/// empty when `e` cannot be read); see [`existing_hash`] for `cache`.
pub(crate) fn fill_hash<'a>(
    slot: &'a OnceLock<String>,
    e: &Existing,
    cache: Option<&ReadHashes>,
) -> Option<&'a String> {
    fill_hash_check(slot, e, cache);
    slot.get()
}

/// [`fill_hash`]; returns the check of the bytes it read when `cache` had
/// them read for one ([`existing_hash_check`]).
pub(crate) fn fill_hash_check(
    slot: &OnceLock<String>,
    e: &Existing,
    cache: Option<&ReadHashes>,
) -> Option<u64> {
    if slot.get().is_some() {
        return None;
    }
    let (hash, check) = existing_hash_check(e, cache);
    if let Some(hash) = hash {
        let _ = slot.set(hash);
    }
    check
}

/// [`ReadMode::Skim`]: the file opened, and when its size is in
/// `SKIM_MIN..=max` its format learned without holding it: from the read
/// hash cache when writegate wrote the file last (the format its bytes had
/// then, to be checked against them before the rename: [`Skimmed::unverified`]),
/// else a piece at a time (never past `max` bytes, whatever size it claims
/// meanwhile); any other file, and one the skim cannot tell, read as
/// [`ReadMode::Prefix`] through the same descriptor. Only in a directory
/// where a replaced file's descriptor may stay open across the rename
/// ([`Dir::can_defer_frees`]): the old hash's helper reads a skimmed file
/// through a descriptor of its own during the publish.
fn skim(
    dir: &Dir,
    leaf: &OsStr,
    max: u64,
    cache: &ReadHashes,
) -> Result<Skimmed, writegate_fs::FsError> {
    use std::ops::ControlFlow;
    let whole = |existing| Skimmed {
        existing,
        format: None,
        unverified: None,
    };
    if !dir.can_defer_frees() {
        return writegate_fs::read_prefix(dir, leaf, max, Atime::Keep).map(whole);
    }
    let Some(mut e) = writegate_fs::open_existing(dir, leaf, Atime::Keep)? else {
        return Ok(whole(None));
    };
    let path = dir.path().join(leaf);
    let skimmable = |len: u64| (SKIM_MIN..=max).contains(&len);
    if skimmable(e.stat.len) {
        let key = FileKey {
            dev: e.stat.dev,
            ino: e.stat.ino,
            len: e.stat.len,
        };
        if let Some((check, format)) = cache.format_of(key) {
            return Ok(Skimmed {
                existing: Some(e),
                format: Some(format),
                unverified: Some(check),
            });
        }
        let mut skim = writegate_text::FormatSkim::new();
        let mut seen = 0u64;
        let read = e.stream(&path, SKIM_PIECE, |piece| {
            seen += piece.len() as u64;
            if seen <= max && skim.feed(piece) {
                ControlFlow::Continue(())
            } else {
                ControlFlow::Break(())
            }
        })?;
        if let (ControlFlow::Continue(seen), Some(format)) = (read, skim.finish())
            && skimmable(seen)
        {
            // What was seen is the file's size (it may have changed since
            // the open), as a whole read records it.
            e.stat.len = seen;
            return Ok(Skimmed {
                existing: Some(e),
                format: Some(format),
                unverified: None,
            });
        }
    }
    e.read_prefix(&path, max).map(|e| whole(Some(e)))
}

/// What [`skim`] found.
struct Skimmed {
    existing: Option<Existing>,
    /// A skimmed file's format.
    format: Option<writegate_text::Format>,
    /// When the format is the one the read hash cache has for the file:
    /// the check (XXH3-64 under the cache's secret) its bytes must have for
    /// the format to be theirs.
    unverified: Option<u64>,
}

/// What a commit did.
pub(crate) struct Committed {
    pub(crate) created: bool,
    pub(crate) bytes_before: u64,
    pub(crate) bytes_after: u64,
    pub(crate) hash_after: String,
}

/// One operation in flight. See the module doc.
pub(crate) struct Op<'s> {
    svc: &'s Service,
    ctx: &'s OpCtx,
    /// The config snapshot this operation runs under.
    pub(crate) cfg: Arc<Config>,
    /// The audit event being drafted; `None` once written.
    event: Option<AuditEvent>,
    raw_path: String,
    start: Instant,
    /// The target's directory, opened by [`Op::lock`] for its lock key and
    /// used by [`Op::read`]; `None` until then and when it does not exist
    /// yet (`dir_missing`).
    dir: Option<Dir>,
    /// The path lock(s), released only after the event is written (see
    /// `Drop`): the key of the real directory, and, when the directory did
    /// not exist at first, also the key of its deepest existing ancestor.
    guards: Vec<PathGuard<'s>>,
    /// The journaled intent of the commit, from just before it until the
    /// event is written (what crash recovery reads).
    intent: Option<CommitIntent>,
    /// The old file's hash, when [`Loaded`] computes it later (see there).
    hash_before: Option<Arc<OnceLock<String>>>,
    /// The event's `pathHash` is still the one `begin` took of the path as
    /// named (see [`Op::hash_canonical`]).
    raw_path_hashed: bool,
    /// The mode [`Op::approve`] judged (`None` until then) and whether
    /// it judged an existing read-only file: [`Op::read`] asks the gate
    /// again when the file it finds inside the lock is read-only and the
    /// gate did not see it so.
    gated: (Option<OpMode>, bool),
    /// An undo's commit: the permission bits, owner and group the file
    /// gets back (instead of those of the file it replaces).
    pub(crate) restore: Option<(u32, u32, u32)>,
    /// Set by a commit that kept a before-image: whether its hash is still
    /// to be recorded once the hash helpers are joined.
    history_pending: Option<bool>,
    /// Set by a commit that published nothing because the old file's bytes
    /// were not those whose format the read hash cache gave
    /// ([`Loaded::unverified`]); see [`Op::take_format_stale`].
    format_stale: bool,
}

impl<'s> Op<'s> {
    /// Starts an operation on the path `raw` as the request named it:
    /// takes the config snapshot and drafts the audit event (`pathHash` of
    /// the raw input until the path is resolved).
    pub(crate) fn begin(
        svc: &'s Service,
        ctx: &'s OpCtx,
        intent: Intent,
        mode: Option<EditMode>,
        raw: &Path,
    ) -> Op<'s> {
        let event = AuditEvent {
            v: 1,
            ts: String::new(),
            kind: EventKind::Denied,
            op_id: svc.audit().next_op_id(),
            intent,
            route: ctx.route.into(),
            writer: Writer::Workspace,
            session_id: ctx.session_id.clone(),
            workspace: ctx.runtime.id.clone(),
            path_hash: path_hash(raw),
            size_bytes: None,
            mode,
            created: None,
            bytes_before: None,
            bytes_after: None,
            hash_before: None,
            hash_after: None,
            error_kind: None,
            hint: None,
            duration_ms: 0,
            source: None,
            approval: None,
            created_dirs: None,
            dry_run: None,
            path: None,
            recovered: None,
            undoes: None,
        };
        Op {
            svc,
            ctx,
            cfg: svc.config(),
            event: Some(event),
            raw_path: crate::path_text(raw),
            start: Instant::now(),
            dir: None,
            guards: Vec::new(),
            intent: None,
            hash_before: None,
            raw_path_hashed: true,
            gated: (None, false),
            restore: None,
            history_pending: None,
            format_stale: false,
        }
    }

    /// Whether the last commit published nothing because the format it
    /// encoded for was the read hash cache's and the old file's bytes were
    /// no longer those it was recorded for (changed in place, same inode and
    /// size); then the cache has forgotten the file, and reading it again
    /// learns its format from its bytes. Clears the mark.
    pub(crate) fn take_format_stale(&mut self) -> bool {
        std::mem::take(&mut self.format_stale)
    }

    fn event(&mut self) -> &mut AuditEvent {
        self.event
            .as_mut()
            .expect("the event is drafted until finish consumes the op")
    }

    /// Notes the request's content size and dry-run flag in the event.
    pub(crate) fn note_request(&mut self, size: u64, dry_run: bool) {
        let e = self.event();
        e.size_bytes = Some(size);
        if dry_run {
            e.dry_run = Some(true);
        }
    }

    /// The generation guard is still open (SPEC 2).
    pub(crate) fn check_open(&self) -> Result<(), Failure> {
        if self.ctx.runtime.guard.is_open() {
            Ok(())
        } else {
            Err(Refusal::new(
                ErrorKind::GenerationClosed,
                "the workspace was removed or its trust changed; reconnect and retry",
            )
            .into())
        }
    }

    fn check_cancel(&self) -> Result<(), Failure> {
        if self.ctx.cancelled() {
            Err(Failure::Cancelled)
        } else {
            Ok(())
        }
    }

    /// Admits a write or edit: audit sink healthy, generation open,
    /// workspace trusted, request content within `max_write_bytes`.
    pub(crate) fn admit_write(&self, content_len: u64) -> Result<(), Failure> {
        if !self.svc.audit().healthy() {
            return Err(Refusal::new(
                ErrorKind::IoError,
                "the audit log cannot be written and audit.required is on",
            )
            .into());
        }
        self.check_open()?;
        if !self.ctx.runtime.trusted {
            return Err(Refusal::new(
                ErrorKind::UntrustedWorkspace,
                "this workspace is not trusted for writes; mark it trusted in the config",
            )
            .into());
        }
        if content_len > self.cfg.max_write_bytes {
            return Err(too_large(
                content_len,
                self.cfg.max_write_bytes,
                "max_write_bytes",
            ));
        }
        Ok(())
    }

    /// Resolves a write's path and chooses its route (SPEC 4, 5, 7.1): the
    /// workspace resolver, or, for a marked write outside the workspace on
    /// a connection that allows it, the external checks. Records the
    /// canonical `pathHash`, the writer and the marker's source.
    pub(crate) fn resolve_write(
        &mut self,
        raw: &Path,
        marker: Option<MarkerSource>,
    ) -> Result<Target, Failure> {
        let root = &self.ctx.runtime.root;
        let target = match writegate_paths::resolve(&OsView, raw, std::slice::from_ref(root)) {
            Ok(r) => Target {
                canonical: r.canonical,
                mode: r.mode,
            },
            Err(ResolveError::OutsideWorkspace(msg)) => {
                let enabled = self.ctx.allows.external_writer && self.cfg.external_writes_enabled();
                let Some(source) = external_route(enabled, marker) else {
                    let mut r = resolve_refusal(ResolveError::OutsideWorkspace(msg), root, "write");
                    // A marked write that could have taken the external
                    // route says why it did not.
                    if marker.is_some() {
                        let why = if self.ctx.allows.external_writer {
                            self.cfg.external_writes_at_start().1
                        } else {
                            "this connection's transport may not use the external writer"
                                .to_string()
                        };
                        r.hint = format!(
                            "{}; the marked tool write was not taken outside: {why}",
                            r.hint
                        );
                    }
                    return Err(r.into());
                };
                // Refusals of the external writer are its own events.
                self.event().source = Some(source);
                self.resolve_outside(raw, msg, "write")?
            }
            Err(e) => return Err(resolve_refusal(e, root, "write").into()),
        };
        self.hash_canonical(&target.canonical);
        self.check_open()?;
        Ok(target)
    }

    /// Opens the target's directory (no symlink in any component) and takes
    /// the daemon-wide lock of the real file (SPEC 7.4): keyed by
    /// the directory's device and inode plus the leaf, so every path alias
    /// of one directory (a bind mount, a symlinked parent) shares one lock.
    /// The lock is held until [`Op::finish`] has written the audit event.
    /// A directory that does not exist yet (a workspace write creates it at
    /// commit) is keyed by its deepest existing ancestor; if it appears
    /// while we wait, its own key is taken too, in that order. Then checks
    /// the generation and cancellation again.
    pub(crate) fn lock(&mut self, target: &Target) -> Result<(), Failure> {
        let (parent, leaf) = target.split()?;
        if let Some(dir) = self.open_dir(parent)? {
            self.guards
                .push(self.svc.locks().lock(LockKey::of(&dir, leaf)));
            self.dir = Some(dir);
        } else {
            self.guards.push(
                self.svc
                    .locks()
                    .lock(LockKey::of_missing(&target.canonical)),
            );
            // Someone may have created it while we waited.
            let now = self.open_dir(parent)?;
            if let Some(dir) = &now {
                // The key of the file in the directory now open. It is the
                // key already held when the parent was there after all (a
                // directory swapped back in between the failed open and
                // `of_missing`'s look): locking it again would wait for
                // ourselves forever (the lock is not reentrant), and every
                // later write of that file with us.
                let key = LockKey::of(dir, leaf);
                if self.guards.last().map(PathGuard::key) != Some(&key) {
                    self.guards.push(self.svc.locks().lock(key));
                }
            }
            self.dir = now;
        }
        self.check_open()?;
        self.check_cancel()
    }

    /// Opens `parent` (canonical); `None` when it is missing and may be
    /// created (a workspace write inside the root); the external writer
    /// never creates directories (SPEC 7.1).
    fn open_dir(&mut self, parent: &Path) -> Result<Option<Dir>, Failure> {
        match Dir::open_canonical(parent) {
            Ok(d) => Ok(Some(d)),
            Err(writegate_fs::FsError::NotFound { .. })
                if self.event().writer == Writer::Workspace
                    && writegate_paths::is_within(parent, &self.ctx.runtime.root) =>
            {
                Ok(None)
            }
            Err(e) => Err(Refusal::from(e).into()),
        }
    }

    /// Reads the existing file with `O_NOFOLLOW` through the directory
    /// [`Op::lock`] opened. Records its size and, when read whole, its hash.
    ///
    /// A file that is read-only now but was not when the gate judged it (a
    /// `chmod` in between) goes back to the gate, without asking anyone
    /// (the lock is held): unless a rule or a grant lets it through, the
    /// operation is refused `approval_required` and the retry is asked about.
    pub(crate) fn read(&mut self, target: &Target, mode: ReadMode) -> Result<Loaded, Failure> {
        let (_, leaf) = target.split()?;
        let Some(dir) = self.dir.take() else {
            return Ok(Loaded {
                dir: None,
                existing: None,
                hash_before: None,
                format: None,
                unverified: None,
            });
        };
        // A leaf swapped for a symlink or another kind of file since it was
        // resolved is refused here; a regular file replaced by another write
        // that committed while this one waited is simply the current
        // content (SPEC 7.4: writes serialise, not fail).
        let read = match mode {
            ReadMode::Whole(max) => writegate_fs::read_existing(&dir, leaf, Some(max), Atime::Keep)
                .map(|e| (e, None, None)),
            ReadMode::Prefix(max) => {
                writegate_fs::read_prefix(&dir, leaf, max, Atime::Keep).map(|e| (e, None, None))
            }
            ReadMode::Skim(max) => skim(&dir, leaf, max, self.svc.read_hashes())
                .map(|s| (s.existing, s.format, s.unverified)),
        };
        let (existing, format, unverified) = read.map_err(Refusal::from)?;
        let mut later = None;
        if let Some(e) = existing.as_ref() {
            let hash = match &e.content {
                Content::Whole(bytes) if bytes.len() < PARALLEL_HASH_MIN => {
                    Some(sha256_tagged(bytes))
                }
                Content::Whole(_) | Content::Unread => {
                    // Hashed during the commit (or when the file is dropped).
                    let slot = Arc::new(OnceLock::new());
                    self.hash_before = Some(slot.clone());
                    later = Some(slot);
                    None
                }
                Content::Prefix(_) | Content::TooLarge => None,
            };
            let ev = self.event();
            ev.bytes_before = Some(e.stat.len);
            ev.hash_before = hash;
        }
        let loaded = Loaded {
            dir: Some(dir),
            existing,
            hash_before: later,
            format,
            unverified,
        };
        if let (Some(mode), false) = self.gated
            && let Some(e) = &loaded.existing
            && is_read_only(e.stat.mode)
        {
            let held = self.svc.approvals().check(
                &self.cfg.policy,
                &self.gate_request(mode, &target.canonical, Some(e.stat.mode)),
            );
            // Behind an approver the caller cannot call
            // `_writegate/approve`: say what happened instead.
            held.map_err(|r| match (&self.ctx.approver, &r.detail) {
                (Some(_), Some(Detail::Approval { command, .. })) => Refusal {
                    hint: format!(
                        "`{command}`: the file became read-only while this operation waited; nothing was written. Tell the user, and do not retry before they have allowed it"
                    ),
                    detail: asked(r.detail.clone()),
                    ..r
                },
                _ => r,
            })?;
            // Judged read-only now: a second read of the same operation
            // (a write whose cached format was stale) is not asked again.
            self.gated.1 = true;
        }
        Ok(loaded)
    }

    /// Reads a whole file for the read methods (no lock: a read sees one
    /// published version or the next, never a torn file). A missing file
    /// is `path_not_found` naming `raw`; a file over `max_edit_bytes` is
    /// `file_too_large`. Records the size read.
    pub(crate) fn read_for_reader(
        &mut self,
        target: &Target,
        raw: &Path,
    ) -> Result<ReadBody, Failure> {
        let (parent, leaf) = target.split()?;
        let dir = Dir::open_canonical(parent).map_err(Refusal::from)?;
        let max = self.cfg.max_edit_bytes;
        match writegate_fs::read_existing(&dir, leaf, Some(max), Atime::Update)
            .map_err(Refusal::from)?
        {
            None => Err(Refusal::new(
                ErrorKind::PathNotFound,
                format!("{} does not exist", raw.display()),
            )
            .with_detail(Detail::NotFound {
                path: raw.display().to_string(),
            })
            .into()),
            Some(Existing {
                stat,
                content: Content::Whole(bytes),
                ..
            }) => {
                self.event().bytes_before = Some(stat.len);
                let key = crate::read_hash::FileKey {
                    dev: stat.dev,
                    ino: stat.ino,
                    len: stat.len,
                };
                Ok(ReadBody::Whole(bytes, key))
            }
            Some(e) => {
                self.event().bytes_before = Some(e.stat.len);
                Ok(ReadBody::Large(e))
            }
        }
    }

    /// Reads a file over `max_edit_bytes` a piece at a time (a paged read,
    /// docs/behaviour.md): its hash taken and its lines counted as the
    /// pieces pass, only the lines `line` and `limit` ask for kept (at most
    /// `max_edit_bytes` of them). UTF-8 files only, up to
    /// [`PAGED_READ_MAX`] bytes; `refuse_binary` refuses a NUL byte
    /// (numbered reads).
    pub(crate) fn read_paged(
        &mut self,
        file: &Existing,
        raw: &Path,
        line: Option<u64>,
        limit: Option<u64>,
        refuse_binary: bool,
    ) -> Result<(writegate_text::Paged, String), Failure> {
        use std::ops::ControlFlow;
        use writegate_text::{PagedRead, PagedStop};
        let max = self.cfg.max_edit_bytes;
        let len = file.stat.len;
        let shown = raw.display();
        if len > PAGED_READ_MAX {
            return Err(Refusal::new(
                ErrorKind::FileTooLarge,
                format!(
                    "{shown} is {len} bytes: over max_edit_bytes ({max}) a file is read a page at a \
                     time, and only up to {PAGED_READ_MAX} bytes; look at it with another tool"
                ),
            )
            .into());
        }
        let keep = usize::try_from(max).unwrap_or(usize::MAX);
        let mut read = PagedRead::new(line, limit, keep, refuse_binary);
        let mut hash = crate::hash::StreamHash::default();
        let mut seen = 0u64;
        let streamed = file
            .stream(raw, PAGED_READ_CHUNK, |piece| {
                seen += piece.len() as u64;
                if seen > PAGED_READ_MAX {
                    return ControlFlow::Break(None);
                }
                hash.update(piece);
                match read.feed(piece) {
                    Ok(()) => ControlFlow::Continue(()),
                    Err(stop) => ControlFlow::Break(Some(stop)),
                }
            })
            .map_err(Refusal::from)?;
        let stop = match streamed {
            ControlFlow::Continue(_) => match read.finish() {
                Ok(paged) => return Ok((paged, hash.finish())),
                Err(stop) => Some(stop),
            },
            ControlFlow::Break(stop) => stop,
        };
        let why = match stop {
            Some(PagedStop::Binary) => {
                return Err(writegate_text::TextError::BinaryFile.into());
            }
            Some(PagedStop::NotUtf8(why)) => format!(
                "over max_edit_bytes ({max}) a file is read a page at a time only when it is \
                 UTF-8, and {why}; raise max_edit_bytes in the writegate config to read it whole"
            ),
            Some(PagedStop::WindowTooLarge { keep_max }) => format!(
                "the lines asked for hold more than {keep_max} bytes (max_edit_bytes); read it a \
                 page at a time: ask for fewer lines with line and limit"
            ),
            None => format!("it grew past {PAGED_READ_MAX} bytes while it was read"),
        };
        Err(Refusal::new(
            ErrorKind::FileTooLarge,
            format!("{shown} is {len} bytes: {why}"),
        )
        .into())
    }

    /// Ends the operation: writes its one audit event (`fs.access` for
    /// `Ok`, `fs.denied` with the errorKind otherwise), then releases the
    /// path lock, and hands `result` back.
    pub(crate) fn finish<T>(mut self, result: Result<T, Failure>) -> Result<T, Failure> {
        let (kind, error_kind, hint) = match &result {
            Ok(_) => (EventKind::Access, None, None),
            Err(Failure::Refused(r)) => (EventKind::Denied, Some(r.kind), Some(r.hint.clone())),
            Err(Failure::InvalidParams(m)) => (EventKind::Denied, None, Some(m.clone())),
            Err(Failure::Cancelled) => (EventKind::Denied, None, Some("cancelled".to_string())),
        };
        self.write_event(kind, error_kind, hint);
        // `self` drops here: the guard is released after the event.
        result
    }

    fn write_event(
        &mut self,
        kind: EventKind,
        error_kind: Option<ErrorKind>,
        hint: Option<String>,
    ) {
        let Some(mut event) = self.event.take() else {
            return;
        };
        if let Some(hash) = self.hash_before.as_ref().and_then(|slot| slot.get()) {
            event.hash_before = Some(hash.clone());
        }
        let raw = self.svc.audit().raw_paths();
        event.ts = now_rfc3339();
        event.kind = kind;
        event.error_kind = error_kind;
        event.hint = if raw { hint } else { None };
        event.duration_ms = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
        if raw {
            event.path = Some(std::mem::take(&mut self.raw_path));
        }
        self.svc.audit().record_op(&event, self.intent.take());
    }
}

impl Drop for Op<'_> {
    /// An operation that never reached [`Op::finish`] (a panic in a step)
    /// still leaves its one event, written before the guard (a field,
    /// dropped after this) releases the lock.
    fn drop(&mut self) {
        if self.event.is_some() {
            self.write_event(
                EventKind::Denied,
                Some(ErrorKind::InternalError),
                Some("the operation failed unexpectedly; nothing was written".to_string()),
            );
        }
    }
}

/// `file_too_large` for `len` bytes over `max`, naming the config key
/// that sets the limit.
/// The largest file a paged read reads (256 MiB): a read's bytes are all
/// read and hashed, for the page's `totalLines` and `hash`.
pub(crate) const PAGED_READ_MAX: u64 = 256 * 1024 * 1024;

/// Bytes a paged read reads at a time.
const PAGED_READ_CHUNK: usize = 1024 * 1024;

/// What [`Op::read_for_reader`] found: the file, whole, or one over
/// `max_edit_bytes`, open, for [`Op::read_paged`].
pub(crate) enum ReadBody {
    /// Every byte of the file, and the file they were read from.
    Whole(Vec<u8>, crate::read_hash::FileKey),
    /// A file too large to hold whole.
    Large(Existing),
}

pub(crate) fn too_large(len: u64, max: u64, key: &str) -> Failure {
    Refusal::new(
        ErrorKind::FileTooLarge,
        format!("{len} bytes is over the limit of {max} bytes ({key} in the writegate config)"),
    )
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 2 MiB UTF-8 file named `leaf` in a new temporary directory (kept
    /// while the first value lives), its path and the directory opened.
    fn skimmable_file(leaf: &str) -> (tempfile::TempDir, PathBuf, Dir) {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        let path = root.join(leaf);
        std::fs::write(&path, "a line\n".repeat(300_000)).unwrap();
        let dir = Dir::open_canonical(&root).unwrap();
        (d, path, dir)
    }

    /// A file can claim any size once it is open (a same-user process
    /// `ftruncate`s it to a terabyte of holes): the old file's hash reads
    /// it no further than the size it had when it was skimmed, and is left
    /// out, where an unbounded read would hold the path lock for hours.
    #[test]
    fn a_file_grown_after_it_was_skimmed_is_not_read_past_its_size() {
        let (_d, path, dir) = skimmable_file("grows.txt");
        let leaf = OsStr::new("grows.txt");
        let cache = ReadHashes::default();
        let s = skim(&dir, leaf, 5 * 1024 * 1024, &cache).unwrap();
        let e = s.existing.unwrap();
        assert!(s.format.is_some(), "skimmed");
        assert!(matches!(e.content, Content::Unread));
        assert!(existing_hash(&e, None).is_some(), "as it was");
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(1 << 40)
            .unwrap();
        assert_eq!(existing_hash(&e, None), None);
        assert_eq!(existing_hash(&e, Some(&cache)), None);
        // A file already that large is never skimmed; its prefix is read.
        let s = skim(&dir, leaf, 5 * 1024 * 1024, &cache).unwrap();
        assert!(s.format.is_none());
        assert!(matches!(s.existing.unwrap().content, Content::Prefix(_)));
    }

    /// A file whose format a write recorded is not read by the skim: the
    /// recorded format is given, with the check its bytes must still
    /// have; the same file at another size is skimmed.
    #[test]
    fn a_file_with_a_recorded_format_is_not_read_by_the_skim() {
        let (_d, path, dir) = skimmable_file("known.txt");
        assert!(dir.can_defer_frees(), "a local disk under {:?}", dir.path());
        let leaf = OsStr::new("known.txt");
        let meta = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&path).unwrap());
        let cache = ReadHashes::default();
        let skimmed = skim(&dir, leaf, 5 * 1024 * 1024, &cache).unwrap();
        let e = skimmed.existing.unwrap();
        assert_eq!(skimmed.unverified, None, "nothing on record: skimmed");
        assert_eq!(e.stat.ino, meta);
        // Recorded as other than what a skim finds, to tell the two apart.
        let recorded = writegate_text::Format::NEW_FILE;
        let key = FileKey {
            dev: e.stat.dev,
            ino: e.stat.ino,
            len: e.stat.len,
        };
        cache.record(key, 7, "sha256:x", Some(recorded));
        let s = skim(&dir, leaf, 5 * 1024 * 1024, &cache).unwrap();
        assert_eq!((s.format, s.unverified), (Some(recorded), Some(7)));
        assert!(matches!(s.existing.unwrap().content, Content::Unread));
        std::fs::write(&path, "a line\n".repeat(300_001)).unwrap();
        let s = skim(&dir, leaf, 5 * 1024 * 1024, &cache).unwrap();
        assert_eq!(s.unverified, None, "another size: skimmed");
        assert_ne!(s.format, Some(recorded));
    }
}
