//! The operation pipeline: one function per method, each taking an operation
//! context and typed parameters and returning a JSON result or a [`Failure`].
//!
//! Order of checks for writes and edits (SPEC 2, 4, 7): audit sink healthy,
//! generation open, trust, content size, resolve (or the external check of
//! SPEC 7.1), generation again, the approval gate, the path lock, generation
//! again and cancellation, read the existing file inside the lock, plan the
//! new bytes (encoding, edit), encoded size, publish (generation checked once
//! more immediately before the rename), then exactly one audit event.

use crate::audit::{AuditEvent, AuditSink, now_rfc3339};
use crate::config::Config;
use crate::error::{ErrorKind, Failure, Refusal};
use crate::policy::{Approvals, Scope, rate, synthetic_command};
use crate::routing::{Route, external_route, parse_marker, write_options};
use crate::runtime::{Registry, Runtime};
use crate::{path_hash, sha256_tagged};
use serde_json::{Map, Value, json};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;
use writegate_fs::{Dir, Existing, PathGuard, PathLocks, PublishOptions, Releaser};
use writegate_paths::{OsView, ResolveError};
use writegate_text::{EditMode, EditRequest, WriteOptions};

/// What a request runs under: the connection's runtime, the request's
/// session, whether this connection may use the external writer, and the
/// request's cancellation flag (set by `$/cancel_request` or shutdown).
#[derive(Clone)]
pub struct OpCtx {
    pub runtime: Arc<Runtime>,
    pub session_id: Option<String>,
    pub external_writes: bool,
    pub cancel: Arc<AtomicBool>,
}

/// `fs/write_text_file` parameters (ACP `WriteTextFileRequest`).
#[derive(Debug, Clone)]
pub struct WriteParams {
    pub path: PathBuf,
    pub content: String,
    pub meta: Option<Map<String, Value>>,
}

/// `_writegate/edit_text_file` parameters (SPEC 8).
#[derive(Debug, Clone)]
pub struct EditParams {
    pub path: PathBuf,
    pub mode: EditMode,
    pub content: String,
    pub find: Option<String>,
    pub line: Option<u64>,
    pub end_line: Option<u64>,
    pub expected_hash: Option<String>,
    pub dry_run: bool,
    pub meta: Option<Map<String, Value>>,
}

/// `fs/read_text_file` / `_writegate/read_lines` parameters.
#[derive(Debug, Clone)]
pub struct ReadParams {
    pub path: PathBuf,
    pub line: Option<u64>,
    pub limit: Option<u64>,
}

/// One entry of `_writegate/receipt` (SPEC 3).
#[derive(Debug, Clone, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    pub path: String,
    pub mode: String,
    pub created: bool,
    pub bytes_before: u64,
    pub bytes_after: u64,
    pub hash_after: String,
    pub time: String,
}

/// At most this many receipts are kept per session (oldest dropped).
pub const MAX_RECEIPTS_PER_SESSION: usize = 10_000;

/// The daemon's shared state. One per process; every connection holds an `Arc`.
pub struct Service {
    config: RwLock<Arc<Config>>,
    registry: Registry,
    locks: PathLocks,
    audit: AuditSink,
    approvals: Approvals,
    receipts: Mutex<HashMap<String, VecDeque<Receipt>>>,
    /// Canonical roots registered by socket clients (`allow_dynamic_workspaces`),
    /// kept across reloads while the option stays on.
    dynamic: Mutex<Vec<PathBuf>>,
    /// Closes the read descriptors of files a write replaced, off the
    /// request's thread (the kernel frees the old blocks then).
    releaser: Releaser,
}

/// How much of the existing file a mutation reads inside the lock.
#[derive(Clone, Copy)]
enum ReadMode {
    /// All of it, or `truncated` (then refused) when it is over the limit.
    Whole(u64),
    /// At most this many bytes: enough to learn the format of a file a
    /// whole-file write replaces (SPEC 7.2 allows replacing a file over the
    /// cap), without ever loading a huge or sparse file.
    Prefix(u64),
}

/// Computes the new bytes from the canonical target and the existing file
/// (read inside the path lock).
type Planner<'a> = dyn FnMut(&Path, Option<&Existing>) -> Result<Plan, Failure> + 'a;

/// A plan's output: the complete new bytes, or nothing to write (dry run).
struct Plan {
    bytes: Vec<u8>,
    dry_run: bool,
}

