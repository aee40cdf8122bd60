//! A read of a file too large to hold whole (over the daemon's
//! `max_edit_bytes`): its bytes fed in chunks as they are read, the lines
//! counted and only the window asked for kept, so a `limit` of two lines of
//! a 6 MiB file holds two lines, not the file.
//!
//! Only UTF-8 files (with or without a BOM) are read this way: a legacy
//! encoding is recognised by decoding the whole file (SPEC 9), and a UTF-16
//! or UTF-32 file would need its own unit walk for a case no agent meets in
//! practice. Those stay refused as too large. Everything else matches
//! [`numbered_view`](crate::numbered_view) and
//! [`read_text_borrowed`](crate::read_text_borrowed) on the whole file:
//! the same lines, the same totals, the same format.

use std::borrow::Cow;

use crate::format::{Encoding, Format, sniff_bom};
use crate::lines::EndingCounts;
use crate::lines::count_endings;
use crate::read::NumberedView;

/// Why a paged read stopped before the end of the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PagedStop {
    /// The file is not UTF-8: its BOM names another encoding, or (without a
    /// BOM) its bytes are not valid UTF-8. The string says which.
    NotUtf8(String),
    /// A NUL byte, in a read that refuses binary files (numbered lines).
    Binary,
    /// The lines asked for hold more than the read may keep, in bytes.
    WindowTooLarge {
        /// The most the read keeps.
        keep_max: usize,
    },
}

/// The state of a paged read: feed it the file's bytes in order with
/// [`PagedRead::feed`], then [`PagedRead::finish`].
#[derive(Debug)]
pub struct PagedRead {
    /// 0-based index of the first line asked for.
    first: usize,
    /// One past the 0-based index of the last line asked for.
    end: usize,
    keep_max: usize,
    nul: Nul,
    /// The first bytes, held until there are enough to tell a BOM (`None`
    /// once they were looked at and any BOM skipped).
    head: Option<Vec<u8>>,
    bom: bool,
    /// An incomplete UTF-8 sequence at the end of the last chunk.
    carry: Vec<u8>,
    counts: EndingCounts,
    /// 0-based index of the line the next byte belongs to (exact while the
    /// window is still being walked).
    line: usize,
    /// The last byte of the body, if any.
    last: Option<u8>,
    kept: Vec<u8>,
    /// Whether the last chunk ended in a `\r` that ends a line kept: a `\n`
    /// opening the next chunk completes its `\r\n`.
    kept_cr_at_cut: bool,
}

