//! `_writegate/undo {opId, force?, dryRun?}` (issue 27): puts an
//! operation's before-image back through the write pipeline. Served where
//! approvals are granted (the person's side), never to a proxied agent.

use super::{Call, Method, MethodError};
use crate::state::ConnState;
use serde::{Deserialize, Serialize};
use writegate_core::Failure;
use writegate_core::history::UndoParams;

/// The method.
pub(crate) struct Undo;

/// Params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct Params {
    op_id: String,
    #[serde(default)]
    force: bool,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    session_id: Option<String>,
}

/// What was done.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct UndoResult {
    op_id: String,
    undone: String,
    path: String,
    action: &'static str,
    bytes: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    hash: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    removed_dirs: Vec<String>,
    forced: bool,
    dry_run: bool,
}

impl Method for Undo {
    const NAME: &'static str = "_writegate/undo";
    type Params = Params;
    type Result = UndoResult;

    fn enabled(conn: &ConnState) -> bool {
        conn.transport.grants_approvals()
    }

    fn check(p: &Params) -> Result<(), Failure> {
        if p.op_id.is_empty() {
            return Err(Failure::InvalidParams(
                "opId is empty; `writegate history` lists the operations that can be undone".into(),
            ));
        }
        Ok(())
    }

    fn handle(call: &Call<'_>, p: Params) -> Result<UndoResult, MethodError> {
        let ctx = call.ctx(p.session_id.as_deref().unwrap_or("undo"), "ACP undo");
        let o = call.conn.service.undo(
            &ctx,
            &UndoParams {
                op_id: p.op_id,
                force: p.force,
                dry_run: p.dry_run,
            },
        )?;
        Ok(UndoResult {
            op_id: o.op_id,
            undone: o.undone,
            path: o.path,
            action: o.action,
            bytes: o.bytes,
            hash: o.hash,
            removed_dirs: o.removed_dirs,
            forced: o.forced,
            dry_run: o.dry_run,
        })
    }
}
