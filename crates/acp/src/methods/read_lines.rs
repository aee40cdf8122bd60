//! `_writegate/read_lines {sessionId, path, line?, limit?}` (SPEC 3):
//! numbered lines for a model to read before a line edit, with the file's
//! hash and format. Served only when reads are on (the config's
//! `read_text_file`, `--allow-read`) and the transport allows them, like
//! `fs/read_text_file` (issue 13: reads off means every read is off).

use super::{Call, Method, MethodError, absolute};
use crate::state::ConnState;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use writegate_core::{Failure, ReadParams};

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

/// One numbered line.
#[derive(Serialize)]
pub(crate) struct Line {
    /// 1-based line number.
    pub n: u64,
    /// Its text, without the ending.
    pub text: String,
}

/// `{lines, totalLines, hash, encoding, bom, lineEnding}`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct LinesResult {
    /// The lines asked for.
    pub lines: Vec<Line>,
    /// Lines in the whole file.
    pub total_lines: usize,
    /// `sha256:<hex>` of the file's bytes.
    pub hash: String,
    /// Encoding name.
    pub encoding: &'static str,
    /// Whether the file has a BOM.
    pub bom: bool,
    /// `lf`, `crlf` or `cr`.
    pub line_ending: &'static str,
}

impl Method for ReadLines {
    const NAME: &'static str = "_writegate/read_lines";
    type Params = Params;
    type Result = LinesResult;

    fn enabled(conn: &ConnState) -> bool {
        conn.transport.allowances().reads && conn.service.config().read_text_file
    }

    fn check(p: &Params) -> Result<(), Failure> {
        absolute(&p.path)
    }

    fn uri(p: &Params) -> Option<&Path> {
        Some(&p.path)
    }

    fn handle(call: &Call<'_>, p: Params) -> Result<LinesResult, MethodError> {
        let ctx = call.ctx(&p.session_id, "read_lines");
        let read = call.conn.service.read_lines(
            &ctx,
            &ReadParams {
                path: p.path,
                line: p.line,
                limit: p.limit,
            },
        )?;
        Ok(LinesResult {
            lines: read
                .lines
                .into_iter()
                .map(|(n, text)| Line { n, text })
                .collect(),
            total_lines: read.total_lines,
            hash: read.hash,
            encoding: read.format.encoding,
            bom: read.format.bom,
            line_ending: read.format.line_ending.as_str(),
        })
    }
}