impl PagedRead {
    /// A read of the lines `line` (1-based; `None` or 0 means line 1) and
    /// the `limit` after it (`None` means all, 0 none), keeping at most
    /// `keep_max` bytes of them. With `refuse_binary`, a NUL byte stops the
    /// read ([`PagedStop::Binary`]), as numbered reads refuse binary files.
    pub fn new(
        line: Option<u64>,
        limit: Option<u64>,
        keep_max: usize,
        refuse_binary: bool,
    ) -> Self {
        let first = usize::try_from(line.unwrap_or(1).max(1) - 1).unwrap_or(usize::MAX);
        let take = limit.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX));
        PagedRead {
            first,
            end: first.saturating_add(take),
            keep_max,
            nul: if refuse_binary {
                Nul::Refused
            } else {
                Nul::Unseen
            },
            head: Some(Vec::new()),
            bom: false,
            carry: Vec::new(),
            counts: EndingCounts::default(),
            line: 0,
            last: None,
            kept: Vec::new(),
            kept_cr_at_cut: false,
        }
    }

    /// The next bytes of the file.
    pub fn feed(&mut self, chunk: &[u8]) -> Result<(), PagedStop> {
        let Some(mut head) = self.head.take() else {
            return self.body(chunk);
        };
        if head.len() + chunk.len() < 4 {
            head.extend_from_slice(chunk);
            self.head = Some(head);
            return Ok(());
        }
        let need = 4 - head.len();
        head.extend_from_slice(&chunk[..need]);
        self.start(&head, &chunk[need..])
    }

    /// Looks at the first bytes (`head`, at least four, or all of a shorter
    /// file) for a BOM, then reads them and `rest` as body.
    fn start(&mut self, head: &[u8], rest: &[u8]) -> Result<(), PagedStop> {
        let skip = match sniff_bom(head) {
            Some((Encoding::Utf8, len)) => {
                self.bom = true;
                len
            }
            Some((other, _)) => {
                return Err(PagedStop::NotUtf8(format!("its BOM says {}", other.name())));
            }
            None => 0,
        };
        self.body(&head[skip..])?;
        self.body(rest)
    }

    /// The body's next bytes: checked, counted, and the window kept.
    fn body(&mut self, chunk: &[u8]) -> Result<(), PagedStop> {
        let Some(&last) = chunk.last() else {
            return Ok(());
        };
        if !self.bom {
            self.check_utf8(chunk)?;
        }
        if self.nul != Nul::Seen && memchr::memchr(0, chunk).is_some() {
            if self.nul == Nul::Refused {
                return Err(PagedStop::Binary);
            }
            self.nul = Nul::Seen;
        }
        let follows_cr = self.last == Some(b'\r');
        let kept_cr_at_cut = std::mem::take(&mut self.kept_cr_at_cut);
        let mut counts = count_endings(chunk);
        let mut at = 0;
        if follows_cr && chunk[0] == b'\n' {
            // The `\n` of a `\r\n` cut between two chunks: counted as a lone
            // `\r` before and an `\n` now, it is one `\r\n`, and it ends the
            // line the `\r` ended.
            counts.lf -= 1;
            self.counts.cr -= 1;
            counts.crlf += 1;
            if kept_cr_at_cut {
                self.keep(b"\n")?;
            }
            at = 1;
        }
        self.counts.lf += counts.lf;
        self.counts.crlf += counts.crlf;
        self.counts.cr += counts.cr;
        self.last = Some(last);
        while self.line < self.end && at < chunk.len() {
            let Some(i) = memchr::memchr2(b'\r', b'\n', &chunk[at..]) else {
                if self.in_window(self.line) {
                    self.keep(&chunk[at..])?;
                }
                break;
            };
            let brk = at + i;
            let end = if chunk[brk] == b'\r' && chunk.get(brk + 1) == Some(&b'\n') {
                brk + 2
            } else {
                brk + 1
            };
            if self.in_window(self.line) {
                self.keep(&chunk[at..end])?;
                self.kept_cr_at_cut = end == chunk.len() && chunk[brk] == b'\r';
            }
            self.line += 1;
            at = end;
        }
        Ok(())
    }

    /// Checks that `chunk`, after what the last chunk left incomplete, is
    /// UTF-8, and holds back an incomplete sequence at its end.
    fn check_utf8(&mut self, chunk: &[u8]) -> Result<(), PagedStop> {
        let mut chunk = chunk;
        if !self.carry.is_empty() {
            // Complete the cut character from the chunk's first bytes (a
            // UTF-8 sequence is at most four bytes long).
            let need = (4 - self.carry.len()).min(chunk.len());
            let mut joined = std::mem::take(&mut self.carry);
            joined.extend_from_slice(&chunk[..need]);
            let used = match std::str::from_utf8(&joined) {
                Ok(_) => need,
                Err(e) if e.valid_up_to() > 0 => e.valid_up_to() - (joined.len() - need),
                Err(e) if e.error_len().is_none() => {
                    // Still incomplete: the chunk was shorter than the rest.
                    self.carry = joined;
                    return Ok(());
                }
                Err(_) => return Err(not_utf8()),
            };
            chunk = &chunk[used..];
        }
        match std::str::from_utf8(chunk) {
            Ok(_) => Ok(()),
            Err(e) if e.error_len().is_none() => {
                self.carry = chunk[e.valid_up_to()..].to_vec();
                Ok(())
            }
            Err(_) => Err(not_utf8()),
        }
    }

    fn in_window(&self, line: usize) -> bool {
        line >= self.first && line < self.end
    }

    fn keep(&mut self, bytes: &[u8]) -> Result<(), PagedStop> {
        if self.kept.len() + bytes.len() > self.keep_max {
            return Err(PagedStop::WindowTooLarge {
                keep_max: self.keep_max,
            });
        }
        self.kept.extend_from_slice(bytes);
        Ok(())
    }

    /// The end of the file: the lines kept, the totals and the format.
    pub fn finish(mut self) -> Result<Paged, PagedStop> {
        if let Some(head) = self.head.take() {
            self.start(&head, &[])?;
        }
        if !self.carry.is_empty() {
            return Err(not_utf8());
        }
        let total_lines =
            self.counts.breaks() + usize::from(self.last.is_some_and(|b| b != b'\n' && b != b'\r'));
        let text = match crate::repr::utf8_lossy(&self.kept) {
            Cow::Borrowed(_) => String::from_utf8(self.kept).unwrap_or_default(),
            Cow::Owned(s) => s,
        };
        Ok(Paged {
            text,
            first: self.first,
            total_lines,
            format: Format {
                encoding: Encoding::Utf8,
                bom: self.bom,
                dominant: self.counts.dominant(),
            },
            binary: self.nul == Nul::Seen,
        })
    }
}

/// What a NUL byte does to a paged read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Nul {
    /// It stops the read (numbered lines refuse binary files).
    Refused,
    /// None seen yet.
    Unseen,
    /// One was seen (a text read answers binary files decoded).
    Seen,
}

fn not_utf8() -> PagedStop {
    PagedStop::NotUtf8("its bytes are not UTF-8".to_string())
}

/// What a [`PagedRead`] kept and counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Paged {
    /// The lines asked for, each with its own ending (undecodable bytes of
    /// a file with a UTF-8 BOM shown as U+FFFD).
    text: String,
    /// 0-based index of the first line asked for.
    first: usize,
    /// Lines in the whole file (SPEC 8.1).
    pub total_lines: usize,
    /// The whole file's format.
    pub format: Format,
    /// Whether the file holds a NUL byte.
    pub binary: bool,
}

