//! `_writegate/edit_text_file` (SPEC 8): the edit tool. Params: `sessionId`,
//! `path`, `mode` (`write`, `append`, `replace`, `insert`, `delete`),
//! `content`, `find?`, `line?`, `endLine?`, `expectedHash?`, `dryRun?`,
//! `_meta?`. Result: SPEC 8.6's object, core's [`EditReport`] as it
//! serialises itself.

use super::{Call, Method, MethodError, absolute};
use crate::wire::{convert_encoding, meta_object, parse_marker, write_options};
use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use writegate_core::{EditMode, EditParams, EditReport, Failure, validate_edit};

/// The method.
pub(crate) struct EditTextFile;

/// Params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Params {
    session_id: String,
    path: PathBuf,
    mode: String,
    content: Option<String>,
    find: Option<String>,
    line: Option<u64>,
    end_line: Option<u64>,
    expected_hash: Option<String>,
    #[serde(default)]
    dry_run: bool,
    #[serde(rename = "_meta")]
    meta: Option<Value>,
}

/// `mode` parsed ([`EditMode`]'s `FromStr`).
fn mode(s: &str) -> Result<EditMode, Failure> {
    s.parse()
        .map_err(|e: writegate_core::UnknownMode| Failure::InvalidParams(e.to_string()))
}

impl Method for EditTextFile {
    const NAME: &'static str = "_writegate/edit_text_file";
    type Params = Params;
    type Result = EditReport;

    /// Bad combinations are invalid params, before routing: no audit
    /// event, no lock, no approval spent.
    fn check(p: &Params) -> Result<(), Failure> {
        absolute(&p.path)?;
        validate_edit(
            mode(&p.mode)?,
            p.content.as_deref(),
            p.find.as_deref(),
            p.line,
            p.end_line,
        )
    }

    fn uri(p: &Params) -> Option<&Path> {
        Some(&p.path)
    }

    fn handle(call: &Call<'_>, p: Params) -> Result<EditReport, MethodError> {
        let mode = mode(&p.mode)?;
        let meta = meta_object(p.meta);
        let ctx = call.ctx(&p.session_id, "edit");
        let r = call.conn.service.edit_text_file(
            &ctx,
            &EditParams {
                path: p.path,
                mode,
                content: p.content,
                find: p.find,
                line: p.line,
                end_line: p.end_line,
                expected_hash: p.expected_hash,
                dry_run: p.dry_run,
                options: write_options(meta.as_ref()),
                marker: parse_marker(meta.as_ref()),
                convert_encoding: convert_encoding(meta.as_ref()),
            },
        )?;
        Ok(r)
    }
}
