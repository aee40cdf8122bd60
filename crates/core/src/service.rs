//! The service: the daemon's shared state and one method per operation.
//! Each method is a short sequence of the pipeline steps in `crate::op`
//! (begin, admit, resolve, approve, lock, read, commit, finish), taking an
//! [`OpCtx`] and typed parameters and returning a typed outcome or a
//! [`Failure`].
//!
//! Order of checks for writes and edits (SPEC 2, 4, 7): audit sink healthy,
//! generation open, trust, content size, resolve (or the external check of
//! SPEC 7.1), generation again, the approval gate, the path lock, generation
//! again and cancellation, read the existing file inside the lock, plan the
//! new bytes (encoding, edit), encoded size, publish (generation checked once
//! more immediately before the rename), then exactly one audit event.

use crate::api::{
    EditParams, EditReport, FileFormat, LinesRead, OpCtx, ReadParams, Receipt, TextRead,
    WriteOutcome, WriteParams,
};
use crate::audit::{AuditSink, Intent, now_rfc3339};
use crate::config::Config;
use crate::error::{Detail, ErrorKind, Failure, Refusal};
use crate::op::{Committed, Loaded, Op, PARALLEL_HASH_MIN, ReadBody, ReadMode, Target};
use crate::policy::{Approvals, Grant, GrantOutcome, Scope};
use crate::read_answer::{LinesView, ReadFacts};
use crate::receipts::Receipts;
use crate::runtime::{Registry, Runtime};
use crate::{sha256_tagged, sync};
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use writegate_fs::{Content, Existing, PathLocks, Releaser};
use writegate_text::{EditMode, EditRequest, WriteOptions};

/// The daemon's shared state. One per process; every connection holds an `Arc`.
pub struct Service {
    config: RwLock<Arc<Config>>,
    registry: Registry,
    locks: PathLocks,
    audit: AuditSink,
    approvals: Approvals,
    receipts: Mutex<Receipts>,
    /// Canonical roots registered by socket clients (`allow_dynamic_workspaces`),
    /// kept across reloads while the option stays on.
    dynamic: Mutex<Vec<PathBuf>>,
    /// Closes the read descriptors of files a write replaced, off the
    /// request's thread (the kernel frees the old blocks then).
    releaser: Releaser,
    /// The before-image store (ADR 0020), when opened.
    history: Option<crate::history::History>,
    /// writegate's own files: refused to every agent (`writegate_file`).
    own: crate::policy::OwnFiles,
    /// The questions waiting for the person (`writegate pending`).
    queue: crate::queue::ApprovalQueue,
    /// The SHA-256 of the files reads answered, per version (ADR 0034).
    read_hashes: crate::read_hash::ReadHashes,
}

