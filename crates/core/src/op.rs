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

use crate::api::OpCtx;
use crate::api::{ApprovalAnswer, ApprovalQuestion};
use crate::audit::{AuditEvent, CommitFacts, CommitIntent, EventKind, Intent, Writer, now_rfc3339};
use crate::config::{Config, NewFileMode};
use crate::error::{Detail, ErrorKind, Failure, Refusal};
use crate::policy::{GateRequest, Grant, Scope, is_read_only};
use crate::routing::{MarkerSource, Route, external_route};
use crate::service::Service;
use crate::{path_hash, sha256_tagged};
use std::cell::RefCell;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Instant;
use writegate_fs::{Atime, Content, Dir, Existing, LockKey, PathGuard, PublishOptions};
use writegate_paths::{OsView, ResolveError};

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
}

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
    /// creates it at commit (issue 10).
    pub(crate) dir: Option<Dir>,
    pub(crate) existing: Option<Existing>,
    /// The old file's hash when it is not computed yet (a large file read
    /// whole): shared with the op's event. The commit fills it in parallel
    /// with the publish; any other path fills it when this is dropped, so
    /// the event has `hashBefore` either way.
    hash_before: Option<Arc<OnceLock<String>>>,
}

impl Loaded {
    /// `sha256:<hex>` of the existing file read whole (computed once);
    /// `None` when there is none or it was read only in part.
    pub(crate) fn hash_before(&self) -> Option<String> {
        let Content::Whole(bytes) = &self.existing.as_ref()?.content else {
            return None;
        };
        Some(match &self.hash_before {
            Some(slot) => slot.get_or_init(|| sha256_tagged(bytes)).clone(),
            None => sha256_tagged(bytes),
        })
    }
}

