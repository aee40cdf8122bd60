//! Fuzz target `edit_engine`: `apply_edit` on arbitrary files and requests.
//!
//! `apply_edit` must never panic. Beyond that, every answer is checked against an
//! oracle written from SPEC 8 (not from the engine's internal plan):
//!
//! - On success, the new file re-split with the SPEC 8.1 line model keeps every
//!   line outside the edited lines identical (text and ending, compared as code
//!   units), the edited lines hold exactly the requested text, the BOM and encoding
//!   are kept, and the break count moves as the edit says. For `replace` + `find`
//!   the output is exactly the original with the one match replaced (a break in
//!   `find` matching any ending, new breaks taking the dominant ending, and the
//!   documented `\r` / `\n` join rule of docs/behaviour.md applied).
//! - Refusals must be the right ones: `line_out_of_range` exactly when a number is
//!   out of range (with the right number and total), `ambiguous_text_match` with the
//!   right count and lines, `text_not_found` only when nothing matches, and so on.
//! - `TextError::Guard` (SPEC 8.5, `internal_error`) is allowed only for the
//!   documented case of docs/behaviour.md: an edit that inserts nothing and would
//!   leave an original lone `\r` directly before an original `\n` (the two would
//!   read as one `\r\n`). Those refusals are counted and the count printed.
//! - `write` / creating `append`: the decoded output has exactly the content's line
//!   texts (whole-file encoding is lossless), and a re-detection agrees on the
//!   encoding and BOM.
//! - `detect`, `encode_whole`, `numbered_lines` and `read_text` never panic on the
//!   same bytes; `numbered_lines` numbers exactly the lines of the unit split.
//!
//! Input layout (so seeds can be written by hand, see fuzz/make_seeds.py):
//! `mode, flags, line, end_line, opts, content_len u16le, find_len u16le, content,
//! find, file...` (missing bytes read as zero).
#![no_main]

use std::sync::atomic::{AtomicU64, Ordering};

use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;
use writegate_text::{
    EditMode, EditOutcome, EditRequest, Encoding, Ending, Format, LineEndingChoice, TextError,
    WriteOptions, apply_edit, convert_breaks, decode, detect, dominant, encode_text, encode_whole,
    indentation_words, numbered_lines, read_text, split_bytes, split_units,
};

const CR: u32 = 0x0D;
const LF: u32 = 0x0A;

static GUARD_JOINS: AtomicU64 = AtomicU64::new(0);
static BOM_AMBIGUOUS: AtomicU64 = AtomicU64::new(0);
static FEFF_AS_BOM: AtomicU64 = AtomicU64::new(0);

fn count(c: &AtomicU64, what: &str) {
    let n = c.fetch_add(1, Ordering::Relaxed) + 1;
    if n.is_power_of_two() {
        eprintln!("edit_engine: {what}: {n}");
    }
}

const LABELS: [&str; 16] = [
    "",
    "utf-8",
    "utf-16le",
    "utf-16be",
    "utf-32le",
    "utf-32be",
    "windows-1252",
    "shift_jis",
    "gbk",
    "utf-16",
    "replacement",
    "bogus-label",
    "koi8-r",
    "euc-kr",
    "iso-2022-jp",
    "big5",
];

struct Input {
    mode: EditMode,
    exists: bool,
    want_diff: bool,
    content: String,
    find: Option<String>,
    line: Option<u64>,
    end_line: Option<u64>,
    opts: WriteOptions,
    file: Vec<u8>,
}

fn take<'a>(u: &mut Unstructured<'a>, n: usize) -> &'a [u8] {
    let n = n.min(u.len());
    u.bytes(n).unwrap_or(&[])
}

