//! The steps that decide where a request may go: the external checks of a
//! path outside the workspace, and the approval gate with its question to
//! the person.

use super::{Op, Target};
use crate::api::{ApprovalAnswer, ApprovalQuestion, OpMode};
use crate::audit::Writer;
use crate::error::{Detail, ErrorKind, Failure, Refusal};
use crate::path_hash;
use crate::policy::{GateRequest, Grant, Scope, is_read_only};
use std::path::Path;
use writegate_paths::{OsView, ResolveError};

impl Op<'_> {
    /// The external checks for a path the workspace resolver found outside
    /// (`msg` says so), for a `verb` (`write` or `read`) that may go there;
    /// the event's writer becomes `external`. Only paths outside every root
    /// of this runtime may take the external route (SPEC 4): a path the
    /// resolver refused for another reason (a suspicious name reached
    /// through a link) but whose target is inside the workspace stays
    /// refused.
    pub(super) fn resolve_outside(
        &mut self,
        raw: &Path,
        msg: String,
        verb: &str,
    ) -> Result<Target, Failure> {
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
        self.refuse_own_file(&target.canonical, "read")?;
        if outside || self.ctx.client_root {
            let held = self.svc.approvals().check_read(
                &self.cfg.policy,
                &self.gate_request(OpMode::Read, &target.canonical, target.mode),
            );
            self.ask_if_held(held, &target, OpMode::Read)?;
        }
        Ok(target)
    }

    /// The event's `pathHash` becomes the canonical path's. `begin` hashed
    /// the path as the request named it; when the canonical path has the
    /// same bytes (the usual case) and that hash is still the event's (the
    /// first resolution of the operation), it is already the right one.
    /// (`raw_path` is those bytes unless the raw path was not UTF-8, and
    /// then it holds U+FFFD: such a path is always hashed again.)
    pub(super) fn hash_canonical(&mut self, canonical: &Path) {
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
    pub(crate) fn approve(
        &mut self,
        target: &Target,
        mode: impl Into<OpMode>,
    ) -> Result<(), Failure> {
        let mode = mode.into();
        self.refuse_own_file(&target.canonical, "change")?;
        self.gated = (Some(mode), target.mode.is_some_and(is_read_only));
        let held = self.svc.approvals().check(
            &self.cfg.policy,
            &self.gate_request(mode, &target.canonical, target.mode),
        );
        self.ask_if_held(held, target, mode)
    }

    /// Refuses `canonical` when it is one of writegate's own files
    /// ([`crate::policy::OwnFiles`]): before the gate, so no approval, rule
    /// or question can let an agent `verb` (`read`, `change`) it.
    fn refuse_own_file(&self, canonical: &Path, verb: &str) -> Result<(), Failure> {
        let Some(kind) = self.svc.own_files().reason(canonical) else {
            return Ok(());
        };
        Err(Refusal::new(
            ErrorKind::WritegateFile,
            format!(
                "{} is {}; no agent may {verb} writegate's own files, and no approval changes that. Do not retry: tell the user what you wanted to change, and they change it themselves (the writegate command or their editor)",
                canonical.display(),
                kind.describe()
            ),
        )
        .into())
    }

    /// What the gate judges: `mode` on `canonical` (whose existing file
    /// has `file_mode`) in this operation's session and workspace.
    pub(super) fn gate_request<'a>(
        &'a self,
        mode: OpMode,
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
        mode: OpMode,
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
        let done = if mode == OpMode::Read {
            "read"
        } else {
            "written"
        };
        let question = ApprovalQuestion {
            command: command.clone(),
            path: target.canonical.clone(),
            mode,
            level,
            reason: reason.clone(),
        };
        if !approver.asks_about(&question) {
            return Err(refusal.into());
        }
        let answer = approver.ask(&question);
        self.event().approval = Some(answer);
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
                    "`{command}` needs the user's approval ({reason}, rated {level}) and the user could not be asked, or did not answer in time; nothing was {done}. Tell the user, and do not retry before they have allowed it"
                ),
                detail: asked(refusal.detail),
                ..refusal
            }
            .into()),
        }
    }
}

/// A resolver refusal with what a model or a person needs to act on it:
/// what happened to which path (the resolver's own words), the workspace
/// root when the path is outside it, and what to do next; `verb` is what
/// the request does (`write` for writes and edits, `read` for reads, so
/// that a reader is never given the resolver's generic, path-free hint,
/// which tells it to "write inside the workspace").
pub(super) fn resolve_refusal(e: ResolveError, root: &Path, verb: &str) -> Refusal {
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

/// The approval detail of a refusal the person answered (or could not be
/// asked about) through an approver: marked `asked`, so no front end
/// offers `_writegate/approve` params to a caller that cannot use them.
pub(super) fn asked(detail: Option<Detail>) -> Option<Detail> {
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