/// What a committed (or dry-run) mutation did.
struct Committed {
    created: bool,
    bytes_before: u64,
    bytes_after: u64,
    hash_after: String,
    canonical: PathBuf,
}

/// The fields of the one audit event an operation emits.
struct OpRecord {
    intent: &'static str,
    route: &'static str,
    writer: &'static str,
    mode: Option<String>,
    path_hash: String,
    raw_path: String,
    size_bytes: Option<u64>,
    created: Option<bool>,
    bytes_before: Option<u64>,
    bytes_after: Option<u64>,
    hash_before: Option<String>,
    hash_after: Option<String>,
    source: Option<&'static str>,
    dry_run: Option<bool>,
    start: Instant,
}

impl Service {
    /// Builds the service: config, registry (already populated by the caller),
    /// audit sink at `audit_path`, approvals persisted at `approvals_file`.
    pub fn new(
        config: Config,
        registry: Registry,
        audit_path: &Path,
        approvals_file: PathBuf,
    ) -> Service {
        let audit = AuditSink::open(audit_path, config.audit.required, config.audit.raw_paths);
        Service {
            config: RwLock::new(Arc::new(config)),
            registry,
            locks: PathLocks::new(),
            audit,
            approvals: Approvals::load(approvals_file),
            receipts: Mutex::new(HashMap::new()),
            dynamic: Mutex::new(Vec::new()),
            releaser: Releaser::new(),
        }
    }

    /// The current config snapshot.
    pub fn config(&self) -> Arc<Config> {
        self.config.read().unwrap().clone()
    }

    /// Replaces the config snapshot (SIGHUP) and reconciles the workspaces of
    /// its `[[workspace]]` list plus `keep` (the command-line workspaces).
    /// On error nothing changes.
    pub fn reload(
        &self,
        config: Config,
        keep: &[(PathBuf, bool)],
    ) -> Result<crate::runtime::ReloadReport, crate::runtime::RegisterError> {
        let mut wanted: Vec<(PathBuf, bool)> = keep.to_vec();
        wanted.extend(config.workspace.iter().map(|w| (w.root.clone(), w.trusted)));
        let mut dynamic = self.dynamic.lock().unwrap();
        if config.allow_dynamic_workspaces {
            wanted.extend(dynamic.iter().map(|r| (r.clone(), trusted_in(&config, r))));
        } else {
            dynamic.clear();
        }
        let report = self.registry.reload(&wanted)?;
        *self.config.write().unwrap() = Arc::new(config);
        Ok(report)
    }

    /// The workspace registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Registers a workspace named by a socket client's `initialize`
    /// (SPEC 2): only with `allow_dynamic_workspaces`, trusted only when the
    /// config's `[[workspace]]` list marks that root trusted. The root is
    /// kept across reloads while the option stays on.
    pub fn register_dynamic(&self, root: &Path) -> Result<Arc<Runtime>, String> {
        let cfg = self.config();
        if !cfg.allow_dynamic_workspaces {
            return Err(format!(
                "{} is not a registered workspace and allow_dynamic_workspaces is off",
                root.display()
            ));
        }
        let canonical =
            std::fs::canonicalize(root).map_err(|e| format!("{}: {e}", root.display()))?;
        let rt = self
            .registry
            .register(&canonical, trusted_in(&cfg, &canonical))
            .map_err(|e| e.to_string())?;
        let mut dynamic = self.dynamic.lock().unwrap();
        if !dynamic.contains(&rt.root) {
            dynamic.push(rt.root.clone());
        }
        Ok(rt)
    }

    /// The audit sink (for tests and shutdown logs).
    pub fn audit(&self) -> &AuditSink {
        &self.audit
    }

    /// Number of live path-lock keys (0 when idle).
    pub fn live_locks(&self) -> usize {
        self.locks.len()
    }

    /// `fs/write_text_file` (SPEC 3, 7): replaces the whole file, creating it
    /// if missing, keeping its format. Result `{}`.
    pub fn write_text_file(&self, ctx: &OpCtx, p: &WriteParams) -> Result<Value, Failure> {
        let opts = write_options(p.meta.as_ref());
        let marker = parse_marker(p.meta.as_ref());
        let mut rec = self.record("write", "ACP writeTextFile", Some("write"), &p.path);
        rec.size_bytes = Some(p.content.len() as u64);
        let content_len = p.content.len() as u64;
        let read = ReadMode::Prefix(self.config().max_edit_bytes);
        let mut held = None;
        let result = self.mutate(
            ctx,
            &mut rec,
            &p.path,
            marker,
            Some(content_len),
            read,
            &mut held,
            &mut |_, existing| {
                let bytes = encode_over(&p.content, existing, &opts)?;
                Ok(Plan {
                    bytes,
                    dry_run: false,
                })
            },
        );
        self.finish(ctx, rec, &result);
        drop(held);
        result.map(|_| json!({}))
    }

