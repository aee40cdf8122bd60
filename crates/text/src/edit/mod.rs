//! The edit engine of `_writegate/edit_text_file` (SPEC 8): modes, the two forgiving
//! rules, the guard, and the result.
//!
//! Every in-place edit works on the original file's code units (bytes, or 16/32-bit
//! units after the BOM), replaces one unit range `a..b` with newly encoded units, and
//! copies everything else unchanged, so bytes outside the edit (invalid ones
//! included) survive byte-identical. The guard then re-reads the new bytes and
//! checks exactly that before anything is returned.
//!
//! Cost: the engine never holds a list of the file's lines. It counts line breaks
//! (vectorised for byte encodings), walks lines only as far as the edit needs, and
//! builds the new bytes in one allocation of their exact size (prefix, new middle,
//! suffix). For a UTF-8 or legacy file its working memory beyond the new bytes is
//! a few small buffers, whatever the line lengths.

use std::time::Duration;

use crate::error::TextError;
use crate::escape::{cut, show};
use crate::format::{Format, WriteOptions, decode, detect, detect_counted, encode_whole};
use crate::lines::{
    Ending, EndingCounts, Line, LineLocator, convert_breaks, count_endings, count_lines,
    count_range, count_units, ends_with_break, iter_bytes, iter_lines_from, line_total, skip_lines,
    strip_one_break,
};
use crate::repr::{BodyUnits, Repr, Unit, is_indent, with_repr};

/// The edit mode (SPEC 8.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EditMode {
    /// Whole file, as `fs/write_text_file` (SPEC 9 for the format). Creates the file.
    Write,
    /// Content after the existing bytes, line breaks taking the dominant ending.
    /// Creates the file.
    Append,
    /// One exact occurrence of `find`, or line `line` (..= `end_line`).
    Replace,
    /// New lines before `line` (`line` = last + 1 adds at the end).
    Insert,
    /// Lines `line..=end_line` (`end_line` defaults to `line`).
    Delete,
}

impl EditMode {
    /// The wire name: `write`, `append`, `replace`, `insert`, `delete`.
    pub fn name(self) -> &'static str {
        match self {
            EditMode::Write => "write",
            EditMode::Append => "append",
            EditMode::Replace => "replace",
            EditMode::Insert => "insert",
            EditMode::Delete => "delete",
        }
    }
}

/// One edit, as received in `_writegate/edit_text_file` params (SPEC 8).
///
/// Line numbers are 1-based as the wire gives them (`0` is out of range for line
/// edits). `display_path` is only used in the result message and diff headers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EditRequest<'a> {
    /// The mode.
    pub mode: EditMode,
    /// New text: the whole file (write), text to add (append), the replacement
    /// (replace), the new lines (insert); ignored by delete.
    pub content: &'a str,
    /// `replace` only: the exact text to replace, or with `line` a check that the
    /// numbered line holds it.
    pub find: Option<&'a str>,
    /// 1-based line for `replace`, `insert`, `delete`.
    pub line: Option<u64>,
    /// 1-based last line (inclusive) for `replace` and `delete`.
    pub end_line: Option<u64>,
    /// The path as the message should name it.
    pub display_path: &'a str,
    /// Whether to compute a unified diff (`dryRun`).
    pub want_diff: bool,
}

/// The result of a successful [`apply_edit`] (SPEC 8.6): the new bytes to publish
/// and what to report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EditOutcome {
    /// The complete new file bytes (BOM included).
    pub bytes: Vec<u8>,
    /// The format of the new bytes (encoding and BOM of the file, dominant ending
    /// recomputed).
    pub format: Format,
    /// The first line edited (1-based) in the new file; `None` for `write`.
    pub line: Option<u64>,
    /// The line asked for when the stale-number rule (SPEC 8.4) moved the edit.
    pub moved_from: Option<u64>,
    /// The kept indentation in words ("4 spaces", "1 tab and 2 spaces") when the
    /// keep-indentation rule (SPEC 8.4) acted.
    pub kept_indentation: Option<String>,
    /// Up to three edited lines as they now read, escaped and cut at 200 characters
    /// (SPEC 8.6). Empty for `write` and `delete`.
    pub now_reads: Vec<String>,
    /// One sentence a model can act on, e.g.
    /// `replaced line 3 of src/a.py; line 3 now: "    return 10"`.
    pub message: String,
    /// A unified diff of the decoded old and new text when `want_diff` was set.
    pub diff: Option<String>,
}

/// True when the file is binary for SPEC 8.3: it holds a NUL byte and its encoding is
/// not UTF-16/32.
pub fn is_binary(bytes: &[u8], format: &Format) -> bool {
    !format.encoding.is_wide() && memchr::memchr(0, bytes).is_some()
}

/// Applies one edit (SPEC 8) to a file's bytes. Pure: the caller reads the file,
/// checks `expectedHash` and size caps, and publishes `bytes`.
///
/// `original` is `None` when the file does not exist: only `Write` and `Append`
/// create (with `opts`, SPEC 9); other modes return `InvalidRequest` (the caller
/// should have answered `path_not_found` already). `opts` (the request's `_meta`)
/// applies to `write` and to an `append` that creates the file; edits of an existing
/// file keep its encoding, BOM and endings.
///
/// Errors: `InvalidRequest` (parameter combination), `UnsupportedEncoding`
/// (undetectable file, or a UTF-16/32 file ending inside a code unit), `BinaryFile`,
/// `TextNotFound`, `AmbiguousTextMatch`, `LineOutOfRange`, `LineMismatch`,
/// `UnmappableCharacter` (content not representable in the file's encoding), `Guard`.
pub fn apply_edit(
    original: Option<&[u8]>,
    req: &EditRequest,
    opts: &WriteOptions,
) -> Result<EditOutcome, TextError> {
    validate(req)?;
    match (req.mode, original) {
        (EditMode::Write, orig) => write_mode(orig, req, opts),
        (EditMode::Append, None) => create_by_append(req, opts),
        (mode, None) => Err(TextError::InvalidRequest(format!(
            "{} needs an existing file; only write and append create files",
            mode.name()
        ))),
        (_, Some(bytes)) => {
            let (format, counts) = detect_counted(bytes)?;
            if is_binary(bytes, &format) {
                return Err(TextError::BinaryFile);
            }
            with_repr!(format.encoding, |r| edit_existing(
                r, bytes, &format, &counts, req
            ))
        }
    }
}

fn invalid(why: &str) -> TextError {
    TextError::InvalidRequest(why.to_string())
}

