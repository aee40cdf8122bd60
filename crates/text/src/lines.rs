//! The line model of SPEC 8.1: a text split into lines, each a text and an ending.
//!
//! Lines can be listed ([`split_bytes`], [`split_units`]), walked without storing a
//! list ([`iter_bytes`], [`iter_units`]), or only counted ([`count_endings`]). The
//! model is local: a unit ends a line break exactly when it is `\n`, or a `\r` not
//! directly followed by `\n`; so breaks can be counted over any range of a text by
//! looking one unit past either end of it, and byte texts are scanned with `memchr`.

use std::iter::FusedIterator;
use std::ops::Range;

use crate::encoding::Unit;

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

fn is_break<U: Copy + Into<u32>>(u: U) -> bool {
    let v: u32 = u.into();
    v == CR || v == LF
}

/// Index of the first `\r` or `\n` at or after `from`, looked at unit by unit.
fn next_break_scalar<U: Copy + Into<u32>>(units: &[U], from: usize) -> Option<usize> {
    units
        .get(from..)?
        .iter()
        .position(|&u| is_break(u))
        .map(|i| from + i)
}

/// [`next_break_scalar`] over bytes, vectorised.
fn next_break_bytes(bytes: &[u8], from: usize) -> Option<usize> {
    memchr::memchr2(b'\r', b'\n', bytes.get(from..)?).map(|i| from + i)
}

/// [`next_break_scalar`] for any code unit, vectorised for bytes.
fn next_break<U: Unit>(units: &[U], from: usize) -> Option<usize> {
    match U::as_bytes(units) {
        Some(bytes) => next_break_bytes(bytes, from),
        None => next_break_scalar(units, from),
    }
}

/// The lines of a code-unit sequence (SPEC 8.1), one at a time, without storing a
/// list: exactly the lines [`split_units`] returns, in the same order. Made by
/// [`iter_bytes`] (vectorised) or [`iter_units`].
#[derive(Clone)]
pub struct LineIter<'a, U> {
    units: &'a [U],
    pos: usize,
    next_break: fn(&[U], usize) -> Option<usize>,
}

impl<U: Copy + Into<u32>> Iterator for LineIter<'_, U> {
    type Item = Line;

    fn next(&mut self) -> Option<Line> {
        let n = self.units.len();
        let start = self.pos;
        if start >= n {
            return None;
        }
        let line = match (self.next_break)(self.units, start) {
            Some(i) => {
                let ending = if self.units[i].into() == LF {
                    Ending::Lf
                } else if self.units.get(i + 1).is_some_and(|&u| u.into() == LF) {
                    Ending::CrLf
                } else {
                    Ending::Cr
                };
                Line {
                    start,
                    text_end: i,
                    end: i + ending.len(),
                    ending: Some(ending),
                }
            }
            None => Line {
                start,
                text_end: n,
                end: n,
                ending: None,
            },
        };
        self.pos = line.end;
        Some(line)
    }
}

impl<U: Copy + Into<u32>> FusedIterator for LineIter<'_, U> {}

/// The lines of `units` one at a time (see [`LineIter`]), scanned unit by unit;
/// works for bytes, UTF-16 units and UTF-32 units alike.
pub fn iter_units<U: Copy + Into<u32>>(units: &[U]) -> LineIter<'_, U> {
    LineIter {
        units,
        pos: 0,
        next_break: next_break_scalar,
    }
}

/// The lines of `bytes` one at a time (see [`LineIter`]), scanned with `memchr`.
pub fn iter_bytes(bytes: &[u8]) -> LineIter<'_, u8> {
    LineIter {
        units: bytes,
        pos: 0,
        next_break: next_break_bytes,
    }
}

/// The lines of any code-unit sequence (vectorised for bytes) from the line starting
/// at `start` on (`start` must be 0 or the end of a line break, as [`skip_lines`]
/// returns).
pub(crate) fn iter_lines_from<U: Unit>(units: &[U], start: usize) -> LineIter<'_, U> {
    LineIter {
        units,
        pos: start,
        next_break: next_break::<U>,
    }
}

