//! The three tools as a model sees them: names, descriptions, argument
//! structs (their JSON schemas are the tools' `inputSchema`) and result
//! structs (`outputSchema`, sent as `structuredContent`).

use rmcp::model::{Tool, ToolAnnotations};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use writegate_core::{EditMode, EditReport, WriteOutcome};

/// `read_file`.
pub(crate) const READ_FILE: &str = "read_file";
/// `write_file`.
pub(crate) const WRITE_FILE: &str = "write_file";
/// `edit_file`.
pub(crate) const EDIT_FILE: &str = "edit_file";

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

/// `write_file` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteArgs {
    /// The file to create or replace: an absolute path, or a path relative to the first workspace root.
    pub(crate) path: String,
    /// The complete new content of the file. Write line breaks as "\n": an existing file gets its own line endings back.
    pub(crate) content: String,
}

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

/// One numbered line of `read_file`.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct LineOut {
    /// 1-based line number.
    pub(crate) n: u64,
    /// The line's text, without its line ending.
    pub(crate) text: String,
}

/// `read_file` result.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ReadOut {
    /// The path read, as given (made absolute).
    pub(crate) path: String,
    /// The lines asked for.
    pub(crate) lines: Vec<LineOut>,
    /// Lines in the whole file.
    pub(crate) total_lines: usize,
    /// "sha256:<hex>" of the file's bytes (`edit_file`'s `expectedHash`).
    pub(crate) hash: String,
    /// The file's encoding ("utf-8", "utf-16le", "windows-1252", ...).
    pub(crate) encoding: &'static str,
    /// Whether the file starts with a byte order mark.
    pub(crate) bom: bool,
    /// The file's dominant line ending: "lf", "crlf" or "cr".
    pub(crate) line_ending: &'static str,
}

/// `write_file` result: the path and core's [`WriteOutcome`] as it
/// serialises itself.
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct WriteOut {
    /// The path written, as given (made absolute).
    pub(crate) path: String,
    /// What the write did.
    #[serde(flatten)]
    pub(crate) outcome: WriteOutcome,
}

/// `edit_file` result: core's [`EditReport`] as it serialises itself (the
/// same members as ACP's `_writegate/edit_text_file` result).
#[derive(Debug, Serialize, JsonSchema)]
pub(crate) struct EditOut {
    /// What the edit did.
    #[serde(flatten)]
    pub(crate) report: EditReport,
}

/// Limits and roots the descriptions mention.
pub(crate) struct Facts<'a> {
    /// `max_edit_bytes`.
    pub(crate) max_edit_bytes: u64,
    /// `max_write_bytes`.
    pub(crate) max_write_bytes: u64,
    /// The workspace roots, first the one relative paths start from.
    pub(crate) roots: &'a [String],
}

fn size(bytes: u64) -> String {
    if bytes.is_multiple_of(1024 * 1024) {
        format!("{} MiB", bytes / (1024 * 1024))
    } else if bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} bytes")
    }
}

fn roots_sentence(roots: &[String]) -> String {
    match roots {
        [] => "No workspace is registered yet.".to_string(),
        [one] => format!("The workspace is {one}; relative paths start there."),
        [first, ..] => format!(
            "The workspaces are {}; relative paths start at {first}.",
            roots.join(", ")
        ),
    }
}

/// The tools, as `tools/list` answers.
pub(crate) fn list(f: &Facts<'_>) -> Vec<Tool> {
    let roots = roots_sentence(f.roots);
    let read = format!(
        "Read a text file as numbered lines (\"<n>\\t<text>\"), with its hash, encoding, BOM, \
         line ending and total line count. The line numbers are the ones edit_file's `line` and \
         `endLine` take, and `hash` is what its `expectedHash` takes. For a large file, read a \
         part with `line` and `limit`. Files over {} and binary files are refused. {roots}",
        size(f.max_edit_bytes)
    );
    let write = format!(
        "Create a file, or replace a file's whole content. An existing file keeps its encoding, \
         BOM and line endings (write line breaks as \"\\n\"); a new file is UTF-8. The write is \
         atomic and durable: the file is the old or the new content, never a mix, even after a \
         crash. Missing parent directories inside the workspace are created. At most {} of \
         content. To change part of a file, use edit_file: it sends less and cannot drop the \
         rest of the file. Paths outside the workspace are refused. {roots}",
        size(f.max_write_bytes)
    );
    let edit = format!(
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
    let tools = vec![
        Tool::new(READ_FILE, read, serde_json::Map::new())
            .with_title("Read file (writegate)")
            .with_input_schema::<ReadArgs>()
            .with_output_schema::<ReadOut>()
            .with_annotations(
                ToolAnnotations::with_title("Read file (writegate)")
                    .read_only(true)
                    .open_world(false),
            ),
        Tool::new(WRITE_FILE, write, serde_json::Map::new())
            .with_title("Write file (writegate)")
            .with_input_schema::<WriteArgs>()
            .with_output_schema::<WriteOut>()
            .with_annotations(
                ToolAnnotations::with_title("Write file (writegate)")
                    .read_only(false)
                    .destructive(true)
                    .idempotent(true)
                    .open_world(false),
            ),
        Tool::new(EDIT_FILE, edit, serde_json::Map::new())
            .with_title("Edit file (writegate)")
            .with_input_schema::<EditArgs>()
            .with_output_schema::<EditOut>()
            .with_annotations(
                ToolAnnotations::with_title("Edit file (writegate)")
                    .read_only(false)
                    .destructive(true)
                    .idempotent(false)
                    .open_world(false),
            ),
    ];
    tools.into_iter().map(portable).collect()
}

/// `tool` with its schemas readable by every client's validator: the
/// `format` of an integer (`uint`, `uint64`: schemars names the Rust type)
/// is dropped. JSON Schema defines no such format, and Ajv, the validator
/// of the TypeScript SDK that Node.js clients use, prints a warning for
/// each one it meets ("unknown format \"uint64\" ignored"). The bounds stay:
/// schemars gives unsigned integers `minimum: 0`.
fn portable(mut tool: Tool) -> Tool {
    fn strip(o: &mut serde_json::Map<String, serde_json::Value>) {
        if is_integer(o) {
            o.remove("format");
        }
        for v in o.values_mut() {
            strip_value(v);
        }
    }
    fn strip_value(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(o) => strip(o),
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip_value),
            _ => {}
        }
    }
    let mut input = (*tool.input_schema).clone();
    strip(&mut input);
    tool.input_schema = std::sync::Arc::new(input);
    tool.output_schema = tool.output_schema.as_deref().map(|o| {
        let mut o = o.clone();
        strip(&mut o);
        std::sync::Arc::new(o)
    });
    tool
}