/// Why a client-named workspace cannot be registered (SPEC 2).
#[derive(Debug, thiserror::Error)]
pub enum DynamicWorkspaceError {
    /// `allow_dynamic_workspaces` is off.
    #[error(
        "{} is not a registered workspace and allow_dynamic_workspaces is off; register it with --workspace or in the config",
        .0.display()
    )]
    Off(PathBuf),
    /// The directory cannot be resolved.
    #[error("{}: {source}", .path.display())]
    Unresolvable {
        /// The directory named.
        path: PathBuf,
        /// Why `realpath` failed.
        #[source]
        source: std::io::Error,
    },
    /// The registry refused it (nested, not a directory).
    #[error(transparent)]
    Register(#[from] crate::runtime::RegisterError),
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
        let audit = AuditSink::open(audit_path, &config.audit);
        Service {
            config: RwLock::new(Arc::new(config)),
            registry,
            locks: PathLocks::new(),
            audit,
            approvals: Approvals::load(approvals_file),
            receipts: Mutex::new(Receipts::default()),
            dynamic: Mutex::new(Vec::new()),
            releaser: Releaser::new(),
            history: None,
            own: crate::policy::OwnFiles::default(),
            queue: crate::queue::ApprovalQueue::default(),
            read_hashes: crate::read_hash::ReadHashes::default(),
        }
    }

    /// Sets writegate's own files (its config, state, runtime directory,
    /// service units, binary): every agent's read, write, edit and undo
    /// of one is refused `writegate_file`, approval or not.
    pub fn protect_own_files(&mut self, own: crate::policy::OwnFiles) {
        self.own = own;
    }

    /// The questions waiting for the person, shared by every connection.
    pub fn approval_queue(&self) -> &crate::queue::ApprovalQueue {
        &self.queue
    }

    /// writegate's own files ([`Service::protect_own_files`]).
    pub fn own_files(&self) -> &crate::policy::OwnFiles {
        &self.own
    }

    /// Opens the history store at `root` and voids the records
    /// of operations the audit recovery found not committed. Without a
    /// store (this is not called, or it failed) nothing is kept.
    ///
    /// Errors: the store cannot be created or read; the service then runs
    /// without history.
    pub fn open_history(&mut self, root: &Path) -> Result<(), writegate_fs::FsError> {
        let h = crate::history::History::open(root)?;
        h.settle(&self.audit.recovery().not_committed);
        self.history = Some(h);
        Ok(())
    }

    /// The history store, if open.
    pub fn history(&self) -> Option<&crate::history::History> {
        self.history.as_ref()
    }

    /// The current config snapshot.
    pub fn config(&self) -> Arc<Config> {
        sync::read(&self.config).clone()
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
        let mut dynamic = sync::lock(&self.dynamic);
        if config.allow_dynamic_workspaces {
            wanted.extend(dynamic.iter().map(|r| (r.clone(), trusted_in(&config, r))));
        } else {
            dynamic.clear();
        }
        let report = self.registry.reload(&wanted)?;
        *sync::write(&self.config) = Arc::new(config);
        Ok(report)
    }

    /// The workspace registry.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Registers a workspace named by a client (SPEC 2): only with
    /// `allow_dynamic_workspaces`, trusted only when the config's
    /// `[[workspace]]` list marks that root trusted. The root is kept across
    /// reloads while the option stays on.
    pub fn register_dynamic(&self, root: &Path) -> Result<Arc<Runtime>, DynamicWorkspaceError> {
        let cfg = self.config();
        if !cfg.allow_dynamic_workspaces {
            return Err(DynamicWorkspaceError::Off(root.to_path_buf()));
        }
        let canonical =
            std::fs::canonicalize(root).map_err(|source| DynamicWorkspaceError::Unresolvable {
                path: root.to_path_buf(),
                source,
            })?;
        let rt = self
            .registry
            .register(&canonical, trusted_in(&cfg, &canonical))?;
        let mut dynamic = sync::lock(&self.dynamic);
        if !dynamic.contains(&rt.root) {
            dynamic.push(rt.root.clone());
        }
        Ok(rt)
    }

    /// The audit sink (for tests and shutdown logs).
    pub fn audit(&self) -> &AuditSink {
        &self.audit
    }

    pub(crate) fn approvals(&self) -> &Approvals {
        &self.approvals
    }

    pub(crate) fn locks(&self) -> &PathLocks {
        &self.locks
    }

    pub(crate) fn releaser(&self) -> &Releaser {
        &self.releaser
    }

    /// The SHA-256s of files as last read or written (see `read_hash.rs`).
    pub(crate) fn read_hashes(&self) -> &crate::read_hash::ReadHashes {
        &self.read_hashes
    }

    /// Number of live path-lock keys (0 when idle).
    pub fn live_locks(&self) -> usize {
        self.locks.len()
    }

    /// Whole-file write (ACP `fs/write_text_file`, SPEC 3, 7): replaces the
    /// file, creating it if missing, keeping its format (SPEC 9).
    pub fn write_text_file(&self, ctx: &OpCtx, p: &WriteParams) -> Result<WriteOutcome, Failure> {
        let mut op = Op::begin(self, ctx, Intent::Write, Some(EditMode::Write), &p.path);
        op.note_request(p.content.len() as u64, false);
        let op_id = Some(op.op_id()).filter(|id| !id.is_empty());
        let result = (|| {
            op.admit_write(p.content.len() as u64)?;
            let target = op.resolve_write(&p.path, p.marker)?;
            op.approve(&target, EditMode::Write)?;
            op.lock(&target)?;
            let read = ReadMode::Skim(op.cfg.max_edit_bytes);
            let mut loaded = op.read(&target, read)?;
            let mut again = true;
            loop {
                let bytes = encode_over(
                    &p.content,
                    loaded.existing.as_ref(),
                    loaded.format,
                    &p.options,
                    p.convert_encoding,
                )?;
                match op.commit(&target, loaded, &bytes, false) {
                    // The format the read hash cache gave was not the
                    // file's any more (changed in place): learned from its
                    // bytes this time.
                    Err(_) if op.take_format_stale() && std::mem::take(&mut again) => {
                        loaded = op.read(&target, read)?;
                    }
                    done => break done,
                }
            }
        })();
        op.finish(result).map(|c| WriteOutcome {
            created: c.created,
            bytes_before: c.bytes_before,
            bytes_after: c.bytes_after,
            hash: c.hash_after,
            op_id,
        })
    }

    /// The edit tool (SPEC 8). The report is SPEC 8.6's.
    pub fn edit_text_file(&self, ctx: &OpCtx, p: &EditParams) -> Result<EditReport, Failure> {
        let mut op = Op::begin(self, ctx, Intent::Edit, Some(p.mode), &p.path);
        op.note_request(p.text().len() as u64, p.dry_run);
        let op_id = Some(op.op_id()).filter(|id| !id.is_empty() && !p.dry_run);
        let result = (|| {
            let want = p.expected_hash.as_deref().map(expected_hash).transpose()?;
            op.admit_write(p.text().len() as u64)?;
            let target = op.resolve_write(&p.path, p.marker)?;
            op.approve(&target, p.mode)?;
            op.lock(&target)?;
            let max = op.cfg.max_edit_bytes;
            let read = if p.mode == EditMode::Write {
                ReadMode::Prefix(max)
            } else {
                ReadMode::Whole(max)
            };
            let loaded = op.read(&target, read)?;
            let mut out = plan_edit(p, want.as_deref(), &target, &ctx.runtime.root, &loaded, max)?;
            // The new bytes move out of the outcome (no second copy of the file).
            let bytes = std::mem::take(&mut out.bytes);
            let done = op.commit(&target, loaded, &bytes, p.dry_run)?;
            Ok((out, done))
        })();
        op.finish(result).map(|(out, done)| EditReport {
            message: out.message,
            created: done.created,
            bytes_before: done.bytes_before,
            bytes_after: done.bytes_after,
            hash: done.hash_after,
            line: out.line,
            moved_from: out.moved_from,
            kept_indentation: out.kept_indentation,
            now_reads: out.now_reads,
            diff: out.diff,
            dry_run: p.dry_run,
            op_id,
        })
    }

    /// Numbered lines for the edit tool (`_writegate/read_lines`, SPEC 3).
    pub fn read_lines(&self, ctx: &OpCtx, p: &ReadParams) -> Result<LinesRead, Failure> {
        // A closure: `LinesView::numbered` names one lifetime of the view,
        // and `read_lines_with` hands over a view of any.
        #[allow(clippy::redundant_closure_for_method_calls)]
        self.read_lines_with(ctx, p, |view| view.numbered())
            .map(|(lines, facts)| facts.with_lines(lines))
    }

    /// [`Service::read_lines`], with the lines handed to `answer` (which
    /// writes them as JSON, say: [`LinesView::write_lines_member`]) while
    /// the file's hash is taken, as [`Service::read_text_file_with`] does.
    /// Returns what `answer` made and the facts the answer ends with.
    pub fn read_lines_with<T>(
        &self,
        ctx: &OpCtx,
        p: &ReadParams,
        answer: impl FnOnce(&LinesView<'_>) -> T,
    ) -> Result<(T, ReadFacts), Failure> {
        let mut op = Op::begin(self, ctx, Intent::Read, None, &p.path);
        let result = (|| {
            let target = op.resolve_read(&p.path)?;
            let (bytes, key) = match op.read_for_reader(&target, &p.path)? {
                ReadBody::Whole(bytes, key) => (bytes, key),
                ReadBody::Large(file) => {
                    let (paged, hash) = op
                        .read_paged(&file, &p.path, p.line, p.limit, true)
                        .map_err(read_words)?;
                    let view = LinesView::new(paged.numbered());
                    let facts = ReadFacts {
                        total_lines: paged.total_lines,
                        hash,
                        format: FileFormat::from(&paged.format),
                    };
                    return Ok((answer(&view), facts));
                }
            };
            let ((made, total_lines, format), hash) = self
                .read_hashed(key, &bytes, || {
                    let view = LinesView::of(&bytes, p.line, p.limit)?;
                    Ok((answer(&view), view.total_lines(), view.format()))
                })
                .map_err(read_words)?;
            Ok((
                made,
                ReadFacts {
                    total_lines,
                    hash,
                    format,
                },
            ))
        })();
        op.finish(result)
    }

    /// Decoded whole lines with their own endings (ACP `fs/read_text_file`,
    /// SPEC 3), and the file's format and hash. The caller checks that reads
    /// are enabled.
    pub fn read_text_file(&self, ctx: &OpCtx, p: &ReadParams) -> Result<TextRead, Failure> {
        self.read_text_file_with(ctx, p, str::to_string)
            .map(|(content, hash, format)| TextRead {
                content,
                hash,
                format,
            })
    }

    /// [`Service::read_text_file`], with the text handed to `answer` (which
    /// serialises it, say) while the file's hash is taken: on a helper
    /// thread for a file of 1 MiB or more (as a large write's hashes), so that
    /// the hash and the decoding and `answer` share the two CPUs
    /// (docs/decisions/0022-large-reads-and-writes.md). Returns what
    /// `answer` made, the hash and the format. `answer` runs only for a
    /// file that was read and decoded.
    pub fn read_text_file_with<T>(
        &self,
        ctx: &OpCtx,
        p: &ReadParams,
        answer: impl FnOnce(&str) -> T,
    ) -> Result<(T, String, FileFormat), Failure> {
        let mut op = Op::begin(self, ctx, Intent::Read, None, &p.path);
        let result = (|| {
            let target = op.resolve_read(&p.path)?;
            let (bytes, key) = match op.read_for_reader(&target, &p.path)? {
                ReadBody::Whole(bytes, key) => (bytes, key),
                ReadBody::Large(file) => {
                    let (paged, hash) = op.read_paged(&file, &p.path, p.line, p.limit, false)?;
                    let made = answer(paged.text());
                    return Ok((made, hash, FileFormat::from(&paged.format)));
                }
            };
            let ((made, format), hash) = self
                .read_hashed(key, &bytes, || {
                    let (content, format) =
                        writegate_text::read_text_borrowed(&bytes, p.line, p.limit)?;
                    Ok((answer(&content), FileFormat::from(&format)))
                })
                .map_err(read_words)?;
            Ok((made, hash, format))
        })();
        op.finish(result)
    }

    /// `make()` and the tagged SHA-256 of `bytes`, a read of the file
    /// `key`: the hash recorded for these bytes of this file when there is
    /// one ([`crate::read_hash`]), else taken beside `make` and recorded.
    fn read_hashed<T>(
        &self,
        key: crate::read_hash::FileKey,
        bytes: &[u8],
        make: impl FnOnce() -> Result<T, Failure>,
    ) -> Result<(T, String), Failure> {
        if bytes.len() < crate::read_hash::CACHED_MIN {
            return hashed_beside(bytes, make);
        }
        match self.read_hashes.lookup(key, bytes) {
            Ok(hash) => make().map(|made| (made, hash)),
            Err(check) => {
                let (made, hash) = hashed_beside(bytes, make)?;
                self.read_hashes.record(key, check, &hash, None);
                Ok((made, hash))
            }
        }
    }

    /// The files written in a session so far, oldest first (SPEC 3).
    pub fn receipt(&self, session_id: &str) -> Vec<Receipt> {
        sync::lock(&self.receipts).of(session_id)
    }

    /// Grants a literal command or a glob pattern in `scope` (SPEC 12,
    /// `policy::Approvals::grant`): `once` and `session` need the
    /// context's session (`-32602` without one). Each grant is an
    /// `approval.grant` audit event; with `audit.required`, a grant whose
    /// event cannot be written is refused (`io_error`) and grants nothing.
    pub fn approve(
        &self,
        ctx: &OpCtx,
        grant: &Grant,
        scope: Scope,
    ) -> Result<GrantOutcome, Failure> {
        let session = ctx.session_id.as_deref().unwrap_or("");
        if !self.audit.healthy() {
            return Err(audit_failing());
        }
        let room = self.audit.reserve_event(grant.text().len() as u64 * 2)?;
        match self.approvals.grant(grant, scope, session, &ctx.runtime.id) {
            Ok(outcome) => {
                self.audit.record_grant(room, ctx, &outcome);
                Ok(outcome)
            }
            Err(e) => {
                self.audit.release(room);
                Err(e.into())
            }
        }
    }

    pub(crate) fn add_receipt(
        &self,
        ctx: &OpCtx,
        mode: EditMode,
        canonical: &Path,
        done: &Committed,
    ) {
        let session = ctx.session_id.as_deref().unwrap_or_default();
        let receipt = Receipt {
            path: crate::path_text(canonical),
            mode,
            created: done.created,
            bytes_before: done.bytes_before,
            bytes_after: done.bytes_after,
            hash_after: done.hash_after.clone(),
            time: now_rfc3339(),
        };
        sync::lock(&self.receipts).add(session, receipt);
    }
}

