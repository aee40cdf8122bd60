//! Edits an existing file in place: plans the edit, builds the new bytes, runs the
//! guard and words the result.

use super::find::{is_cr, is_lf};
use super::guard::{breaks_within, guard};
use super::plan::{
    Doc, Plan, What, plan_append, plan_delete, plan_find, plan_insert, plan_lines,
    unreachable_write,
};
use super::{EditMode, EditOutcome, EditRequest, line_span, now_clause, plural, unified_diff};
use crate::encoding::Unit;
use crate::error::TextError;
use crate::escape::show;
use crate::format::{Format, decode};
use crate::lines::{
    Ending, EndingCounts, Line, count_units, iter_lines_from, line_total, skip_lines,
};
use crate::repr::Repr;

/// Edits an existing file whose format is `format` and whose body (the units after
/// the BOM) holds the line breaks `counts`.
pub(super) fn edit_existing<R: Repr>(
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
