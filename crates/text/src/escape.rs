//! Making whitespace visible in the text shown to a model (SPEC 8.6 `nowReads`).

/// Longest text (in `char`s) shown for one line, SPEC 8.6.
pub const SHOW_MAX_CHARS: usize = 200;

/// Escapes `s` so whitespace shows: `\` → `\\`, `"` → `\"`, tab → `\t`, CR → `\r`,
/// LF → `\n`, any other control character → `\u{XX}` (hex). Everything else is kept.
/// Implements the escaping of SPEC 8.6. Never fails.
pub fn escape_visible(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\n' => out.push_str("\\n"),
            // `\u{7f}`: lower-case hex, no leading zeros.
            c if c.is_control() => out.extend(c.escape_unicode()),
            c => out.push(c),
        }
    }
    out
}

/// Cuts `s` to its first [`SHOW_MAX_CHARS`] characters (appending `…` when something
/// was cut), then escapes it with [`escape_visible`]. The form used for `nowReads`
/// entries and for line texts in messages and hints (SPEC 8.6). Never fails.
pub fn show(s: &str) -> String {
    match s.char_indices().nth(SHOW_MAX_CHARS) {
        Some((cut, _)) => {
            let mut out = escape_visible(&s[..cut]);
            out.push('…');
            out
        }
        None => escape_visible(s),
    }
}

/// Cuts `s` to at most [`SHOW_MAX_CHARS`] characters, without escaping and without a
/// marker. Used for [`crate::TextError::LineMismatch`]'s `holds`.
pub(crate) fn cut(s: &str) -> String {
    match s.char_indices().nth(SHOW_MAX_CHARS) {
        Some((cut, _)) => s[..cut].to_string(),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_whitespace_quotes_and_backslashes() {
        assert_eq!(
            escape_visible("\ta \"b\"\\\r\n\u{1}"),
            "\\ta \\\"b\\\"\\\\\\r\\n\\u{1}"
        );
        assert_eq!(escape_visible("    return 10"), "    return 10");
    }

    #[test]
    fn show_cuts_at_200_chars() {
        let long = "é".repeat(250);
        let shown = show(&long);
        assert_eq!(shown.chars().count(), 201);
        assert!(shown.ends_with('…'));
        assert_eq!(show(&"x".repeat(200)), "x".repeat(200));
        assert_eq!(cut(&long).chars().count(), 200);
    }
}
