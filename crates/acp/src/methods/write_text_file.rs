//! `fs/write_text_file {sessionId, path, content, _meta?}` (ACP, SPEC 3, 7):
//! replaces the whole file, creating it if missing. Result `{}`.

use super::{Call, Method, MethodError, absolute};
use crate::message::{RawMember, RawParams};
use crate::wire::{convert_encoding, parse_marker, write_options};
use agent_client_protocol::v1::schema::{Meta, SessionId, WriteTextFileRequest};
use serde::Serialize;
use std::path::{Path, PathBuf};
use writegate_core::{Failure, WriteParams};

/// The method.
pub(crate) struct WriteTextFile;

/// `sessionId`, `path`, `_meta` and the span of `content` of the plain
/// params form (see [`WriteTextFile::params_from_raw`]).
type Plain = (SessionId, PathBuf, Option<Meta>, std::ops::Range<usize>);

fn plain_params(raw: &RawParams) -> Option<Plain> {
    let params = raw.object()?;
    let session: SessionId = params.parse("sessionId")?;
    let path: PathBuf = params.parse("path")?;
    // `_meta` that is not an object is no `_meta` (the schema's
    // DefaultOnError).
    let meta = match params.get("_meta") {
        RawMember::Absent => None,
        RawMember::One(m) => serde_json::from_slice::<Meta>(m).ok(),
        RawMember::Repeated => return None,
    };
    let content = params.string_span("content")?;
    Some((session, path, meta, content))
}

/// ACP's empty result object, `{}` (never `null`).
#[derive(Serialize)]
pub(crate) struct Empty {}

impl Method for WriteTextFile {
    const NAME: &'static str = "fs/write_text_file";
    type Params = WriteTextFileRequest;
    type Result = Empty;

    /// The plain form `{sessionId, path, content, _meta?}` (other members
    /// ignored, as serde ignores them): `content` is decoded in one pass
    /// from the line, not through serde's scratch buffer and a copy.
    /// Anything else (positional params, a missing or repeated member, a
    /// wrong type) is serde's.
    fn params_from_raw(raw: RawParams) -> Result<Self::Params, RawParams> {
        let Some((session, path, meta, content)) = plain_params(&raw) else {
            return Err(raw);
        };
        // Checked above: a string the scan accepted decodes.
        let content = raw
            .into_string(content)
            .expect("a string the line scan accepted decodes");
        let mut p = WriteTextFileRequest::new(session, path, content);
        p.meta = meta;
        Ok(p)
    }

    fn check(p: &Self::Params) -> Result<(), Failure> {
        absolute(&p.path)
    }

    fn uri(p: &Self::Params) -> Option<&Path> {
        Some(&p.path)
    }

    fn handle(call: &Call<'_>, p: Self::Params) -> Result<Empty, MethodError> {
        let ctx = call.ctx(&p.session_id.0, "ACP writeTextFile");
        let params = WriteParams {
            options: write_options(p.meta.as_ref()),
            marker: parse_marker(p.meta.as_ref()),
            convert_encoding: convert_encoding(p.meta.as_ref()),
            path: p.path,
            content: p.content,
        };
        call.conn.service.write_text_file(&ctx, &params)?;
        Ok(Empty {})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::{Parsed, parse_line};

    fn raw(params: &str) -> RawParams {
        let line = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"m","params":{params}}}"#);
        match parse_line(bytes::Bytes::from(line)) {
            Parsed::Request(r) => r.params,
            Parsed::Other(i, _) => panic!("{params}: {i:?}"),
            Parsed::Notification(n) => panic!("{params}: a notification {n:?}"),
        }
    }

    /// The hand-read params are exactly serde's, and every unusual form is
    /// left to serde.
    #[test]
    fn params_from_raw_is_serde_or_nothing() {
        let cases = [
            (
                r#"{"sessionId":"s","path":"/a/b","content":"x\n\"y\"\u00e9\ud83d\ude00"}"#,
                true,
            ),
            (
                r#"{"content":"","path":"/a","sessionId":"s","other":[1,{"z":null}]}"#,
                true,
            ),
            (
                r#"{"sessionId":"s","path":"/a","content":"c","_meta":{"bom":true,"encoding":"utf-16le"}}"#,
                true,
            ),
            (
                r#"{"sessionId":"s","path":"/a","content":"c","_meta":null}"#,
                true,
            ),
            (
                r#"{"sessionId":"s","path":"/a","content":"c","_meta":[1]}"#,
                true,
            ),
            (r#"{"sessionId":"s","path":"/a","content":7}"#, false),
            (r#"{"sessionId":"s","path":"/a"}"#, false),
            (
                r#"{"sessionId":"s","path":"/a","content":"a","content":"b"}"#,
                false,
            ),
            (r#"["s","/a","c"]"#, false),
            (r#"{"sessionId":5,"path":"/a","content":"c"}"#, false),
        ];
        for (params, fast) in cases {
            let raw = raw(params);
            let ours = WriteTextFile::params_from_raw(raw).ok();
            assert_eq!(ours.is_some(), fast, "{params}");
            let theirs = serde_json::from_str::<WriteTextFileRequest>(params);
            if let Some(ours) = ours {
                assert_eq!(ours, theirs.unwrap(), "{params}");
            }
        }
    }
}