/// The refusal while the audit log is failing and `audit.required` is on.
pub(crate) fn audit_failing() -> Failure {
    Refusal::new(
        ErrorKind::IoError,
        "the audit log cannot be written and audit.required is on; nothing was done; free space for the audit log or fix it, then retry",
    )
    .into()
}

/// `expectedHash` as the daemon gives hashes (`sha256:` and 64 hex
/// digits, SPEC 8), lower-cased for the comparison (hex case is ignored).
/// Anything else is `invalid_params` before anything is resolved: a hash
/// in another form can never match, and answering `hash_mismatch` would
/// say the file changed when it did not.
fn expected_hash(want: &str) -> Result<String, Failure> {
    let hex = want.strip_prefix("sha256:").unwrap_or("");
    if hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Ok(format!("sha256:{}", hex.to_ascii_lowercase()));
    }
    let shown: String = want.chars().take(80).collect();
    let more = if shown.len() < want.len() { "…" } else { "" };
    Err(Failure::InvalidParams(format!(
        "expectedHash must be \"sha256:\" followed by 64 hex digits, copied whole from the hash a read of the file returned (got {shown:?}{more}); read the file again to get its hash"
    )))
}

/// The edit's own preconditions, checked inside the lock on the file as
/// read, then the new bytes from the text core (SPEC 8): an edit that loads
/// the file refuses one over `max_edit_bytes`; only `write` and `append`
/// create a file; `want` (the request's `expectedHash`, checked by
/// [`expected_hash`]) must match.
fn plan_edit(
    p: &EditParams,
    want: Option<&str>,
    target: &Target,
    root: &Path,
    loaded: &Loaded,
    max_edit_bytes: u64,
) -> Result<writegate_text::EditOutcome, Failure> {
    let display = display_path(&target.canonical, root);
    let existing = loaded.existing.as_ref();
    if let Some(e) = existing
        && !matches!(e.content, Content::Whole(_))
        && (p.mode != EditMode::Write || p.expected_hash.is_some())
    {
        return Err(Refusal::new(
            ErrorKind::FileTooLarge,
            format!(
                "{display} is {} bytes; edits load at most {max_edit_bytes} bytes (max_edit_bytes)",
                e.stat.len
            ),
        )
        .into());
    }
    if existing.is_none() && !matches!(p.mode, EditMode::Write | EditMode::Append) {
        return Err(Refusal::new(
            ErrorKind::PathNotFound,
            format!("{display} does not exist; use mode write to create it"),
        )
        .with_detail(Detail::NotFound {
            path: p.path.display().to_string(),
        })
        .into());
    }
    if let Some(want) = want {
        // The old file's hash is computed once, for this check and the event.
        let have = loaded
            .hash_before()
            .unwrap_or_else(|| "missing".to_string());
        if have != want {
            return Err(Refusal::new(
                ErrorKind::HashMismatch,
                format!("{display} changed since it was read (expected {want}, now {have}); read it again"),
            )
            .with_detail(Detail::HashMismatch {
                expected: want.to_string(),
                current: have,
            })
            .into());
        }
    }
    let req = EditRequest {
        mode: p.mode,
        content: p.text(),
        find: p.find.as_deref(),
        line: p.line,
        end_line: p.end_line,
        display_path: &display,
        want_diff: p.dry_run,
    };
    // An existing file keeps its encoding and BOM unless the request
    // converts it explicitly (SPEC 9); one whose encoding is unknown cannot
    // be rewritten without that.
    check_label(&p.options)?;
    let opts = match existing {
        Some(e) if p.mode == EditMode::Write => {
            let known = writegate_text::detect(format_sample(e)).is_ok();
            if !known && (!p.convert_encoding || p.options.encoding.is_none()) {
                return Err(unknown_encoding());
            }
            kept_format_options(&p.options, known, p.convert_encoding)
        }
        _ => p.options.clone(),
    };
    let aligned = match existing {
        Some(e) if p.mode == EditMode::Write => writegate_text::detect(format_sample(e))
            .ok()
            .and_then(|f| aligned_endings(p.text(), e, &f, &opts)),
        _ => None,
    };
    let mut opts = opts;
    let req = match &aligned {
        Some(a) => {
            opts.line_ending = Some(writegate_text::LineEndingChoice::Lf);
            EditRequest { content: a, ..req }
        }
        None => req,
    };
    // A whole-file write over a file larger than the read limit sees only
    // its beginning, which is all the format needs.
    Ok(writegate_text::apply_edit(
        existing.map(format_sample),
        &req,
        &opts,
    )?)
}