    /// `_writegate/edit_text_file` (SPEC 8). Result: SPEC 8.6 object.
    pub fn edit_text_file(&self, ctx: &OpCtx, p: &EditParams) -> Result<Value, Failure> {
        let opts = write_options(p.meta.as_ref());
        let marker = parse_marker(p.meta.as_ref());
        let mode_name = mode_str(p.mode);
        let mut rec = self.record("edit", "edit", Some(mode_name), &p.path);
        rec.size_bytes = Some(p.content.len() as u64);
        if p.dry_run {
            rec.dry_run = Some(true);
        }
        let cfg = self.config();
        let read = if p.mode == EditMode::Write {
            ReadMode::Prefix(cfg.max_edit_bytes)
        } else {
            ReadMode::Whole(cfg.max_edit_bytes)
        };
        let root = ctx.runtime.root.clone();
        let mut held = None;
        let mut outcome: Option<writegate_text::EditOutcome> = None;
        let result = self.mutate(
            ctx,
            &mut rec,
            &p.path,
            marker,
            Some(p.content.len() as u64),
            read,
            &mut held,
            &mut |canonical, existing| {
                let display = display_path(canonical, &root);
                if let Some(e) = existing
                    && e.truncated
                    && (p.mode != EditMode::Write || p.expected_hash.is_some())
                {
                    return Err(Refusal::new(
                        ErrorKind::FileTooLarge,
                        format!(
                            "{display} is {} bytes; edits load at most {} bytes (max_edit_bytes)",
                            e.len, cfg.max_edit_bytes
                        ),
                    )
                    .into());
                }
                if existing.is_none() && !matches!(p.mode, EditMode::Write | EditMode::Append) {
                    return Err(Refusal::new(
                        ErrorKind::PathNotFound,
                        format!("{display} does not exist; use mode write to create it"),
                    )
                    .with("uri", Value::String(p.path.display().to_string()))
                    .into());
                }
                if let Some(want) = &p.expected_hash {
                    let have = existing.map(|e| sha256_tagged(&e.bytes));
                    if have.as_deref() != Some(want.as_str()) {
                        return Err(Refusal::new(
                            ErrorKind::HashMismatch,
                            format!(
                                "{display} changed since it was read (expected {want}, now {}); read it again",
                                have.unwrap_or_else(|| "missing".to_string())
                            ),
                        )
                        .into());
                    }
                }
                let req = EditRequest {
                    mode: p.mode,
                    content: &p.content,
                    find: p.find.as_deref(),
                    line: p.line,
                    end_line: p.end_line,
                    display_path: &display,
                    want_diff: p.dry_run,
                };
                // A whole-file write over a file larger than the read limit
                // sees only its beginning, which is all the format needs.
                let mut out = writegate_text::apply_edit(existing.map(format_sample), &req, &opts)?;
                // The new bytes move into the plan; the rest of the outcome
                // is kept for the result (no second copy of the file).
                let bytes = std::mem::take(&mut out.bytes);
                outcome = Some(out);
                Ok(Plan {
                    bytes,
                    dry_run: p.dry_run,
                })
            },
        );
        self.finish(ctx, rec, &result);
        drop(held);
        let done = result?;
        let out = outcome.expect("a successful plan stores its outcome");
        let mut r = Map::new();
        r.insert("message".into(), out.message.into());
        r.insert("created".into(), done.created.into());
        r.insert("bytesBefore".into(), done.bytes_before.into());
        r.insert("bytesAfter".into(), done.bytes_after.into());
        r.insert("hash".into(), done.hash_after.into());
        if let Some(l) = out.line {
            r.insert("line".into(), l.into());
        }
        if let Some(m) = out.moved_from {
            r.insert("movedFrom".into(), m.into());
        }
        if let Some(k) = out.kept_indentation {
            r.insert("keptIndentation".into(), k.into());
        }
        if !out.now_reads.is_empty() {
            r.insert("nowReads".into(), out.now_reads.into());
        }
        if let Some(d) = out.diff {
            r.insert("diff".into(), d.into());
        }
        if p.dry_run {
            r.insert("dryRun".into(), true.into());
        }
        Ok(Value::Object(r))
    }

