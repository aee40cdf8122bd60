//! `_writegate/receipt {sessionId}` (SPEC 3): the files written in that
//! session so far.

use super::{Call, Method, MethodError};
use serde::{Deserialize, Serialize};

/// The method.
pub(crate) struct Receipt;

/// Params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Params {
    session_id: String,
}

/// `{sessionId, files}`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReceiptResult {
    /// The session asked about.
    pub session_id: String,
    /// Its files, oldest first.
    pub files: Vec<writegate_core::Receipt>,
}

impl Method for Receipt {
    const NAME: &'static str = "_writegate/receipt";
    type Params = Params;
    type Result = ReceiptResult;

    fn handle(call: &Call<'_>, p: Params) -> Result<ReceiptResult, MethodError> {
        let files = call.conn.service.receipt(&p.session_id);
        Ok(ReceiptResult {
            session_id: p.session_id,
            files,
        })
    }
}