fn parse(data: &[u8]) -> Input {
    let mut u = Unstructured::new(data);
    let b: [u8; 5] = std::array::from_fn(|_| u.arbitrary::<u8>().unwrap_or(0));
    let clen = u.arbitrary::<u16>().unwrap_or(0) as usize;
    let flen = u.arbitrary::<u16>().unwrap_or(0) as usize;
    let mode = match b[0] % 5 {
        0 => EditMode::Write,
        1 => EditMode::Append,
        2 => EditMode::Replace,
        3 => EditMode::Insert,
        _ => EditMode::Delete,
    };
    let flags = b[1];
    let content = String::from_utf8_lossy(take(&mut u, clen)).into_owned();
    let find_bytes = take(&mut u, flen).to_vec();
    let file = u.take_rest().to_vec();
    let has_find = flags & 0x02 != 0;
    let find = if !has_find {
        None
    } else if flags & 0x04 != 0 {
        // Take find from the file's own text, so that it matches.
        let text = match detect(&file) {
            Ok(f) => decode(&file, &f),
            Err(_) => String::from_utf8_lossy(&file).into_owned(),
        };
        let off = find_bytes.first().copied().unwrap_or(0) as usize;
        let len = find_bytes.get(1).copied().unwrap_or(0) as usize % 48 + 1;
        Some(text.chars().skip(off).take(len).collect())
    } else {
        Some(String::from_utf8_lossy(&find_bytes).into_owned())
    };
    let line_v = if flags & 0x40 != 0 {
        u64::MAX - (b[2] % 4) as u64
    } else {
        b[2] as u64
    };
    let line = (flags & 0x10 != 0).then_some(line_v);
    let end_v = if b[3] & 0x80 != 0 {
        line_v.saturating_add((b[3] & 0x07) as u64)
    } else {
        (b[3] & 0x7F) as u64
    };
    let end_line = (flags & 0x20 != 0).then_some(end_v);
    let o = b[4];
    let opts = WriteOptions {
        bom: match o & 3 {
            1 => Some(false),
            2 => Some(true),
            _ => None,
        },
        line_ending: match (o >> 2) & 3 {
            1 => Some(LineEndingChoice::Lf),
            2 => Some(LineEndingChoice::Crlf),
            _ => None,
        },
        encoding: match (o >> 4) as usize {
            0 => None,
            i => Some(LABELS[i].to_string()),
        },
    };
    Input {
        mode,
        exists: flags & 0x01 != 0,
        want_diff: flags & 0x08 != 0,
        content,
        find,
        line,
        end_line,
        opts,
        file,
    }
}

// ---------------------------------------------------------------- code units

fn to_units(body: &[u8], enc: Encoding) -> (Vec<u32>, usize) {
    fn chunks<const N: usize>(b: &[u8], f: impl Fn([u8; N]) -> u32) -> (Vec<u32>, usize) {
        let c = b.chunks_exact(N);
        let tail = c.remainder().len();
        (c.map(|x| f(x.try_into().unwrap())).collect(), tail)
    }
    match enc.normalized() {
        Encoding::Utf16Le => chunks::<2>(body, |x| u16::from_le_bytes(x) as u32),
        Encoding::Utf16Be => chunks::<2>(body, |x| u16::from_be_bytes(x) as u32),
        Encoding::Utf32Le => chunks::<4>(body, u32::from_le_bytes),
        Encoding::Utf32Be => chunks::<4>(body, u32::from_be_bytes),
        _ => (body.iter().map(|&b| b as u32).collect(), 0),
    }
}

fn from_units(units: &[u32], enc: Encoding) -> Vec<u8> {
    let mut out = Vec::new();
    for &u in units {
        match enc.normalized() {
            Encoding::Utf16Le => out.extend((u as u16).to_le_bytes()),
            Encoding::Utf16Be => out.extend((u as u16).to_be_bytes()),
            Encoding::Utf32Le => out.extend(u.to_le_bytes()),
            Encoding::Utf32Be => out.extend(u.to_be_bytes()),
            _ => out.push(u as u8),
        }
    }
    out
}

fn enc_units(s: &str, enc: Encoding) -> Result<Vec<u32>, TextError> {
    Ok(to_units(&encode_text(s, enc)?, enc).0)
}

fn dec(units: &[u32], enc: Encoding) -> String {
    let f = Format {
        encoding: enc,
        bom: false,
        dominant: None,
    };
    decode(&from_units(units, enc), &f)
}

/// Multi-byte legacy encodings: a unit index need not be a character boundary, so
/// the engine filters matches the plain matcher below would count.
fn multibyte_legacy(enc: Encoding) -> bool {
    matches!(enc.normalized(), Encoding::Legacy(e) if !e.is_single_byte())
}

type LineView = Vec<(Vec<u32>, Option<Ending>)>;

fn view(units: &[u32]) -> LineView {
    split_units(units)
        .iter()
        .map(|l| (units[l.text()].to_vec(), l.ending))
        .collect()
}