/// Where the line `k` lines after the line starting at `start` starts, or `None`
/// when there is no such line (`skip_lines(u, 0, k)` is the start of line `k`,
/// 0-based). For bytes, whole blocks whose breaks are fewer than those left to skip
/// are only counted (vectorised); the rest is walked break by break.
pub(crate) fn skip_lines<U: Unit>(units: &[U], start: usize, k: usize) -> Option<usize> {
    const BLOCK: usize = 1 << 14;
    let (mut pos, mut k) = (start, k);
    if let Some(bytes) = U::as_bytes(units) {
        // `pos` need not stay a line start here: it only marks how far the breaks
        // (by their last unit) have been counted.
        while k > 0 && pos + BLOCK <= bytes.len() {
            let c = count_range_bytes(bytes, pos, pos + BLOCK).breaks();
            if c >= k {
                break;
            }
            k -= c;
            pos += BLOCK;
        }
    }
    while k > 0 {
        let q = next_break(units, pos)?;
        let crlf = units[q].into() == CR && units.get(q + 1).is_some_and(|&u| u.into() == LF);
        pos = q + if crlf { 2 } else { 1 };
        k -= 1;
    }
    (pos < units.len()).then_some(pos)
}

/// Splits a sequence of code units into lines (SPEC 8.1). A line ends at `\n`,
/// `\r\n` or a lone `\r` (compared as unit values 0x0A / 0x0D, so this works for
/// bytes, UTF-16 units and UTF-32 units alike). An empty input has no lines; a final
/// line break does not start an extra empty line (`"a\n"` is one line); the last
/// line may have no ending. Joining every `start..end` gives back the input exactly.
/// Never fails, never panics.
///
/// This stores one [`Line`] per line; to walk lines or count them without a list,
/// use [`iter_units`] / [`iter_bytes`] / [`count_endings`].
pub fn split_units<U: Copy + Into<u32>>(units: &[U]) -> Vec<Line> {
    iter_units(units).collect()
}

/// [`split_units`] over bytes: the SPEC 8.1 split for UTF-8 and single-byte (or
/// ASCII-compatible multi-byte) legacy files. Indexes are byte offsets.
pub fn split_bytes(bytes: &[u8]) -> Vec<Line> {
    iter_bytes(bytes).collect()
}

/// How many line breaks of each kind a text (or a range of it) holds, under the
/// SPEC 8.1 model.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EndingCounts {
    /// `\n` endings (not preceded by `\r`).
    pub lf: usize,
    /// `\r\n` endings.
    pub crlf: usize,
    /// Lone `\r` endings.
    pub cr: usize,
}

impl EndingCounts {
    /// The endings of an already split list of lines, tallied by kind.
    pub fn of_lines(lines: &[Line]) -> EndingCounts {
        let mut c = EndingCounts::default();
        for l in lines {
            match l.ending {
                Some(Ending::Lf) => c.lf += 1,
                Some(Ending::CrLf) => c.crlf += 1,
                Some(Ending::Cr) => c.cr += 1,
                None => {}
            }
        }
        c
    }

    /// Number of line breaks of any kind.
    pub fn breaks(&self) -> usize {
        self.lf + self.crlf + self.cr
    }

    /// Number of code units the endings take (`\r\n` is two).
    pub fn units(&self) -> usize {
        self.lf + 2 * self.crlf + self.cr
    }