/// Encodes a whole-file write over `existing` (SPEC 9). An existing file
/// keeps its own encoding and BOM: `_meta.encoding` / `_meta.bom` apply to
/// new files, and to an existing file only with `convert` (an explicit
/// conversion request). An existing file whose encoding cannot be detected
/// is `unsupported_encoding` unless the request converts it explicitly.
/// `skimmed` is the file's format when a skim learned it
/// ([`ReadMode::Skim`]); else it is detected from what was read.
fn encode_over<'a>(
    content: &'a str,
    existing: Option<&Existing>,
    skimmed: Option<writegate_text::Format>,
    opts: &WriteOptions,
    convert: bool,
) -> Result<Cow<'a, [u8]>, Failure> {
    check_label(opts)?;
    let Some(e) = existing else {
        return Ok(writegate_text::encode_whole_bytes(content, None, opts)?);
    };
    let detected = match skimmed {
        Some(f) => Ok(f),
        None => writegate_text::detect(format_sample(e)),
    };
    let format = match detected {
        Ok(f) => Some(f),
        Err(_) if convert && opts.encoding.is_some() => None,
        Err(_) => return Err(unknown_encoding()),
    };
    let mut opts = kept_format_options(opts, format.is_some(), convert);
    match format
        .as_ref()
        .and_then(|f| aligned_endings(content, e, f, &opts))
    {
        Some(aligned) => {
            // Every break is decided: write them as given.
            opts.line_ending = Some(writegate_text::LineEndingChoice::Lf);
            Ok(Cow::Owned(
                writegate_text::encode_whole_bytes(&aligned, format.as_ref(), &opts)?.into_owned(),
            ))
        }
        // Borrowed from `content` when nothing needs converting.
        None => Ok(writegate_text::encode_whole_bytes(
            content,
            format.as_ref(),
            &opts,
        )?),
    }
}