/// Checks that the parameters of an edit fit its mode (SPEC 8.3): `write`
/// and `append` take no `find`/`line`/`endLine`; `replace` needs `find`,
/// `line` or both; `insert` needs `line` only; `delete` needs `line` (and
/// optionally `endLine`), no `find`; `endLine` needs `line` and is not
/// before it. Pure and cheap, so callers run it before anything else (a bad
/// combination is invalid params, not an audited refusal).
///
/// Errors: [`TextError::InvalidRequest`] naming the problem.
pub fn validate(req: &EditRequest) -> Result<(), TextError> {
    let m = req.mode.name();
    match req.mode {
        EditMode::Write | EditMode::Append => {
            if req.find.is_some() || req.line.is_some() || req.end_line.is_some() {
                return Err(invalid(&format!("{m} takes no find, line or endLine")));
            }
        }
        EditMode::Replace => {
            if req.find.is_none() && req.line.is_none() {
                return Err(invalid("replace needs find, line, or both"));
            }
        }
        EditMode::Insert => {
            if req.line.is_none() {
                return Err(invalid("insert needs line"));
            }
            if req.find.is_some() || req.end_line.is_some() {
                return Err(invalid(
                    "insert takes line and content only, no find or endLine",
                ));
            }
        }
        EditMode::Delete => {
            if req.line.is_none() {
                return Err(invalid("delete needs line"));
            }
            if req.find.is_some() {
                return Err(invalid("delete takes line and endLine only, no find"));
            }
        }
    }
    if req.end_line.is_some() && req.line.is_none() {
        return Err(invalid("endLine needs line"));
    }
    if let (Some(l), Some(e)) = (req.line, req.end_line)
        && e < l
    {
        return Err(invalid("endLine must not be before line"));
    }
    Ok(())
}

fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// Describes an indentation in words (SPEC 8.4/8.6): runs of spaces and tabs in order,
/// e.g. `"4 spaces"`, `"1 tab"`, `"1 tab and 2 spaces"`, `"1 space, 1 tab and 1 space"`.
/// Characters other than space and tab are ignored. Empty input gives `""`.
pub fn indentation_words(indent: &str) -> String {
    let mut runs: Vec<(char, usize)> = Vec::new();
    for c in indent.chars().filter(|c| *c == ' ' || *c == '\t') {
        match runs.last_mut() {
            Some((rc, n)) if *rc == c => *n += 1,
            _ => runs.push((c, 1)),
        }
    }
    let words: Vec<String> = runs
        .iter()
        .map(|&(c, n)| plural(n, if c == ' ' { "space" } else { "tab" }))
        .collect();
    match words.len() {
        0 => String::new(),
        1 => words[0].clone(),
        n => format!("{} and {}", words[..n - 1].join(", "), words[n - 1]),
    }
}

/// Number of line breaks in `s` under the SPEC 8.1 model.
fn breaks_in(s: &str) -> usize {
    count_endings(s.as_bytes()).breaks()
}

/// How many lines new text spans when shown: its breaks plus one, except that a
/// final line break does not start a shown line.
fn shown_lines(s: &str) -> usize {
    let b = breaks_in(s);
    if b > 0 && s.ends_with(['\n', '\r']) {
        b
    } else {
        b + 1
    }
}

fn unified_diff(path: &str, old: &str, new: &str) -> String {
    let (a, b) = if path.starts_with('/') {
        (path.to_string(), path.to_string())
    } else {
        (format!("a/{path}"), format!("b/{path}"))
    };
    similar::TextDiff::configure()
        .timeout(Duration::from_secs(2))
        .diff_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&a, &b)
        .to_string()
}

/// `line 3 now: "x"` or `lines 3-5 now: "a", "b", "c"` (SPEC 8.6).
fn now_clause(first: u64, count: usize, now: &[String]) -> String {
    let quoted: Vec<String> = now.iter().map(|s| format!("\"{s}\"")).collect();
    match count {
        0 => String::new(),
        1 => format!("line {first} now: {}", quoted.join(", ")),
        n => {
            let last = first + n as u64 - 1;
            let more = if n > now.len() { ", …" } else { "" };
            format!("lines {first}-{last} now: {}{more}", quoted.join(", "))
        }
    }
}

fn line_span(first: u64, last: u64) -> String {
    if first == last {
        format!("line {first}")
    } else {
        format!("lines {first}-{last}")
    }
}

fn write_mode(
    original: Option<&[u8]>,
    req: &EditRequest,
    opts: &WriteOptions,
) -> Result<EditOutcome, TextError> {
    let existing = match original {
        Some(b) => match detect(b) {
            Ok(f) => Some(f),
            // An undetectable file may still be replaced whole when the request names
            // the encoding to write; otherwise SPEC 9 refuses.
            Err(_) if opts.encoding.is_some() => None,
            Err(e) => return Err(e),
        },
        None => None,
    };
    let (bytes, format) = encode_whole(req.content, existing.as_ref(), opts)?;
    let lines = count_lines(req.content.as_bytes());
    let verb = if original.is_some() {
        "wrote"
    } else {
        "created"
    };
    let message = format!(
        "{verb} {} ({}, {} bytes, {}{}{})",
        req.display_path,
        plural(lines, "line"),
        bytes.len(),
        format.encoding.name(),
        if format.bom { " with BOM" } else { "" },
        format
            .line_ending_name()
            .map(|e| format!(", {e} line endings"))
            .unwrap_or_default()
    );
    let diff = req.want_diff.then(|| {
        let old = match (original, existing) {
            (Some(b), Some(f)) => decode(b, &f),
            (Some(b), None) => String::from_utf8_lossy(b).into_owned(),
            (None, _) => String::new(),
        };
        unified_diff(req.display_path, &old, &decode(&bytes, &format))
    });
    Ok(EditOutcome {
        bytes,
        format,
        line: None,
        moved_from: None,
        kept_indentation: None,
        now_reads: Vec::new(),
        message,
        diff,
    })
}

fn create_by_append(req: &EditRequest, opts: &WriteOptions) -> Result<EditOutcome, TextError> {
    let (bytes, format) = encode_whole(req.content, None, opts)?;
    let text = decode(&bytes, &format);
    let lines = count_lines(text.as_bytes());
    let now_reads: Vec<String> = iter_bytes(text.as_bytes())
        .take(3)
        .map(|l| show(&text[l.text()]))
        .collect();
    let message = format!(
        "created {} with the appended content ({}){}",
        req.display_path,
        plural(lines, "line"),
        if lines == 0 {
            String::new()
        } else {
            format!("; {}", now_clause(1, lines, &now_reads))
        }
    );
    let diff = req
        .want_diff
        .then(|| unified_diff(req.display_path, "", &text));
    Ok(EditOutcome {
        bytes,
        format,
        line: (lines != 0).then_some(1),
        moved_from: None,
        kept_indentation: None,
        now_reads,
        message,
        diff,
    })
}