/// The texts a piece of new content spans: one per line break plus the text after
/// the last break (empty when the content is empty or ends with a break).
fn pieces(s: &str) -> Vec<&str> {
    let mut v: Vec<&str> = split_bytes(s.as_bytes())
        .iter()
        .map(|l| &s[l.text()])
        .collect();
    if s.is_empty() || s.ends_with(['\n', '\r']) {
        v.push("");
    }
    v
}

fn strip_one_break(s: &str) -> &str {
    s.strip_suffix("\r\n")
        .or_else(|| s.strip_suffix('\n'))
        .or_else(|| s.strip_suffix('\r'))
        .unwrap_or(s)
}

/// An expected line: its text and its ending (`None` in `Exp::New` means a new line
/// break, which must be the dominant ending or `\r\n`, the join-avoiding form).
#[derive(Clone, Debug)]
enum End {
    Is(Option<Ending>),
    New,
}

type Expected = Vec<(Vec<u32>, End)>;

fn kept(lines: &[(Vec<u32>, Option<Ending>)]) -> Expected {
    lines
        .iter()
        .map(|(t, e)| (t.clone(), End::Is(*e)))
        .collect()
}

/// New lines for `texts`, every one ending in a new break except the last, which
/// ends with `last`. A last line that would be empty and without ending does not
/// exist in the line model and is dropped.
fn new_lines(texts: &[Vec<u32>], last: End) -> Expected {
    let mut v: Expected = texts.iter().map(|t| (t.clone(), End::New)).collect();
    if let Some(l) = v.last_mut() {
        l.1 = last;
    }
    if matches!(v.last(), Some((t, End::Is(None))) if t.is_empty()) {
        v.pop();
    }
    v
}

fn assert_lines(got: &LineView, want: &Expected, nl: Ending, what: &str) {
    assert_eq!(
        got.len(),
        want.len(),
        "{what}: line count\n got {got:?}\nwant {want:?}"
    );
    for (i, ((gt, ge), (wt, we))) in got.iter().zip(want).enumerate() {
        assert_eq!(gt, wt, "{what}: text of line {}", i + 1);
        match we {
            End::Is(e) => assert_eq!(ge, e, "{what}: ending of line {}", i + 1),
            End::New => assert!(
                *ge == Some(nl) || *ge == Some(Ending::CrLf),
                "{what}: new break of line {} is {ge:?}, dominant {nl:?}",
                i + 1
            ),
        }
    }
}

// ---------------------------------------------------------------- find matching

enum Tok {
    Text(Vec<u32>),
    Break,
}

/// `find` as text pieces and breaks; `None` when a piece cannot be encoded.
fn tokens(find: &str, enc: Encoding) -> Option<Vec<Tok>> {
    let mut v = Vec::new();
    for l in split_bytes(find.as_bytes()) {
        let t = &find[l.text()];
        if !t.is_empty() {
            v.push(Tok::Text(enc_units(t, enc).ok()?));
        }
        if l.ending.is_some() {
            v.push(Tok::Break);
        }
    }
    Some(v)
}

/// Every (start, end) where `toks` matches, a break matching one whole ending and
/// no match starting between a `\r` and its `\n`. Naive on purpose.
fn matches(h: &[u32], toks: &[Tok]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    'p: for p in 0..h.len() {
        if p > 0 && h[p - 1] == CR && h[p] == LF {
            continue;
        }
        let mut i = p;
        for t in toks {
            match t {
                Tok::Text(v) => {
                    if h.len() < i + v.len() || h[i..i + v.len()] != v[..] {
                        continue 'p;
                    }
                    i += v.len();
                }
                Tok::Break => match h.get(i) {
                    Some(&CR) => i += if h.get(i + 1) == Some(&LF) { 2 } else { 1 },
                    Some(&LF) => i += 1,
                    _ => continue 'p,
                },
            }
        }
        out.push((p, i));
    }
    out
}

fn line_of(lines: &[writegate_text::Line], pos: usize) -> usize {
    lines
        .iter()
        .position(|l| pos < l.end)
        .unwrap_or(lines.len().saturating_sub(1))
}

