//! `edit_file`: change part of a text file (replace, insert, delete,
//! append, write), keeping every byte outside the edit.

use super::{Facts, Tool, roots_sentence, size};
use rmcp::model::ToolAnnotations;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::Path;
use writegate_core::{
    EditMode, EditParams, EditReport, Failure, OpCtx, Service, WriteOptions, validate_edit,
};

/// `edit_file`'s `mode` as its schema shows it to a model (this order,
/// these descriptions); the argument itself parses as core's [`EditMode`].
#[derive(JsonSchema)]
#[serde(rename_all = "lowercase")]
#[allow(dead_code)] // a schema only: never built
pub(crate) enum ModeArg {
    /// Replace the one occurrence of `find`, or line `line` (to `endLine`).
    Replace,
    /// Insert `content` before line `line`.
    Insert,
    /// Delete lines `line` to `endLine`.
    Delete,
    /// Add `content` at the end of the file (created if missing).
    Append,
    /// Replace the whole file with `content` (as `write_file`).
    Write,
}

/// `edit_file` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct EditArgs {
    /// The file to edit: an absolute path, or a path relative to the first workspace root.
    pub(crate) path: String,
    /// What to do: "replace" (the default), "insert", "delete", "append" or "write".
    #[schemars(with = "Option<ModeArg>")]
    pub(crate) mode: Option<EditMode>,
    /// For replace: the exact text to replace, copied from the file (whitespace and indentation included). It must occur exactly once in the file. With `line`, it must be on that line (a check).
    pub(crate) find: Option<String>,
    /// 1-based line number from `read_file`: the line to replace, the line to insert before (totalLines + 1 inserts at the end), or the first line to delete.
    #[schemars(range(min = 1))]
    pub(crate) line: Option<u64>,
    /// Last line of the range to replace or delete (inclusive; default: `line`).
    #[schemars(range(min = 1))]
    pub(crate) end_line: Option<u64>,
    /// The new text: the replacement for `find`, the complete new text of the line(s) for a line replace, the lines to insert, or the text to append. Not needed for delete.
    pub(crate) content: Option<String>,
    /// The `hash` `read_file` (or the last edit) returned, "sha256:" and 64 hex digits, copied whole: the edit is refused if the file changed since.
    pub(crate) expected_hash: Option<String>,
    /// true: return the diff the edit would make and write nothing.
    pub(crate) dry_run: Option<bool>,
}

/// `edit_file` result: core's [`EditReport`] as it serialises itself (the
/// same members as ACP's `_writegate/edit_text_file` result), and the
/// edit's `opId`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct EditOut {
    /// The edit's opId (its audit event's): what `undo` takes. Absent for
    /// a dry run.
    #[serde(rename = "opId", skip_serializing_if = "Option::is_none")]
    pub(crate) op_id: Option<String>,
    /// What the edit did.
    #[serde(flatten)]
    pub(crate) report: EditReport,
}

/// `edit_file`: change part of a text file.
pub(crate) struct EditFile;

impl Tool for EditFile {
    const NAME: &'static str = "edit_file";
    const ROUTE: &'static str = "mcp edit_file";
    type Args = EditArgs;
    type Out = EditOut;

    fn describe(f: &Facts<'_>) -> rmcp::model::Tool {
        let roots = roots_sentence(f.roots);
        let text = format!(
            "Change part of a text file; every byte outside the edit stays as it was, and so do the \
             file's encoding and line endings.\n\
             Modes (`mode`, default \"replace\"):\n\
             - replace with `find`: replaces the one occurrence of `find` with `content`. `find` must \
             match the file's text exactly (whitespace and indentation included) and exactly once.\n\
             - replace with `line` (and `endLine`): `content` is the complete new text of that line \
             or range. Add `find` to check that the line still holds that text.\n\
             - insert: inserts `content` before `line` (totalLines + 1 adds at the end).\n\
             - delete: deletes lines `line` to `endLine`.\n\
             - append: adds `content` at the end (creates the file if missing).\n\
             - write: replaces the whole file, like write_file.\n\
             Line numbers are 1-based and come from read_file; after an edit that adds or removes \
             lines, read again before using more line numbers. Pass `expectedHash` (the `hash` from \
             read_file or the last edit) to refuse the edit if the file changed since. \
             `dryRun: true` returns the unified diff and writes nothing. Files over {} cannot be \
             edited.\n\
             After an error nothing was written. text_not_found: read the file and copy the text \
             exactly. ambiguous_text_match: the error lists the lines where `find` occurs; add \
             neighbouring text to `find` or edit by `line`. line_out_of_range or line_mismatch: read \
             the file again for current line numbers. line_ending_conflict: include the line it \
             names in the edit. hash_mismatch: the file changed; read it \
             again and redo the edit on its current text. approval_required: the user must allow \
             this path; do not retry until they have. {roots}",
            size(f.max_edit_bytes)
        );
        rmcp::model::Tool::new(Self::NAME, text, serde_json::Map::new())
            .with_title("Edit file (writegate)")
            .with_annotations(
                ToolAnnotations::with_title("Edit file (writegate)")
                    .read_only(false)
                    .destructive(true)
                    .idempotent(false)
                    .open_world(false),
            )
    }

    fn path(args: &EditArgs) -> Option<&str> {
        Some(&args.path)
    }

    fn content_len(args: &EditArgs) -> usize {
        args.content.as_ref().map_or(0, String::len)
    }

    /// Bad combinations are refused before any IO, unaudited.
    fn check(args: &EditArgs) -> Result<(), String> {
        match validate_edit(
            args.mode.unwrap_or(EditMode::Replace),
            args.content.as_deref(),
            args.find.as_deref(),
            args.line,
            args.end_line,
        ) {
            Err(Failure::InvalidParams(why)) => Err(why.trim_end_matches('.').to_string()),
            _ => Ok(()),
        }
    }

    fn run(
        service: &Service,
        ctx: &OpCtx,
        path: &Path,
        args: EditArgs,
    ) -> Result<EditOut, Failure> {
        let params = EditParams {
            path: path.to_path_buf(),
            mode: args.mode.unwrap_or(EditMode::Replace),
            content: args.content,
            find: args.find,
            line: args.line,
            end_line: args.end_line,
            expected_hash: args.expected_hash,
            dry_run: args.dry_run.unwrap_or(false),
            options: WriteOptions::default(),
            marker: None,
            convert_encoding: false,
        };
        service.edit_text_file(ctx, &params).map(|r| EditOut {
            op_id: r.op_id.clone(),
            report: r,
        })
    }

    /// The core's sentence, the diff of a dry run, the new hash and the
    /// opId.
    fn text(out: &EditOut) -> String {
        let r = &out.report;
        let mut text = r.message.clone();
        if let Some(d) = &r.diff {
            text.push_str("\n\n");
            text.push_str(d);
            if !d.ends_with('\n') {
                text.push('\n');
            }
            text.push_str("(dry run: nothing was written)");
        }
        let _ = write!(
            text,
            "\nhash {}{}",
            r.hash,
            if r.dry_run {
                " (the file's hash if this edit were made)"
            } else {
                ""
            }
        );
        if let Some(id) = &out.op_id {
            let _ = write!(text, "; opId {id}");
        }
        text
    }
}