/// For a whole-file write over a file whose dominant ending is `\r\n` or
/// `\r` and a request that names no `lineEnding`: the content with each
/// unchanged line's own ending kept and every other break in the dominant
/// ending (`writegate_text::align_endings`), so a mixed file read and
/// written back changes no byte outside the edit. `None` when that does not
/// apply (LF-dominant file, explicit `lineEnding`, a file read only in
/// part, a diff over its deadline): then SPEC 9's plain rule converts
/// every break.
fn aligned_endings(
    content: &str,
    e: &Existing,
    format: &writegate_text::Format,
    opts: &WriteOptions,
) -> Option<String> {
    let dominant = format.dominant?;
    let Content::Whole(bytes) = &e.content else {
        return None;
    };
    if dominant == writegate_text::Ending::Lf || opts.line_ending.is_some() {
        return None;
    }
    let old = writegate_text::decode(bytes, format);
    writegate_text::align_endings(&old, content, dominant)
}

/// An encoding name the daemon does not know is `unsupported_encoding`, even
/// where the existing file's own encoding wins (SPEC 9: never a silent
/// fallback).
fn check_label(opts: &WriteOptions) -> Result<(), Failure> {
    if let Some(label) = &opts.encoding {
        writegate_text::Encoding::from_label(label)?;
    }
    Ok(())
}

