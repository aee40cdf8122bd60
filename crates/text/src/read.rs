//! Reading with the line model (SPEC 3: `_writegate/read_lines`, `fs/read_text_file`).

use std::borrow::Cow;

use crate::edit::is_binary;
use crate::error::TextError;
use crate::format::{Encoding, Format, decode, detect};
use crate::lines::{Line, count_lines, iter_lines_from, skip_lines};
use crate::repr::utf8_lossy;

/// The numbered lines of `_writegate/read_lines` (SPEC 3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NumberedLines {
    /// `(n, text)` pairs: the 1-based line number and the decoded text without its
    /// ending (undecodable units shown as U+FFFD).
    pub lines: Vec<(u64, String)>,
    /// Number of lines in the whole file (SPEC 8.1; an empty file has 0).
    pub total_lines: usize,
    /// The file's detected format (`encoding`, `bom`, `lineEnding` of the result).
    pub format: Format,
}

/// The window of the lines of `text` starting at 1-based `line` (`None` or 0 means
/// line 1) holding at most `limit` lines (`None` means all, 0 means none), walked
/// without a list of every line: the 0-based index of its first line, and its
/// lines. Empty when `line` is past the end.
fn window(
    text: &str,
    line: Option<u64>,
    limit: Option<u64>,
) -> (usize, impl Iterator<Item = Line> + '_) {
    let first = line.unwrap_or(1).max(1);
    let start = usize::try_from(first - 1).unwrap_or(usize::MAX);
    let take = limit.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
    let at = skip_lines(text.as_bytes(), 0, start);
    let lines = at.map(|at| iter_lines_from(text.as_bytes(), at));
    (start, lines.into_iter().flatten().take(take))
}

/// [`decode`] without a copy when the file is UTF-8 (its bytes after any BOM, with
/// invalid sequences replaced as `decode` does, borrowed when there are none).
fn decoded<'a>(bytes: &'a [u8], format: &Format) -> Cow<'a, str> {
    if format.encoding.normalized() == Encoding::Utf8 {
        let bom = format.encoding.bom_bytes();
        let body = match bytes.strip_prefix(bom) {
            Some(body) if format.bom => body,
            _ => bytes,
        };
        utf8_lossy(body)
    } else {
        Cow::Owned(decode(bytes, format))
    }
}

/// The numbered lines of `_writegate/read_lines` (SPEC 3) without a copy of each
/// line: the decoded text (borrowed from the file's bytes when they are UTF-8) and
/// the window asked for, walked by [`NumberedView::lines`]. What
/// [`numbered_lines`] collects, for an answer written straight from the text.
#[derive(Clone, Debug)]
pub struct NumberedView<'a> {
    text: Cow<'a, str>,
    line: Option<u64>,
    limit: Option<u64>,
    /// Lines of the file before `text` (a paged read's window starts
    /// there; 0 when `text` is the whole file).
    skipped: usize,
    /// Number of lines in the whole file (SPEC 8.1; an empty file has 0).
    pub total_lines: usize,
    /// The file's detected format.
    pub format: Format,
}

impl<'a> NumberedView<'a> {
    /// The lines of `window`, the part of a file that starts after its
    /// first `skipped` lines, numbered as in the file, which holds
    /// `total_lines` lines in `format` ([`crate::paged::Paged::numbered`]).
    pub(crate) fn window_of(
        window: Cow<'a, str>,
        skipped: usize,
        total_lines: usize,
        format: Format,
    ) -> Self {
        NumberedView {
            text: window,
            line: None,
            limit: None,
            skipped,
            total_lines,
            format,
        }
    }
}

impl NumberedView<'_> {
    /// The lines asked for: the 1-based number and the decoded text without its
    /// ending (undecodable units shown as U+FFFD), in order.
    pub fn lines(&self) -> impl Iterator<Item = (u64, &str)> + '_ {
        let (start, win) = window(&self.text, self.line, self.limit);
        let start = self.skipped + start;
        win.enumerate()
            .map(move |(i, l)| ((start + i) as u64 + 1, &self.text[l.text()]))
    }

    /// The lines asked for as one piece of the decoded text, each with its
    /// own ending, and the 1-based number of the first: what
    /// [`NumberedView::lines`] walks, for a caller that writes them in one
    /// pass. `None` when no line is asked for.
    pub fn window(&self) -> Option<(u64, &str)> {
        let (start, mut win) = window(&self.text, self.line, self.limit);
        let first = win.next()?;
        let end = win.last().map_or(first.end, |l| l.end);
        Some((
            (self.skipped + start) as u64 + 1,
            &self.text[first.start..end],
        ))
    }
}

/// [`numbered_lines`] as a [`NumberedView`]: the same checks and errors, nothing
/// copied per line.
pub fn numbered_view(
    bytes: &[u8],
    line: Option<u64>,
    limit: Option<u64>,
) -> Result<NumberedView<'_>, TextError> {
    let format = detect(bytes)?;
    if is_binary(bytes, &format) {
        return Err(TextError::BinaryFile);
    }
    // Decoding never adds or removes a line break (bad sequences become U+FFFD, and
    // CR / LF decode as themselves in every supported encoding), so the decoded text
    // splits into exactly the lines of the raw units.
    let text = decoded(bytes, &format);
    Ok(NumberedView {
        total_lines: count_lines(text.as_bytes()),
        text,
        line,
        limit,
        skipped: 0,
        format,
    })
}