    /// `_writegate/read_lines` (SPEC 3): `{lines: [{n, text}], totalLines,
    /// hash, encoding, bom, lineEnding}`.
    pub fn read_lines(&self, ctx: &OpCtx, p: &ReadParams) -> Result<Value, Failure> {
        let mut rec = self.record("read", "read_lines", None, &p.path);
        let result = self.read_file(ctx, &mut rec, &p.path).and_then(|bytes| {
            let n = writegate_text::numbered_lines(&bytes, p.line, p.limit)?;
            Ok(json!({
                "lines": n.lines.iter().map(|(n, t)| json!({"n": n, "text": t})).collect::<Vec<_>>(),
                "totalLines": n.total_lines,
                "hash": sha256_tagged(&bytes),
                "encoding": n.format.encoding.name(),
                "bom": n.format.bom,
                "lineEnding": match n.format.dominant {
                    Some(writegate_text::Ending::CrLf) => "crlf",
                    Some(writegate_text::Ending::Cr) => "cr",
                    _ => "lf",
                },
            }))
        });
        self.finish(ctx, rec, &result);
        result
    }

    /// `fs/read_text_file` (SPEC 3): `{content}` of whole lines with their
    /// own endings, decoded. The caller checks that reads are enabled.
    pub fn read_text_file(&self, ctx: &OpCtx, p: &ReadParams) -> Result<Value, Failure> {
        let mut rec = self.record("read", "ACP readTextFile", None, &p.path);
        let result = self.read_file(ctx, &mut rec, &p.path).and_then(|bytes| {
            let content = writegate_text::read_text(&bytes, p.line, p.limit)?;
            Ok(json!({ "content": content }))
        });
        self.finish(ctx, rec, &result);
        result
    }

    /// `_writegate/receipt` (SPEC 3): `{sessionId, files: [Receipt]}`.
    pub fn receipt(&self, session_id: &str) -> Value {
        let receipts = self.receipts.lock().unwrap();
        let files = receipts.get(session_id).cloned().unwrap_or_default();
        json!({ "sessionId": session_id, "files": files })
    }

    /// `_writegate/approve` (SPEC 12): grants `pattern` in `scope`.
    pub fn approve(&self, ctx: &OpCtx, pattern: &str, scope: Scope) -> Result<Value, Failure> {
        let session = ctx.session_id.clone().unwrap_or_default();
        self.approvals
            .grant(pattern, scope, &session, &ctx.runtime.id)
            .map_err(|e| {
                let why = crate::error::with_causes(&e);
                Refusal::new(ErrorKind::IoError, format!("cannot store approval: {why}"))
            })?;
        Ok(json!({ "pattern": pattern, "scope": scope }))
    }

    fn record(
        &self,
        intent: &'static str,
        route: &'static str,
        mode: Option<&str>,
        raw: &Path,
    ) -> OpRecord {
        OpRecord {
            intent,
            route,
            writer: "workspace",
            mode: mode.map(str::to_string),
            path_hash: path_hash(raw),
            raw_path: raw.display().to_string(),
            size_bytes: None,
            created: None,
            bytes_before: None,
            bytes_after: None,
            hash_before: None,
            hash_after: None,
            source: None,
            dry_run: None,
            start: Instant::now(),
        }
    }

    /// Emits the one audit event of an operation.
    fn finish<T>(&self, ctx: &OpCtx, rec: OpRecord, result: &Result<T, Failure>) {
        let (kind, error_kind, hint) = match result {
            Ok(_) => ("fs.access", None, None),
            Err(Failure::Refused(r)) => ("fs.denied", Some(r.kind.as_str()), Some(r.hint.clone())),
            Err(Failure::InvalidParams(m)) => ("fs.denied", None, Some(m.clone())),
            Err(Failure::Cancelled) => ("fs.denied", None, Some("cancelled".to_string())),
        };
        let raw = self.audit.raw_paths();
        let event = AuditEvent {
            v: 1,
            ts: now_rfc3339(),
            kind,
            intent: rec.intent,
            route: rec.route,
            writer: rec.writer,
            session_id: ctx.session_id.clone(),
            workspace: ctx.runtime.id.clone(),
            path_hash: rec.path_hash,
            size_bytes: rec.size_bytes,
            mode: rec.mode,
            created: rec.created,
            bytes_before: rec.bytes_before,
            bytes_after: rec.bytes_after,
            hash_before: rec.hash_before,
            hash_after: rec.hash_after,
            error_kind,
            hint: if raw { hint } else { None },
            duration_ms: rec.start.elapsed().as_millis() as u64,
            source: rec.source,
            dry_run: rec.dry_run,
            path: if raw { Some(rec.raw_path) } else { None },
        };
        self.audit.record(&event);
    }