/// A piece of `find`: text (already encoded) or a line break matching any ending.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok<U> {
    Text(Vec<U>),
    Break,
}

/// Splits `find` into text pieces and line breaks; `Ok(None)` when `find` holds a
/// character the file's encoding cannot hold (so it can occur nowhere).
fn tokenize<R: Repr>(r: &R, find: &str) -> Result<Option<Vec<Tok<R::U>>>, TextError> {
    let mut toks = Vec::new();
    for l in iter_bytes(find.as_bytes()) {
        let text = &find[l.text()];
        if !text.is_empty() {
            match r.encode(text) {
                Ok(units) => toks.push(Tok::Text(units)),
                Err(TextError::UnmappableCharacter(_)) => return Ok(None),
                Err(e) => return Err(e),
            }
        }
        if l.ending.is_some() {
            toks.push(Tok::Break);
        }
    }
    Ok(Some(toks))
}

fn is_cr<U: Unit>(u: U) -> bool {
    u.into() == 0x0D
}

fn is_lf<U: Unit>(u: U) -> bool {
    u.into() == 0x0A
}

/// The start positions of `pat` in `hay`, overlapping ones included, in increasing
/// order and found lazily (no list): `memchr::memmem` for bytes, KMP for 16/32-bit
/// units.
fn occurrence_iter<'a, U: Unit>(
    hay: &'a [U],
    pat: &'a [U],
) -> Box<dyn Iterator<Item = usize> + 'a> {
    let m = pat.len();
    if m == 0 || m > hay.len() {
        return Box::new(std::iter::empty());
    }
    if let (Some(hay), Some(pat)) = (U::as_bytes(hay), U::as_bytes(pat)) {
        let finder = memchr::memmem::Finder::new(pat);
        let mut at = 0;
        // Resuming one unit after each hit keeps overlapping occurrences.
        return Box::new(std::iter::from_fn(move || {
            let i = at + finder.find(hay.get(at..)?)?;
            at = i + 1;
            Some(i)
        }));
    }
    let mut fail = vec![0usize; m];
    let mut k = 0;
    for i in 1..m {
        while k > 0 && pat[i] != pat[k] {
            k = fail[k - 1];
        }
        if pat[i] == pat[k] {
            k += 1;
        }
        fail[i] = k;
    }
    let mut k = 0;
    let mut units = hay.iter().enumerate();
    Box::new(std::iter::from_fn(move || {
        for (i, &c) in units.by_ref() {
            while k > 0 && c != pat[k] {
                k = fail[k - 1];
            }
            if c == pat[k] {
                k += 1;
            }
            if k == m {
                k = fail[k - 1];
                return Some(i + 1 - m);
            }
        }
        None
    }))
}

/// All start positions of `pat` in `hay`, overlapping ones included.
#[cfg(test)]
fn occurrences<U: Unit>(hay: &[U], pat: &[U]) -> Vec<usize> {
    occurrence_iter(hay, pat).collect()
}

/// The end of a match of `toks` starting at `p`, if there is one. A break token
/// consumes a whole ending (`\r\n` together), and a match never starts between `\r`
/// and `\n`.
fn match_at<U: Unit>(hay: &[U], p: usize, toks: &[Tok<U>]) -> Option<usize> {
    if p > 0 && p < hay.len() && is_cr(hay[p - 1]) && is_lf(hay[p]) {
        return None;
    }
    let mut i = p;
    for t in toks {
        match t {
            Tok::Text(v) => {
                if hay.get(i..i + v.len())? != v.as_slice() {
                    return None;
                }
                i += v.len();
            }
            Tok::Break => {
                let u = *hay.get(i)?;
                if is_cr(u) {
                    i += 1;
                    if hay.get(i).is_some_and(|&n| is_lf(n)) {
                        i += 1;
                    }
                } else if is_lf(u) {
                    i += 1;
                } else {
                    return None;
                }
            }
        }
    }
    Some(i)
}

/// Every (start, end) match of `toks` in `hay` (overlapping included), in increasing
/// order of start and found lazily, both ends on character boundaries when `bounds`
/// is given.
fn matches<'a, U: Unit>(
    hay: &'a [U],
    toks: &'a [Tok<U>],
    bounds: Option<&'a [bool]>,
) -> impl Iterator<Item = (usize, usize)> + 'a {
    let candidates: Box<dyn Iterator<Item = usize> + 'a> = match toks.first() {
        None => Box::new(std::iter::empty()),
        Some(Tok::Text(v)) => occurrence_iter(hay, v),
        // A break token starts at every ending: a `\r`, or a `\n` not after a `\r`.
        Some(Tok::Break) => match U::as_bytes(hay) {
            Some(h) => Box::new(
                memchr::memchr2_iter(b'\r', b'\n', h)
                    .filter(move |&p| h[p] == b'\r' || p == 0 || h[p - 1] != b'\r'),
            ),
            None => Box::new((0..hay.len()).filter(move |&p| {
                is_cr(hay[p]) || (is_lf(hay[p]) && (p == 0 || !is_cr(hay[p - 1])))
            })),
        },
    };
    candidates
        .filter_map(move |p| match_at(hay, p, toks).map(|e| (p, e)))
        .filter(move |&(s, e)| bounds.is_none_or(|b| b[s] && b[e]))
}

/// [`matches`], collected.
#[cfg(test)]
fn find_all<U: Unit>(hay: &[U], toks: &[Tok<U>], bounds: Option<&[bool]>) -> Vec<(usize, usize)> {
    matches(hay, toks, bounds).collect()
}

/// What an in-place edit does: replace `units[a..b]` with `ins`. `delta` is the change
/// in line breaks the edit means to make, computed from the request (not from the
/// new bytes), for the guard.
struct Plan<U> {
    a: usize,
    b: usize,
    ins: Vec<U>,
    delta: isize,
    /// 0-based index (in the new file) of the first edited line, and how many lines
    /// the edit spans there, for `nowReads`.
    show_from: usize,
    show_count: usize,
    what: What,
}

enum What {
    Find,
    Lines {
        first: u64,
        last: u64,
        asked: u64,
        moved: bool,
        kept: Option<String>,
    },
    Insert {
        at: u64,
        count: usize,
        at_end: bool,
    },
    Delete {
        first: u64,
        last: u64,
    },
    Append {
        bytes: usize,
    },
}

