//! The line model of SPEC 8.1: a text split into lines, each a text and an ending.

use std::ops::Range;

/// A line ending (SPEC 8.1): `\n`, `\r\n`, or a lone `\r`. A missing ending (only
/// possible on the last line) is `None` in an `Option<Ending>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ending {
    /// `\n` (U+000A).
    Lf,
    /// `\r\n` (U+000D U+000A), always one ending, never split.
    CrLf,
    /// A lone `\r` (U+000D) not followed by `\n`.
    Cr,
}

impl Ending {
    /// The ending as text: `"\n"`, `"\r\n"` or `"\r"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Ending::Lf => "\n",
            Ending::CrLf => "\r\n",
            Ending::Cr => "\r",
        }
    }

    /// The wire name used by `_writegate/read_lines`' `lineEnding`: `"lf"`, `"crlf"`, `"cr"`.
    pub fn name(self) -> &'static str {
        match self {
            Ending::Lf => "lf",
            Ending::CrLf => "crlf",
            Ending::Cr => "cr",
        }
    }

    /// Length of the ending in code units (1 or 2), in any encoding.
    pub fn len(self) -> usize {
        match self {
            Ending::CrLf => 2,
            _ => 1,
        }
    }

    /// Always false: an ending is never empty. Present for clippy's `len` convention.
    pub fn is_empty(self) -> bool {
        false
    }
}

/// One line of the SPEC 8.1 model, as code-unit indexes into the split sequence
/// (bytes for UTF-8 and legacy files, 16/32-bit units after the BOM for UTF-16/32).
///
/// `start..text_end` is the text, `text_end..end` the ending (empty when `ending` is
/// `None`). Lines are contiguous: each line's `start` is the previous line's `end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Line {
    /// Index of the first unit of the line.
    pub start: usize,
    /// Index one past the last unit of the text (where the ending starts).
    pub text_end: usize,
    /// Index one past the ending (equal to `text_end` when there is none).
    pub end: usize,
    /// The line's ending; `None` only for a last line without a final line break.
    pub ending: Option<Ending>,
}

impl Line {
    /// The text's unit range, `start..text_end`.
    pub fn text(&self) -> Range<usize> {
        self.start..self.text_end
    }

    /// The whole line's unit range including its ending, `start..end`.
    pub fn range(&self) -> Range<usize> {
        self.start..self.end
    }
}

const CR: u32 = 0x0D;
const LF: u32 = 0x0A;

/// Splits a sequence of code units into lines (SPEC 8.1). A line ends at `\n`,
/// `\r\n` or a lone `\r` (compared as unit values 0x0A / 0x0D, so this works for
/// bytes, UTF-16 units and UTF-32 units alike). An empty input has no lines; a final
/// line break does not start an extra empty line (`"a\n"` is one line); the last
/// line may have no ending. Joining every `start..end` gives back the input exactly.
/// Never fails, never panics.
pub fn split_units<U: Copy + Into<u32>>(units: &[U]) -> Vec<Line> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut i = 0;
    let n = units.len();
    while i < n {
        let u: u32 = units[i].into();
        if u == LF || u == CR {
            let (ending, len) = if u == CR {
                if i + 1 < n && units[i + 1].into() == LF {
                    (Ending::CrLf, 2)
                } else {
                    (Ending::Cr, 1)
                }
            } else {
                (Ending::Lf, 1)
            };
            lines.push(Line {
                start,
                text_end: i,
                end: i + len,
                ending: Some(ending),
            });
            i += len;
            start = i;
        } else {
            i += 1;
        }
    }
    if start < n {
        lines.push(Line {
            start,
            text_end: n,
            end: n,
            ending: None,
        });
    }
    lines
}

/// [`split_units`] over bytes: the SPEC 8.1 split for UTF-8 and single-byte (or
/// ASCII-compatible multi-byte) legacy files. Indexes are byte offsets.
pub fn split_bytes(bytes: &[u8]) -> Vec<Line> {
    split_units(bytes)
}

/// The dominant ending of `lines` (SPEC 8.2): the most frequent ending; ties go to
/// `Lf`, then `CrLf`, then `Cr`. `None` when no line has an ending.
pub fn dominant(lines: &[Line]) -> Option<Ending> {
    let (mut lf, mut crlf, mut cr) = (0usize, 0usize, 0usize);
    for l in lines {
        match l.ending {
            Some(Ending::Lf) => lf += 1,
            Some(Ending::CrLf) => crlf += 1,
            Some(Ending::Cr) => cr += 1,
            None => {}
        }
    }
    if lf == 0 && crlf == 0 && cr == 0 {
        None
    } else if lf >= crlf && lf >= cr {
        Some(Ending::Lf)
    } else if crlf >= cr {
        Some(Ending::CrLf)
    } else {
        Some(Ending::Cr)
    }
}