    fn check_open(&self, ctx: &OpCtx) -> Result<(), Failure> {
        if !ctx.runtime.guard.is_open() {
            return Err(Refusal::new(
                ErrorKind::GenerationClosed,
                "the workspace was removed or its trust changed; reconnect and retry",
            )
            .into());
        }
        Ok(())
    }

    fn check_cancel(&self, ctx: &OpCtx) -> Result<(), Failure> {
        if ctx.cancel.load(Ordering::SeqCst) {
            return Err(Failure::Cancelled);
        }
        Ok(())
    }

    /// Resolves a path for a write or edit, choosing the route (SPEC 4), and
    /// returns the canonical target. The external route is noted in `rec`.
    fn target(
        &self,
        ctx: &OpCtx,
        rec: &mut OpRecord,
        raw: &Path,
        marker: Option<&'static str>,
    ) -> Result<PathBuf, Failure> {
        match writegate_paths::resolve(&OsView, raw, std::slice::from_ref(&ctx.runtime.root)) {
            Ok(r) => Ok(r.canonical),
            Err(ResolveError::OutsideWorkspace(msg)) => {
                let enabled = ctx.external_writes && self.config().external_tool_writes;
                match external_route(enabled, marker) {
                    Some(route) => {
                        if let Route::External(source) = route {
                            // Refusals of the external writer are its own events.
                            rec.writer = "external";
                            rec.source = Some(source);
                        }
                        let ext = writegate_paths::resolve_external(&OsView, raw)
                            .map_err(Refusal::from)?;
                        // Only paths outside every root of this runtime may
                        // take the external route (SPEC 4): a path the
                        // resolver refused for another reason (a suspicious
                        // name reached through a link) but whose target is
                        // inside the workspace stays refused.
                        if writegate_paths::is_within(&ext.canonical, &ctx.runtime.root) {
                            return Err(Refusal::from(ResolveError::OutsideWorkspace(msg)).into());
                        }
                        Ok(ext.canonical)
                    }
                    None => Err(Refusal::from(ResolveError::OutsideWorkspace(msg)).into()),
                }
            }
            Err(e) => Err(Refusal::from(e).into()),
        }
    }