/// The file as the engine sees it: its units, its line count and dominant ending,
/// found by counting. Lines are found by walking only as far as needed; no list of
/// the file's lines is ever built.
struct Doc<'a, R: Repr> {
    r: &'a R,
    units: &'a [R::U],
    /// Number of lines (SPEC 8.1).
    total: usize,
    /// The ending new line breaks take: the dominant one, `\n` when there is none.
    nl: Ending,
}

impl<R: Repr> Doc<'_, R> {
    fn total(&self) -> usize {
        self.total
    }

    fn encode(&self, s: &str) -> Result<Vec<R::U>, TextError> {
        self.r.encode(s)
    }

    /// Lines `first` and `last` (0-based, `first <= last < total`).
    fn lines_at(&self, first: usize, last: usize) -> Result<(Line, Line), TextError> {
        let line_at = |start: usize| iter_lines_from(self.units, start).next();
        let f = skip_lines(self.units, 0, first);
        let l = f.and_then(|f| skip_lines(self.units, f, last.saturating_sub(first)));
        match (f.and_then(line_at), l.and_then(line_at)) {
            (Some(f), Some(l)) if first <= last => Ok((f, l)),
            _ => Err(TextError::Guard(format!(
                "line {} is not in the file's {} lines",
                last.max(first) + 1,
                self.total
            ))),
        }
    }

    /// Line `i` (0-based, `i < total`).
    fn line(&self, i: usize) -> Result<Line, TextError> {
        Ok(self.lines_at(i, i)?.0)
    }

    /// Whether the last line has an ending (false for an empty file).
    fn last_has_ending(&self) -> bool {
        ends_with_break(self.units)
    }

    /// Line indexes of increasing positions.
    fn locator(&self) -> LineLocator<'_, R::U> {
        LineLocator::new(self.units, self.total)
    }

    fn line_text(&self, line: &Line) -> String {
        self.r.decode(&self.units[line.text()])
    }

    fn bounds(&self) -> Option<Vec<bool>> {
        self.r.boundaries(self.units)
    }
}

fn out_of_range(line: u64, total: usize) -> TextError {
    TextError::LineOutOfRange { line, total }
}

/// Edits an existing file whose format is `format` and whose body (the units after
/// the BOM) holds the line breaks `counts`.
fn edit_existing<R: Repr>(
    r: &R,
    bytes: &[u8],
    format: &Format,
    counts: &EndingCounts,
    req: &EditRequest,
) -> Result<EditOutcome, TextError> {
    let bom_len = format.bom_len();
    let (bom, body) = bytes.split_at(bom_len);
    let (units, tail) = r.units(body);
    if tail != 0 {
        return Err(TextError::UnsupportedEncoding(format!(
            "the {} file ends inside a code unit ({tail} stray bytes); only a whole write can replace it",
            format.encoding.name()
        )));
    }
    let doc = Doc {
        r,
        units: &units,
        total: line_total(&units, counts),
        nl: counts.dominant().unwrap_or(Ending::Lf),
    };
    let mut plan = match req.mode {
        EditMode::Replace if req.line.is_some() => plan_lines(&doc, req)?,
        EditMode::Replace => plan_find(&doc, req)?,
        EditMode::Insert => plan_insert(&doc, req)?,
        EditMode::Delete => plan_delete(&doc, req)?,
        EditMode::Append => plan_append(&doc, req)?,
        EditMode::Write => unreachable_write()?,
    };
    if plan.a > plan.b || plan.b > units.len() {
        return Err(TextError::Guard(format!(
            "the edit range {}..{} is not within the file's {} units",
            plan.a,
            plan.b,
            units.len()
        )));
    }
    if format.bom && plan.a == 0 {
        strip_echoed_bom(&mut plan.ins, &units[..plan.b], &doc.encode("\u{FEFF}")?);
    }
    avoid_joins(&units, &mut plan, &doc.encode("\r\n")?);
    if plan.ins.is_empty()
        && plan.a > 0
        && plan.b < units.len()
        && is_cr(units[plan.a - 1])
        && is_lf(units[plan.b])
    {
        // Nothing inserted between a lone `\r` and a `\n`: they would join
        // (the guard would catch it; this names it). The `\r` ends the line
        // whose number is the count of breaks up to and including it.
        let line = breaks_within(&units[..plan.a], 0, plan.a);
        return Err(TextError::LineEndingConflict {
            line: u64::try_from(line).unwrap_or(u64::MAX),
        });
    }

    // The new bytes in one allocation of their exact size: BOM, the units before
    // the edit, the new units, the units after it.
    let new_units = units.len() - (plan.b - plan.a) + plan.ins.len();
    let mut new_bytes = Vec::with_capacity(bom_len + new_units * std::mem::size_of::<R::U>());
    new_bytes.extend_from_slice(bom);
    r.write(&units[..plan.a], &mut new_bytes);
    r.write(&plan.ins, &mut new_bytes);
    r.write(&units[plan.b..], &mut new_bytes);
    // The units of a 16/32-bit file are a copy; the guard reads the original body
    // in place instead, so that copy goes before the new bytes are read again.
    drop(units);

    // SPEC 8.5: read the new bytes again and compare with the original.
    let (re_units, re_tail) = r.units(&new_bytes[bom_len..]);
    guard(
        &r.body_units(body),
        &*re_units,
        re_tail,
        plan.a,
        plan.b,
        plan.ins.len(),
        plan.delta,
    )?;

    let new_counts = count_units(&re_units);
    let new_total = line_total(&re_units, &new_counts);
    let shown = |l: Line| show(&r.decode(&re_units[l.text()]));
    let first_edited = skip_lines(&re_units, 0, plan.show_from);
    let new_lines_from = |start: Option<usize>| {
        start
            .map(|s| iter_lines_from(&re_units, s))
            .into_iter()
            .flatten()
    };
    let now_reads: Vec<String> = match plan.what {
        What::Delete { .. } => Vec::new(),
        _ => new_lines_from(first_edited)
            .take(plan.show_count.min(3))
            .map(shown)
            .collect(),
    };
    let first_shown = plan.show_from as u64 + 1;
    let now = now_clause(first_shown, plan.show_count, &now_reads);
    let path = req.display_path;
    let (message, line, moved_from, kept_indentation) = match plan.what {
        What::Find => (
            format!("replaced the one occurrence of find in {path} at line {first_shown}; {now}"),
            Some(first_shown),
            None,
            None,
        ),
        What::Lines {
            first,
            last,
            asked,
            moved,
            kept,
        } => {
            let keeping = kept
                .as_ref()
                .map(|k| format!(", keeping the line's indentation ({k})"))
                .unwrap_or_default();
            let msg = if moved {
                format!(
                    "line {asked} did not contain \"{}\"; replaced line {first} of {path}, the one line that does{keeping}; {now}",
                    show(req.find.unwrap_or(""))
                )
            } else {
                format!(
                    "replaced {} of {path}{keeping}; {now}",
                    line_span(first, last)
                )
            };
            (msg, Some(first), moved.then_some(asked), kept)
        }
        What::Insert { at, count, at_end } => {
            let where_ = if at_end {
                format!("at the end of {path}")
            } else {
                format!("before line {at} of {path}")
            };
            (
                format!("inserted {} {where_}; {now}", plural(count, "line")),
                Some(at),
                None,
                None,
            )
        }
        What::Delete { first, last } => {
            let after = match new_lines_from(first_edited).next() {
                Some(l) => format!("line {first} now: \"{}\"", shown(l)),
                None => format!("the file now has {}", plural(new_total, "line")),
            };
            (
                format!("deleted {} of {path}; {after}", line_span(first, last)),
                Some(first),
                None,
                None,
            )
        }
        What::Append { bytes } => (
            if now.is_empty() {
                format!("appended nothing to {path}; the file is unchanged")
            } else {
                format!("appended {} to {path}; {now}", plural(bytes, "byte"))
            },
            Some(first_shown),
            None,
            None,
        ),
    };
    let new_format = Format {
        encoding: format.encoding,
        bom: format.bom,
        dominant: new_counts.dominant(),
    };
    let diff = req.want_diff.then(|| {
        unified_diff(
            path,
            &decode(bytes, format),
            &decode(&new_bytes, &new_format),
        )
    });
    Ok(EditOutcome {
        bytes: new_bytes,
        format: new_format,
        line,
        moved_from,
        kept_indentation,
        now_reads,
        message,
        diff,
    })
}