/// The documented join rule (docs/behaviour.md): a new break landing right after a
/// lone `\r` or right before a `\n` is written as `\r\n`.
fn avoid_joins(units: &[u32], a: usize, b: usize, mut ins: Vec<u32>) -> Vec<u32> {
    if a > 0 && units[a - 1] == CR && ins.first() == Some(&LF) {
        ins.insert(0, CR);
    }
    if b < units.len() && units[b] == LF && ins.last() == Some(&CR) {
        ins.push(LF);
    }
    ins
}

/// True when removing `a..b` and inserting nothing would put an original `\r`
/// directly before an original `\n`: the documented `line_ending_conflict`.
fn joins(units: &[u32], a: usize, b: usize) -> bool {
    a > 0 && a < b && b < units.len() && units[a - 1] == CR && units[b] == LF
}

/// The documented refusal of [`joins`]: `line_ending_conflict`, not a guard
/// refusal.
fn guard_join(err: &TextError) -> bool {
    matches!(err, TextError::LineEndingConflict { .. })
}

// ---------------------------------------------------------------- the oracle

struct Doc {
    enc: Encoding,
    units: Vec<u32>,
    old: LineView,
    lines: Vec<writegate_text::Line>,
    nl: Ending,
}

fn unexpected(what: &str, e: &TextError) -> ! {
    panic!("{what}: unexpected refusal {e:?}")
}

fn check_find(
    doc: &Doc,
    content: &str,
    find: &str,
    res: &Result<EditOutcome, TextError>,
) -> Option<Vec<Vec<u32>>> {
    let u = &doc.units;
    if find.is_empty() {
        assert!(
            matches!(res, Err(TextError::TextNotFound(_))),
            "empty find: {res:?}"
        );
        return None;
    }
    let found = match tokens(find, doc.enc) {
        Some(t) => matches(u, &t),
        None => Vec::new(),
    };
    let ins = enc_units(&convert_breaks(content, doc.nl), doc.enc);
    let loose = multibyte_legacy(doc.enc);
    match res {
        Ok(out) => {
            let line0 = out.line.expect("line") as usize - 1;
            let cands: Vec<(usize, usize)> = match found.len() {
                1 => found.clone(),
                _ if loose => found
                    .iter()
                    .filter(|m| line_of(&doc.lines, m.0) == line0)
                    .copied()
                    .collect(),
                n => panic!("replace find succeeded with {n} matches"),
            };
            assert!(
                !cands.is_empty(),
                "the engine replaced something that does not match find"
            );
            let ins = ins.expect("content encodes when the edit succeeded");
            assert_eq!(line_of(&doc.lines, cands[0].0), line0, "line");
            let wants = cands
                .iter()
                .map(|&(s, e)| {
                    let mut want = u[..s].to_vec();
                    want.extend(avoid_joins(u, s, e, ins.clone()));
                    want.extend_from_slice(&u[e..]);
                    want
                })
                .collect();
            Some(wants)
        }
        Err(TextError::TextNotFound(_)) => {
            assert!(
                loose || found.is_empty(),
                "text_not_found but {found:?} match"
            );
            None
        }
        Err(TextError::AmbiguousTextMatch { count, lines }) => {
            if !loose {
                assert_eq!(*count, found.len());
                let want: Vec<usize> = found.iter().map(|m| line_of(&doc.lines, m.0) + 1).collect();
                assert_eq!(*lines, want);
            } else {
                assert!(*count <= found.len() && *count >= 2);
            }
            None
        }
        Err(TextError::UnmappableCharacter(_)) => {
            assert!(ins.is_err(), "unmappable but the content encodes");
            None
        }
        Err(err) if guard_join(err) => {
            assert!(content.is_empty(), "join refusal with non-empty content");
            assert!(
                found.iter().any(|&(s, e)| joins(u, s, e)),
                "join refusal but no match sits between a lone CR and an LF"
            );
            count(&GUARD_JOINS, "line ending conflicts (documented)");
            None
        }
        Err(e) => unexpected("replace find", e),
    }
}