/// Numbers a file's lines for `_writegate/read_lines` (SPEC 3) with the SPEC 8.1
/// line model, the same one line edits use. `line` is 1-based (`None`/0 = 1), `limit`
/// the most lines to return (`None` = all). A `line` past the end gives no lines.
///
/// Errors: `UnsupportedEncoding` (undetectable file, SPEC 9), `BinaryFile` (a NUL
/// byte in a file that is not UTF-16/32: such a file cannot be line-edited either).
pub fn numbered_lines(
    bytes: &[u8],
    line: Option<u64>,
    limit: Option<u64>,
) -> Result<NumberedLines, TextError> {
    let view = numbered_view(bytes, line, limit)?;
    Ok(NumberedLines {
        lines: view.lines().map(|(n, t)| (n, t.to_string())).collect(),
        total_lines: view.total_lines,
        format: view.format,
    })
}

/// The `content` of `fs/read_text_file` (SPEC 3): whole lines with their own endings,
/// decoded from the file's encoding (BOM not included). `line` is 1-based (`None`/0
/// = 1), `limit` the most lines (`None` = all, 0 = none). An empty file, or a `line`
/// past the end, gives `""`. Binary files are returned decoded, not refused.
///
/// Errors: `UnsupportedEncoding` (undetectable file, SPEC 9).
pub fn read_text(bytes: &[u8], line: Option<u64>, limit: Option<u64>) -> Result<String, TextError> {
    read_text_borrowed(bytes, line, limit).map(|(text, _)| text.into_owned())
}

/// [`read_text`] borrowed from `bytes` when it can be (UTF-8 without invalid
/// sequences), with the format it was decoded from: the text of a large
/// read is not copied before it is answered, nor the file detected twice.
pub fn read_text_borrowed(
    bytes: &[u8],
    line: Option<u64>,
    limit: Option<u64>,
) -> Result<(Cow<'_, str>, Format), TextError> {
    let format = detect(bytes)?;
    let text = decoded(bytes, &format);
    if line.unwrap_or(1) <= 1 && limit.is_none() {
        return Ok((text, format));
    }
    let (_, mut win) = window(&text, line, limit);
    let text = Cow::Owned(match win.next() {
        Some(f) => {
            let end = win.last().map_or(f.end, |l| l.end);
            text[f.start..end].to_string()
        }
        None => String::new(),
    });
    Ok((text, format))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::Encoding;
    use crate::lines::Ending;

    #[test]
    fn numbers_crlf_cr_and_mixed_alike() {
        for bytes in [&b"a\nb\nc"[..], b"a\r\nb\r\nc", b"a\rb\rc", b"a\r\nb\rc"] {
            let n = numbered_lines(bytes, None, None).unwrap();
            assert_eq!(n.total_lines, 3);
            assert_eq!(
                n.lines,
                vec![(1, "a".into()), (2, "b".into()), (3, "c".into())]
            );
        }
    }

    #[test]
    fn window_and_format() {
        let n = numbered_lines(
            b"\xFF\xFEa\x00\r\x00\n\x00b\x00\r\x00\n\x00",
            Some(2),
            Some(5),
        )
        .unwrap();
        assert_eq!(n.lines, vec![(2, "b".into())]);
        assert_eq!(n.total_lines, 2);
        assert_eq!(n.format.encoding, Encoding::Utf16Le);
        assert!(n.format.bom);
        assert_eq!(n.format.dominant, Some(Ending::CrLf));
        assert_eq!(
            numbered_lines(b"a\n", Some(0), None).unwrap().lines.len(),
            1
        );
        assert!(
            numbered_lines(b"a\n", Some(9), None)
                .unwrap()
                .lines
                .is_empty()
        );
        assert!(
            numbered_lines(b"a\n", None, Some(0))
                .unwrap()
                .lines
                .is_empty()
        );
        assert_eq!(numbered_lines(b"", None, None).unwrap().total_lines, 0);
        assert_eq!(
            numbered_lines(b"a\0", None, None).unwrap_err(),
            TextError::BinaryFile
        );
    }

    #[test]
    fn read_text_keeps_endings() {
        let f = b"\xEF\xBB\xBFone\r\ntwo\rthree\nfour";
        assert_eq!(read_text(f, None, None).unwrap(), "one\r\ntwo\rthree\nfour");
        assert_eq!(
            read_text(f, Some(0), None).unwrap(),
            "one\r\ntwo\rthree\nfour"
        );
        assert_eq!(read_text(f, Some(2), Some(2)).unwrap(), "two\rthree\n");
        assert_eq!(read_text(f, Some(4), None).unwrap(), "four");
        assert_eq!(read_text(f, Some(5), None).unwrap(), "");
        assert_eq!(read_text(b"", None, None).unwrap(), "");
        assert_eq!(read_text(b"caf\xe9\n", None, None).unwrap(), "café\n");
    }
}
