//! Keeping each unchanged line's own ending in a whole-file write (SPEC 9:
//! a read→write round trip never changes a byte the client did
//! not mean to change).
//!
//! A whole-file write over a file whose dominant ending is `\r\n` or `\r`
//! converts every line break of the content to that ending (SPEC 9), which
//! would rewrite the minority endings of a mixed file even where the client
//! sent the text back unchanged. [`align_endings`] decides each break
//! instead: the new content's lines are aligned with the old file's lines
//! by a line diff; a line whose text is unchanged keeps its old ending
//! exactly, and every other line break takes the dominant ending.

use crate::lines::{Ending, iter_bytes};
use similar::{Algorithm, DiffOp, capture_diff_slices_deadline};
use std::time::{Duration, Instant};

/// How long the line diff may take before the alignment gives up (then the
/// caller converts every break, the plain SPEC 9 rule).
pub const ALIGN_DEADLINE: Duration = Duration::from_millis(200);

/// `new` with every line break decided, for a write over a file whose
/// decoded text is `old` and whose dominant ending is `dominant`: lines of
/// `new` that the diff matches to an unchanged line of `old` get that
/// line's old ending; every other break becomes `dominant`. A last line
/// without a break keeps having none. Never produces `\r\r\n`: a `\r\n` is
/// one break in the SPEC 8.1 model.
///
/// Returns `None` when the diff did not finish within [`ALIGN_DEADLINE`].
pub fn align_endings(old: &str, new: &str, dominant: Ending) -> Option<String> {
    let old_lines = split(old);
    let new_lines = split(new);
    let old_texts: Vec<&str> = old_lines.iter().map(|l| l.0).collect();
    let new_texts: Vec<&str> = new_lines.iter().map(|l| l.0).collect();
    let deadline = Instant::now() + ALIGN_DEADLINE;
    let ops =
        capture_diff_slices_deadline(Algorithm::Myers, &old_texts, &new_texts, Some(deadline));
    if Instant::now() > deadline {
        return None;
    }
    let mut kept: Vec<Option<Option<Ending>>> = vec![None; new_lines.len()];
    for op in ops {
        if let DiffOp::Equal {
            old_index,
            new_index,
            len,
        } = op
        {
            for i in 0..len {
                kept[new_index + i] = Some(old_lines[old_index + i].1);
            }
        }
    }
    let mut out = String::with_capacity(new.len() + new.len() / 32);
    for (i, (text, ending)) in new_lines.iter().enumerate() {
        out.push_str(text);
        let ending = match (ending, kept[i]) {
            // The last line of the content has no break: it keeps none.
            (None, _) => None,
            // An unchanged line with a break keeps its old break (or, if
            // it was the old file's unterminated last line, the dominant).
            (Some(_), Some(old)) => Some(old.unwrap_or(dominant)),
            (Some(_), None) => Some(dominant),
        };
        if let Some(e) = ending {
            out.push_str(e.as_str());
        }
    }
    Some(out)
}

/// `(text, ending)` of each line of `s` (SPEC 8.1 model).
fn split(s: &str) -> Vec<(&str, Option<Ending>)> {
    iter_bytes(s.as_bytes())
        // Line boundaries fall on `\r`/`\n` bytes, which are char boundaries.
        .map(|l| (&s[l.start..l.text_end], l.ending))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unchanged_lines_keep_their_own_endings() {
        let old = "a\r\nb\nc\r\nd\r\n";
        // The client echoed the file with one word changed.
        assert_eq!(
            align_endings(old, "a\r\nb\nC\r\nd\r\n", Ending::CrLf).unwrap(),
            "a\r\nb\nC\r\nd\r\n"
        );
        // The client flattened every ending to \n: unchanged lines get
        // their own back, the changed one the dominant ending.
        assert_eq!(
            align_endings(old, "a\nb\nC\nd\n", Ending::CrLf).unwrap(),
            "a\r\nb\nC\r\nd\r\n"
        );
    }

    #[test]
    fn new_lines_take_the_dominant_ending_and_no_double_cr() {
        let old = "x\ry\r";
        assert_eq!(
            align_endings(old, "x\nnew\ny\n", Ending::Cr).unwrap(),
            "x\rnew\ry\r"
        );
        assert_eq!(
            align_endings("a\r\n", "a\r\nb\r\n", Ending::CrLf).unwrap(),
            "a\r\nb\r\n"
        );
        // No final break stays without one.
        assert_eq!(
            align_endings("a\r\nb", "a\nb", Ending::CrLf).unwrap(),
            "a\r\nb"
        );
        // The old unterminated last line, now followed by more lines.
        assert_eq!(
            align_endings("a\r\nb", "a\nb\nc", Ending::CrLf).unwrap(),
            "a\r\nb\r\nc"
        );
    }
}