fn check_lines(
    doc: &Doc,
    req: &EditRequest,
    res: &Result<EditOutcome, TextError>,
) -> Option<Expected> {
    let total = doc.old.len();
    let asked = req.line.unwrap();
    let asked_end = req.end_line.unwrap_or(asked);
    if asked == 0 || asked > total as u64 {
        assert_eq!(
            *res.as_ref().unwrap_err(),
            TextError::LineOutOfRange { line: asked, total }
        );
        return None;
    }
    if asked_end > total as u64 {
        assert_eq!(
            *res.as_ref().unwrap_err(),
            TextError::LineOutOfRange {
                line: asked_end,
                total
            }
        );
        return None;
    }
    if req.find == Some("") {
        assert!(matches!(res, Err(TextError::TextNotFound(_))), "{res:?}");
        return None;
    }
    let single = asked == asked_end;
    let (mut first, mut last) = (asked as usize - 1, asked_end as usize - 1);
    let mut moved = false;
    let mut mismatch = false;
    if let Some(find) = req.find
        && !multibyte_legacy(doc.enc)
    {
        let toks = tokens(find, doc.enc);
        let span = doc.lines[first].start..doc.lines[last].text_end;
        let all = toks
            .as_ref()
            .map(|t| matches(&doc.units, t))
            .unwrap_or_default();
        let contained = all.iter().any(|&(s, e)| span.start <= s && e <= span.end);
        if !contained {
            let has_break = toks
                .as_ref()
                .is_none_or(|t| t.iter().any(|t| matches!(t, Tok::Break)));
            let mut holders: Vec<usize> = all.iter().map(|m| line_of(&doc.lines, m.0)).collect();
            holders.dedup();
            if single && !has_break && holders.len() == 1 {
                first = holders[0];
                last = first;
                moved = true;
            } else {
                mismatch = true;
            }
        }
    }
    let content = strip_one_break(req.content);
    let out = match res {
        Ok(out) => out,
        Err(TextError::LineMismatch { line, .. }) => {
            assert!(req.find.is_some() && *line == asked);
            assert!(
                mismatch || multibyte_legacy(doc.enc),
                "line_mismatch but find fits"
            );
            return None;
        }
        Err(TextError::UnmappableCharacter(_)) => {
            assert!(
                enc_units(content, doc.enc).is_err(),
                "unmappable but the content encodes"
            );
            return None;
        }
        Err(err) if guard_join(err) => {
            assert!(content.is_empty(), "join refusal with non-empty content");
            let possible = if req.find.is_some() {
                (0..total).any(|i| joins(&doc.units, doc.lines[i].start, doc.lines[i].text_end))
            } else {
                joins(&doc.units, doc.lines[first].start, doc.lines[last].text_end)
            };
            assert!(possible, "join refusal where no lone CR meets an LF");
            count(&GUARD_JOINS, "line ending conflicts (documented)");
            return None;
        }
        Err(e) => unexpected("replace line", e),
    };
    assert!(
        !mismatch,
        "edited although find is in no line or several: {out:?}"
    );
    if multibyte_legacy(doc.enc) && out.moved_from.is_some() {
        first = out.line.unwrap() as usize - 1;
        last = first;
        moved = true;
    }
    assert_eq!(out.moved_from, moved.then_some(asked), "movedFrom");
    assert_eq!(out.line, Some(first as u64 + 1), "line");
    // SPEC 8.4 keep indentation.
    let old_text = &doc.old[first].0;
    let indent = old_text
        .iter()
        .take_while(|&&c| c == 0x20 || c == 0x09)
        .count();
    let keep = single
        && indent > 0
        && !content.is_empty()
        && !content.starts_with([' ', '\t'])
        && content.trim() != dec(old_text, doc.enc).trim();
    let words = keep.then(|| indentation_words(&dec(&old_text[..indent], doc.enc)));
    assert_eq!(out.kept_indentation, words, "keptIndentation");
    let mut texts: Vec<Vec<u32>> = pieces(content)
        .iter()
        .map(|p| enc_units(p, doc.enc).expect("content encodes when the edit succeeded"))
        .collect();
    if keep {
        texts[0].splice(0..0, old_text[..indent].iter().copied());
    }
    let mut want = kept(&doc.old[..first]);
    want.extend(new_lines(&texts, End::Is(doc.old[last].1)));
    want.extend(kept(&doc.old[last + 1..]));
    Some(want)
}