/// Whether a schema object describes an integer (`"type": "integer"`, or a
/// list of types holding it, as schemars writes an `Option<u64>`).
fn is_integer(o: &serde_json::Map<String, serde_json::Value>) -> bool {
    match o.get("type") {
        Some(serde_json::Value::String(t)) => t == "integer",
        Some(serde_json::Value::Array(ts)) => ts.iter().any(|t| t == "integer"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn facts() -> Facts<'static> {
        Facts {
            max_edit_bytes: 5 * 1024 * 1024,
            max_write_bytes: 5 * 1024 * 1024,
            roots: &[],
        }
    }

    /// No integer in any schema has a `format` (clients' validators know
    /// none of schemars' `uint*` names), and unsigned ones keep their
    /// minimum.
    #[test]
    fn integer_schemas_carry_no_format() {
        fn walk(v: &Value, path: &str, mins: &mut usize) {
            match v {
                Value::Object(o) => {
                    if is_integer(o) {
                        assert!(o.get("format").is_none(), "{path}: {v}");
                        *mins += usize::from(o.contains_key("minimum"));
                    }
                    for (k, x) in o {
                        walk(x, &format!("{path}/{k}"), mins);
                    }
                }
                Value::Array(a) => a.iter().for_each(|x| walk(x, path, mins)),
                _ => {}
            }
        }
        let mut mins = 0;
        for t in list(&facts()) {
            walk(
                &Value::Object(t.input_schema.as_ref().clone()),
                &t.name,
                &mut mins,
            );
            let out = t.output_schema.expect("an output schema");
            walk(&Value::Object(out.as_ref().clone()), &t.name, &mut mins);
        }
        assert!(mins >= 4, "unsigned integers keep their minimum ({mins})");
    }

    /// Every property an input schema names is an argument the struct accepts, and the required ones are exactly the non-optional fields.
    #[test]
    fn input_schemas_match_the_argument_structs() {
        let tools = list(&facts());
        let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
        assert_eq!(names, [READ_FILE, WRITE_FILE, EDIT_FILE]);
        let schema = |name: &str| {
            let t = tools.iter().find(|t| t.name == name).unwrap();
            Value::Object(t.input_schema.as_ref().clone())
        };
        let props = |s: &Value| -> Vec<String> {
            let mut v: Vec<_> = s["properties"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect();
            v.sort();
            v
        };
        let read = schema(READ_FILE);
        assert_eq!(props(&read), ["limit", "line", "path"]);
        assert_eq!(read["required"], json!(["path"]));
        let write = schema(WRITE_FILE);
        assert_eq!(props(&write), ["content", "path"]);
        let edit = schema(EDIT_FILE);
        assert_eq!(
            props(&edit),
            [
                "content",
                "dryRun",
                "endLine",
                "expectedHash",
                "find",
                "line",
                "mode",
                "path"
            ]
        );
        assert_eq!(edit["required"], json!(["path"]));
        // Every property deserialises (no name drift between schema and struct).
        let full = json!({"path": "/a", "mode": "replace", "find": "x", "line": 1, "endLine": 2,
            "content": "y", "expectedHash": "sha256:00", "dryRun": true});
        serde_json::from_value::<EditArgs>(full).unwrap();
        serde_json::from_value::<ReadArgs>(json!({"path": "/a", "line": 1, "limit": 2})).unwrap();
        serde_json::from_value::<WriteArgs>(json!({"path": "/a", "content": ""})).unwrap();
        assert!(serde_json::from_value::<EditArgs>(json!({"path": "/a", "edits": []})).is_err());
    }

    #[test]
    fn every_tool_has_an_output_schema_and_descriptions_name_the_limits() {
        let roots = ["/w".to_string()];
        let tools = list(&Facts {
            roots: &roots,
            ..facts()
        });
        for t in &tools {
            assert!(t.output_schema.is_some(), "{}", t.name);
            let d = t.description.as_deref().unwrap();
            assert!(d.contains("5 MiB"), "{d}");
            assert!(d.contains("The workspace is /w"), "{d}");
        }
    }
}
