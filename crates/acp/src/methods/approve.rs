//! `_writegate/approve {sessionId?, pattern, scope}` (SPEC 12): grants an
//! approval for operations the gate holds. A cancelled approve stores
//! nothing (`-32800`).

use super::{Call, Method, MethodError};
use serde::{Deserialize, Serialize};
use writegate_core::policy::Scope;

/// The method.
pub struct Approve;

/// Params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Params {
    #[serde(default)]
    session_id: Option<String>,
    pattern: String,
    scope: Scope,
}

/// `{pattern, scope}` as granted.
#[derive(Serialize)]
pub struct Approved {
    /// The pattern granted.
    pub pattern: String,
    /// Its scope.
    pub scope: Scope,
}

impl Method for Approve {
    const NAME: &'static str = "_writegate/approve";
    type Params = Params;
    type Result = Approved;

    fn handle(call: &Call<'_>, p: Params) -> Result<Approved, MethodError> {
        let ctx = call.ctx(p.session_id.as_deref().unwrap_or(""), "approve");
        let a = call.conn.service.approve(&ctx, &p.pattern, p.scope)?;
        Ok(Approved {
            pattern: a.pattern,
            scope: a.scope,
        })
    }
}
