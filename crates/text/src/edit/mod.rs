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

mod find;
mod guard;
mod in_place;
mod plan;
mod whole;

use std::time::Duration;

use crate::error::TextError;
use crate::format::{Format, WriteOptions, detect_counted};
use crate::lines::count_endings;
use crate::repr::with_repr;
use in_place::edit_existing;
use whole::{create_by_append, write_mode};

/// The edit mode (SPEC 8.3). Its wire name (serde, [`FromStr`](std::str::FromStr),
/// [`Display`](std::fmt::Display)) is the lowercase word: `write`, `append`,
/// `replace`, `insert`, `delete`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
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
    /// Every mode, in SPEC 8.3 order.
    pub const ALL: [EditMode; 5] = [
        EditMode::Write,
        EditMode::Append,
        EditMode::Replace,
        EditMode::Insert,
        EditMode::Delete,
    ];

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

impl std::fmt::Display for EditMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A mode name that is none of the five ([`EditMode`]'s `FromStr`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("mode must be write, append, replace, insert or delete, got {0:?}")]
pub struct UnknownMode(pub String);

impl std::str::FromStr for EditMode {
    type Err = UnknownMode;

    /// The mode named exactly (lowercase) by `s`.
    fn from_str(s: &str) -> Result<EditMode, UnknownMode> {
        EditMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| UnknownMode(s.to_string()))
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

/// A unified diff of two versions of a file, each decoded in its own
/// encoding (`writegate diff`). Empty when the texts are equal.
///
/// Errors: a version that cannot be decoded as text.
pub fn diff_versions(path: &str, old: &[u8], new: &[u8]) -> Result<String, crate::TextError> {
    let old = crate::read_text(old, None, None)?;
    let new = crate::read_text(new, None, None)?;
    if old == new {
        return Ok(String::new());
    }
    Ok(unified_diff(path, &old, &new))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indentation_in_words() {
        assert_eq!(indentation_words("    "), "4 spaces");
        assert_eq!(indentation_words("\t"), "1 tab");
        assert_eq!(indentation_words("\t  "), "1 tab and 2 spaces");
        assert_eq!(indentation_words(" "), "1 space");
        assert_eq!(indentation_words("\t\t"), "2 tabs");
        assert_eq!(indentation_words(" \t "), "1 space, 1 tab and 1 space");
    }

    /// The name a mode displays, parses from and serialises to is one word.
    #[test]
    fn mode_names_round_trip() {
        for m in EditMode::ALL {
            assert_eq!(m.to_string().parse::<EditMode>(), Ok(m));
            assert_eq!(
                serde_json::to_string(&m).unwrap(),
                format!("\"{}\"", m.name())
            );
            assert_eq!(
                serde_json::from_str::<EditMode>(&format!("\"{m}\"")).unwrap(),
                m
            );
        }
        assert_eq!(
            "Write".parse::<EditMode>(),
            Err(UnknownMode("Write".to_string()))
        );
        assert!("".parse::<EditMode>().is_err());
    }
}
