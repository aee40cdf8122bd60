//! `_writegate/read_lines {sessionId, path, line?, limit?}` (SPEC 3):
//! numbered lines for a model to read before a line edit, with the file's
//! hash and format. Served only when reads are on (the config's
//! `read_text_file`, `--allow-read`) and the transport allows them, like
//! `fs/read_text_file` (reads off means every read is off).

use super::{Call, Method, MethodError, absolute};
use crate::state::ConnState;
use agent_client_protocol::v1::schema::RequestId;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use writegate_core::{Failure, LinesView, ReadFacts, ReadParams};

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
        let (object, facts) = call.conn.service.read_lines_with(
            &ctx,
            &ReadParams {
                path: p.path,
                line: p.line,
                limit: p.limit,
            },
            object_head,
        )?;
        Ok(finish(object, &facts))
    }

    /// The bytes of [`crate::message::ok_line`] with the object copied as
    /// written.
    fn result_line(id: &RequestId, r: LinesAnswer) -> Vec<u8> {
        crate::message::ok_line_in(id, b"", r.0, &[])
    }
}

/// `{"lines":[...]`: the answer's object up to its facts.
fn object_head(view: &LinesView<'_>) -> Vec<u8> {
    let mut out =
        Vec::with_capacity(view.extent().lines_member_room() + 160 + crate::message::LINE_ROOM);
    out.push(b'{');
    view.write_lines_member(&mut out);
    out
}

/// The answer: `head` and the facts that end it.
fn finish(mut head: Vec<u8>, facts: &ReadFacts) -> LinesAnswer {
    facts.write_members(&mut head);
    head.push(b'}');
    LinesAnswer(head)
}

/// `core::LinesRead` as JSON text (`{lines, totalLines, hash, encoding,
/// bom, lineEnding}`), written by `core::read_answer`.
pub(crate) struct LinesAnswer(Vec<u8>);

impl Serialize for LinesAnswer {
    /// The object it holds, members in their order (`serde_json` keeps the
    /// order of a `Value`'s members here; a test holds this to the typed
    /// answer's bytes). Not the way a response is written: see
    /// [`ReadLines::result_line`].
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let v: serde_json::Value =
            serde_json::from_slice(&self.0).map_err(serde::ser::Error::custom)?;
        v.serialize(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ok_line;
    use writegate_core::sha256_tagged;

    /// The line written from the prebuilt object is serde's line for the
    /// typed answer (`core::LinesRead`), byte for byte, and so is the
    /// answer's own `Serialize`.
    #[test]
    fn result_line_is_serdes_line_of_the_typed_answer() {
        let files: [&[u8]; 4] = [
            b"",
            b"a \"q\"\tb\r\nc\\d\r\n\x01",
            b"\xFF\xFEa\x00\r\x00\n\x00b\x00",
            b"x\ny\nz\n",
        ];
        for bytes in files {
            for (line, limit) in [(None, None), (Some(2), Some(1))] {
                let view = LinesView::of(bytes, line, limit).unwrap();
                let facts = ReadFacts {
                    total_lines: view.total_lines(),
                    hash: sha256_tagged(bytes),
                    format: view.format(),
                };
                let typed = facts.clone().with_lines(view.numbered());
                for id in [RequestId::Number(3), RequestId::Str("a \"b\"".into())] {
                    let want = ok_line(&id, &typed);
                    let answer = finish(object_head(&view), &facts);
                    assert_eq!(ok_line(&id, &answer), want);
                    assert_eq!(
                        String::from_utf8(ReadLines::result_line(&id, answer)).unwrap(),
                        String::from_utf8(want.clone()).unwrap()
                    );
                }
            }
        }
    }
}