    /// The dominant ending (SPEC 8.2): the most frequent; ties go to `Lf`, then
    /// `CrLf`, then `Cr`. `None` when there is no line break.
    pub fn dominant(&self) -> Option<Ending> {
        let (lf, crlf, cr) = (self.lf, self.crlf, self.cr);
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
}

/// Counts the line breaks of `bytes` by kind, without splitting it into lines
/// (vectorised). `count_endings(b).dominant()` is `dominant(&split_bytes(b))`.
pub fn count_endings(bytes: &[u8]) -> EndingCounts {
    count_range_bytes(bytes, 0, bytes.len())
}

/// The breaks whose last unit lies in `lo..hi` (`lo <= hi <= units.len()`), unit by
/// unit. Whether a `\r` at `hi - 1` is lone, and whether a `\n` at `lo` completes a
/// `\r\n`, is decided by the units just outside the range. Counts over adjacent
/// ranges therefore add up to the count over their union.
fn count_range_scalar<U: Copy + Into<u32>>(units: &[U], lo: usize, hi: usize) -> EndingCounts {
    let mut c = EndingCounts::default();
    let mut prev_cr = lo > 0 && units[lo - 1].into() == CR;
    for (q, &u) in units[lo..hi].iter().enumerate() {
        let v: u32 = u.into();
        if v == LF {
            if prev_cr {
                c.crlf += 1;
            } else {
                c.lf += 1;
            }
        } else if v == CR && units.get(lo + q + 1).is_none_or(|&n| n.into() != LF) {
            c.cr += 1;
        }
        prev_cr = v == CR;
    }
    c
}

/// [`count_range_scalar`] over bytes, vectorised.
fn count_range_bytes(b: &[u8], lo: usize, hi: usize) -> EndingCounts {
    let r = &b[lo..hi];
    let lfs = memchr::memchr_iter(b'\n', r).count();
    let crs = memchr::memchr_iter(b'\r', r).count();
    // `\r` units in the range directly followed by `\n` (that `\n` possibly at `hi`).
    let last = hi.min(b.len().saturating_sub(1));
    let cr_lf = if crs == 0 || lo >= last {
        0
    } else {
        count_cr_lf(&b[lo..last], &b[lo + 1..=last])
    };
    // `\n` units in the range directly preceded by `\r`: the same pairs, less one
    // whose `\n` is at `hi`, plus one whose `\r` is at `lo - 1`.
    let mut lf_after_cr = cr_lf;
    if hi > lo && b[hi - 1] == b'\r' && b.get(hi) == Some(&b'\n') {
        lf_after_cr -= 1;
    }
    if lo > 0 && lo < hi && b[lo - 1] == b'\r' && b[lo] == b'\n' {
        lf_after_cr += 1;
    }
    EndingCounts {
        lf: lfs - lf_after_cr,
        crlf: lf_after_cr,
        cr: crs - cr_lf,
    }
}

/// Number of indexes `i` with `cr[i] == b'\r'` and `lf[i] == b'\n'` (`lf` is `cr`
/// shifted by one byte). Counted in blocks small enough for byte-wide sums, which
/// the compiler vectorises.
fn count_cr_lf(cr: &[u8], lf: &[u8]) -> usize {
    const BLOCK: usize = 128;
    cr.chunks(BLOCK)
        .zip(lf.chunks(BLOCK))
        .map(|(c, l)| {
            let hits = c.iter().zip(l).fold(0u8, |n, (&x, &y)| {
                n + (u8::from(x == b'\r') & u8::from(y == b'\n'))
            });
            usize::from(hits)
        })
        .sum()
}

/// The breaks whose last unit lies in `lo..hi` of any code-unit sequence (see
/// [`count_range_scalar`]), vectorised for bytes. `lo <= hi <= units.len()`.
pub(crate) fn count_range<U: Unit>(units: &[U], lo: usize, hi: usize) -> EndingCounts {
    match U::as_bytes(units) {
        Some(bytes) => count_range_bytes(bytes, lo, hi),
        None => count_range_scalar(units, lo, hi),
    }
}

/// All line breaks of `units`, by kind.
pub(crate) fn count_units<U: Unit>(units: &[U]) -> EndingCounts {
    count_range(units, 0, units.len())
}

/// Line breaks by kind of a stream of unit values (for encodings whose units are
/// not stored as a slice).
pub(crate) fn count_stream(units: impl Iterator<Item = u32>) -> EndingCounts {
    let mut c = EndingCounts::default();
    let mut prev_cr = false;
    for v in units {
        if v == LF {
            if prev_cr {
                c.crlf += 1;
            } else {
                c.lf += 1;
            }
        } else if prev_cr {
            c.cr += 1;
        }
        prev_cr = v == CR;
    }
    if prev_cr {
        c.cr += 1;
    }
    c
}

/// Number of lines (SPEC 8.1) of `units` whose breaks are `counts`: one per break,
/// plus a last line without an ending when the units do not end with a break.
pub(crate) fn line_total<U: Copy + Into<u32>>(units: &[U], counts: &EndingCounts) -> usize {
    counts.breaks() + usize::from(units.last().is_some_and(|&u| !is_break(u)))
}

/// Number of lines (SPEC 8.1) of `bytes`, counted without splitting:
/// `split_bytes(b).len()`.
pub fn count_lines(bytes: &[u8]) -> usize {
    line_total(bytes, &count_endings(bytes))
}

/// True when the last line of `units` has an ending (`false` for no units).
pub(crate) fn ends_with_break<U: Copy + Into<u32>>(units: &[U]) -> bool {
    units.last().is_some_and(|&u| is_break(u))
}

/// The dominant ending of `lines` (SPEC 8.2): the most frequent ending; ties go to
/// `Lf`, then `CrLf`, then `Cr`. `None` when no line has an ending.
pub fn dominant(lines: &[Line]) -> Option<Ending> {
    EndingCounts::of_lines(lines).dominant()
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

/// Index (0-based) of the line holding unit `pos` for a run of non-decreasing
/// positions, without a line list: [`line_index_at`] over the split of `units`,
/// counting only the breaks between one position and the next.
pub(crate) struct LineLocator<'a, U> {
    units: &'a [U],
    total: usize,
    pos: usize,
    breaks: usize,
}

impl<'a, U: Unit> LineLocator<'a, U> {
    /// A locator over `units`, which hold `total` lines.
    pub(crate) fn new(units: &'a [U], total: usize) -> Self {
        LineLocator {
            units,
            total,
            pos: 0,
            breaks: 0,
        }
    }

