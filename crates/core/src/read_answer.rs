//! A read's numbered lines written as JSON text, straight from the decoded
//! file: the shape [`LinesRead`] serialises to (`lines`, `totalLines`,
//! `hash`, `encoding`, `bom`, `lineEnding`), without a `String` per line or
//! a `serde_json::Value` tree. A 5 MiB file has some 90,000 lines; the
//! per-line objects cost more than the read
//! (docs/decisions/0023-large-answers-and-kept-buffers.md).
//! ACP's `_writegate/read_lines` and MCP's `read_file` write their answers
//! with it; [`LinesRead`] stays the typed form of the same answer.

use crate::api::{FileFormat, LinesRead, NumberedLine};
use crate::error::Failure;
use writegate_text::NumberedView;

/// The lines a read asked for, borrowed from the decoded file
/// ([`crate::Service::read_lines_with`] hands it to its caller while the
/// file's hash is taken).
pub struct LinesView<'a> {
    view: NumberedView<'a>,
}

impl<'a> LinesView<'a> {
    pub(crate) fn new(view: NumberedView<'a>) -> Self {
        LinesView { view }
    }

    /// The lines `line` and `limit` ask for of a file holding `bytes`
    /// (what [`crate::Service::read_lines_with`] hands over, without the
    /// file): `unsupported_encoding` or `binary_file` as a read refuses them.
    pub fn of(bytes: &'a [u8], line: Option<u64>, limit: Option<u64>) -> Result<Self, Failure> {
        Ok(LinesView::new(writegate_text::numbered_view(
            bytes, line, limit,
        )?))
    }

    /// The lines asked for: 1-based number and text without its ending.
    pub fn lines(&self) -> impl Iterator<Item = (u64, &str)> + '_ {
        self.view.lines()
    }

    /// The lines asked for as one piece of the decoded text, each with its
    /// own ending, and the number of the first (`None`: no line asked for).
    pub fn window(&self) -> Option<(u64, &str)> {
        self.view.window()
    }

    /// Lines in the whole file (SPEC 8.1).
    pub fn total_lines(&self) -> usize {
        self.view.total_lines
    }

    /// The file's format.
    pub fn format(&self) -> FileFormat {
        FileFormat::from(&self.view.format)
    }

    /// How many lines were asked for and the bytes of their text (one walk
    /// over them), to size the buffers an answer is written into.
    pub fn extent(&self) -> Extent {
        let (lines, bytes) = self
            .lines()
            .fold((0, 0), |(n, b), (_, t)| (n + 1, b + t.len()));
        Extent { lines, bytes }
    }

    /// The lines asked for, each its own [`NumberedLine`].
    pub fn numbered(&self) -> Vec<NumberedLine> {
        self.lines()
            .map(|(n, text)| NumberedLine {
                n,
                text: text.to_string(),
            })
            .collect()
    }

    /// Appends the `lines` member as [`LinesRead`] serialises it:
    /// `"lines":[{"n":1,"text":"..."},...]`.
    pub fn write_lines_member(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(br#""lines":["#);
        let mut first = true;
        for (n, text) in self.lines() {
            if !first {
                out.push(b',');
            }
            first = false;
            out.extend_from_slice(br#"{"n":"#);
            out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
            out.extend_from_slice(br#","text":"#);
            writegate_jsonscan::push_string(out, text);
            out.push(b'}');
        }
        out.push(b']');
    }
}

/// The size of a [`LinesView`]'s lines: how many, and the bytes of their
/// text (endings not counted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extent {
    /// Lines.
    pub lines: usize,
    /// Bytes of their text.
    pub bytes: usize,
}

impl Extent {
    /// Room for [`LinesView::write_lines_member`]'s output before its
    /// buffer grows: the text with an escape every 8 bytes, and about 24
    /// bytes of `{"n":…,"text":""},` a line.
    pub fn lines_member_room(self) -> usize {
        self.bytes + self.bytes / 8 + self.lines * 24 + 16
    }
}

/// What a numbered read reports beside its lines: [`LinesRead`] without
/// `lines`. Serialised (camelCase: `totalLines`, `hash`, `encoding`, `bom`,
/// `lineEnding`) as every front end shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReadFacts {
    /// Lines in the whole file (SPEC 8.1).
    pub total_lines: usize,
    /// `sha256:<hex>` of the file's bytes (an edit's `expectedHash`).
    pub hash: String,
    /// The file's format.
    #[serde(flatten)]
    pub format: FileFormat,
}

impl ReadFacts {
    /// Appends the members as [`LinesRead`] serialises them after `lines`,
    /// each preceded by a comma: `,"totalLines":N,"hash":...,"lineEnding":...`.
    pub fn write_members(&self, out: &mut Vec<u8>) {
        use writegate_jsonscan::push_string;
        out.extend_from_slice(br#","totalLines":"#);
        out.extend_from_slice(itoa::Buffer::new().format(self.total_lines).as_bytes());
        out.extend_from_slice(br#","hash":"#);
        push_string(out, &self.hash);
        out.extend_from_slice(br#","encoding":"#);
        push_string(out, self.format.encoding);
        out.extend_from_slice(br#","bom":"#);
        out.extend_from_slice(if self.format.bom { b"true" } else { b"false" });
        out.extend_from_slice(br#","lineEnding":"#);
        push_string(out, self.format.line_ending.as_str());
    }

    /// The whole [`LinesRead`] as JSON text: `{"lines":[...],...}`.
    pub fn write_object(&self, view: &LinesView<'_>, out: &mut Vec<u8>) {
        out.push(b'{');
        view.write_lines_member(out);
        self.write_members(out);
        out.push(b'}');
    }
}

impl ReadFacts {
    /// The typed answer: `lines` and these facts.
    pub fn with_lines(self, lines: Vec<NumberedLine>) -> LinesRead {
        LinesRead {
            lines,
            total_lines: self.total_lines,
            hash: self.hash,
            format: self.format,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sha256_tagged;

    /// Every shape of file: the written object is the serde form of the
    /// typed answer, byte for byte.
    #[test]
    fn the_written_object_is_the_typed_answers_serde_bytes() {
        let files: [&[u8]; 7] = [
            b"",
            b"one\n",
            b"a \"quoted\"\tline\r\nb\\c\r\n\x01ctl",
            b"\xEF\xBB\xBFbom\rcr\rlines",
            b"\xFF\xFEa\x00\r\x00\n\x00b\x00",
            b"caf\xe9 latin-1\n",
            b"x\ny\nz\n",
        ];
        for bytes in files {
            for (line, limit) in [(None, None), (Some(2), Some(1)), (Some(9), None)] {
                let view =
                    LinesView::new(writegate_text::numbered_view(bytes, line, limit).unwrap());
                let facts = ReadFacts {
                    total_lines: view.total_lines(),
                    hash: sha256_tagged(bytes),
                    format: view.format(),
                };
                let mut out = Vec::new();
                facts.write_object(&view, &mut out);
                let typed = facts.with_lines(view.numbered());
                assert_eq!(
                    String::from_utf8(out).unwrap(),
                    serde_json::to_string(&typed).unwrap(),
                    "{bytes:?} {line:?} {limit:?}"
                );
            }
        }
    }
}
