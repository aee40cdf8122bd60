//! `_writegate/read_lines {sessionId, path, line?, limit?}` (SPEC 3):
//! numbered lines for a model to read before a line edit, with the file's
//! hash and format. Served only when reads are on (the config's
//! `read_text_file`, `--allow-read`) and the transport allows them, like
//! `fs/read_text_file` (issue 13: reads off means every read is off).

use super::{Call, Method, MethodError, absolute};
use crate::state::ConnState;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use writegate_core::{Failure, LinesRead, ReadParams};

/// The method.
pub(crate) struct ReadLines;

/// Params.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Params {
    session_id: String,
    path: PathBuf,
    line: Option<u64>,
    limit: Option<u64>,
}

impl Method for ReadLines {
    const NAME: &'static str = "_writegate/read_lines";
    type Params = Params;
    type Result = LinesRead;

    fn enabled(conn: &ConnState) -> bool {
        conn.transport.allowances().reads && conn.service.config().read_text_file
    }

    fn check(p: &Params) -> Result<(), Failure> {
        absolute(&p.path)
    }

    fn uri(p: &Params) -> Option<&Path> {
        Some(&p.path)
    }

    fn handle(call: &Call<'_>, p: Params) -> Result<LinesRead, MethodError> {
        let ctx = call.ctx(&p.session_id, "read_lines");
        Ok(call.conn.service.read_lines(
            &ctx,
            &ReadParams {
                path: p.path,
                line: p.line,
                limit: p.limit,
            },
        )?)
    }
}