/// Number of line breaks (lines that have an ending) in `lines`.
pub fn count_breaks(lines: &[Line]) -> usize {
    lines.iter().filter(|l| l.ending.is_some()).count()
}

/// Index (0-based) of the line holding unit `pos`; a `pos` at or past the end maps
/// to the last line. `lines` must come from one split; returns 0 for no lines.
pub fn line_index_at(lines: &[Line], pos: usize) -> usize {
    if lines.is_empty() {
        return 0;
    }
    match lines.binary_search_by(|l| {
        if pos < l.start {
            std::cmp::Ordering::Greater
        } else if pos >= l.end {
            std::cmp::Ordering::Less
        } else {
            std::cmp::Ordering::Equal
        }
    }) {
        Ok(i) => i,
        Err(i) => i.min(lines.len() - 1),
    }
}

/// Replaces every line break of `s` (`\n`, `\r\n`, lone `\r`) by `ending`. A `\r\n`
/// is one break, so the result never holds `\r\r\n` unless `s` had `\r` before `\r\n`
/// (which is two breaks and becomes two endings).
pub fn convert_breaks(s: &str, ending: Ending) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 16);
    for l in split_bytes(s.as_bytes()) {
        out.push_str(&s[l.text()]);
        if l.ending.is_some() {
            out.push_str(ending.as_str());
        }
    }
    out
}

/// `s` without one trailing line break (`\r\n`, `\n` or `\r`), if it has one
/// (SPEC 8.3: one trailing line break of a line edit's content is not a new line).
pub fn strip_one_break(s: &str) -> &str {
    if let Some(t) = s.strip_suffix("\r\n") {
        t
    } else if let Some(t) = s.strip_suffix('\n') {
        t
    } else if let Some(t) = s.strip_suffix('\r') {
        t
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(s: &str) -> Vec<(&str, Option<Ending>)> {
        split_bytes(s.as_bytes())
            .iter()
            .map(|l| (&s[l.text()], l.ending))
            .collect()
    }

    #[test]
    fn splits_every_ending() {
        assert_eq!(texts(""), vec![]);
        assert_eq!(texts("a"), vec![("a", None)]);
        assert_eq!(texts("a\n"), vec![("a", Some(Ending::Lf))]);
        assert_eq!(
            texts("a\r\nb\rc\nd"),
            vec![
                ("a", Some(Ending::CrLf)),
                ("b", Some(Ending::Cr)),
                ("c", Some(Ending::Lf)),
                ("d", None)
            ]
        );
        assert_eq!(
            texts("\r\r\n\n"),
            vec![
                ("", Some(Ending::Cr)),
                ("", Some(Ending::CrLf)),
                ("", Some(Ending::Lf))
            ]
        );
    }

    #[test]
    fn splits_utf16_units() {
        let units: Vec<u16> = "x\r\ny\rz".encode_utf16().collect();
        let lines = split_units(&units);
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0].ending, Some(Ending::CrLf));
        assert_eq!(lines[1].ending, Some(Ending::Cr));
        assert_eq!(lines[2].ending, None);
    }

    #[test]
    fn dominant_counts_and_ties() {
        assert_eq!(dominant(&split_bytes(b"abc")), None);
        assert_eq!(dominant(&split_bytes(b"a\r\nb\r\nc\n")), Some(Ending::CrLf));
        assert_eq!(dominant(&split_bytes(b"a\r\nb\n")), Some(Ending::Lf));
        assert_eq!(dominant(&split_bytes(b"a\r\nb\r")), Some(Ending::CrLf));
        assert_eq!(dominant(&split_bytes(b"a\rb\rc\n")), Some(Ending::Cr));
        assert_eq!(dominant(&split_bytes(b"a\rb\n")), Some(Ending::Lf));
    }

    #[test]
    fn converts_breaks_without_doubling_cr() {
        assert_eq!(
            convert_breaks("a\r\nb\nc\rd", Ending::CrLf),
            "a\r\nb\r\nc\r\nd"
        );
        assert_eq!(convert_breaks("a\r\n", Ending::Lf), "a\n");
        assert_eq!(strip_one_break("a\r\n\r\n"), "a\r\n");
        assert_eq!(strip_one_break("a"), "a");
    }

    #[test]
    fn line_index_lookup() {
        let lines = split_bytes(b"ab\ncd\r\ne");
        assert_eq!(line_index_at(&lines, 0), 0);
        assert_eq!(line_index_at(&lines, 2), 0);
        assert_eq!(line_index_at(&lines, 3), 1);
        assert_eq!(line_index_at(&lines, 6), 1);
        assert_eq!(line_index_at(&lines, 7), 2);
        assert_eq!(line_index_at(&lines, 99), 2);
    }
}
