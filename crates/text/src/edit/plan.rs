//! What each in-place mode changes: the unit range it replaces, the new units,
//! the line-break change the guard expects, and what to report.

use super::find::{Tok, matches, tokenize};
use super::{EditRequest, breaks_in, indentation_words, shown_lines};
use crate::encoding::is_indent;
use crate::error::TextError;
use crate::escape::cut;
use crate::lines::{
    Ending, Line, LineLocator, convert_breaks, ends_with_break, iter_lines_from, skip_lines,
    strip_one_break,
};
use crate::repr::Repr;

/// What an in-place edit does: replace `units[a..b]` with `ins`. `delta` is the change
/// in line breaks the edit means to make, computed from the request (not from the
/// new bytes), for the guard.
pub(super) struct Plan<U> {
    pub(super) a: usize,
    pub(super) b: usize,
    pub(super) ins: Vec<U>,
    pub(super) delta: isize,
    /// 0-based index (in the new file) of the first edited line, and how many lines
    /// the edit spans there, for `nowReads`.
    pub(super) show_from: usize,
    pub(super) show_count: usize,
    pub(super) what: What,
}

pub(super) enum What {
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
pub(super) struct Doc<'a, R: Repr> {
    pub(super) r: &'a R,
    pub(super) units: &'a [R::U],
    /// Number of lines (SPEC 8.1).
    pub(super) total: usize,
    /// The ending new line breaks take: the dominant one, `\n` when there is none.
    pub(super) nl: Ending,
}

impl<R: Repr> Doc<'_, R> {
    fn total(&self) -> usize {
        self.total
    }

    pub(super) fn encode(&self, s: &str) -> Result<Vec<R::U>, TextError> {
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

pub(super) fn unreachable_write<U>() -> Result<Plan<U>, TextError> {
    Err(TextError::Guard(
        "write mode reached the in-place engine".to_string(),
    ))
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
pub(super) fn signed(n: usize) -> isize {
    isize::try_from(n).unwrap_or(isize::MAX)
}

pub(super) fn plan_find<R: Repr>(doc: &Doc<R>, req: &EditRequest) -> Result<Plan<R::U>, TextError> {
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

pub(super) fn plan_lines<R: Repr>(
    doc: &Doc<R>,
    req: &EditRequest,
) -> Result<Plan<R::U>, TextError> {
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

pub(super) fn plan_insert<R: Repr>(
    doc: &Doc<R>,
    req: &EditRequest,
) -> Result<Plan<R::U>, TextError> {
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

pub(super) fn plan_delete<R: Repr>(
    doc: &Doc<R>,
    req: &EditRequest,
) -> Result<Plan<R::U>, TextError> {
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

pub(super) fn plan_append<R: Repr>(
    doc: &Doc<R>,
    req: &EditRequest,
) -> Result<Plan<R::U>, TextError> {
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
