//! Tool results: core outcomes as the text a model reads plus
//! `structuredContent`, and every failure as a result with `isError: true`
//! and one or two sentences the model can act on. The only place a core
//! [`Failure`] becomes MCP.

use crate::out::Prebuilt;
use crate::tools::{EditOut, WriteOut};
use rmcp::model::{CallToolResult, ContentBlock, MetaObject};
use serde_json::{Map, Value, json};
use std::fmt::Write as _;
use std::path::Path;
use writegate_core::history::{UndoAction, UndoOutcome};
use writegate_core::{
    Detail, EditReport, ErrorKind, Failure, LinesView, ReadFacts, RefusalFacts, WriteOutcome,
};

/// `_meta` key of an error result's facts: `{errorKind, status, ...}`.
pub(crate) const ERROR_META_KEY: &str = "writegate/error";

/// What the failure text may mention besides the refusal itself.
pub(crate) struct Situation<'a> {
    /// Every workspace root the connection routes to, the primary first.
    pub(crate) roots: &'a [String],
    /// The workspace the request ran in came from the client's roots.
    pub(crate) client_root: bool,
    /// The level a config rule must give a held path (`policy.auto_approve`).
    pub(crate) auto_approve: &'static str,
    /// The config file the person would edit, if known.
    pub(crate) config_file: Option<&'a Path>,
    /// The person could be asked (the client offers elicitation).
    pub(crate) asked: bool,
}

/// A successful result with `text` for the model and `structured` content.
fn success(text: String, structured: &impl serde::Serialize) -> CallToolResult {
    let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
    r.structured_content = serde_json::to_value(structured).ok();
    r
}

/// An error result: `text` for the model, `facts` under `_meta`.
pub(crate) fn error(text: String, facts: Map<String, Value>) -> CallToolResult {
    let r = CallToolResult::error(vec![ContentBlock::text(text)]);
    let mut meta = MetaObject::new();
    meta.0
        .insert(ERROR_META_KEY.to_string(), Value::Object(facts));
    r.with_meta(Some(meta))
}

/// Arguments that do not fit the tool (wrong type, unknown name, bad
/// combination): an error result naming what to fix. Not audited (no
/// operation ran).
pub(crate) fn invalid_arguments(tool: &str, why: &str) -> CallToolResult {
    let mut facts = Map::new();
    facts.insert("errorKind".into(), "invalid_arguments".into());
    error(
        format!(
            "invalid_arguments: {tool}: {why}. Nothing was done; fix the arguments (see the tool's input schema) and call it again."
        ),
        facts,
    )
}

/// `read_file`'s lines written as JSON text while the file is hashed
/// ([`lines_json`]); [`read`] finishes the result.
pub(crate) struct ReadLinesJson {
    /// `"content":[{"type":"text","text":"` and the numbered lines, escaped.
    head: Vec<u8>,
    /// `"lines":[...]`.
    lines: Vec<u8>,
    first: Option<u64>,
    last: Option<u64>,
    count: usize,
}

