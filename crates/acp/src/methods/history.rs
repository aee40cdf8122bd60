//! `_writegate/history {path?, sessionId?}`: the operations the
//! daemon can take back, newest first. Served where approvals are granted
//! (the person's side: stdio, the socket), never to a proxied agent. Only
//! the operations recorded in the connection's own workspace are listed
//! (`_writegate/undo` takes back no other).

use super::{Call, Method, MethodError};
use crate::state::ConnState;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use writegate_core::history::Reach;

/// The method.
pub(crate) struct History;

/// Params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Params {
    /// Only this file (canonicalised by the daemon when it exists).
    #[serde(default)]
    path: Option<PathBuf>,
    /// Only this session.
    #[serde(default)]
    session_id: Option<String>,
}

/// One operation.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Entry {
    op_id: String,
    ts: String,
    path: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    session_id: Option<String>,
    workspace: String,
    intent: &'static str,
    writer: &'static str,
    created: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    removed: bool,
    bytes_before: u64,
    bytes_after: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    hash_before: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    hash_after: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    image: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    undoes: Option<String>,
    undoable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

/// `{operations}`.
#[derive(Serialize)]
pub(crate) struct HistoryResult {
    operations: Vec<Entry>,
}

impl Method for History {
    const NAME: &'static str = "_writegate/history";
    type Params = Params;
    type Result = HistoryResult;

    fn enabled(conn: &ConnState) -> bool {
        conn.transport.grants_approvals()
    }

    fn handle(call: &Call<'_>, p: Params) -> Result<HistoryResult, MethodError> {
        let path = p.path.map(|p| std::fs::canonicalize(&p).unwrap_or(p));
        let runtime = call.conn.runtime();
        let reach = Reach {
            session: p.session_id.as_deref(),
            workspace: Some(&runtime.id),
        };
        let entries = call.conn.service.history_entries(path.as_deref(), reach)?;
        Ok(HistoryResult {
            operations: entries.into_iter().map(entry).collect(),
        })
    }
}

fn entry(e: writegate_core::history::HistoryEntry) -> Entry {
    let r = e.record;
    Entry {
        op_id: r.op_id,
        ts: r.ts,
        path: r.path,
        session_id: r.session_id,
        workspace: r.workspace,
        intent: match r.intent {
            writegate_core::audit::Intent::Write => "write",
            writegate_core::audit::Intent::Edit => "edit",
            writegate_core::audit::Intent::Read => "read",
            writegate_core::audit::Intent::Undo => "undo",
        },
        writer: match r.writer {
            writegate_core::audit::Writer::Workspace => "workspace",
            writegate_core::audit::Writer::External => "external",
        },
        created: r.created,
        removed: r.removed,
        bytes_before: r.bytes_before,
        bytes_after: r.bytes_after,
        hash_before: r.hash_before,
        hash_after: r.hash_after,
        image: r.image,
        undoes: r.undoes,
        undoable: e.undoable,
        reason: e.reason,
    }
}