/// The options that may change an existing file's format: all of them with
/// an explicit conversion, else only `lineEnding` (SPEC 9).
fn kept_format_options(opts: &WriteOptions, existing: bool, convert: bool) -> WriteOptions {
    if !existing || convert {
        return opts.clone();
    }
    WriteOptions {
        encoding: None,
        bom: None,
        line_ending: opts.line_ending,
    }
}

/// `unsupported_encoding` for an existing file whose encoding is unknown.
fn unknown_encoding() -> Failure {
    Refusal::new(
        ErrorKind::UnsupportedEncoding,
        "the existing file's encoding cannot be detected, so it cannot be rewritten as it is; \
         to replace it in another encoding, send _meta.encoding with \
         _meta[\"writegate/convertEncoding\"]: true",
    )
    .into()
}

/// `make()` and the tagged SHA-256 of `bytes`, the hash taken on a helper
/// thread while `make` runs when `bytes` is 1 MiB or more (as a large
/// write's hashes), so that the two share the two CPUs
/// (docs/decisions/0022-large-reads-and-writes.md).
/// A refusal of a read in a read's words: the text engine's `binary_file`
/// hint speaks of editing, and a read edits nothing.
fn read_words(f: Failure) -> Failure {
    match f {
        Failure::Refused(r) if r.kind == ErrorKind::BinaryFile => Refusal::new(
            ErrorKind::BinaryFile,
            "The file contains NUL bytes and is treated as binary; it cannot be read as text. Look at it with a tool for binary files, or replace it whole with a write if it should hold text.",
        )
        .into(),
        other => other,
    }
}

