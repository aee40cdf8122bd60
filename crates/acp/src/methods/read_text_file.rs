//! `fs/read_text_file {sessionId, path, line?, limit?}` (ACP, SPEC 3): whole
//! lines with their own endings, decoded, and in `_meta` the file's format
//! and hash (`{encoding, bom, lineEnding, hash}`, SPEC 9) so that a client
//! that echoes them back on its write keeps the file as it is. Served only when the config's
//! `read_text_file` is on and the transport allows reads (`-32601`
//! otherwise).

use super::{Call, Method, MethodError, absolute};
use crate::state::ConnState;
use crate::wire::FormatMeta;
use agent_client_protocol::v1::schema::ReadTextFileRequest;
use serde::Serialize;
use std::path::Path;
use writegate_core::{Failure, ReadParams};

/// The method.
pub(crate) struct ReadTextFile;

/// `{content, _meta: {encoding, bom, lineEnding, hash}}`.
#[derive(Serialize)]
pub(crate) struct TextResult {
    /// The lines read.
    pub content: String,
    /// The file's format as read and the `sha256:` hash of its bytes.
    #[serde(rename = "_meta")]
    pub meta: FormatMeta,
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
        let read = call.conn.service.read_text_file(
            &ctx,
            &ReadParams {
                path: p.path,
                line: p.line.map(u64::from),
                limit: p.limit.map(u64::from),
            },
        )?;
        Ok(TextResult {
            content: read.content,
            meta: FormatMeta::new(read.format, read.hash),
        })
    }
}