fn check_insert(
    doc: &Doc,
    req: &EditRequest,
    res: &Result<EditOutcome, TextError>,
) -> Option<Expected> {
    let total = doc.old.len();
    let at = req.line.unwrap();
    if at == 0 || at > total as u64 + 1 {
        assert_eq!(
            *res.as_ref().unwrap_err(),
            TextError::LineOutOfRange { line: at, total }
        );
        return None;
    }
    let content = strip_one_break(req.content);
    let out = match res {
        Ok(out) => out,
        Err(TextError::UnmappableCharacter(_)) => {
            assert!(enc_units(content, doc.enc).is_err());
            return None;
        }
        Err(e) => unexpected("insert", e),
    };
    assert_eq!(out.line, Some(at));
    let texts: Vec<Vec<u32>> = pieces(content)
        .iter()
        .map(|p| enc_units(p, doc.enc).unwrap())
        .collect();
    let k = at as usize - 1;
    Some(if k < total {
        let mut w = kept(&doc.old[..k]);
        w.extend(new_lines(&texts, End::New));
        w.extend(kept(&doc.old[k..]));
        w
    } else if total == 0 {
        new_lines(&texts, End::Is(None))
    } else if doc.old[total - 1].1.is_some() {
        let mut w = kept(&doc.old);
        w.extend(new_lines(&texts, End::New));
        w
    } else {
        // SPEC 8.2: the old last line takes the dominant ending, the new last line
        // has none.
        let mut w = kept(&doc.old[..total - 1]);
        w.push((doc.old[total - 1].0.clone(), End::New));
        w.extend(new_lines(&texts, End::Is(None)));
        w
    })
}

fn check_delete(
    doc: &Doc,
    req: &EditRequest,
    res: &Result<EditOutcome, TextError>,
) -> Option<Expected> {
    let total = doc.old.len();
    let l = req.line.unwrap();
    let e = req.end_line.unwrap_or(l);
    if l == 0 || l > total as u64 {
        assert_eq!(
            *res.as_ref().unwrap_err(),
            TextError::LineOutOfRange { line: l, total }
        );
        return None;
    }
    if e > total as u64 {
        assert_eq!(
            *res.as_ref().unwrap_err(),
            TextError::LineOutOfRange { line: e, total }
        );
        return None;
    }
    let (first, last) = (l as usize - 1, e as usize - 1);
    let at_end = last == total - 1 && doc.old[last].1.is_none();
    let out = match res {
        Ok(out) => out,
        Err(err) if guard_join(err) => {
            let (a, b) = (doc.lines[first].start, doc.lines[last].end);
            assert!(
                !at_end && joins(&doc.units, a, b),
                "join refusal where nothing joins"
            );
            count(&GUARD_JOINS, "line ending conflicts (documented)");
            return None;
        }
        Err(err) => unexpected("delete", err),
    };
    assert_eq!(out.line, Some(l));
    Some(if !at_end {
        let mut w = kept(&doc.old[..first]);
        w.extend(kept(&doc.old[last + 1..]));
        w
    } else if first == 0 {
        Vec::new()
    } else {
        // The file keeps having no final line break; an empty line without an
        // ending does not exist in the line model.
        let mut w = kept(&doc.old[..first - 1]);
        if !doc.old[first - 1].0.is_empty() {
            w.push((doc.old[first - 1].0.clone(), End::Is(None)));
        }
        w
    })
}

fn check_append(
    doc: &Doc,
    content: &str,
    res: &Result<EditOutcome, TextError>,
) -> Option<Vec<Vec<u32>>> {
    let u = &doc.units;
    let text = if u.is_empty() {
        content.to_string()
    } else {
        convert_breaks(content, doc.nl)
    };
    let ins = enc_units(&text, doc.enc);
    match res {
        Ok(_) => {
            let mut want = u.clone();
            want.extend(avoid_joins(
                u,
                u.len(),
                u.len(),
                ins.expect("content encodes"),
            ));
            Some(vec![want])
        }
        Err(TextError::UnmappableCharacter(_)) => {
            assert!(ins.is_err());
            None
        }
        Err(e) => unexpected("append", e),
    }
}

fn invalid_params(r: &EditRequest) -> bool {
    let (f, l, e) = (r.find.is_some(), r.line.is_some(), r.end_line.is_some());
    let bad = match r.mode {
        EditMode::Write | EditMode::Append => f || l || e,
        EditMode::Replace => !f && !l,
        EditMode::Insert => !l || f || e,
        EditMode::Delete => !l || f,
    };
    bad || (e && !l) || matches!((r.line, r.end_line), (Some(l), Some(e)) if e < l)
}