    /// The shared write/edit pipeline (SPEC 7). `plan` gets the canonical
    /// target and the existing file (read inside the path lock) and returns
    /// the new bytes.
    #[allow(clippy::too_many_arguments)]
    fn mutate<'s>(
        &'s self,
        ctx: &OpCtx,
        rec: &mut OpRecord,
        raw: &Path,
        marker: Option<&'static str>,
        content_len: Option<u64>,
        read: ReadMode,
        held: &mut Option<PathGuard<'s>>,
        plan: &mut Planner<'_>,
    ) -> Result<Committed, Failure> {
        let cfg = self.config();
        if !self.audit.healthy() {
            return Err(Refusal::new(
                ErrorKind::IoError,
                "the audit log cannot be written and audit.required is on",
            )
            .into());
        }
        self.check_open(ctx)?;
        if !ctx.runtime.trusted {
            return Err(Refusal::new(
                ErrorKind::UntrustedWorkspace,
                "this workspace is not trusted for writes; mark it trusted in the config",
            )
            .into());
        }
        if let Some(len) = content_len
            && len > cfg.max_write_bytes
        {
            return Err(too_large(len, cfg.max_write_bytes));
        }
        let canonical = self.target(ctx, rec, raw, marker)?;
        rec.path_hash = path_hash(&canonical);
        self.check_open(ctx)?;
        // The approval gate, before anything is written (SPEC 12).
        let mode = rec.mode.clone().unwrap_or_else(|| "write".to_string());
        let command = synthetic_command(&mode, &canonical);
        let level = rate(&cfg.policy, &command, &canonical);
        if level > cfg.policy.auto_approve {
            let session = ctx.session_id.clone().unwrap_or_default();
            if !self.approvals.take(&command, &session, &ctx.runtime.id) {
                return Err(Refusal::new(
                    ErrorKind::ApprovalRequired,
                    format!(
                        "`{command}` is rated {level:?}; ask the user, then call _writegate/approve with a pattern and retry"
                    ),
                )
                .with("command", Value::String(command))
                .into());
            }
        }
        let (parent, leaf) = split_target(&canonical)?;
        // Held by the caller until the audit event is written (SPEC 7.4).
        held.replace(self.locks.lock(&canonical));
        self.check_open(ctx)?;
        self.check_cancel(ctx)?;
        let dir = Dir::open_canonical(parent).map_err(Refusal::from)?;
        let mut existing = match read {
            ReadMode::Whole(max) => writegate_fs::read_existing(&dir, leaf, Some(max)),
            ReadMode::Prefix(max) => writegate_fs::read_prefix(&dir, leaf, max),
        }
        .map_err(Refusal::from)?;
        // The leaf is read again inside the lock through the directory handle
        // with O_NOFOLLOW: a leaf swapped for a symlink or another kind of
        // file since the external check is refused there, and a regular file
        // replaced by another write that committed while this one waited is
        // simply the current content (SPEC 7.4: writes serialise, not fail).
        if let Some(e) = existing.as_ref() {
            rec.bytes_before = Some(e.len);
            if !e.truncated {
                rec.hash_before = Some(sha256_tagged(&e.bytes));
            }
        }
        let planned = plan(&canonical, existing.as_ref())?;
        if planned.bytes.len() as u64 > cfg.max_write_bytes {
            return Err(too_large(planned.bytes.len() as u64, cfg.max_write_bytes));
        }
        let hash_after = sha256_tagged(&planned.bytes);
        let bytes_before = existing.as_ref().map_or(0, |e| e.len);
        let created = if planned.dry_run {
            existing.is_none()
        } else {
            let opts = PublishOptions {
                new_file_mode: match cfg.new_file_mode {
                    crate::config::NewFileMode::Owner => writegate_fs::NewFileMode::Owner,
                    crate::config::NewFileMode::System => writegate_fs::NewFileMode::System,
                },
                expect_existing: existing.as_ref().map(|e| (e.dev, e.ino)),
            };
            let guard = &ctx.runtime.guard;
            let mut precommit = || {
                if guard.is_open() {
                    Ok(())
                } else {
                    Err("generation closed".to_string())
                }
            };
            // Keep the old file's read descriptor across the rename only
            // where that just delays freeing its blocks (local disks);
            // elsewhere close it first (NFS and FUSE would rename it to a
            // hidden name while it is open).
            if let Some(e) = existing.as_mut()
                && !dir.can_defer_frees()
            {
                drop(e.take_handle());
            }
            let published =
                writegate_fs::publish(&dir, leaf, &planned.bytes, &opts, &mut precommit)
                    .map_err(Refusal::from)?;
            // The replaced file's last reference goes to the releaser: its
            // blocks are freed there, not on this request's path.
            if let Some(fd) = existing.as_mut().and_then(Existing::take_handle) {
                self.releaser.release(fd);
            }
            published.created
        };
        rec.created = Some(created);
        rec.bytes_after = Some(planned.bytes.len() as u64);
        rec.hash_after = Some(hash_after.clone());
        let done = Committed {
            created,
            bytes_before,
            bytes_after: planned.bytes.len() as u64,
            hash_after,
            canonical,
        };
        if !planned.dry_run {
            self.add_receipt(ctx, &mode, &done);
        }
        Ok(done)
    }

    fn add_receipt(&self, ctx: &OpCtx, mode: &str, done: &Committed) {
        let session = ctx.session_id.clone().unwrap_or_default();
        let mut all = self.receipts.lock().unwrap();
        let list = all.entry(session).or_default();
        if list.len() >= MAX_RECEIPTS_PER_SESSION {
            list.pop_front();
        }
        list.push_back(Receipt {
            path: done.canonical.display().to_string(),
            mode: mode.to_string(),
            created: done.created,
            bytes_before: done.bytes_before,
            bytes_after: done.bytes_after,
            hash_after: done.hash_after.clone(),
            time: now_rfc3339(),
        });
    }

    /// Resolves and reads a file for the read methods (workspace only; an
    /// untrusted workspace may still be read). Files over `max_edit_bytes`
    /// are `file_too_large`.
    fn read_file(&self, ctx: &OpCtx, rec: &mut OpRecord, raw: &Path) -> Result<Vec<u8>, Failure> {
        let cfg = self.config();
        self.check_open(ctx)?;
        let r = writegate_paths::resolve(&OsView, raw, std::slice::from_ref(&ctx.runtime.root))
            .map_err(Refusal::from)?;
        rec.path_hash = path_hash(&r.canonical);
        let (parent, leaf) = split_target(&r.canonical)?;
        let dir = Dir::open_canonical(parent).map_err(Refusal::from)?;
        match writegate_fs::read_existing(&dir, leaf, Some(cfg.max_edit_bytes))
            .map_err(Refusal::from)?
        {
            None => Err(Refusal::new(
                ErrorKind::PathNotFound,
                format!("{} does not exist", raw.display()),
            )
            .with("uri", Value::String(raw.display().to_string()))
            .into()),
            Some(e) if e.truncated => Err(too_large(e.len, cfg.max_edit_bytes)),
            Some(e) => {
                rec.bytes_before = Some(e.len);
                Ok(e.bytes)
            }
        }
    }
}

