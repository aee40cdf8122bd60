//! The edit engine of `_writegate/edit_text_file` (SPEC 8): modes, the two forgiving
//! rules, the guard, and the result.
//!
//! Every in-place edit works on the original file's code units (bytes, or 16/32-bit
//! units after the BOM), replaces one unit range `a..b` with newly encoded units, and
//! copies everything else unchanged, so bytes outside the edit (invalid ones
//! included) survive byte-identical. The guard then re-splits the new bytes and
//! checks exactly that before anything is returned.

use std::time::Duration;

use crate::error::TextError;
use crate::escape::{cut, show};
use crate::format::{Format, WriteOptions, decode, detect, encode_whole};
use crate::lines::{
    Ending, Line, convert_breaks, count_breaks, dominant, line_index_at, split_bytes, split_units,
    strip_one_break,
};
use crate::repr::{Repr, Unit, is_indent, with_repr};

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
    !format.encoding.is_wide() && bytes.contains(&0)
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
            let format = detect(bytes)?;
            if is_binary(bytes, &format) {
                return Err(TextError::BinaryFile);
            }
            with_repr!(format.encoding, |r| edit_existing(r, bytes, &format, req))
        }
    }
}

fn invalid(why: &str) -> TextError {
    TextError::InvalidRequest(why.to_string())
}

