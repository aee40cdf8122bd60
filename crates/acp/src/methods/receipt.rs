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

/// One file written.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FileReceipt {
    /// Canonical path.
    pub path: String,
    /// `write` or the edit mode.
    pub mode: &'static str,
    /// The file did not exist before.
    pub created: bool,
    /// Size before, in bytes.
    pub bytes_before: u64,
    /// Size after, in bytes.
    pub bytes_after: u64,
    /// `sha256:<hex>` after.
    pub hash_after: String,
    /// RFC 3339 UTC time of the commit.
    pub time: String,
}

/// `{sessionId, files}`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReceiptResult {
    /// The session asked about.
    pub session_id: String,
    /// Its files, oldest first.
    pub files: Vec<FileReceipt>,
}

impl Method for Receipt {
    const NAME: &'static str = "_writegate/receipt";
    type Params = Params;
    type Result = ReceiptResult;

    fn handle(call: &Call<'_>, p: Params) -> Result<ReceiptResult, MethodError> {
        let files = call
            .conn
            .service
            .receipt(&p.session_id)
            .into_iter()
            .map(|r| FileReceipt {
                path: r.path,
                mode: r.mode.name(),
                created: r.created,
                bytes_before: r.bytes_before,
                bytes_after: r.bytes_after,
                hash_after: r.hash_after,
                time: r.time,
            })
            .collect();
        Ok(ReceiptResult {
            session_id: p.session_id,
            files,
        })
    }
}