    /// The index of the line holding `pos` (the last line for a `pos` at or past the
    /// end; 0 when there are no lines).
    pub(crate) fn index_at(&mut self, pos: usize) -> usize {
        let pos = pos.min(self.units.len());
        if pos < self.pos {
            self.pos = 0;
            self.breaks = 0;
        }
        // The line holding `pos` is the number of breaks that end at or before it,
        // i.e. whose last unit is before it.
        self.breaks += count_range(self.units, self.pos, pos).breaks();
        self.pos = pos;
        self.breaks.min(self.total.saturating_sub(1))
    }
}

/// Replaces every line break of `s` (`\n`, `\r\n`, lone `\r`) by `ending`. A `\r\n`
/// is one break, so the result never holds `\r\r\n` unless `s` had `\r` before `\r\n`
/// (which is two breaks and becomes two endings).
pub fn convert_breaks(s: &str, ending: Ending) -> String {
    let c = count_endings(s.as_bytes());
    if c.breaks() == kind_count(&c, ending) {
        return s.to_owned();
    }
    let mut out = String::with_capacity(s.len() - c.units() + c.breaks() * ending.len());
    for piece in converted_pieces(s, ending) {
        out.push_str(piece);
    }
    out
}

fn kind_count(c: &EndingCounts, ending: Ending) -> usize {
    match ending {
        Ending::Lf => c.lf,
        Ending::CrLf => c.crlf,
        Ending::Cr => c.cr,
    }
}

/// The pieces of [`convert_breaks`]`(s, ending)`, in order: each line's text, then
/// `ending` for each line that had one.
pub(crate) fn converted_pieces(s: &str, ending: Ending) -> impl Iterator<Item = &str> {
    iter_bytes(s.as_bytes()).flat_map(move |l| {
        let nl = if l.ending.is_some() {
            ending.as_str()
        } else {
            ""
        };
        [&s[l.text()], nl]
    })
}

/// Appends `prefix` and then the bytes of [`convert_breaks`]`(s, ending)` to `out`,
/// reserving exactly the room they take.
pub(crate) fn push_converted(s: &str, ending: Ending, prefix: &[u8], out: &mut Vec<u8>) {
    let c = count_endings(s.as_bytes());
    out.reserve_exact(prefix.len() + s.len() - c.units() + c.breaks() * ending.len());
    out.extend_from_slice(prefix);
    if c.breaks() == kind_count(&c, ending) {
        out.extend_from_slice(s.as_bytes());
    } else {
        for piece in converted_pieces(s, ending) {
            out.extend_from_slice(piece.as_bytes());
        }
    }
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

    /// Skipping lines over texts long enough for whole counted blocks, including
    /// blocks that end between a `\r` and its `\n` and lines longer than a block.
    #[test]
    fn skipping_lines_across_blocks() {
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..6 {
            let mut bytes = Vec::new();
            while bytes.len() < 200_000 {
                let r = next();
                let text = usize::try_from(r % if round % 2 == 0 { 60 } else { 40_000 }).unwrap();
                bytes.extend(std::iter::repeat_n(b'x', text));
                bytes.extend_from_slice(match (r >> 32) % 4 {
                    0 => &b"\n"[..],
                    1 => b"\r",
                    _ => b"\r\n",
                });
            }
            // Breaks straddling block edges.
            for edge in [1usize << 14, 2 << 14, 3 << 14] {
                bytes[edge - 1] = b'\r';
                bytes[edge] = b'\n';
            }
            if round >= 4 {
                bytes.pop();
            }
            let want = reference_split(&bytes);
            for k in (0..want.len() + 2)
                .step_by(61)
                .chain([want.len() - 1, want.len()])
            {
                assert_eq!(
                    skip_lines(&bytes, 0, k),
                    want.get(k).map(|l| l.start),
                    "round {round}, k {k}"
                );
            }
            assert_eq!(count_endings(&bytes), counts_of(&want));
        }
    }

    /// The split as first written (a plain loop), the reference for the scanners.
    fn reference_split<U: Copy + Into<u32>>(units: &[U]) -> Vec<Line> {
        let mut lines = Vec::new();
        let (mut start, mut i, n) = (0, 0, units.len());
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

    fn counts_of(lines: &[Line]) -> EndingCounts {
        EndingCounts::of_lines(lines)
    }

    /// Break-heavy bytes, long enough to cross the vectorised scanners' blocks.
    fn breaky() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let unit = prop_oneof![
            3 => Just(b'\n'),
            3 => Just(b'\r'),
            1 => Just(0xFFu8),
            4 => Just(b'a'),
        ];
        prop::collection::vec(unit, 0..300)
    }

    proptest::proptest! {
        #[test]
        fn scanners_match_the_reference_split(bytes in breaky(), cut in 0usize..301, cut2 in 0usize..301) {
            let want = reference_split(&bytes);
            proptest::prop_assert_eq!(&split_bytes(&bytes), &want);
            proptest::prop_assert_eq!(&split_units(&bytes), &want);
            proptest::prop_assert_eq!(&iter_lines_from(&bytes, 0).collect::<Vec<_>>(), &want);
            let wide: Vec<u16> = bytes.iter().map(|&b| u16::from(b)).collect();
            proptest::prop_assert_eq!(&iter_lines_from(&wide, 0).collect::<Vec<_>>(), &want);
            let c = count_endings(&bytes);
            proptest::prop_assert_eq!(c, counts_of(&want));
            proptest::prop_assert_eq!(count_units(&wide), c);
            proptest::prop_assert_eq!(count_stream(wide.iter().map(|&u| u32::from(u))), c);
            proptest::prop_assert_eq!(c.dominant(), dominant(&want));
            proptest::prop_assert_eq!(count_lines(&bytes), want.len());
            proptest::prop_assert_eq!(ends_with_break(&bytes), want.last().is_some_and(|l| l.ending.is_some()));
            // Counting over a range: the breaks whose last unit lies in it.
            let (lo, hi) = (cut.min(cut2).min(bytes.len()), cut.max(cut2).min(bytes.len()));
            let in_range: Vec<Line> = want.iter().copied().filter(|l| l.ending.is_some() && l.end > lo && l.end <= hi).collect();
            proptest::prop_assert_eq!(count_range(&bytes, lo, hi), counts_of(&in_range));
            proptest::prop_assert_eq!(count_range(&wide, lo, hi), counts_of(&in_range));
            // Line lookup without a list, in increasing and then decreasing order.
            let mut loc = LineLocator::new(&bytes, want.len());
            for p in [lo, hi, hi + 1, lo] {
                proptest::prop_assert_eq!(loc.index_at(p), line_index_at(&want, p), "pos {}", p);
            }
        }

        #[test]
        fn skipping_lines_matches_the_reference(bytes in breaky(), from in 0usize..40) {
            let want = reference_split(&bytes);
            let wide: Vec<u32> = bytes.iter().map(|&b| u32::from(b)).collect();
            let start = want.get(from).map_or(0, |l| l.start);
            let base = if from < want.len() { from } else { 0 };
            for k in 0..=want.len() + 1 {
                let expect = want.get(base + k).map(|l| l.start);
                proptest::prop_assert_eq!(skip_lines(&bytes, start, k), expect);
                proptest::prop_assert_eq!(skip_lines(&wide, start, k), expect);
                if let Some(p) = expect {
                    proptest::prop_assert_eq!(iter_lines_from(&bytes, p).next(), want.get(base + k).copied());
                }
            }
        }

        #[test]
        fn convert_breaks_matches_the_reference(bytes in breaky(), which in 0usize..3) {
            let s = String::from_utf8_lossy(&bytes).into_owned();
            let ending = [Ending::Lf, Ending::CrLf, Ending::Cr][which];
            let mut want = String::new();
            for l in reference_split(s.as_bytes()) {
                want.push_str(&s[l.text()]);
                if l.ending.is_some() {
                    want.push_str(ending.as_str());
                }
            }
            proptest::prop_assert_eq!(convert_breaks(&s, ending), want);
        }
    }
}