fn hashed_beside<T>(
    bytes: &[u8],
    make: impl FnOnce() -> Result<T, Failure>,
) -> Result<(T, String), Failure> {
    if bytes.len() < PARALLEL_HASH_MIN {
        let made = make()?;
        return Ok((made, sha256_tagged(bytes)));
    }
    std::thread::scope(|s| {
        let hash = s.spawn(|| sha256_tagged(bytes));
        let made = make();
        let hash = hash
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        made.map(|made| (made, hash))
    })
}

/// The bytes to detect an existing file's format from: all of them, or for
/// a file read only in part ([`Content::Prefix`]), its beginning cut to
/// whole 32-bit units and to a UTF-8 character boundary, so a cut in the
/// middle of a character does not look like an encoding error (none for a
/// file not read, [`Content::TooLarge`] or [`Content::Unread`]).
fn format_sample(e: &Existing) -> &[u8] {
    let bytes = match &e.content {
        Content::Whole(bytes) => return bytes,
        Content::Prefix(bytes) => bytes,
        Content::TooLarge | Content::Unread => return &[],
    };
    let aligned = &bytes[..bytes.len() / 4 * 4];
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
            allows: crate::api::Allowances {
                external_writer: true,
                choose_workspace: false,
                reads: true,
            },
            route: "test",
            cancel: Arc::new(AtomicBool::new(false)),
            approver: None,
            client_root: false,
        }
    }

    fn audit_lines(state: &Path) -> Vec<serde_json::Value> {
        writegate_testkit::audit_lines(&state.join("audit.jsonl"))
            .iter()
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
        // The key the write will wait on: the real file, not its path text.
        let key = writegate_fs::LockKey::of(
            &writegate_fs::Dir::open_canonical(&root).unwrap(),
            std::ffi::OsStr::new("f.txt"),
        );
        let held = svc.locks.lock(key.clone());
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
                        options: WriteOptions::default(),
                        marker: None,
                        convert_encoding: false,
                    },
                )
            })
        };
        // Wait until the writer queues behind the lock we hold.
        while svc.locks.queued(key.clone()) < 2 {
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

    /// A file made read-only after the gate judged it writable
    /// (here while the write waits on the path lock) goes back to the gate
    /// inside the lock: `approval_required`, the file byte-identical, no
    /// temp file, one event.
    #[test]
    fn a_file_made_read_only_while_a_write_waits_is_held() {
        use std::os::unix::fs::PermissionsExt;
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(ws.path()).unwrap();
        let file = root.join("f.txt");
        std::fs::write(&file, b"old\n").unwrap();
        let (svc, rt) = service(&root, state.path());
        let key = writegate_fs::LockKey::of(
            &writegate_fs::Dir::open_canonical(&root).unwrap(),
            std::ffi::OsStr::new("f.txt"),
        );
        let held = svc.locks.lock(key.clone());
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
                        options: WriteOptions::default(),
                        marker: None,
                        convert_encoding: false,
                    },
                )
            })
        };
        while svc.locks.queued(key.clone()) < 2 {
            std::thread::yield_now();
        }
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o444)).unwrap();
        drop(held);
        match writer.join().unwrap() {
            Err(Failure::Refused(r)) => {
                assert_eq!(r.kind, ErrorKind::ApprovalRequired);
                assert!(r.hint.contains("read-only file"), "{}", r.hint);
            }
            other => panic!("expected approval_required, got {other:?}"),
        }
        assert_eq!(std::fs::read(&file).unwrap(), b"old\n");
        let names: Vec<_> = std::fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("f.txt")]);
        let events = audit_lines(state.path());
        assert_eq!(events.len(), 1);
        assert_eq!(events[0]["errorKind"], "approval_required");
        assert!(events[0]["hashBefore"].is_string(), "{}", events[0]);
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
                        &EditParams::new(file, EditMode::Append, format!("line {i}\n")),
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
            options: WriteOptions::default(),
            marker: None,
            convert_encoding: false,
        };
        let err = svc.write_text_file(&c, &p).unwrap_err();
        let Failure::Refused(r) = err else { panic!() };
        assert_eq!(r.kind, ErrorKind::ApprovalRequired);
        let Some(Detail::Approval { command, .. }) = r.detail else {
            panic!("no command in {r:?}")
        };
        assert_eq!(command, format!("edit_file write {}", file.display()));
        assert!(!file.exists());
        svc.approve(&c, &Grant::Command(command), Scope::Once)
            .unwrap();
        svc.write_text_file(&c, &p).unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), b"Host b\n");
        assert!(svc.write_text_file(&c, &p).is_err(), "once is consumed");
    }
}
