//! `fs/read_text_file {sessionId, path, line?, limit?}` (ACP, SPEC 3): whole
//! lines with their own endings, decoded, and in `_meta` the file's format
//! and hash (`{encoding, bom, lineEnding, hash}`, SPEC 9) so that a client
//! that echoes them back on its write keeps the file as it is. Served only when the config's
//! `read_text_file` is on and the transport allows reads (`-32601`
//! otherwise).

use super::{Call, Method, MethodError, absolute};
use crate::state::ConnState;
use crate::wire::FormatMeta;
use agent_client_protocol::v1::schema::{ReadTextFileRequest, RequestId};
use serde::Serialize;
use std::path::Path;
use writegate_core::{Failure, ReadParams};

/// The method.
pub(crate) struct ReadTextFile;

/// `{content, _meta: {encoding, bom, lineEnding, hash}}`.
#[derive(Serialize)]
pub(crate) struct TextResult {
    /// The lines read, as JSON text.
    pub content: JsonString,
    /// The file's format as read and the `sha256:` hash of its bytes.
    #[serde(rename = "_meta")]
    pub meta: FormatMeta,
}

/// A string already written as JSON (quotes included) by
/// [`writegate_jsonscan::push_string`]: the text of a read is escaped while
/// its file is hashed, and copied into the response line as it is
/// ([`ReadTextFile::result_line`]).
pub(crate) struct JsonString(Vec<u8>);

impl JsonString {
    /// `text` as a JSON string.
    pub(crate) fn of(text: &str) -> JsonString {
        // Room for an escape every 8 bytes before the buffer grows, and
        // for the response line around it (`ok_line_in`).
        let mut out =
            Vec::with_capacity(text.len() + text.len() / 8 + 2 + crate::message::LINE_ROOM + 256);
        writegate_jsonscan::push_string(&mut out, text);
        JsonString(out)
    }
}

impl Serialize for JsonString {
    /// The string it holds (not the way a response is written: see
    /// [`ReadTextFile::result_line`]).
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let text: String = serde_json::from_slice(&self.0).map_err(serde::ser::Error::custom)?;
        s.serialize_str(&text)
    }
}

impl Method for ReadTextFile {
    const NAME: &'static str = "fs/read_text_file";
    type Params = ReadTextFileRequest;
    type Result = TextResult;

    fn enabled(conn: &ConnState) -> bool {
        conn.transport.allowances().reads && conn.service.config().read_text_file
    }

    fn check(p: &Self::Params) -> Result<(), Failure> {
        absolute(&p.path)
    }

    fn uri(p: &Self::Params) -> Option<&Path> {
        Some(&p.path)
    }

    fn handle(call: &Call<'_>, p: Self::Params) -> Result<TextResult, MethodError> {
        let ctx = call.ctx(&p.session_id.0, "ACP readTextFile");
        // The text is escaped while the file is hashed.
        let (content, hash, format) = call.conn.service.read_text_file_with(
            &ctx,
            &ReadParams {
                path: p.path,
                line: p.line.map(u64::from),
                limit: p.limit.map(u64::from),
            },
            JsonString::of,
        )?;
        Ok(TextResult {
            content,
            meta: FormatMeta::new(format, hash),
        })
    }

    /// The bytes of [`crate::message::ok_line`], built around the content
    /// as escaped (serde would escape it again, byte by byte) in its own
    /// buffer.
    fn result_line(id: &RequestId, r: TextResult) -> Vec<u8> {
        let meta = serde_json::to_vec(&r.meta).unwrap_or_default();
        crate::message::ok_line_in(
            id,
            br#"{"content":"#,
            r.content.0,
            &[br#","_meta":"#, &meta, b"}"],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use writegate_core::FileFormat;

    /// Serde's line for the same answer, the content a plain string.
    fn serde_line(id: &RequestId, content: &str, meta: &FormatMeta) -> Vec<u8> {
        #[derive(Serialize)]
        struct Plain<'a> {
            content: &'a str,
            #[serde(rename = "_meta")]
            meta: &'a FormatMeta,
        }
        crate::message::ok_line(id, &Plain { content, meta })
    }

    #[test]
    fn result_line_is_serdes_line() {
        let format = FileFormat {
            encoding: "utf-8",
            bom: false,
            line_ending: writegate_core::LineEnding::Crlf,
        };
        let meta = FormatMeta::new(format, format!("sha256:{}", "ab".repeat(32)));
        let long = "a \"quoted\"\tline\u{1}é😀\r\n".repeat(500);
        for id in [
            RequestId::Number(7),
            RequestId::Str("a \"b\"\n".into()),
            RequestId::Null,
        ] {
            for content in ["", "x\n", long.as_str()] {
                let r = TextResult {
                    content: JsonString::of(content),
                    meta: meta.clone(),
                };
                // Its own Serialize gives the same answer too.
                let serialized = crate::message::ok_line(&id, &r);
                let line = ReadTextFile::result_line(&id, r);
                assert_eq!(line, serde_line(&id, content, &meta));
                assert_eq!(serialized, line);
            }
        }
    }
}
