//! The audit records: an operation's event (`fs.access`, `fs.denied`), an
//! approval's (`approval.grant`) and the `audit.gap` line, as serialised.

use crate::api::ApprovalAnswer;
use crate::error::ErrorKind;
use crate::policy::{GrantForm, Scope};
use crate::routing::MarkerSource;
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use writegate_text::EditMode;

/// One audit event, serialised as one JSON line with camelCase keys.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    /// Always 1.
    pub v: u32,
    /// RFC 3339 UTC time the outcome was known, millisecond precision.
    pub ts: String,
    /// `fs.access` or `fs.denied`.
    #[serde(rename = "type")]
    pub kind: EventKind,
    /// Unique id of the operation (`<12 hex of the process>-<n>`): the key
    /// that makes crash recovery write an event only when it is missing.
    #[serde(default)]
    pub op_id: String,
    /// `write`, `edit` or `read`.
    pub intent: Intent,
    /// The front end's name for the method or tool: `ACP writeTextFile`,
    /// `edit`, `ACP readTextFile`, `read_lines`, ...
    pub route: Cow<'static, str>,
    /// `workspace` or `external`.
    pub writer: Writer,
    /// The request's session, if it named one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Runtime id of the connection's workspace.
    pub workspace: String,
    /// First 16 hex of sha256 of the canonical path (or of the raw input when
    /// refused before resolving).
    pub path_hash: String,
    /// Bytes of the request's content.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// The edit mode (`write` for whole-file writes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<EditMode>,
    /// Whether the write created the file.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<bool>,
    /// Size of the file before.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_before: Option<u64>,
    /// Size of the file after.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bytes_after: Option<u64>,
    /// `sha256:<hex>` of the file before (when read whole).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hash_before: Option<String>,
    /// `sha256:<hex>` of the file after.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hash_after: Option<String>,
    /// Why it was refused (SPEC 11).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<ErrorKind>,
    /// The refusal's hint, only with `audit.raw_paths`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// Whole milliseconds from the start of the operation.
    pub duration_ms: u64,
    /// The marker's source on the external route.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<MarkerSource>,
    /// When the gate held the operation and a person was asked: the answer
    /// (`allowed_once`, `allowed_always`, `denied`, `cancelled`,
    /// `unanswered`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<ApprovalAnswer>,
    /// The parent directories a workspace write created, outermost
    /// first, each as the `pathHash` of its canonical path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_dirs: Option<Vec<String>>,
    /// True for an edit's `dryRun` (nothing was written).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
    /// Raw path, only with `audit.raw_paths`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Set only on an event written at start-up for an operation of a
    /// process that died before recording it (see [`Recovered`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub recovered: Option<Recovered>,
    /// The `opId` an undo took back (intent `undo`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub undoes: Option<String>,
}

/// An event's `type`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub enum EventKind {
    /// `fs.access`: the operation succeeded.
    #[serde(rename = "fs.access")]
    Access,
    /// `fs.denied`: it was refused or failed.
    #[serde(rename = "fs.denied")]
    Denied,
}

/// What an operation meant to do (`intent`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Intent {
    /// A whole-file write.
    Write,
    /// An edit (any mode of SPEC 8).
    Edit,
    /// A read.
    Read,
    /// An undo: a before-image put back.
    Undo,
}

/// Which writer handled (or would have handled) an operation (`writer`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Writer {
    /// The workspace writer.
    Workspace,
    /// The external host writer.
    External,
}

/// `recovered`: what start-up found for an operation of a dead process
/// that had journaled its intent to commit but left no event.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Recovered {
    /// The file holds exactly what the operation wrote: it committed
    /// (`fs.access`).
    Committed,
    /// The file is still the one the operation would have replaced (or
    /// still missing): it did not commit (`fs.denied`, `internal_error`).
    NotCommitted,
    /// The file changed again since (or cannot be looked at): the operation
    /// may have committed before that. Recorded as `fs.access` so that no
    /// committed change is left without an event.
    Unconfirmed,
}

/// An `approval.grant` event: an approval was granted (SPEC 12).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GrantEvent {
    /// Always 1.
    pub v: u32,
    /// RFC 3339 UTC time of the grant.
    pub ts: String,
    /// Always `approval.grant`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// Unique id of the operation.
    pub op_id: String,
    /// The front end's name for the method or tool.
    pub route: Cow<'static, str>,
    /// The granting request's session, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// Runtime id of the connection's workspace.
    pub workspace: String,
    /// `once`, `session`, `workspace` or `persistent`.
    pub scope: Scope,
    /// `command` (one literal synthetic command) or `pattern` (a glob).
    pub form: GrantForm,
    /// The mode part of `edit_file <mode> <path>`, when the text has that
    /// shape.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// First 16 hex of sha256 of the path part of the command (for a
    /// pattern, of its glob text after `edit_file <mode> `); of the whole
    /// text when it has no such part.
    pub path_hash: String,
    /// Seconds until it expires (`once`, `session`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_in_secs: Option<u64>,
    /// The command, only with `audit.raw_paths`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The pattern, only with `audit.raw_paths`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
}

/// An `audit.gap` line: events that could not be kept (the log was failing
/// and more than [`MAX_BACKLOG`](super::MAX_BACKLOG) were waiting).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct GapEvent {
    pub(super) v: u32,
    pub(super) ts: String,
    #[serde(rename = "type")]
    pub(super) kind: &'static str,
    pub(super) lost: u64,
}