impl Paged {
    /// The lines asked for, with their endings: what `fs/read_text_file`
    /// answers.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// The lines asked for as numbered lines, numbered as in the whole file.
    pub fn numbered(&self) -> NumberedView<'_> {
        NumberedView::window_of(
            Cow::Borrowed(&self.text),
            self.first,
            self.total_lines,
            self.format,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn paged(bytes: &[u8], cut: usize, line: Option<u64>, limit: Option<u64>) -> Paged {
        let mut read = PagedRead::new(line, limit, usize::MAX, false);
        for chunk in bytes.chunks(cut.max(1)) {
            read.feed(chunk).unwrap();
        }
        read.finish().unwrap()
    }

    fn same_as_whole(bytes: &[u8], cut: usize, line: Option<u64>, limit: Option<u64>) {
        let p = paged(bytes, cut, line, limit);
        let whole = crate::numbered_view(bytes, line, limit).unwrap();
        let got: Vec<_> = p
            .numbered()
            .lines()
            .map(|(n, t)| (n, t.to_string()))
            .collect();
        let want: Vec<_> = whole.lines().map(|(n, t)| (n, t.to_string())).collect();
        assert_eq!(got, want, "{bytes:?} cut {cut} {line:?} {limit:?}");
        assert_eq!(p.total_lines, whole.total_lines, "{bytes:?} cut {cut}");
        assert_eq!(p.format, whole.format, "{bytes:?} cut {cut}");
        let (text, _) = crate::read_text_borrowed(bytes, line, limit).unwrap();
        assert_eq!(p.text(), text, "{bytes:?} cut {cut} {line:?} {limit:?}");
    }

    #[test]
    fn a_crlf_cut_between_chunks_is_one_ending_of_one_line() {
        for cut in 1..8 {
            same_as_whole(b"ab\r\ncd\r\n\r\nx", cut, Some(1), Some(1));
            same_as_whole(b"ab\r\ncd\r\n\r\nx", cut, Some(2), Some(2));
            same_as_whole(b"a\rb\r\r\nc\n", cut, None, None);
        }
    }

    #[test]
    fn a_character_cut_between_chunks_is_utf8() {
        let text = "é€😀 line\r\nnext ✓\n".repeat(3);
        for cut in 1..9 {
            same_as_whole(text.as_bytes(), cut, Some(2), Some(3));
        }
    }

    #[test]
    fn a_utf8_bom_is_kept_in_the_format_and_out_of_the_text() {
        for cut in 1..6 {
            same_as_whole(b"\xEF\xBB\xBFone\ntwo\n", cut, Some(2), None);
            same_as_whole(b"\xEF\xBB\xBF", cut, None, None);
        }
    }

    #[test]
    fn other_encodings_and_bad_bytes_stop_the_read() {
        for bytes in [
            &b"\xFF\xFEa\x00"[..],
            b"\x00\x00\xFE\xFFabcd",
            b"ok\n\xE9t\xE9\n",
        ] {
            let mut read = PagedRead::new(None, Some(1), usize::MAX, false);
            let stop = read.feed(bytes).and_then(|()| read.finish().map(drop));
            assert!(matches!(stop, Err(PagedStop::NotUtf8(_))), "{bytes:?}");
        }
        let mut cut = PagedRead::new(None, None, usize::MAX, false);
        cut.feed(b"ok \xE2\x82").unwrap();
        assert!(matches!(cut.finish(), Err(PagedStop::NotUtf8(_))));
    }

    #[test]
    fn a_nul_stops_a_numbered_read_and_is_noted_by_a_text_read() {
        let mut numbered = PagedRead::new(None, Some(1), usize::MAX, true);
        assert_eq!(numbered.feed(b"a\nb\x00\n"), Err(PagedStop::Binary));
        let mut text = PagedRead::new(None, Some(1), usize::MAX, false);
        text.feed(b"a\nb\x00\n").unwrap();
        let p = text.finish().unwrap();
        assert!(p.binary);
        assert_eq!(p.text(), "a\n");
    }

    #[test]
    fn a_window_over_its_limit_stops_the_read() {
        let mut read = PagedRead::new(Some(2), Some(2), 5, false);
        read.feed(b"skipped line\n1234\n").unwrap();
        assert_eq!(
            read.feed(b"56\n"),
            Err(PagedStop::WindowTooLarge { keep_max: 5 })
        );
    }

    proptest! {
        /// Any UTF-8 text of the line model's pieces, cut anywhere, read any
        /// window: the lines, totals, format and text of the whole-file read.
        #[test]
        fn paged_reads_agree_with_whole_reads(
            pieces in proptest::collection::vec(
                prop_oneof![
                    Just("\r"), Just("\n"), Just("\r\n"), Just("a"), Just("é"), Just("😀"), Just(""),
                ],
                0..40,
            ),
            bom in any::<bool>(),
            cut in 1usize..12,
            line in proptest::option::of(0u64..12),
            limit in proptest::option::of(0u64..6),
        ) {
            let mut bytes = if bom { b"\xEF\xBB\xBF".to_vec() } else { Vec::new() };
            for p in &pieces {
                bytes.extend_from_slice(p.as_bytes());
            }
            same_as_whole(&bytes, cut, line, limit);
        }
    }
}