/// The numbered lines of `view` as `read_file` answers them: the text
/// (`<n>\t<text>` lines) and the `lines` of the structured content.
pub(crate) fn lines_json(view: &LinesView<'_>) -> ReadLinesJson {
    let extent = view.extent();
    // The text with an escape every 8 bytes, and `<n>\t`, `\n` a line.
    let mut head = Vec::with_capacity(extent.bytes + extent.bytes / 8 + extent.lines * 10 + 64);
    head.extend_from_slice(br#""content":[{"type":"text","text":""#);
    let (mut first, mut last) = (None, None);
    let mut number = itoa::Buffer::new();
    for (n, text) in view.lines() {
        first.get_or_insert(n);
        last = Some(n);
        head.extend_from_slice(number.format(n).as_bytes());
        head.extend_from_slice(br"\t");
        writegate_jsonscan::push_escaped(&mut head, text);
        head.extend_from_slice(br"\n");
    }
    let mut lines = Vec::with_capacity(extent.lines_member_room());
    view.write_lines_member(&mut lines);
    ReadLinesJson {
        head,
        lines,
        first,
        last,
        count: extent.lines,
    }
}

/// `read_file`'s result: numbered lines, then one line of facts, and the
/// structured content (`path` and core's `LinesRead` members), written as
/// JSON text ([`Prebuilt`]: only the connection's `out::Out` sends it).
pub(crate) fn read(path: &Path, j: ReadLinesJson, facts: &ReadFacts) -> Prebuilt {
    let summary = read_summary(path, j.first, j.last, j.count, facts);
    let mut head = j.head;
    head.reserve(summary.len() + path.as_os_str().len() + 64);
    writegate_jsonscan::push_escaped(&mut head, &summary);
    head.extend_from_slice(br#""}],"structuredContent":{"path":"#);
    writegate_jsonscan::push_string(&mut head, &path.display().to_string());
    head.push(b',');
    let mut tail = Vec::with_capacity(256);
    facts.write_members(&mut tail);
    tail.extend_from_slice(br#"},"isError":false"#);
    Prebuilt(vec![head, j.lines, tail])
}

/// The line of facts after the numbered lines: which lines these are, the
/// format and the hash.
fn read_summary(
    path: &Path,
    first: Option<u64>,
    last: Option<u64>,
    count: usize,
    facts: &ReadFacts,
) -> String {
    let shown = match (first, last) {
        (Some(a), Some(b)) if count < facts.total_lines => {
            let more = if usize::try_from(b).is_ok_and(|b| b < facts.total_lines) {
                format!("; read on with line={}", b + 1)
            } else {
                String::new()
            };
            format!("lines {a}-{b} of {}{more}", facts.total_lines)
        }
        (Some(_), Some(_)) => format!("{} lines", facts.total_lines),
        _ if facts.total_lines == 0 => "empty file".to_string(),
        _ => format!(
            "no lines in that range; the file has {} lines",
            facts.total_lines
        ),
    };
    format!(
        "[{}: {shown}; {}{}, {} line endings; hash {}]",
        path.display(),
        facts.format.encoding,
        if facts.format.bom { " with BOM" } else { "" },
        facts.format.line_ending.as_str().to_uppercase(),
        facts.hash
    )
}

/// `write_file`'s result.
pub(crate) fn wrote(path: &Path, w: WriteOutcome) -> CallToolResult {
    let what = if w.created {
        "created".to_string()
    } else {
        format!("replaced (was {} bytes)", w.bytes_before)
    };
    let mut text = format!(
        "Wrote {} bytes to {}: {what}. hash {}",
        w.bytes_after,
        path.display(),
        w.hash
    );
    if let Some(id) = &w.op_id {
        let _ = write!(text, "; opId {id}");
    }
    let out = WriteOut {
        path: path.display().to_string(),
        op_id: w.op_id.clone(),
        outcome: w,
    };
    success(text, &out)
}

/// `edit_file`'s result: the core's sentence, the diff of a dry run, the
/// new hash.
pub(crate) fn edited(r: EditReport) -> CallToolResult {
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
    if let Some(id) = &r.op_id {
        let _ = write!(text, "; opId {id}");
    }
    let out = EditOut {
        op_id: r.op_id.clone(),
        report: r,
    };
    success(text, &out)
}

/// `undo`'s result: what was put back, and the undo's own `opId`.
pub(crate) fn undone(o: &UndoOutcome) -> CallToolResult {
    let verb = if o.dry_run { "would be" } else { "was" };
    let mut text = match o.action {
        UndoAction::Removed => format!(
            "{} {verb} removed (operation {} had created it)",
            o.path, o.undone
        ),
        UndoAction::Restored => format!(
            "{} {verb} restored to what it was before operation {} ({} bytes, hash {})",
            o.path,
            o.undone,
            o.bytes,
            o.hash.as_deref().unwrap_or("-")
        ),
    };
    if !o.removed_dirs.is_empty() {
        let _ = write!(
            text,
            ", with the empty directories {}",
            o.removed_dirs.join(", ")
        );
    }
    for d in &o.skipped_dirs {
        let _ = write!(text, "; directory {} left: {}", d.path, d.reason);
    }
    if o.dry_run {
        text.push_str(". Dry run: nothing was written.");
    } else {
        let _ = write!(text, ". opId {} (undo it to redo)", o.op_id);
    }
    success(text, o)
}

/// A TOML string holding `s` (literal when it can be).
fn toml_string(s: &str) -> String {
    if !s.contains(['\'', '\n', '\r']) {
        return format!("'{s}'");
    }
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A core failure as an error result. The text is `<errorKind>: <what
/// happened and what to do>`; `_meta["writegate/error"]` holds the kind,
/// the status and the refusal's structured facts.
pub(crate) fn failure(f: &Failure, s: &Situation<'_>) -> CallToolResult {
    let mut facts = Map::new();
    let text = match f {
        Failure::InvalidParams(why) => {
            facts.insert("errorKind".into(), "invalid_arguments".into());
            format!(
                "invalid_arguments: {why}. Nothing was done; fix the arguments and call the tool again."
            )
        }
        Failure::Cancelled => {
            facts.insert("errorKind".into(), "cancelled".into());
            "cancelled: the call was cancelled, or the user dismissed the approval question; nothing was written.".to_string()
        }
        Failure::Refused(r) => {
            // The members ACP's `data` shows too.
            if let Ok(Value::Object(m)) = serde_json::to_value(RefusalFacts::of(r)) {
                facts = m;
            }
            let mut hint = r.hint.clone();
            if let Some(Detail::Approval {
                command,
                level,
                reason,
                ..
            }) = &r.detail
            {
                hint = if hint.starts_with("the user declined") {
                    format!(
                        "the user declined `{command}` ({reason}); nothing was written. Do not retry it unless the user asks for it."
                    )
                } else {
                    let file = s.config_file.map_or_else(
                        || "the writegate config".to_string(),
                        |p| p.display().to_string(),
                    );
                    let why = if s.asked {
                        "the question to the user got no answer"
                    } else {
                        "this MCP client cannot ask them (it does not offer elicitation)"
                    };
                    format!(
                        "`{command}` needs the user's approval ({reason}, rated {level}) and {why}. Nothing was written. Tell the user; they can allow it with a rule in {file}: [policy] rules = [{{ pattern = {}, level = \"{}\" }}], then restart the MCP server; do not retry before they do.",
                        toml_string(&writegate_core::policy::escape_glob(command)),
                        s.auto_approve
                    )
                };
            }
            match r.kind {
                ErrorKind::PathOutsideWorkspace if s.roots.len() > 1 => {
                    let _ = write!(hint, " (the workspaces are {})", s.roots.join(", "));
                }
                ErrorKind::PathOutsideWorkspace => {
                    if let Some(root) = s.roots.first().filter(|r| !hint.contains(r.as_str())) {
                        let _ = write!(hint, " (the workspace is {root})");
                    }
                }
                ErrorKind::UntrustedWorkspace if s.client_root => {
                    hint = "this workspace came from the MCP client's roots, which are registered read-only ([mcp] client_roots = \"untrusted\"); nothing was written. Tell the user: they can start writegate mcp with --workspace on this directory, or set [mcp] client_roots = \"trusted\" in the writegate config.".to_string();
                }
                _ => {}
            }
            facts.insert("hint".into(), json!(hint));
            format!("{}: {hint}", r.kind.as_str())
        }
    };
    error(text, facts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::out::{Answer, Pending};
    use crate::tools::ReadOut;
    use rmcp::model::{JsonRpcMessage, RequestId, ServerResult};
    use writegate_core::{LinesRead, Refusal, sha256_tagged};

    /// `read_file`'s result as rmcp's types hold it: the text and a
    /// `Value` of the structured content.
    fn typed_read(path: &Path, r: LinesRead) -> CallToolResult {
        let mut text = String::new();
        for l in &r.lines {
            let _ = writeln!(text, "{}\t{}", l.n, l.text);
        }
        let facts = ReadFacts {
            total_lines: r.total_lines,
            hash: r.hash.clone(),
            format: r.format,
        };
        text.push_str(&read_summary(
            path,
            r.lines.first().map(|l| l.n),
            r.lines.last().map(|l| l.n),
            r.lines.len(),
            &facts,
        ));
        let out = ReadOut {
            path: path.display().to_string(),
            read: r,
        };
        success(text, &out)
    }

    fn wire(r: Answer) -> Value {
        let pending = Pending::default();
        let r = match r {
            Answer::Typed(r) => r,
            Answer::Prebuilt(p) => pending.hold(RequestId::Number(1), p),
        };
        let item = JsonRpcMessage::response(ServerResult::CallToolResult(r), RequestId::Number(1));
        serde_json::from_slice(&pending.line_of(&item).unwrap().concat()).unwrap()
    }

    #[test]
    fn the_written_read_result_is_the_typed_one() {
        let path = Path::new("/w/a \"b\".txt");
        let files: [&[u8]; 5] = [
            b"",
            b"one\n",
            b"a\t\"q\"\r\nb\\c\r\n\x01\n",
            b"\xFF\xFEa\x00\r\x00\n\x00b\x00",
            b"x\ny\nz\n",
        ];
        for bytes in files {
            for (line, limit) in [(None, None), (Some(2), Some(1)), (Some(9), None)] {
                let view = LinesView::of(bytes, line, limit).unwrap();
                let facts = ReadFacts {
                    total_lines: view.total_lines(),
                    hash: sha256_tagged(bytes),
                    format: view.format(),
                };
                let typed = typed_read(path, facts.clone().with_lines(view.numbered()));
                let written = read(path, lines_json(&view), &facts);
                let again = read(path, lines_json(&view), &facts);
                let typed_wire = wire(typed.into());
                assert_eq!(
                    wire(Answer::Prebuilt(written)),
                    typed_wire,
                    "{bytes:?} {line:?} {limit:?}"
                );
                // Without a writer of its own (Streamable HTTP) the same
                // answer goes as the typed result: the file, not an error.
                assert_eq!(
                    wire(Answer::Typed(again.into_typed())),
                    typed_wire,
                    "{bytes:?} {line:?} {limit:?}"
                );
            }
        }
    }

    fn situation() -> Situation<'static> {
        Situation {
            roots: &[],
            client_root: false,
            auto_approve: "moderate",
            config_file: None,
            asked: false,
        }
    }

    fn text(r: &CallToolResult) -> String {
        match &r.content[0] {
            ContentBlock::Text(t) => t.text.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_ambiguous_find_names_the_count_and_lines() {
        let f = Failure::Refused(
            Refusal::new(
                ErrorKind::AmbiguousTextMatch,
                "find occurs 2 times (starting on lines 3 and 9); include more surrounding text",
            )
            .with_detail(Detail::Ambiguous {
                count: 2,
                lines: vec![3, 9],
            }),
        );
        let r = failure(&f, &situation());
        assert_eq!(r.is_error, Some(true));
        let t = text(&r);
        assert!(
            t.starts_with("ambiguous_text_match: find occurs 2 times (starting on lines 3 and 9)"),
            "{t}"
        );
        let meta = r.meta.unwrap();
        assert_eq!(meta.0[ERROR_META_KEY]["lines"], json!([3, 9]));
        assert_eq!(meta.0[ERROR_META_KEY]["count"], 2);
    }

    #[test]
    fn a_held_write_without_elicitation_says_how_to_allow_it() {
        let f = Failure::Refused(
            Refusal::new(ErrorKind::ApprovalRequired, "call _writegate/approve").with_detail(
                Detail::Approval {
                    command: "edit_file write /w/a*b/.env".into(),
                    level: writegate_core::config::Level::Dangerous,
                    reason: "credential file .env".into(),
                    session: Some("s".into()),
                    asked: false,
                },
            ),
        );
        let t = text(&failure(&f, &situation()));
        assert!(!t.contains("_writegate/approve"), "{t}");
        assert!(
            t.contains(r#"pattern = 'edit_file write /w/a\*b/.env', level = "moderate""#),
            "{t}"
        );
        assert!(t.contains("cannot ask"), "{t}");
    }

    #[test]
    fn toml_strings_quote_what_a_literal_cannot_hold() {
        assert_eq!(toml_string("a\\b"), "'a\\b'");
        assert_eq!(toml_string("it's"), "\"it's\"");
        assert_eq!(toml_string("a\"'\\"), "\"a\\\"'\\\\\"");
    }
}