/// Encodes a whole-file write over `existing` (SPEC 9): the existing format
/// is kept unless `_meta` says otherwise; an existing file whose encoding
/// cannot be detected is refused unless `_meta` names an encoding.
fn encode_over(
    content: &str,
    existing: Option<&Existing>,
    opts: &WriteOptions,
) -> Result<Vec<u8>, Failure> {
    let format = match existing {
        Some(e) => match writegate_text::detect(format_sample(e)) {
            Ok(f) => Some(f),
            Err(_) if opts.encoding.is_some() => None,
            Err(err) => return Err(err.into()),
        },
        None => None,
    };
    let (bytes, _) = writegate_text::encode_whole(content, format.as_ref(), opts)?;
    Ok(bytes)
}

/// The bytes to detect an existing file's format from: all of them, or for
/// a file read only in part (`truncated`), its beginning cut to whole
/// 32-bit units and to a UTF-8 character boundary, so a cut in the middle
/// of a character does not look like an encoding error.
fn format_sample(e: &Existing) -> &[u8] {
    if !e.truncated {
        return &e.bytes;
    }
    let aligned = &e.bytes[..e.bytes.len() / 4 * 4];
    match std::str::from_utf8(aligned) {
        Err(err) if err.error_len().is_none() => &aligned[..err.valid_up_to()],
        _ => aligned,
    }
}

/// Whether the config's `[[workspace]]` list marks `canonical` trusted.
fn trusted_in(cfg: &Config, canonical: &Path) -> bool {
    cfg.workspace
        .iter()
        .any(|w| w.trusted && std::fs::canonicalize(&w.root).ok().as_deref() == Some(canonical))
}

fn too_large(len: u64, max: u64) -> Failure {
    Refusal::new(
        ErrorKind::FileTooLarge,
        format!("{len} bytes is over the limit of {max} bytes"),
    )
    .into()
}

fn split_target(canonical: &Path) -> Result<(&Path, &std::ffi::OsStr), Failure> {
    match (canonical.parent(), canonical.file_name()) {
        (Some(p), Some(l)) => Ok((p, l)),
        _ => Err(Refusal::new(ErrorKind::ParseError, "the path names no file").into()),
    }
}

/// `mode` as its wire string.
pub fn mode_str(m: EditMode) -> &'static str {
    match m {
        EditMode::Write => "write",
        EditMode::Append => "append",
        EditMode::Replace => "replace",
        EditMode::Insert => "insert",
        EditMode::Delete => "delete",
    }
}