impl Drop for Loaded {
    fn drop(&mut self) {
        if let (Some(slot), Some(e)) = (&self.hash_before, &self.existing) {
            slot.get_or_init(|| sha256_tagged(e.content.bytes()));
        }
    }
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
    /// event is written (issue 13).
    intent: Option<CommitIntent>,
    /// The old file's hash, when [`Loaded`] computes it later (see there).
    hash_before: Option<Arc<OnceLock<String>>>,
    /// The event's `pathHash` is still the one `begin` took of the path as
    /// named (see [`Op::hash_canonical`]).
    raw_path_hashed: bool,
    /// The mode name [`Op::approve`] judged (empty until then) and whether
    /// it judged an existing read-only file: [`Op::read`] asks the gate
    /// again when the file it finds inside the lock is read-only and the
    /// gate did not see it so.
    gated: (&'static str, bool),
}

impl<'s> Op<'s> {
    /// Starts an operation on the path `raw` as the request named it:
    /// takes the config snapshot and drafts the audit event (`pathHash` of
    /// the raw input until the path is resolved).
    pub(crate) fn begin(
        svc: &'s Service,
        ctx: &'s OpCtx,
        intent: Intent,
        mode: Option<&'static str>,
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
            mode: mode.map(str::to_string),
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
            gated: ("", false),
        }
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
                let Some(Route::External(source)) = external_route(enabled, marker) else {
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
                self.event().source = Some(source.as_str().into());
                self.resolve_outside(raw, msg, "write")?
            }
            Err(e) => return Err(resolve_refusal(e, root, "write").into()),
        };
        self.hash_canonical(&target.canonical);
        self.check_open()?;
        Ok(target)
    }

    /// The external checks for a path the workspace resolver found outside
    /// (`msg` says so), for a `verb` (`write` or `read`) that may go there;
    /// the event's writer becomes `external`. Only paths outside every root
    /// of this runtime may take the external route (SPEC 4): a path the
    /// resolver refused for another reason (a suspicious name reached
    /// through a link) but whose target is inside the workspace stays
    /// refused.
    fn resolve_outside(&mut self, raw: &Path, msg: String, verb: &str) -> Result<Target, Failure> {
        self.event().writer = Writer::External;
        let root = &self.ctx.runtime.root;
        let ext = writegate_paths::resolve_external(&OsView, raw)
            .map_err(|e| resolve_refusal(e, root, verb))?;
        if writegate_paths::is_within(&ext.canonical, root) {
            return Err(resolve_refusal(ResolveError::OutsideWorkspace(msg), root, verb).into());
        }
        Ok(Target {
            canonical: ext.canonical,
            mode: ext.mode,
        })
    }

    /// Resolves a read's path (SPEC 3): inside the workspace; or, on a
    /// connection whose marked writes may take the external writer (and
    /// with external writes on), outside it where such a write would be
    /// allowed, through the same external checks, recorded with writer
    /// `external`. Outside the workspace, and in a workspace that only an
    /// MCP client's roots named, a credential path is held by the gate
    /// ([`Approvals::check_read`]) until a person allows it.
    pub(crate) fn resolve_read(&mut self, raw: &Path) -> Result<Target, Failure> {
        self.check_open()?;
        let root = &self.ctx.runtime.root;
        let (target, outside) =
            match writegate_paths::resolve(&OsView, raw, std::slice::from_ref(root)) {
                Ok(r) => (
                    Target {
                        canonical: r.canonical,
                        mode: r.mode,
                    },
                    false,
                ),
                Err(ResolveError::OutsideWorkspace(msg))
                    if self.ctx.allows.external_writer && self.cfg.external_writes_enabled() =>
                {
                    (self.resolve_outside(raw, msg, "read")?, true)
                }
                Err(e) => return Err(resolve_refusal(e, root, "read").into()),
            };
        self.hash_canonical(&target.canonical);
        if outside || self.ctx.client_root {
            let held = self.svc.approvals().check_read(
                &self.cfg.policy,
                &self.gate_request("read", &target.canonical, target.mode),
            );
            self.ask_if_held(held, &target, "read")?;
        }
        Ok(target)
    }

    /// The event's `pathHash` becomes the canonical path's. `begin` hashed
    /// the path as the request named it; when the canonical path has the
    /// same bytes (the usual case) and that hash is still the event's (the
    /// first resolution of the operation), it is already the right one.
    /// (`raw_path` is those bytes unless the raw path was not UTF-8, and
    /// then it holds U+FFFD: such a path is always hashed again.)
    fn hash_canonical(&mut self, canonical: &Path) {
        let same = self.raw_path_hashed
            && canonical.to_str() == Some(self.raw_path.as_str())
            && !self.raw_path.contains('\u{fffd}');
        self.raw_path_hashed = false;
        if !same {
            self.event().path_hash = path_hash(canonical);
        }
    }

    /// The approval gate (SPEC 12): the synthetic command of `mode` on the
    /// target, judged by the config's rules, the built-in protected paths
    /// and the existing file's mode (a read-only file is held); above
    /// `auto_approve` it needs a matching approval (a `once`
    /// approval is consumed). When it is held and the context has an
    /// [`Approver`], the person is asked (once, before any lock is taken):
    /// "allow once" goes ahead, "allow always" also grants the literal
    /// command for the session (or the workspace without one), anything
    /// else refuses; the answer goes into the operation's one audit event.
    pub(crate) fn approve(&mut self, target: &Target, mode: &'static str) -> Result<(), Failure> {
        self.gated = (mode, target.mode.is_some_and(is_read_only));
        let held = self.svc.approvals().check(
            &self.cfg.policy,
            &self.gate_request(mode, &target.canonical, target.mode),
        );
        self.ask_if_held(held, target, mode)
    }

    /// What the gate judges: `mode` on `canonical` (whose existing file
    /// has `file_mode`) in this operation's session and workspace.
    fn gate_request<'a>(
        &'a self,
        mode: &'a str,
        canonical: &'a Path,
        file_mode: Option<u32>,
    ) -> GateRequest<'a> {
        GateRequest {
            mode,
            canonical,
            root: &self.ctx.runtime.root,
            session: self.ctx.session_id.as_deref().unwrap_or(""),
            workspace: &self.ctx.runtime.id,
            file_mode,
        }
    }

    /// What the gate `held` becomes: nothing when it let the operation
    /// through; otherwise, with an [`Approver`], the person's answer (see
    /// [`Op::approve`]); without one, the refusal.
    fn ask_if_held(
        &mut self,
        held: Result<(), Refusal>,
        target: &Target,
        mode: &'static str,
    ) -> Result<(), Failure> {
        let session = self.ctx.session_id.as_deref().unwrap_or("");
        let Err(refusal) = held else { return Ok(()) };
        let (
            Some(approver),
            Some(Detail::Approval {
                command,
                level,
                reason,
                ..
            }),
        ) = (self.ctx.approver.clone(), refusal.detail.clone())
        else {
            return Err(refusal.into());
        };
        let done = if mode == "read" { "read" } else { "written" };
        let level = level.as_str();
        let answer = approver.ask(&ApprovalQuestion {
            command: command.clone(),
            path: target.canonical.clone(),
            mode,
            level,
            reason: reason.clone(),
        });
        self.event().approval = Some(answer.as_str().into());
        match answer {
            ApprovalAnswer::AllowOnce => Ok(()),
            ApprovalAnswer::AllowAlways => {
                let scope = if session.is_empty() {
                    Scope::Workspace
                } else {
                    Scope::Session
                };
                self.svc
                    .approvals()
                    .grant(
                        &Grant::Command(command),
                        scope,
                        session,
                        &self.ctx.runtime.id,
                    )
                    .map_err(Failure::from)?;
                Ok(())
            }
            ApprovalAnswer::Cancelled => Err(Failure::Cancelled),
            // The caller asked through an approver, so it has no
            // `_writegate/approve` of its own to call: the hints say what
            // to do instead, and a "no" is final.
            ApprovalAnswer::Deny => Err(Refusal {
                hint: format!(
                    "the user declined `{command}` ({reason}); nothing was {done}. Do not retry it or ask again unless the user asks for it"
                ),
                detail: asked(refusal.detail),
                ..refusal
            }
            .into()),
            ApprovalAnswer::Unavailable => Err(Refusal {
                hint: format!(
                    "`{command}` needs the user's approval ({reason}, rated {level}) and the user could not be asked; nothing was {done}. Tell the user, and do not retry before they have allowed it"
                ),
                detail: asked(refusal.detail),
                ..refusal
            }
            .into()),
        }
    }

    /// Opens the target's directory (no symlink in any component) and takes
    /// the daemon-wide lock of the real file (SPEC 7.4, issue 13): keyed by
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
            });
        };
        // A leaf swapped for a symlink or another kind of file since it was
        // resolved is refused here; a regular file replaced by another write
        // that committed while this one waited is simply the current
        // content (SPEC 7.4: writes serialise, not fail).
        let existing = match mode {
            ReadMode::Whole(max) => writegate_fs::read_existing(&dir, leaf, Some(max), Atime::Keep),
            ReadMode::Prefix(max) => writegate_fs::read_prefix(&dir, leaf, max, Atime::Keep),
        }
        .map_err(Refusal::from)?;
        let mut later = None;
        if let Some(e) = existing.as_ref() {
            let hash = match &e.content {
                Content::Whole(bytes) if bytes.len() >= PARALLEL_HASH_MIN => {
                    // Hashed during the commit (or when the file is dropped).
                    let slot = Arc::new(OnceLock::new());
                    self.hash_before = Some(slot.clone());
                    later = Some(slot);
                    None
                }
                Content::Whole(bytes) => Some(sha256_tagged(bytes)),
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
        };
        let (mode, gate_saw_read_only) = self.gated;
        if let Some(e) = &loaded.existing
            && is_read_only(e.stat.mode)
            && !gate_saw_read_only
            && !mode.is_empty()
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
    ) -> Result<Vec<u8>, Failure> {
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
                uri: raw.display().to_string(),
            })
            .into()),
            Some(Existing {
                stat,
                content: Content::Whole(bytes),
                ..
            }) => {
                self.event().bytes_before = Some(stat.len);
                Ok(bytes)
            }
            Some(e) => Err(too_large(e.stat.len, max, "max_edit_bytes")),
        }
    }

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
            // rename (issue 13). A large write's is taken on a helper
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
                .and_then(|e| e.mode.as_deref())
                .unwrap_or_default();
            self.svc
                .add_receipt(self.ctx, mode, &target.canonical, &done);
        }
        Ok(done)
    }

    /// Publishes `bytes` over the target (SPEC 7.3) relative to `dir`, or
    /// creates the missing parents of a workspace write first (issue 10).
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
        // everything else has been checked (issue 10).
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
        // Issue 13: space for the event and the intent to commit are on
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
            audit.intent_durable(intent.as_ref().and_then(Option::as_ref))
        };
        // A panic while publishing (a bug) still hands the intent to the
        // operation, whose `Drop` records its event with it: otherwise the
        // intent would never be retired, and the journal would fill up.
        let published = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            writegate_fs::publish_overlapping(&dir, leaf, bytes, &opts, written, &mut precommit)
        }));
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

    /// Ends the operation: writes its one audit event (`fs.access` for
    /// `Ok`, `fs.denied` with the errorKind otherwise), then releases the
    /// path lock, and hands `result` back.
    pub(crate) fn finish<T>(mut self, result: Result<T, Failure>) -> Result<T, Failure> {
        let (kind, error_kind, hint) = match &result {
            Ok(_) => (EventKind::Access, None, None),
            Err(Failure::Refused(r)) => (
                EventKind::Denied,
                Some(r.kind.as_str()),
                Some(r.hint.clone()),
            ),
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
        error_kind: Option<&'static str>,
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
        event.error_kind = error_kind.map(Into::into);
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
                Some(ErrorKind::InternalError.as_str()),
                Some("the operation failed unexpectedly; nothing was written".to_string()),
            );
        }
    }
}