/// `write`, and `append` that creates the file: whole-file encoding (SPEC 9).
fn check_whole(
    orig: Option<&[u8]>,
    req: &EditRequest,
    opts: &WriteOptions,
    res: &Result<EditOutcome, TextError>,
) {
    let out = match res {
        Ok(out) => out,
        Err(
            TextError::UnsupportedEncoding(_)
            | TextError::UnmappableCharacter(_)
            | TextError::InvalidRequest(_),
        ) => return,
        Err(e) => unexpected("write", e),
    };
    if let Some(b) = orig
        && opts.encoding.is_none()
    {
        assert!(
            detect(b).is_ok(),
            "wrote over an undetectable file without an encoding"
        );
    }
    let bom = out.format.encoding.bom_bytes();
    if out.format.bom {
        assert!(!bom.is_empty() && out.bytes.starts_with(bom), "BOM missing");
    }
    let content = if out.format.bom {
        req.content.strip_prefix('\u{FEFF}').unwrap_or(req.content)
    } else {
        req.content
    };
    let text = decode(&out.bytes, &out.format);
    let got_lines = split_bytes(text.as_bytes());
    if opts.line_ending == Some(LineEndingChoice::Crlf) {
        assert!(
            got_lines
                .iter()
                .all(|l| l.ending.is_none() || l.ending == Some(Ending::CrLf))
        );
    }
    let got: Vec<&str> = got_lines.iter().map(|l| &text[l.text()]).collect();
    let want: Vec<&str> = split_bytes(content.as_bytes())
        .iter()
        .map(|l| &content[l.text()])
        .collect();
    assert_eq!(got, want, "whole-file encoding changed the text");
    // Re-detection agrees on a BOM'd or UTF-8 file.
    if out.format.bom || out.format.encoding == Encoding::Utf8 {
        let again = detect(&out.bytes).expect("a file just written re-detects");
        if again.encoding != out.format.encoding || again.bom != out.format.bom {
            // Two ways the written bytes begin with another BOM, both counted, not
            // failed (see fuzz/regressions/README.md):
            // - UTF-16LE with BOM whose text starts with U+0000 begins FF FE 00 00,
            //   the UTF-32LE BOM (SPEC 9 checks UTF-32LE first);
            // - UTF-8 without BOM whose text starts with U+FEFF begins EF BB BF,
            //   the UTF-8 BOM.
            if out.format.encoding == Encoding::Utf16Le && content.starts_with('\0') {
                count(
                    &BOM_AMBIGUOUS,
                    "UTF-16LE files starting with U+0000 re-detect as UTF-32LE",
                );
            } else if out.format.encoding == Encoding::Utf8
                && !out.format.bom
                && content.starts_with('\u{FEFF}')
                && again.encoding == Encoding::Utf8
            {
                count(
                    &FEFF_AS_BOM,
                    "UTF-8 files without BOM starting with U+FEFF re-detect with BOM",
                );
            } else {
                panic!("re-detected as {again:?}, written as {:?}", out.format);
            }
        }
    }
}