fn unreachable_write<U>() -> Result<Plan<U>, TextError> {
    Err(TextError::Guard(
        "write mode reached the in-place engine".to_string(),
    ))
}

/// SPEC 9: when the output has a BOM, exactly one is written. Text inserted at the
/// very start of a BOM file's body (a new line 1, or a match at its first
/// character) that itself starts with U+FEFF holds the BOM a client echoed back (as
/// a whole-file write's `content` may); that one U+FEFF is dropped (`feff`: its
/// units in the file's encoding), so the file does not get a second BOM. A U+FEFF
/// anywhere else, or in a file without a BOM, is content and stays; so is one that
/// replaces a U+FEFF the body itself starts with (`replaced`, the units the edit
/// takes away: a file that already holds a second BOM and an edit that spells it
/// out keep it).
fn strip_echoed_bom<U: Unit>(ins: &mut Vec<U>, replaced: &[U], feff: &[U]) {
    if ins.starts_with(feff) && !replaced.starts_with(feff) {
        ins.drain(..feff.len());
    }
}

/// A new line break must not join a neighbouring ending into one `\r\n`: an
/// inserted leading `\n` right after a lone `\r`, or an inserted trailing `\r` right
/// before a `\n`, would merge with it and change the neighbour line's ending. Such
/// an inserted break becomes `\r\n` instead (the next ending in the tie order), which
/// keeps both lines and their endings. `crlf` holds the units of `"\r\n"`.
fn avoid_joins<U: Unit>(units: &[U], plan: &mut Plan<U>, crlf: &[U]) {
    let (cr, lf) = (crlf[0], crlf[1]);
    if plan.a > 0 && is_cr(units[plan.a - 1]) && plan.ins.first().is_some_and(|&u| is_lf(u)) {
        plan.ins.insert(0, cr);
    }
    if plan.b < units.len() && is_lf(units[plan.b]) && plan.ins.last().is_some_and(|&u| is_cr(u)) {
        plan.ins.push(lf);
    }
}

/// Converts a 1-based line number already checked to be in `1..=total` to an index.
fn idx(line: u64) -> usize {
    usize::try_from(line - 1).unwrap_or(usize::MAX)
}

/// `n` as a signed count, for the line-break deltas of [`Plan`]. Every count
/// here is a number of units or line breaks of an in-memory buffer, and Rust
/// never allocates more than `isize::MAX` bytes, so the conversion cannot
/// fail; it saturates instead of panicking all the same (this crate never
/// panics).
fn signed(n: usize) -> isize {
    isize::try_from(n).unwrap_or(isize::MAX)
}

fn plan_find<R: Repr>(doc: &Doc<R>, req: &EditRequest) -> Result<Plan<R::U>, TextError> {
    let find = req.find.unwrap_or("");
    let not_found = || TextError::TextNotFound(find.to_string());
    if find.is_empty() {
        return Err(not_found());
    }
    let toks = tokenize(doc.r, find)?.ok_or_else(not_found)?;
    let bounds = doc.bounds();
    let mut found = matches(doc.units, &toks, bounds.as_deref());
    let (s, e) = found.next().ok_or_else(not_found)?;
    if let Some((s2, _)) = found.next() {
        let mut at = doc.locator();
        let lines: Vec<usize> = [s, s2]
            .into_iter()
            .chain(found.map(|(s, _)| s))
            .map(|p| at.index_at(p) + 1)
            .collect();
        return Err(TextError::AmbiguousTextMatch {
            count: lines.len(),
            lines,
        });
    }
    let content = convert_breaks(req.content, doc.nl);
    let removed = toks.iter().filter(|t| **t == Tok::Break).count();
    Ok(Plan {
        a: s,
        b: e,
        ins: doc.encode(&content)?,
        delta: signed(breaks_in(req.content)) - signed(removed),
        show_from: doc.locator().index_at(s),
        show_count: shown_lines(req.content),
        what: What::Find,
    })
}

