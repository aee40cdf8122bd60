//! Whole-file results: `write`, and an `append` that creates the file.

use super::{EditOutcome, EditRequest, now_clause, plural, unified_diff};
use crate::error::TextError;
use crate::escape::show;
use crate::format::{WriteOptions, decode, detect, encode_whole};
use crate::lines::{count_lines, iter_bytes};

pub(super) fn write_mode(
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

pub(super) fn create_by_append(
    req: &EditRequest,
    opts: &WriteOptions,
) -> Result<EditOutcome, TextError> {
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
