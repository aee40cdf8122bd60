//! writegate's core: workspaces and runtimes with generation guards
//! (SPEC 2), routing decisions (SPEC 4), the approval gate (SPEC 12), the
//! write/edit/read pipeline that ties the resolver (`writegate-paths`), the
//! text core (`writegate-text`) and the publisher (`writegate-fs`) together
//! (`op`, `service`), audit records (SPEC 10), error kinds (SPEC 11) and
//! configuration (SPEC 13).
//!
//! Front ends (ACP serve, ACP proxy, MCP, the CLI) pass an [`OpCtx`] and
//! typed parameters ([`api`]) and get typed outcomes or a [`Failure`]; each
//! maps those to its own wire. The audit event format is core's own.
//!
//! It is synchronous: callers at the edge run operations on blocking
//! threads. It must never write to disk itself (every write goes through
//! `writegate-fs`) and never depend on an async runtime. It owns the
//! serialised shape of its outcomes (serde, camelCase) and may write that
//! shape as bytes (`read_answer`, the audit line) where a test holds them
//! equal to serde's; it never speaks a wire: it knows no envelope (no
//! JSON-RPC message or code, no `_meta`, no MCP content blocks) and no
//! `serde_json::Value` in its API.

pub mod api;
pub mod audit;
pub mod config;
pub mod error;
mod hash;
pub mod history;
mod op;
pub mod policy;
pub mod queue;
pub mod read_answer;
mod read_hash;
pub mod receipts;
pub mod routing;
pub mod runtime;
pub mod service;
pub mod sessions;
mod sync;

pub use api::{
    Allowances, ApprovalAnswer, ApprovalQuestion, Approver, EditParams, EditReport, FileFormat,
    LineEnding, LinesRead, NumberedLine, OpCtx, OpMode, ReadParams, Receipt, TextRead,
    WriteOutcome, WriteParams, validate_edit,
};
pub use config::Config;
pub use error::{Detail, ErrorKind, Failure, Refusal, RefusalFacts, guarded};
pub use hash::{hex, path_hash, path_text, sha256_tagged, unpredictable_hex};
pub use read_answer::{Extent, LinesView, ReadFacts};
pub use routing::MarkerSource;
pub use runtime::{Registry, Runtime};
pub use service::{DynamicWorkspaceError, Service};
pub use sessions::SessionWorkspaceError;
pub use writegate_text::{EditMode, LineEndingChoice, UnknownMode, WriteOptions};
