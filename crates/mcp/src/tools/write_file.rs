//! `write_file`: create a file, or replace a file's whole content.

use super::{Facts, Tool, roots_sentence, size};
use rmcp::model::ToolAnnotations;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::Path;
use writegate_core::{Failure, OpCtx, Service, WriteOptions, WriteOutcome, WriteParams};

/// `write_file` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteArgs {
    /// The file to create or replace: an absolute path, or a path relative to the first workspace root.
    pub(crate) path: String,
    /// The complete new content of the file. Write line breaks as "\n": an existing file gets its own line endings back.
    pub(crate) content: String,
}

/// `write_file` result: the path and core's [`WriteOutcome`] as it
/// serialises itself.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct WriteOut {
    /// The path written, as given (made absolute).
    pub(crate) path: String,
    /// The write's opId (its audit event's): what `undo` takes.
    #[serde(rename = "opId", skip_serializing_if = "Option::is_none")]
    pub(crate) op_id: Option<String>,
    /// What the write did.
    #[serde(flatten)]
    pub(crate) outcome: WriteOutcome,
}

/// `write_file`: create a file or replace its whole content.
pub(crate) struct WriteFile;

impl Tool for WriteFile {
    const NAME: &'static str = "write_file";
    const ROUTE: &'static str = "mcp write_file";
    type Args = WriteArgs;
    type Out = WriteOut;

    fn describe(f: &Facts<'_>) -> rmcp::model::Tool {
        let roots = roots_sentence(f.roots);
        let text = format!(
            "Create a file, or replace a file's whole content. An existing file keeps its encoding, \
         BOM and line endings (write line breaks as \"\\n\"); a new file is UTF-8. The write is \
         atomic and durable: the file is the old or the new content, never a mix, even after a \
         crash. Missing parent directories inside the workspace are created. At most {} of \
         content. To change part of a file, use edit_file: it sends less and cannot drop the \
         rest of the file. Paths outside the workspace are refused. {roots}",
            size(f.max_write_bytes)
        );
        rmcp::model::Tool::new(Self::NAME, text, serde_json::Map::new())
            .with_title("Write file (writegate)")
            .with_annotations(
                ToolAnnotations::with_title("Write file (writegate)")
                    .read_only(false)
                    .destructive(true)
                    .idempotent(true)
                    .open_world(false),
            )
    }

    fn path(args: &WriteArgs) -> Option<&str> {
        Some(&args.path)
    }

    fn content_len(args: &WriteArgs) -> usize {
        args.content.len()
    }

    fn run(
        service: &Service,
        ctx: &OpCtx,
        path: &Path,
        args: WriteArgs,
    ) -> Result<WriteOut, Failure> {
        let params = WriteParams {
            path: path.to_path_buf(),
            content: args.content,
            options: WriteOptions::default(),
            marker: None,
            convert_encoding: false,
        };
        service.write_text_file(ctx, &params).map(|w| WriteOut {
            path: path.display().to_string(),
            op_id: w.op_id.clone(),
            outcome: w,
        })
    }

    /// How many bytes went where, created or replaced, the new hash and
    /// the opId.
    fn text(out: &WriteOut) -> String {
        let w = &out.outcome;
        let what = if w.created {
            "created".to_string()
        } else {
            format!("replaced (was {} bytes)", w.bytes_before)
        };
        let mut text = format!(
            "Wrote {} bytes to {}: {what}. hash {}",
            w.bytes_after, out.path, w.hash
        );
        if let Some(id) = &out.op_id {
            let _ = write!(text, "; opId {id}");
        }
        text
    }
}