fn validate(req: &EditRequest) -> Result<(), TextError> {
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
    count_breaks(&split_bytes(s.as_bytes()))
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
    let lines = split_units(req.content.as_bytes()).len();
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
    let lines = split_bytes(text.as_bytes());
    let now_reads: Vec<String> = lines
        .iter()
        .take(3)
        .map(|l| show(&text[l.text()]))
        .collect();
    let message = format!(
        "created {} with the appended content ({}){}",
        req.display_path,
        plural(lines.len(), "line"),
        if lines.is_empty() {
            String::new()
        } else {
            format!("; {}", now_clause(1, lines.len(), &now_reads))
        }
    );
    let diff = req
        .want_diff
        .then(|| unified_diff(req.display_path, "", &text));
    Ok(EditOutcome {
        bytes,
        format,
        line: (!lines.is_empty()).then_some(1),
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
    for l in split_bytes(find.as_bytes()) {
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

/// All start positions of `pat` in `hay`, overlapping ones included (KMP).
fn occurrences<U: Unit>(hay: &[U], pat: &[U]) -> Vec<usize> {
    let m = pat.len();
    if m == 0 || m > hay.len() {
        return Vec::new();
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
    let mut out = Vec::new();
    k = 0;
    for (i, &c) in hay.iter().enumerate() {
        while k > 0 && c != pat[k] {
            k = fail[k - 1];
        }
        if c == pat[k] {
            k += 1;
        }
        if k == m {
            out.push(i + 1 - m);
            k = fail[k - 1];
        }
    }
    out
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

/// Every (start, end) match of `toks` in `hay` (overlapping included), both ends on
/// character boundaries when `bounds` is given.
fn find_all<U: Unit>(hay: &[U], toks: &[Tok<U>], bounds: Option<&[bool]>) -> Vec<(usize, usize)> {
    let candidates: Vec<usize> = match toks.first() {
        None => return Vec::new(),
        Some(Tok::Text(v)) => occurrences(hay, v),
        Some(Tok::Break) => (0..hay.len())
            .filter(|&p| is_cr(hay[p]) || (is_lf(hay[p]) && (p == 0 || !is_cr(hay[p - 1]))))
            .collect(),
    };
    candidates
        .into_iter()
        .filter_map(|p| match_at(hay, p, toks).map(|e| (p, e)))
        .filter(|&(s, e)| bounds.is_none_or(|b| b[s] && b[e]))
        .collect()
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

/// The file as the engine sees it.
struct Doc<'a, R: Repr> {
    r: &'a R,
    units: &'a [R::U],
    lines: Vec<Line>,
    /// The ending new line breaks take: the dominant one, `\n` when there is none.
    nl: Ending,
}

impl<R: Repr> Doc<'_, R> {
    fn total(&self) -> usize {
        self.lines.len()
    }

    fn encode(&self, s: &str) -> Result<Vec<R::U>, TextError> {
        self.r.encode(s)
    }

    fn line_text(&self, idx: usize) -> String {
        self.r.decode(&self.units[self.lines[idx].text()])
    }

    fn bounds(&self) -> Option<Vec<bool>> {
        self.r.boundaries(self.units)
    }
}

fn out_of_range(line: u64, total: usize) -> TextError {
    TextError::LineOutOfRange { line, total }
}

fn edit_existing<R: Repr>(
    r: &R,
    bytes: &[u8],
    format: &Format,
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
    let lines = split_units(&units);
    let nl = dominant(&lines).unwrap_or(Ending::Lf);
    let doc = Doc {
        r,
        units: &units,
        lines,
        nl,
    };
    let mut plan = match req.mode {
        EditMode::Replace if req.line.is_some() => plan_lines(&doc, req)?,
        EditMode::Replace => plan_find(&doc, req)?,
        EditMode::Insert => plan_insert(&doc, req)?,
        EditMode::Delete => plan_delete(&doc, req)?,
        EditMode::Append => plan_append(&doc, req)?,
        EditMode::Write => unreachable_write()?,
    };
    avoid_joins(&units, &mut plan, &doc.encode("\r\n")?);

    let mut new_units = Vec::with_capacity(units.len() - (plan.b - plan.a) + plan.ins.len());
    new_units.extend_from_slice(&units[..plan.a]);
    new_units.extend_from_slice(&plan.ins);
    new_units.extend_from_slice(&units[plan.b..]);
    let mut new_bytes = Vec::with_capacity(bytes.len() + plan.ins.len() * 4);
    new_bytes.extend_from_slice(bom);
    r.write(&new_units, &mut new_bytes);
    drop(new_units);

    // SPEC 8.5: split the new bytes again and compare with the original.
    let (re_units, re_tail) = r.units(&new_bytes[bom_len..]);
    guard(
        &units,
        &re_units,
        re_tail,
        plan.a,
        plan.b,
        plan.ins.len(),
        plan.delta,
    )?;

    let new_lines = split_units(&re_units);
    let shown = |i: usize| show(&r.decode(&re_units[new_lines[i].text()]));
    let now_reads: Vec<String> = match plan.what {
        What::Delete { .. } => Vec::new(),
        _ => (plan.show_from..plan.show_from + plan.show_count.min(3))
            .filter(|&i| i < new_lines.len())
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
            let after = match new_lines.get(plan.show_from) {
                Some(_) => format!("line {first} now: \"{}\"", shown(plan.show_from)),
                None => format!("the file now has {}", plural(new_lines.len(), "line")),
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
        dominant: dominant(&new_lines),
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

fn plan_find<R: Repr>(doc: &Doc<R>, req: &EditRequest) -> Result<Plan<R::U>, TextError> {
    let find = req.find.unwrap_or("");
    let not_found = || TextError::TextNotFound(find.to_string());
    if find.is_empty() {
        return Err(not_found());
    }
    let toks = tokenize(doc.r, find)?.ok_or_else(not_found)?;
    let bounds = doc.bounds();
    let matches = find_all(doc.units, &toks, bounds.as_deref());
    let (s, e) = match matches.len() {
        0 => return Err(not_found()),
        1 => matches[0],
        count => {
            return Err(TextError::AmbiguousTextMatch {
                count,
                lines: matches
                    .iter()
                    .map(|&(s, _)| line_index_at(&doc.lines, s) + 1)
                    .collect(),
            });
        }
    };
    let content = convert_breaks(req.content, doc.nl);
    let removed = toks.iter().filter(|t| **t == Tok::Break).count();
    Ok(Plan {
        a: s,
        b: e,
        ins: doc.encode(&content)?,
        delta: breaks_in(req.content) as isize - removed as isize,
        show_from: line_index_at(&doc.lines, s),
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
    let mut moved = false;
    if let Some(find) = req.find {
        if find.is_empty() {
            return Err(TextError::TextNotFound(String::new()));
        }
        let mismatch = || TextError::LineMismatch {
            line: asked,
            holds: cut(&doc.line_text(first)),
        };
        let toks = tokenize(doc.r, find)?;
        let bounds = doc.bounds();
        let span = doc.lines[first].start..doc.lines[last].text_end;
        let contained = toks.as_ref().is_some_and(|t| {
            let sub = bounds.as_ref().map(|b| &b[span.start..=span.end]);
            !find_all(&doc.units[span.clone()], t, sub).is_empty()
        });
        if !contained {
            // SPEC 8.4 reconciliation: only for a single line, only when exactly one
            // line of the file holds `find` (a break in `find` fits no single line).
            let toks = match toks {
                Some(t) if single && !t.contains(&Tok::Break) => t,
                _ => return Err(mismatch()),
            };
            let mut holders: Vec<usize> = find_all(doc.units, &toks, bounds.as_deref())
                .iter()
                .map(|&(s, _)| line_index_at(&doc.lines, s))
                .collect();
            holders.dedup();
            if holders.len() != 1 {
                return Err(mismatch());
            }
            first = holders[0];
            last = first;
            moved = true;
        }
    }
    let content = strip_one_break(req.content);
    let mut ins = Vec::new();
    let mut kept = None;
    if single {
        // SPEC 8.4 keep indentation.
        let old = &doc.units[doc.lines[first].text()];
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
        a: doc.lines[first].start,
        b: doc.lines[last].text_end,
        ins,
        delta: breaks_in(content) as isize - (last - first) as isize,
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
        (
            doc.lines[idx(at)].start,
            [text, nl].concat(),
            count as isize,
        )
    } else if total == 0 {
        (end, text, count as isize - 1)
    } else if doc.lines[total - 1].ending.is_some() {
        (end, [text, nl].concat(), count as isize)
    } else {
        // The old last line takes the dominant ending; the new last line has none.
        (end, [nl, text].concat(), count as isize)
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
    let removed = (ei - li + 1) as isize;
    let (a, b, delta) = if ei == total - 1 && doc.lines[ei].ending.is_none() {
        if li == 0 {
            (0, doc.units.len(), -(total as isize - 1))
        } else {
            // Keep the file without a final line break: the line before the range
            // loses its ending along with the range.
            (doc.lines[li - 1].text_end, doc.units.len(), -removed)
        }
    } else {
        (doc.lines[li].start, doc.lines[ei].end, -removed)
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
        let last = doc.lines[doc.total() - 1];
        let from = if last.ending.is_some() {
            doc.total()
        } else {
            doc.total() - 1
        };
        (doc.encode(&convert_breaks(req.content, doc.nl))?, from)
    };
    let mut bytes = Vec::new();
    doc.r.write(&ins, &mut bytes);
    Ok(Plan {
        a: end,
        b: end,
        ins,
        delta: breaks_in(req.content) as isize,
        show_from,
        show_count: if req.content.is_empty() {
            0
        } else {
            shown_lines(req.content)
        },
        what: What::Append { bytes: bytes.len() },
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
fn guard<U: Unit>(
    orig: &[U],
    new: &[U],
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
    let ins_ends_line = a + n == 0 || (n > 0 && (is_lf(new[a + n - 1]) || is_cr(new[a + n - 1])));
    let suf = old_lines
        .iter()
        .rev()
        .take_while(|l| l.start > b || (l.start == b && ins_ends_line))
        .count();
    if suf > new_lines.len() {
        return fail("lines after the edit are missing".into());
    }
    let shift = (a + n) as isize - b as isize;
    let moved = |x: usize| (x as isize + shift) as usize;
    for j in 1..=suf {
        let o = old_lines[old_lines.len() - j];
        let m = new_lines[new_lines.len() - j];
        if m.start != moved(o.start)
            || m.text_end != moved(o.text_end)
            || m.end != moved(o.end)
            || m.ending != o.ending
        {
            return fail(format!(
                "line {} after the edit changed",
                old_lines.len() - j + 1
            ));
        }
    }
    let got = count_breaks(&new_lines) as isize - count_breaks(&old_lines) as isize;
    if got != delta {
        return fail(format!(
            "the edit changed the number of line breaks by {got}, expected {delta}"
        ));
    }
    Ok(())
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
        assert_eq!(err.kind(), "internal_error");
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