fn plan_lines<R: Repr>(doc: &Doc<R>, req: &EditRequest) -> Result<Plan<R::U>, TextError> {
    let total = doc.total();
    let asked = req.line.unwrap_or(0);
    if asked == 0 || asked > total as u64 {
        return Err(out_of_range(asked, total));
    }
    let asked_end = req.end_line.unwrap_or(asked);
    if asked_end > total as u64 {
        return Err(out_of_range(asked_end, total));
    }
    let single = asked_end == asked;
    let (mut first, mut last) = (idx(asked), idx(asked_end));
    let (mut first_line, mut last_line) = doc.lines_at(first, last)?;
    let mut moved = false;
    if let Some(find) = req.find {
        if find.is_empty() {
            return Err(TextError::TextNotFound(String::new()));
        }
        let asked_line = first_line;
        let mismatch = || TextError::LineMismatch {
            line: asked,
            holds: cut(&doc.line_text(&asked_line)),
        };
        let toks = tokenize(doc.r, find)?;
        let bounds = doc.bounds();
        let span = first_line.start..last_line.text_end;
        let contained = toks.as_ref().is_some_and(|t| {
            let sub = bounds.as_ref().map(|b| &b[span.start..=span.end]);
            matches(&doc.units[span.clone()], t, sub).next().is_some()
        });
        if !contained {
            // SPEC 8.4 reconciliation: only for a single line, only when exactly one
            // line of the file holds `find` (a break in `find` fits no single line).
            let toks = match toks {
                Some(t) if single && !t.contains(&Tok::Break) => t,
                _ => return Err(mismatch()),
            };
            // Matches come in increasing order, so their lines do too: the first
            // holder, and any other line after it, settle the question.
            let mut at = doc.locator();
            let mut holders =
                matches(doc.units, &toks, bounds.as_deref()).map(|(s, _)| at.index_at(s));
            let holder = holders.next().ok_or_else(mismatch)?;
            if holders.any(|h| h != holder) {
                return Err(mismatch());
            }
            first = holder;
            last = first;
            first_line = doc.line(first)?;
            last_line = first_line;
            moved = true;
        }
    }
    let content = strip_one_break(req.content);
    let mut ins = Vec::new();
    let mut kept = None;
    if single {
        // SPEC 8.4 keep indentation.
        let old = &doc.units[first_line.text()];
        let indent = old.iter().take_while(|&&u| is_indent(u)).count();
        if indent > 0
            && !content.is_empty()
            && !content.starts_with([' ', '\t'])
            && content.trim() != doc.r.decode(old).trim()
        {
            ins.extend_from_slice(&old[..indent]);
            kept = Some(indentation_words(&doc.r.decode(&old[..indent])));
        }
    }
    ins.extend(doc.encode(&convert_breaks(content, doc.nl))?);
    let line_no = first as u64 + 1;
    Ok(Plan {
        a: first_line.start,
        b: last_line.text_end,
        ins,
        delta: signed(breaks_in(content)) - signed(last - first),
        show_from: first,
        show_count: breaks_in(content) + 1,
        what: What::Lines {
            first: line_no,
            last: last as u64 + 1,
            asked,
            moved,
            kept,
        },
    })
}

fn plan_insert<R: Repr>(doc: &Doc<R>, req: &EditRequest) -> Result<Plan<R::U>, TextError> {
    let total = doc.total();
    let at = req.line.unwrap_or(0);
    if at == 0 || at > total as u64 + 1 {
        return Err(out_of_range(at, total));
    }
    let content = strip_one_break(req.content);
    let count = breaks_in(content) + 1;
    let text = doc.encode(&convert_breaks(content, doc.nl))?;
    let nl = doc.encode(doc.nl.as_str())?;
    let end = doc.units.len();
    let (pos, ins, delta) = if at <= total as u64 {
        (doc.line(idx(at))?.start, [text, nl].concat(), signed(count))
    } else if total == 0 {
        (end, text, signed(count) - 1)
    } else if doc.last_has_ending() {
        (end, [text, nl].concat(), signed(count))
    } else {
        // The old last line takes the dominant ending; the new last line has none.
        (end, [nl, text].concat(), signed(count))
    };
    Ok(Plan {
        a: pos,
        b: pos,
        ins,
        delta,
        show_from: idx(at),
        show_count: count,
        what: What::Insert {
            at,
            count,
            at_end: at > total as u64,
        },
    })
}

fn plan_delete<R: Repr>(doc: &Doc<R>, req: &EditRequest) -> Result<Plan<R::U>, TextError> {
    let total = doc.total();
    let l = req.line.unwrap_or(0);
    if l == 0 || l > total as u64 {
        return Err(out_of_range(l, total));
    }
    let e = req.end_line.unwrap_or(l);
    if e > total as u64 {
        return Err(out_of_range(e, total));
    }
    let (li, ei) = (idx(l), idx(e));
    let removed = signed(ei - li + 1);
    let (a, b, delta) = if ei == total - 1 && !doc.last_has_ending() {
        if li == 0 {
            (0, doc.units.len(), 1 - signed(total))
        } else {
            // Keep the file without a final line break: the line before the range
            // loses its ending along with the range.
            (doc.line(li - 1)?.text_end, doc.units.len(), -removed)
        }
    } else {
        let (first, last) = doc.lines_at(li, ei)?;
        (first.start, last.end, -removed)
    };
    Ok(Plan {
        a,
        b,
        ins: Vec::new(),
        delta,
        show_from: li,
        show_count: 0,
        what: What::Delete { first: l, last: e },
    })
}

fn plan_append<R: Repr>(doc: &Doc<R>, req: &EditRequest) -> Result<Plan<R::U>, TextError> {
    let end = doc.units.len();
    let (ins, show_from) = if end == 0 {
        (doc.encode(req.content)?, 0)
    } else {
        let from = if doc.last_has_ending() {
            doc.total()
        } else {
            doc.total() - 1
        };
        (doc.encode(&convert_breaks(req.content, doc.nl))?, from)
    };
    // Every encoding writes a unit as exactly its size in bytes.
    let bytes = ins.len() * std::mem::size_of::<R::U>();
    Ok(Plan {
        a: end,
        b: end,
        ins,
        delta: signed(breaks_in(req.content)),
        show_from,
        show_count: if req.content.is_empty() {
            0
        } else {
            shown_lines(req.content)
        },
        what: What::Append { bytes },
    })
}

