//! `read_file`: a text file as numbered lines, with its hash and format.

use super::{Facts, Tool, roots_sentence, size};
use crate::out::Answer;
use crate::reply;
use rmcp::model::ToolAnnotations;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::path::Path;
use writegate_core::{Failure, LinesRead, OpCtx, ReadParams, Service};

/// `read_file` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReadArgs {
    /// The file to read: an absolute path, or a path relative to the first workspace root.
    pub(crate) path: String,
    /// First line to return, 1-based (default 1).
    #[schemars(range(min = 1))]
    pub(crate) line: Option<u64>,
    /// Return at most this many lines (default: to the end of the file).
    pub(crate) limit: Option<u64>,
}

/// `read_file` result: the path and core's [`LinesRead`] as it serialises
/// itself (the same members as ACP's `_writegate/read_lines` result). Its
/// schema is the tool's `outputSchema`; the result itself is written as
/// JSON text by [`reply::read`] (a test checks the two agree), and only
/// the connection's `out::Out` sends it.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct ReadOut {
    /// The path read, as given (made absolute).
    pub(crate) path: String,
    /// The lines and the file's facts.
    #[serde(flatten)]
    pub(crate) read: LinesRead,
}

/// `read_file`: a text file as numbered lines.
pub(crate) struct ReadFile;

impl Tool for ReadFile {
    const NAME: &'static str = "read_file";
    const ROUTE: &'static str = "mcp read_file";
    type Args = ReadArgs;
    type Out = ReadOut;

    fn describe(f: &Facts<'_>) -> rmcp::model::Tool {
        let roots = roots_sentence(f.roots);
        let text = format!(
            "Read a text file as numbered lines (\"<n>\\t<text>\"), with its hash, encoding, BOM, \
         line ending and total line count. The line numbers are the ones edit_file's `line` and \
         `endLine` take, and `hash` is what its `expectedHash` takes. For a large file, read a \
         part with `line` and `limit`; a file over {} is read only in parts. Binary files are \
         refused. {roots}",
            size(f.max_edit_bytes)
        );
        rmcp::model::Tool::new(Self::NAME, text, serde_json::Map::new())
            .with_title("Read file (writegate)")
            .with_annotations(
                ToolAnnotations::with_title("Read file (writegate)")
                    .read_only(true)
                    .open_world(false),
            )
    }

    fn path(args: &ReadArgs) -> Option<&str> {
        Some(&args.path)
    }

    fn run(service: &Service, ctx: &OpCtx, path: &Path, args: ReadArgs) -> Result<Answer, Failure> {
        // What the connection's transport allows (`transport::Transport`).
        if !ctx.allows.reads {
            return Err(Failure::InvalidParams(
                "reads are not served on this transport".to_string(),
            ));
        }
        let params = ReadParams {
            path: path.to_path_buf(),
            line: args.line,
            limit: args.limit,
        };
        // The lines are written as JSON while the file is hashed.
        service
            .read_lines_with(ctx, &params, reply::lines_json)
            .map(|(lines, facts)| Answer::Prebuilt(reply::read(path, lines, &facts)))
    }
}