/// A path as a model should see it: relative to the workspace root when
/// inside it, else canonical.
fn display_path(canonical: &Path, root: &Path) -> String {
    match canonical.strip_prefix(root) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
        _ => canonical.display().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use std::sync::atomic::AtomicBool;

    fn service(root: &Path, state: &Path) -> (Arc<Service>, Arc<Runtime>) {
        let registry = Registry::default();
        let rt = registry.register(root, true).unwrap();
        let svc = Service::new(
            Config::default(),
            registry,
            &state.join("audit.jsonl"),
            state.join("approvals.json"),
        );
        (Arc::new(svc), rt)
    }

    fn ctx(rt: &Arc<Runtime>) -> OpCtx {
        OpCtx {
            runtime: rt.clone(),
            session_id: Some("s".into()),
            external_writes: true,
            cancel: Arc::new(AtomicBool::new(false)),
        }
    }

    fn audit_lines(state: &Path) -> Vec<Value> {
        std::fs::read_to_string(state.join("audit.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// SPEC 2: a generation closed (by a reload that removes the workspace)
    /// while a write waits on the path lock fails that write with
    /// `generation_closed`, writes nothing, and leaves one audit event.
    #[test]
    fn generation_closed_while_waiting_on_the_path_lock() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(ws.path()).unwrap();
        let file = root.join("f.txt");
        std::fs::write(&file, b"old\n").unwrap();
        let (svc, rt) = service(&root, state.path());
        let held = svc.locks.lock(&file);
        let writer = {
            let svc = svc.clone();
            let c = ctx(&rt);
            let file = file.clone();
            std::thread::spawn(move || {
                svc.write_text_file(
                    &c,
                    &WriteParams {
                        path: file,
                        content: "new\n".into(),
                        meta: None,
                    },
                )
            })
        };
        // Wait until the writer queues behind the lock we hold.
        while svc.locks.queued(&file) < 2 {
            std::thread::yield_now();
        }
        let other = tempfile::tempdir().unwrap();
        svc.reload(Config::default(), &[(other.path().to_path_buf(), true)])
            .unwrap();
        assert!(!rt.guard.is_open());
        drop(held);
        let result = writer.join().unwrap();
        match result {
            Err(Failure::Refused(r)) => assert_eq!(r.kind, ErrorKind::GenerationClosed),
            other => panic!("expected generation_closed, got {other:?}"),
        }
        assert_eq!(std::fs::read(&file).unwrap(), b"old\n");
        let names: Vec<_> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(
            names,
            vec![std::ffi::OsString::from("f.txt")],
            "no temp file left"
        );
        let events = audit_lines(state.path());
        assert_eq!(events.len(), 1);
        assert_eq!(events[0]["type"], "fs.denied");
        assert_eq!(events[0]["errorKind"], "generation_closed");
    }

    /// SPEC 7.4: two edits to one file both land (read-modify-write inside the lock).
    #[test]
    fn concurrent_appends_all_land() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(ws.path()).unwrap();
        let file = root.join("log.txt");
        std::fs::write(&file, b"").unwrap();
        let (svc, rt) = service(&root, state.path());
        let threads: Vec<_> = (0..16)
            .map(|i| {
                let svc = svc.clone();
                let c = ctx(&rt);
                let file = file.clone();
                std::thread::spawn(move || {
                    svc.edit_text_file(
                        &c,
                        &EditParams {
                            path: file,
                            mode: EditMode::Append,
                            content: format!("line {i}\n"),
                            find: None,
                            line: None,
                            end_line: None,
                            expected_hash: None,
                            dry_run: false,
                            meta: None,
                        },
                    )
                    .unwrap()
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let text = std::fs::read_to_string(&file).unwrap();
        for i in 0..16 {
            assert!(
                text.contains(&format!("line {i}\n")),
                "line {i} lost: {text}"
            );
        }
        assert_eq!(text.lines().count(), 16);
        assert_eq!(svc.live_locks(), 0);
        assert_eq!(audit_lines(state.path()).len(), 16);
    }

    /// SPEC 12: a dangerous path needs an approval; `once` is consumed.
    #[test]
    fn approval_once_then_refused_again() {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(ws.path()).unwrap();
        std::fs::create_dir(root.join(".ssh")).unwrap();
        let file = root.join(".ssh/config");
        let (svc, rt) = service(&root, state.path());
        let c = ctx(&rt);
        let p = WriteParams {
            path: file.clone(),
            content: "Host b\n".into(),
            meta: None,
        };
        let err = svc.write_text_file(&c, &p).unwrap_err();
        let Failure::Refused(r) = err else { panic!() };
        assert_eq!(r.kind, ErrorKind::ApprovalRequired);
        let command = r.extra["command"].as_str().unwrap().to_string();
        assert_eq!(command, format!("edit_file write {}", file.display()));
        assert!(!file.exists());
        svc.approve(&c, &command, Scope::Once).unwrap();
        svc.write_text_file(&c, &p).unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"Host b\n");
        assert!(svc.write_text_file(&c, &p).is_err(), "once is consumed");
    }
}