/// The guard of SPEC 8.5. `orig` are the original units, `new` the units re-read from
/// the new bytes (`new_tail` stray bytes after them); the edit replaced `orig[a..b]`
/// with `n` units and meant to change the line-break count by `delta`.
///
/// Checks: the units before `a` and after the edit are identical; every original line
/// wholly before the edit and wholly after it is, after re-splitting, the same line
/// (text and ending, shifted by the size change); the line-break count changed by
/// exactly `delta`.
///
/// It needs no line lists, because the line model is local: a unit ends a line break
/// exactly when it is `\n`, or a `\r` whose next unit is not `\n`, and the kind of
/// the break depends on the unit before. So once the units before `a` and after the
/// edit are known to be identical:
/// - a line wholly before the edit can change only if the lone `\r` ending it at
///   `a - 1` now meets a `\n` at `a`, and a line wholly after it (or starting where
///   the new units end on a break) only if a `\r` just before it now meets the `\n`
///   it starts with: a `\r` and a `\n` joining at a boundary of the edit, which is
///   checked directly;
/// - the break counts of the two texts can differ only over the edit and one unit
///   either side, so the change is counted there (in time and memory independent of
///   the file's size).
fn guard<O: UnitView + ?Sized, N: UnitView + ?Sized>(
    orig: &O,
    new: &N,
    new_tail: usize,
    a: usize,
    b: usize,
    n: usize,
    delta: isize,
) -> Result<(), TextError> {
    let fail = |why: String| Err(TextError::Guard(why));
    if new_tail != 0 {
        return fail("the new bytes end inside a code unit".into());
    }
    if a > b || b > orig.len() || new.len() + b != orig.len() + a + n {
        return fail("the new text does not have the expected length".into());
    }
    if !same_units(orig, 0, new, 0, a) {
        return fail("the text before the edit changed".into());
    }
    if !same_units(orig, b, new, a + n, orig.len() - b) {
        return fail("the text after the edit changed".into());
    }
    // A `\r` and a `\n` joining into one ending at either boundary of the edit. (With
    // nothing removed and nothing added, the texts are identical.)
    let joins = |p: usize| p > 0 && p < new.len() && new.at(p - 1) == CR && new.at(p) == LF;
    if (n > 0 && joins(a)) || ((n > 0 || b > a) && joins(a + n)) {
        return fail(
            "the edit would join a lone \\r and a following \\n into one \\r\\n ending, changing a line it does not touch"
                .into(),
        );
    }
    // The breaks whose last unit lies in the edit or one unit either side: outside
    // that window both texts agree unit for unit, neighbours included.
    let lo = a.saturating_sub(1);
    let before = breaks_within(orig, lo, (b + 1).min(orig.len()));
    let after = breaks_within(new, lo, (a + n + 1).min(new.len()));
    let got = signed(after) - signed(before);
    if got != delta {
        return fail(format!(
            "the edit changed the number of line breaks by {got}, expected {delta}"
        ));
    }
    Ok(())
}

const CR: u32 = 0x0D;
const LF: u32 = 0x0A;

/// What the guard reads of a text: its code units by index, and the units as bytes
/// when a unit is a byte (so ranges compare with `memcmp` and breaks are counted
/// vectorised).
trait UnitView {
    fn len(&self) -> usize;
    fn at(&self, i: usize) -> u32;
    fn byte_units(&self) -> Option<&[u8]>;
}

impl<U: Unit> UnitView for [U] {
    fn len(&self) -> usize {
        <[U]>::len(self)
    }
    fn at(&self, i: usize) -> u32 {
        self[i].into()
    }
    fn byte_units(&self) -> Option<&[u8]> {
        U::as_bytes(self)
    }
}

impl<U: Unit> UnitView for Vec<U> {
    fn len(&self) -> usize {
        self.as_slice().len()
    }
    fn at(&self, i: usize) -> u32 {
        self[i].into()
    }
    fn byte_units(&self) -> Option<&[u8]> {
        U::as_bytes(self)
    }
}

impl UnitView for BodyUnits<'_> {
    fn len(&self) -> usize {
        BodyUnits::len(self)
    }
    fn at(&self, i: usize) -> u32 {
        BodyUnits::at(self, i)
    }
    fn byte_units(&self) -> Option<&[u8]> {
        self.as_bytes()
    }
}

/// Whether `len` units of `x` from `xi` equal those of `y` from `yi` (in range).
fn same_units<X: UnitView + ?Sized, Y: UnitView + ?Sized>(
    x: &X,
    xi: usize,
    y: &Y,
    yi: usize,
    len: usize,
) -> bool {
    match (x.byte_units(), y.byte_units()) {
        (Some(x), Some(y)) => x[xi..xi + len] == y[yi..yi + len],
        _ => (0..len).all(|k| x.at(xi + k) == y.at(yi + k)),
    }
}

