//! `fs/write_text_file {sessionId, path, content, _meta?}` (ACP, SPEC 3, 7):
//! replaces the whole file, creating it if missing. Result `{}`.

use super::{Call, Method, MethodError, absolute};
use crate::wire::{convert_encoding, parse_marker, write_options};
use agent_client_protocol::v1::schema::WriteTextFileRequest;
use serde::Serialize;
use std::path::Path;
use writegate_core::{Failure, WriteParams};

/// The method.
pub(crate) struct WriteTextFile;

/// ACP's empty result object, `{}` (never `null`).
#[derive(Serialize)]
pub(crate) struct Empty {}

impl Method for WriteTextFile {
    const NAME: &'static str = "fs/write_text_file";
    type Params = WriteTextFileRequest;
    type Result = Empty;

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