/// The result of a helper thread; its panic goes on in this thread.
/// The new bytes' `hashAfter`: taken inline before the commit, or on a
/// helper thread started once they are in the temp file (see
/// [`PARALLEL_HASH_MIN`]) and joined when first needed (computed here if
/// the helper never started).
pub(crate) enum NewHash<'scope, 'b> {
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

fn joined<T>(h: std::thread::ScopedJoinHandle<'_, T>) -> T {
    h.join()
        .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
}

/// A resolver refusal with what a model or a person needs to act on it:
/// what happened to which path (the resolver's own words), the workspace
/// root when the path is outside it, and what to do next; `verb` is what
/// the request does (`write` for writes and edits, `read` for reads, so
/// that a reader is never given the resolver's generic, path-free hint,
/// which tells it to "write inside the workspace").
fn resolve_refusal(e: ResolveError, root: &Path, verb: &str) -> Refusal {
    // The resolver's own words without its kind prefix: the refusal's
    // message already starts with the errorKind.
    let what = match &e {
        ResolveError::ParseError(m)
        | ResolveError::NotAFile(m)
        | ResolveError::ReservedName(m)
        | ResolveError::OutsideWorkspace(m)
        | ResolveError::SymlinkEscape(m)
        | ResolveError::NotFound(m)
        | ResolveError::PermissionDenied(m) => m.clone(),
    };
    let mut r = Refusal::from(e);
    r.hint = match r.kind {
        ErrorKind::PathOutsideWorkspace if what.contains("suspicious") => format!(
            "{what}; such names are refused everywhere (they can alias devices or other files); choose another name"
        ),
        ErrorKind::PathOutsideWorkspace => format!(
            "{what} (the workspace is {root}); {verb} inside {root}, or ask the user to register that directory as a workspace",
            root = root.display()
        ),
        _ => format!("{what}; {}", r.hint),
    };
    r
}

/// `file_too_large` for `len` bytes over `max`, naming the config key
/// that sets the limit.
pub(crate) fn too_large(len: u64, max: u64, key: &str) -> Failure {
    Refusal::new(
        ErrorKind::FileTooLarge,
        format!("{len} bytes is over the limit of {max} bytes ({key} in the writegate config)"),
    )
    .into()
}

/// The approval detail of a refusal the person answered (or could not be
/// asked about) through an approver: marked `asked`, so no front end
/// offers `_writegate/approve` params to a caller that cannot use them.
fn asked(detail: Option<Detail>) -> Option<Detail> {
    match detail {
        Some(Detail::Approval {
            command,
            level,
            reason,
            session,
            ..
        }) => Some(Detail::Approval {
            command,
            level,
            reason,
            session,
            asked: true,
        }),
        other => other,
    }
}
