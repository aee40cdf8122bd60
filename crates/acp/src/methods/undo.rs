//! `_writegate/undo {opId, force?, dryRun?}`: puts an
//! operation's before-image back through the write pipeline. Served where
//! approvals are granted (the person's side), never to a proxied agent.
//!
//! Only an operation recorded in the connection's own workspace (the one
//! its `initialize` chose, or the daemon's primary) can be taken back: any
//! other `opId` is answered exactly as an unknown one, so a connection
//! neither changes nor learns of another workspace's files through it. An
//! operation of the external writer recorded in this workspace is undone
//! through this connection's external checks, as its write was. The CLI
//! reaches every workspace by opening a connection on each.

use super::{Call, Method, MethodError};
use crate::state::ConnState;
use serde::Deserialize;
use writegate_core::Failure;
use writegate_core::history::{UndoOutcome, UndoParams};

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

impl Method for Undo {
    const NAME: &'static str = "_writegate/undo";
    type Params = Params;
    type Result = UndoOutcome;

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

    fn handle(call: &Call<'_>, p: Params) -> Result<UndoOutcome, MethodError> {
        let ctx = call.ctx(p.session_id.as_deref().unwrap_or("undo"), "ACP undo");
        Ok(call.conn.service.undo(
            &ctx,
            &UndoParams {
                op_id: p.op_id,
                force: p.force,
                dry_run: p.dry_run,
                session: None,
                own_workspace: true,
            },
        )?)
    }
}