/// The line breaks whose last unit lies in `lo..hi` of `v` (see `count_range`).
fn breaks_within<V: UnitView + ?Sized>(v: &V, lo: usize, hi: usize) -> usize {
    match v.byte_units() {
        Some(bytes) => count_range(bytes, lo, hi).breaks(),
        None => (lo..hi)
            .filter(|&q| {
                let u = v.at(q);
                u == LF || (u == CR && (q + 1 == v.len() || v.at(q + 1) != LF))
            })
            .count(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn units(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    #[test]
    fn guard_accepts_a_clean_line_edit() {
        let o = units("a\r\nb\r\nc\r\n");
        let n = units("a\r\nX\r\nc\r\n");
        assert!(guard(&o, &n, 0, 3, 4, 1, 0).is_ok());
    }

    #[test]
    fn guard_refuses_a_merged_crlf() {
        // "a\r" + inserted "\nb": the inserted LF joins the old CR into one ending.
        let o = units("a\rc\n");
        let n = units("a\r\nbc\n");
        let err = guard(&o, &n, 0, 2, 2, 2, 1).unwrap_err();
        assert!(matches!(err, TextError::Guard(_)), "{err:?}");
    }

    #[test]
    fn guard_refuses_a_changed_prefix_or_wrong_delta() {
        let o = units("a\nb\nc\n");
        let n = units("A\nB\nc\n");
        assert!(guard(&o, &n, 0, 2, 3, 1, 0).is_err());
        // The data-loss bug of seed 000: the whole file replaced by one line.
        let n = units("FIRST");
        assert!(guard(&units("first\r\nsecond\r\n"), &n, 0, 0, 5, 5, 0).is_err());
        // A wrong break count.
        let o = units("a\nb\n");
        let n = units("a\nx\ny\n");
        assert!(guard(&o, &n, 0, 2, 3, 3, 0).is_err());
        assert!(guard(&o, &n, 0, 2, 3, 3, 1).is_ok());
    }

    #[test]
    fn guard_refuses_a_stray_tail() {
        let o: Vec<u16> = vec![0x61];
        assert!(guard(&o, &o, 1, 0, 0, 0, 0).is_err());
    }

    /// The guard as first written, splitting both texts into line lists: the
    /// reference the list-free guard must agree with.
    #[allow(clippy::too_many_arguments)]
    fn reference_guard<U: Unit>(
        orig: &[U],
        new: &[U],
        new_tail: usize,
        a: usize,
        b: usize,
        n: usize,
        delta: isize,
    ) -> Result<(), TextError> {
        use crate::lines::{count_breaks, split_units};
        let fail = |why: String| Err(TextError::Guard(why));
        if new_tail != 0 {
            return fail("the new bytes end inside a code unit".into());
        }
        if a > b || b > orig.len() || new.len() + b != orig.len() + a + n {
            return fail("the new text does not have the expected length".into());
        }
        if new[..a] != orig[..a] {
            return fail("the text before the edit changed".into());
        }
        if new[a + n..] != orig[b..] {
            return fail("the text after the edit changed".into());
        }
        let joins = |p: usize| p > 0 && p < new.len() && is_cr(new[p - 1]) && is_lf(new[p]);
        if (n > 0 && joins(a)) || ((n > 0 || b > a) && joins(a + n)) {
            return fail(
                "the edit would join a lone \\r and a following \\n into one \\r\\n ending, changing a line it does not touch"
                    .into(),
            );
        }
        let old_lines = split_units(orig);
        let new_lines = split_units(new);
        let pre = old_lines
            .iter()
            .take_while(|l| l.ending.is_some() && l.end <= a)
            .count();
        for (i, old) in old_lines.iter().take(pre).enumerate() {
            if new_lines.get(i) != Some(old) {
                return fail(format!("line {} before the edit changed", i + 1));
            }
        }
        let ins_ends_line =
            a + n == 0 || (n > 0 && (is_lf(new[a + n - 1]) || is_cr(new[a + n - 1])));
        let suf = old_lines
            .iter()
            .rev()
            .take_while(|l| l.start > b || (l.start == b && ins_ends_line))
            .count();
        if suf > new_lines.len() {
            return fail("lines after the edit are missing".into());
        }
        let shift = signed(a + n) - signed(b);
        let moved = |x: usize| x.checked_add_signed(shift);
        for j in 1..=suf {
            let o = old_lines[old_lines.len() - j];
            let m = new_lines[new_lines.len() - j];
            if Some(m.start) != moved(o.start)
                || Some(m.text_end) != moved(o.text_end)
                || Some(m.end) != moved(o.end)
                || m.ending != o.ending
            {
                return fail(format!(
                    "line {} after the edit changed",
                    old_lines.len() - j + 1
                ));
            }
        }
        let got = signed(count_breaks(&new_lines)) - signed(count_breaks(&old_lines));
        if got != delta {
            return fail(format!(
                "the edit changed the number of line breaks by {got}, expected {delta}"
            ));
        }
        Ok(())
    }

    fn breaky(max: usize) -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let unit = prop_oneof![
            3 => Just(b'\n'),
            3 => Just(b'\r'),
            3 => Just(b'a'),
        ];
        prop::collection::vec(unit, 0..max)
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig {
            cases: 2048,
            ..proptest::prelude::ProptestConfig::default()
        })]

        /// Any replacement of `orig[a..b]`, sometimes with a damaged prefix or suffix,
        /// a stray tail or a wrong expected count: both guards decide alike, with the
        /// same reason.
        #[test]
        fn guard_agrees_with_the_line_list_guard(
            orig in breaky(24),
            ins in breaky(5),
            cut in (0usize..25, 0usize..25),
            damage in proptest::option::weighted(0.15, (0usize..40, proptest::sample::select(vec![b'\n', b'\r', b'a']))),
            tail in proptest::option::weighted(0.05, 1usize..3),
            off in proptest::sample::select(vec![0isize, 0, 0, 1, -1]),
        ) {
            let (a, b) = (cut.0.min(cut.1).min(orig.len()), cut.0.max(cut.1).min(orig.len()));
            let mut new = [&orig[..a], &ins[..], &orig[b..]].concat();
            if let Some((at, byte)) = damage
                && !new.is_empty()
            {
                let at = at % new.len();
                new[at] = byte;
            }
            let truth = signed(count_units(&new).breaks()) - signed(count_units(&orig).breaks());
            let tail = tail.unwrap_or(0);
            let delta = truth + off;
            let got = guard(&orig, &new, tail, a, b, ins.len(), delta);
            let want = reference_guard(&orig, &new, tail, a, b, ins.len(), delta);
            proptest::prop_assert_eq!(&got, &want);
            // Also at units of 16 bits.
            let wide = |v: &[u8]| v.iter().map(|&x| u16::from(x)).collect::<Vec<u16>>();
            let got = guard(&wide(&orig), &wide(&new), tail, a, b, ins.len(), delta);
            proptest::prop_assert_eq!(&got, &want);
            // As the engine calls it: the original read in place from its bytes (here
            // UTF-16BE and UTF-8), the new text as units.
            let be: Vec<u8> = wide(&orig).iter().flat_map(|u| u.to_be_bytes()).collect();
            let in_place = crate::repr::Utf16Repr { be: true }.body_units(&be);
            let got = guard(&in_place, wide(&new).as_slice(), tail, a, b, ins.len(), delta);
            proptest::prop_assert_eq!(&got, &want);
            let in_place = crate::repr::Utf8Repr.body_units(&orig);
            let got = guard(&in_place, new.as_slice(), tail, a, b, ins.len(), delta);
            proptest::prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn occurrences_overlap() {
        assert_eq!(occurrences(b"aaa", b"aa"), vec![0, 1]);
        assert_eq!(occurrences(b"abcabc", b"c"), vec![2, 5]);
        assert_eq!(occurrences(b"ab", b"abc"), Vec::<usize>::new());
    }

    #[test]
    fn break_tokens_match_any_ending_but_never_split_crlf() {
        let r = crate::repr::Utf8Repr;
        let toks = tokenize(&r, "a\nb").unwrap().unwrap();
        for hay in ["a\nb", "a\r\nb", "a\rb"] {
            assert_eq!(find_all(hay.as_bytes(), &toks, None).len(), 1, "{hay:?}");
        }
        let toks = tokenize(&r, "\nb").unwrap().unwrap();
        assert_eq!(find_all(b"a\r\nb", &toks, None), vec![(1, 4)]);
        let toks = tokenize(&r, "a\n\nb").unwrap().unwrap();
        assert!(find_all(b"a\r\nb", &toks, None).is_empty());
    }

    #[test]
    fn indentation_in_words() {
        assert_eq!(indentation_words("    "), "4 spaces");
        assert_eq!(indentation_words("\t"), "1 tab");
        assert_eq!(indentation_words("\t  "), "1 tab and 2 spaces");
        assert_eq!(indentation_words(" "), "1 space");
        assert_eq!(indentation_words("\t\t"), "2 tabs");
        assert_eq!(indentation_words(" \t "), "1 space, 1 tab and 1 space");
    }
}
