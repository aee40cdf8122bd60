//! `read_file`: a text file as numbered lines, with its hash and format.
//! Its answer is written as JSON text while the file is hashed (the
//! numbered text, straight from the file's bytes), never built as a tree
//! of one object per line (ADR 0023), and carries the file once: one text
//! block, no `structuredContent` (ADR 0034).

use super::{Facts, Tool, ToolOutput, roots_sentence, size, success};
use crate::out::{Answer, Prebuilt, Writer};
use rmcp::model::ToolAnnotations;
use schemars::JsonSchema;
use serde::Deserialize;
use std::path::Path;
use writegate_core::{Failure, LinesView, OpCtx, ReadFacts, ReadParams, Service};

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

/// `read_file`'s outcome, already JSON text: the numbered lines escaped
/// while the file was hashed ([`numbered_json`]), and the file's facts.
/// Its result is one text block, the numbered lines and a line of facts,
/// and no `structuredContent`: the model reads the file once, whichever
/// block its agent shows it (docs/decisions/0034-reads-ahead-of-the-peers.md).
/// [`ReadFile::answer`] finishes it as a [`Prebuilt`] result for the
/// connection's own writer.
pub(crate) struct ReadOut {
    path: String,
    lines: NumberedJson,
    facts: ReadFacts,
}

impl ToolOutput for ReadOut {
    fn with_schema(tool: rmcp::model::Tool) -> rmcp::model::Tool {
        tool
    }

    fn structured(&self) -> Option<serde_json::Value> {
        None
    }
}

/// The numbered lines of a read as `read_file` answers them, written as
/// JSON text by [`numbered_json`].
struct NumberedJson {
    /// `"content":[{"type":"text","text":"` and the numbered lines, escaped.
    head: Vec<u8>,
    first: Option<u64>,
    last: Option<u64>,
    count: u64,
}

/// What [`NumberedJson::head`] starts with; the escaped text follows.
const TEXT_START: &[u8] = br#""content":[{"type":"text","text":""#;

/// The numbered lines of `view` as `read_file` answers them: `<n>\t<text>`
/// lines, escaped as the text block's JSON string.
fn numbered_json(view: &LinesView<'_>) -> NumberedJson {
    let window = view.window();
    // Room for the text escaped, a number and `\t` a line (a short line
    // doubles), the line of facts and the result's end
    // (`ReadOut::written`): capacity is only address space until written.
    let len = window.map_or(0, |(_, text)| text.len());
    let mut head = Vec::with_capacity(2 * len + 640);
    head.extend_from_slice(TEXT_START);
    let (first, last, count) = match window {
        Some((first, text)) => {
            let count = writegate_jsonscan::push_numbered_escaped(&mut head, text, first);
            (Some(first), Some(first + count - 1), count)
        }
        None => (None, None, 0),
    };
    NumberedJson {
        head,
        first,
        last,
        count,
    }
}

impl ReadOut {
    /// The line of facts after the numbered lines: which lines these are,
    /// the format and the hash.
    fn summary(&self) -> String {
        let (j, facts) = (&self.lines, &self.facts);
        let shown = match (j.first, j.last) {
            (Some(a), Some(b)) if j.count < facts.total_lines as u64 => {
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
            self.path,
            facts.format.encoding,
            if facts.format.bom { " with BOM" } else { "" },
            facts.format.line_ending.as_str().to_uppercase(),
            facts.hash
        )
    }

    /// The result: the numbered lines and the line of facts, as JSON text
    /// ([`Prebuilt`]: only the connection's `out::Out` sends it), in the
    /// buffer the lines were escaped into.
    fn written(self) -> Prebuilt {
        let summary = self.summary();
        let mut head = self.lines.head;
        head.reserve(summary.len() + 64);
        writegate_jsonscan::push_escaped(&mut head, &summary);
        head.extend_from_slice(br#""}],"isError":false"#);
        Prebuilt(vec![head])
    }
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

    fn run(
        service: &Service,
        ctx: &OpCtx,
        path: &Path,
        args: ReadArgs,
    ) -> Result<ReadOut, Failure> {
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
            .read_lines_with(ctx, &params, numbered_json)
            .map(|(lines, facts)| ReadOut {
                path: path.display().to_string(),
                lines,
                facts,
            })
    }

    /// The numbered lines and the line of facts, read back from the
    /// written text (a JSON string `numbered_json` wrote: it always decodes).
    fn text(out: &ReadOut) -> String {
        let mut quoted = out.lines.head[TEXT_START.len() - 1..].to_vec();
        quoted.push(b'"');
        let mut text: String = serde_json::from_slice(&quoted).unwrap_or_default();
        text.push_str(&out.summary());
        text
    }

    /// Written as JSON text for the connection's own writer; through
    /// `rmcp`'s, the typed result.
    fn answer(out: ReadOut, writer: Writer) -> Answer {
        match writer {
            Writer::Own => Answer::Prebuilt(out.written()),
            Writer::Rmcp => Answer::Typed(success::<Self>(&out)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::out::Pending;
    use rmcp::model::{CallToolResult, ContentBlock, JsonRpcMessage, RequestId, ServerResult};
    use serde_json::Value;
    use std::fmt::Write as _;
    use writegate_core::sha256_tagged;

    /// `read_file`'s result as `rmcp`'s types hold it: one text block, the
    /// numbered lines and the summary.
    fn typed(view: &LinesView<'_>, summary: &str) -> CallToolResult {
        let mut text = String::new();
        for (n, line) in view.lines() {
            let _ = writeln!(text, "{n}\t{line}");
        }
        text.push_str(summary);
        CallToolResult::success(vec![ContentBlock::text(text)])
    }

    /// The response line a connection's `Out` writes for `answer`.
    fn wire(answer: Answer) -> Value {
        let pending = Pending::default();
        let r = match answer {
            Answer::Typed(r) => r,
            Answer::Prebuilt(p) => pending.hold(RequestId::Number(1), p),
        };
        let item = JsonRpcMessage::response(ServerResult::CallToolResult(r), RequestId::Number(1));
        serde_json::from_slice(&pending.line_of(&item).unwrap().concat()).unwrap()
    }

    /// The written result is the one serde writes for the typed result,
    /// and so is the typed result a connection without a writer of its
    /// own (Streamable HTTP) sends: the file, not an error, and the file
    /// once (no `structuredContent`).
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
                let out = || ReadOut {
                    path: path.display().to_string(),
                    lines: numbered_json(&view),
                    facts: facts.clone(),
                };
                let want = wire(Answer::Typed(typed(&view, &out().summary())));
                let at = format!("{bytes:?} {line:?} {limit:?}");
                assert!(want["result"].get("structuredContent").is_none(), "{at}");
                let written = ReadFile::answer(out(), Writer::Own);
                assert!(matches!(written, Answer::Prebuilt(_)), "{at}");
                assert_eq!(wire(written), want, "{at}");
                let plain = ReadFile::answer(out(), Writer::Rmcp);
                assert!(matches!(plain, Answer::Typed(_)), "{at}");
                assert_eq!(wire(plain), want, "{at}");
            }
        }
    }
}
