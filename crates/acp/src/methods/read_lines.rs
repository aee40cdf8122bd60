//! `_writegate/read_lines {sessionId, path, line?, limit?}` (SPEC 3):
//! numbered lines for a model to read before a line edit, with the file's
//! hash and format. Served only when reads are on (the config's
//! `read_text_file`, `--allow-read`) and the transport allows them, like
//! `fs/read_text_file` (issue 13: reads off means every read is off).

use super::{Call, Method, MethodError, absolute};
use crate::state::ConnState;
use agent_client_protocol::v1::schema::RequestId;
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

impl Method for ReadLines {
    const NAME: &'static str = "_writegate/read_lines";
    type Params = Params;
    type Result = LinesAnswer;

    fn enabled(conn: &ConnState) -> bool {
        conn.transport.allowances().reads && conn.service.config().read_text_file
    }

    fn check(p: &Params) -> Result<(), Failure> {
        absolute(&p.path)
    }

    fn uri(p: &Params) -> Option<&Path> {
        Some(&p.path)
    }

    fn handle(call: &Call<'_>, p: Params) -> Result<LinesAnswer, MethodError> {
        let ctx = call.ctx(&p.session_id, "read_lines");
        // The lines are written as JSON while the file is hashed.
        let (mut object, facts) = call.conn.service.read_lines_with(
            &ctx,
            &ReadParams {
                path: p.path,
                line: p.line,
                limit: p.limit,
            },
            |view| {
                let mut out = Vec::with_capacity(view_size_hint(view));
                out.push(b'{');
                view.write_lines_member(&mut out);
                out
            },
        )?;
        facts.write_members(&mut object);
        object.push(b'}');
        Ok(LinesAnswer(object))
    }

    /// The bytes of [`crate::message::ok_line`] with the object copied as
    /// written.
    fn result_line(id: &RequestId, r: &LinesAnswer) -> Vec<u8> {
        let id = serde_json::to_vec(id).unwrap_or_default();
        let mut line = Vec::with_capacity(r.0.len() + id.len() + 40);
        line.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
        line.extend_from_slice(&id);
        line.extend_from_slice(br#","result":"#);
        line.extend_from_slice(&r.0);
        line.extend_from_slice(b"}\n");
        line
    }
}

/// Room for the lines' JSON before the buffer grows: the text plus about
/// 20 bytes of `{"n":…,"text":""}` a line.
fn view_size_hint(view: &writegate_core::LinesView<'_>) -> usize {
    let (lines, bytes) = view
        .lines()
        .fold((0, 0), |(n, b), (_, t)| (n + 1, b + t.len()));
    bytes + bytes / 8 + lines * 24 + 160
}

/// `core::LinesRead` as JSON text (`{lines, totalLines, hash, encoding,
/// bom, lineEnding}`), written by `core::read_answer`.
pub(crate) struct LinesAnswer(Vec<u8>);

impl Serialize for LinesAnswer {
    /// The object it holds (not the way a response is written: see
    /// [`ReadLines::result_line`]).
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v: serde_json::Value =
            serde_json::from_slice(&self.0).map_err(serde::ser::Error::custom)?;
        v.serialize(s)
    }
}
