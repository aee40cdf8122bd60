//! `_writegate/approve {sessionId?, command | pattern, scope}` (SPEC 12):
//! grants an approval for operations the gate holds. `command` is one exact
//! synthetic command, matched literally (what a host copies from an
//! `approval_required` refusal's `data.command`); `pattern` is a glob a
//! person wrote on purpose. A cancelled approve stores nothing (`-32800`).
//! Not served where the peer is the one whose writes are held (the proxy's
//! agent side, see [`crate::transport::Transport::grants_approvals`]).

use super::{Call, Method, MethodError};
use crate::state::ConnState;
use serde::{Deserialize, Serialize};
use writegate_core::Failure;
use writegate_core::policy::{Grant, Scope};

/// The method.
pub(crate) struct Approve;

/// Params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Params {
    #[serde(default)]
    session_id: Option<String>,
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    pattern: Option<String>,
    scope: Scope,
}

/// `{command | pattern, scope, expiresInSecs?}` as granted.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Approved {
    /// The literal command granted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// The glob granted.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pattern: Option<String>,
    /// Its scope.
    pub scope: Scope,
    /// Seconds until it expires (`once`, `session`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expires_in_secs: Option<u64>,
}

impl Method for Approve {
    const NAME: &'static str = "_writegate/approve";
    type Params = Params;
    type Result = Approved;

    fn enabled(conn: &ConnState) -> bool {
        conn.transport.grants_approvals()
    }

    fn check(p: &Params) -> Result<(), Failure> {
        Grant::from_params(p.command.clone(), p.pattern.clone())?;
        Ok(())
    }

    fn handle(call: &Call<'_>, p: Params) -> Result<Approved, MethodError> {
        let grant = Grant::from_params(p.command, p.pattern).map_err(Failure::from)?;
        let mut ctx = call.ctx("", "approve");
        ctx.session_id = p.session_id.filter(|s| !s.is_empty());
        let a = call.conn.service.approve(&ctx, &grant, p.scope)?;
        let (command, pattern) = match a.grant {
            Grant::Command(c) => (Some(c), None),
            Grant::Pattern(p) => (None, Some(p)),
        };
        Ok(Approved {
            command,
            pattern,
            scope: a.scope,
            expires_in_secs: a.expires_in_secs,
        })
    }
}