fn run(input: &Input) {
    let req = EditRequest {
        mode: input.mode,
        content: &input.content,
        find: input.find.as_deref(),
        line: input.line,
        end_line: input.end_line,
        display_path: "dir/f.txt",
        want_diff: input.want_diff,
    };
    let orig = input.exists.then_some(&input.file[..]);
    let res = apply_edit(orig, &req, &input.opts);
    if let Ok(out) = &res {
        assert_eq!(out.diff.is_some(), input.want_diff);
        assert!(out.now_reads.len() <= 3);
    }
    if invalid_params(&req) {
        assert!(matches!(res, Err(TextError::InvalidRequest(_))), "{res:?}");
        return;
    }
    let bytes = match (input.mode, orig) {
        (EditMode::Write, _) | (EditMode::Append, None) => {
            return check_whole(orig, &req, &input.opts, &res);
        }
        (_, None) => {
            assert!(matches!(res, Err(TextError::InvalidRequest(_))), "{res:?}");
            return;
        }
        (_, Some(b)) => b,
    };
    let format = match detect(bytes) {
        Ok(f) => f,
        Err(_) => {
            assert!(
                matches!(res, Err(TextError::UnsupportedEncoding(_))),
                "{res:?}"
            );
            return;
        }
    };
    if !format.encoding.is_wide() && bytes.contains(&0) {
        assert_eq!(res, Err(TextError::BinaryFile));
        return;
    }
    let bom_len = format.bom_len();
    let (units, tail) = to_units(&bytes[bom_len..], format.encoding);
    if tail != 0 {
        assert!(
            matches!(res, Err(TextError::UnsupportedEncoding(_))),
            "{res:?}"
        );
        return;
    }
    let lines = split_units(&units);
    let doc = Doc {
        enc: format.encoding,
        old: view(&units),
        nl: dominant(&lines).unwrap_or(Ending::Lf),
        lines,
        units,
    };
    // The exact new units (find, append) or the expected lines (line edits).
    let (want_units, want_lines) = match input.mode {
        EditMode::Replace if req.line.is_some() => (None, check_lines(&doc, &req, &res)),
        EditMode::Replace => (check_find(&doc, req.content, req.find.unwrap(), &res), None),
        EditMode::Insert => (None, check_insert(&doc, &req, &res)),
        EditMode::Delete => (None, check_delete(&doc, &req, &res)),
        EditMode::Append => (check_append(&doc, req.content, &res), None),
        EditMode::Write => unreachable!(),
    };
    let Ok(out) = &res else { return };
    // Common to every in-place edit: same encoding and BOM, whole units, the
    // dominant ending recomputed, bytes before and after the changed lines kept.
    assert_eq!(out.format.encoding, format.encoding);
    assert_eq!(out.format.bom, format.bom);
    assert_eq!(out.bytes[..bom_len], bytes[..bom_len]);
    let (new_units, new_tail) = to_units(&out.bytes[bom_len..], format.encoding);
    assert_eq!(new_tail, 0);
    let new = view(&new_units);
    assert_eq!(out.format.dominant, dominant(&split_units(&new_units)));
    if let Some(w) = want_units {
        assert!(
            w.contains(&new_units),
            "new units differ from the original with the one edit\n got {new_units:?}\nwant {w:?}"
        );
    }
    if let Some(w) = want_lines {
        assert_lines(&new, &w, doc.nl, input.mode.name());
    }
    // The guard's promise, checked the plain way: the lines the two files share at
    // the start and at the end cover everything but one contiguous region, and
    // re-splitting the kept bytes gives the same lines.
    let pre = doc.old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let pre_units: usize = doc.old[..pre]
        .iter()
        .map(|(t, e)| t.len() + e.map_or(0, Ending::len))
        .sum();
    assert_eq!(new_units[..pre_units], doc.units[..pre_units]);
    let suf = doc.old[pre..]
        .iter()
        .rev()
        .zip(new[pre..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let suf_units: usize = doc.old[doc.old.len() - suf..]
        .iter()
        .map(|(t, e)| t.len() + e.map_or(0, Ending::len))
        .sum();
    assert_eq!(
        new_units[new_units.len() - suf_units..],
        doc.units[doc.units.len() - suf_units..]
    );
}

/// Functions that take bytes or text on their own must never panic either.
fn side_checks(input: &Input) {
    let f = detect(&input.file);
    let _ = encode_whole(&input.content, f.as_ref().ok(), &input.opts);
    let _ = encode_whole(&input.content, None, &input.opts);
    let _ = read_text(&input.file, input.line, input.end_line);
    let whole = read_text(&input.file, None, None);
    if let (Ok(f), Ok(text)) = (&f, &whole) {
        assert_eq!(*text, decode(&input.file, f));
    }
    match numbered_lines(&input.file, input.line, input.end_line) {
        Ok(n) => {
            let f = f
                .as_ref()
                .expect("numbered_lines read a file detect refused");
            let (units, tail) = to_units(&input.file[f.bom_len()..], f.encoding);
            // Decoding neither adds nor removes a line break. A trailing partial
            // code unit decodes as one U+FFFD, which can start one more line.
            let split = split_units(&units);
            let ends_open = split.last().is_some_and(|l| l.ending.is_none());
            let want = split.len() + usize::from(tail > 0 && !ends_open);
            assert_eq!(n.total_lines, want, "numbered_lines count");
            assert!(n.lines.len() <= n.total_lines);
        }
        Err(e) => assert!(matches!(
            e,
            TextError::UnsupportedEncoding(_) | TextError::BinaryFile
        )),
    }
}

fuzz_target!(|data: &[u8]| {
    let input = parse(data);
    run(&input);
    side_checks(&input);
});
