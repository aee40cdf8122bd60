//! The one error type of the crate (SPEC 11 refusals).

use crate::escape::show;

/// Why a text operation refused. Nothing was changed when one of these is returned:
/// every function of this crate is pure, so the caller simply writes nothing.
///
/// Each variant stands for one SPEC 11 `errorKind`, named in its docs; the daemon
/// maps them, in one place (`writegate-core`'s `error.rs`). [`TextError::hint`] gives
/// one sentence a model can act on; the `Display` text is a short English description.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TextError {
    /// SPEC 9: an encoding label the crate does not know, or an existing file whose
    /// encoding cannot be recognised losslessly. The string says which.
    /// errorKind `unsupported_encoding`.
    #[error("unsupported encoding: {0}")]
    UnsupportedEncoding(String),
    /// SPEC 9: the content holds a character the target encoding cannot represent
    /// (never replaced by `?` or a numeric character reference). The string names the
    /// character (as `U+XXXX`) and the encoding. errorKind `unmappable_character`.
    #[error("unmappable character: {0}")]
    UnmappableCharacter(String),
    /// SPEC 8.3: a NUL byte in a file that is not UTF-16/32. errorKind `binary_file`.
    #[error("the file is binary (it contains a NUL byte)")]
    BinaryFile,
    /// SPEC 8.3: `find` occurs nowhere (or is empty). The string is the `find` text.
    /// errorKind `text_not_found`.
    #[error("find text not found: \"{}\"", show(.0))]
    TextNotFound(String),
    /// SPEC 8.3: `find` occurs `count` times (overlapping occurrences counted);
    /// `lines` are the 1-based line numbers where the occurrences start, in order
    /// (one entry per occurrence, so a line may repeat). errorKind `ambiguous_text_match`.
    #[error("find text occurs {count} times, starting on lines {}", join_lines(.lines))]
    AmbiguousTextMatch {
        /// Number of occurrences (at least 2).
        count: usize,
        /// 1-based start line of each occurrence.
        lines: Vec<usize>,
    },
    /// SPEC 8.3: `line` (or `endLine`) is 0 or past the last line; `total` is the
    /// number of lines of the file (SPEC 8.1). errorKind `line_out_of_range`.
    #[error("line {line} is out of range (the file has {total} lines)")]
    LineOutOfRange {
        /// The 1-based line number asked for.
        line: u64,
        /// Number of lines of the file.
        total: usize,
    },
    /// SPEC 8.4: the asked line does not contain `find` and not exactly one other line
    /// does. `holds` is the asked line's decoded text without its ending, cut at 200
    /// characters (not escaped). errorKind `line_mismatch`.
    #[error("line {line} does not contain find; it holds \"{}\"", show(.holds))]
    LineMismatch {
        /// The 1-based line number asked for.
        line: u64,
        /// What that line holds now.
        holds: String,
    },
    /// SPEC 8.1 and 8.5: the edit removes everything between a line ending in a
    /// lone `\r` (line `line`) and a `\n` (the ending of an empty line, or the
    /// `\n` the kept text starts with), and inserts nothing: the two would read as
    /// one `\r\n` ending, changing line `line` and merging the line after into
    /// it. No bytes can keep both lines as they are. errorKind
    /// `line_ending_conflict`.
    #[error(
        "the edit would join line {line}'s lone \\r ending and the next \\n into one \\r\\n ending"
    )]
    LineEndingConflict {
        /// The 1-based number of the line that ends in the lone `\r`.
        line: u64,
    },
    /// A combination of edit parameters that makes no sense (for example `insert`
    /// without `line`, `endLine` before `line`). The caller answers JSON-RPC `-32602`
    /// (`invalid_params`).
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    /// SPEC 8.5: the guard found the edited bytes differ from the original outside
    /// the edit, or the line-break count changed unexpectedly. errorKind `internal_error`.
    #[error("edit refused by the integrity guard: {0}")]
    Guard(String),
}

fn join_lines(lines: &[usize]) -> String {
    let mut out = String::new();
    for (i, l) in lines.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(&l.to_string());
    }
    out
}

impl TextError {
    /// One sentence a model can act on (the `hint` of SPEC 10 and 11).
    pub fn hint(&self) -> String {
        match self {
            TextError::UnsupportedEncoding(_) => "Name a supported encoding (utf-8, utf-16le, utf-16be, utf-32le, utf-32be, or a WHATWG label such as windows-1252); a file whose encoding cannot be recognised losslessly can only be replaced whole with mode write and an explicit encoding.".to_string(),
            TextError::UnmappableCharacter(what) => format!("The content holds a character the target encoding cannot represent ({what}); remove or replace it, or write the file whole with encoding \"utf-8\"."),
            TextError::BinaryFile => "The file contains NUL bytes and is treated as binary; it cannot be edited, only replaced whole with mode write.".to_string(),
            TextError::TextNotFound(find) if find.is_empty() => "find is empty; give the exact text to replace, or omit find and edit by line number.".to_string(),
            TextError::TextNotFound(_) => "No text in the file matches find exactly; read the file again and copy the text exactly, or edit by line number.".to_string(),
            TextError::AmbiguousTextMatch { count, lines } => format!("find occurs {count} times (starting on lines {}); include more surrounding text so it matches exactly once, or edit by line number.", join_lines(lines)),
            TextError::LineOutOfRange { total: 0, .. } => "The file is empty; insert at line 1 or append instead.".to_string(),
            TextError::LineOutOfRange { total, .. } => format!("The file has {total} lines; use a line number from 1 to {total} (insert also accepts {} to add at the end).", total + 1),
            TextError::LineMismatch { line, holds } => format!("Line {line} holds \"{}\"; read the file again for current line numbers, or correct find.", show(holds)),
            TextError::LineEndingConflict { line } => format!("Line {line} ends in a lone \\r and the text after the edit starts with \\n, which would read as one \\r\\n ending; include line {line} in the edit (replace it together with the lines you meant), or replace the whole file with mode write."),
            TextError::InvalidRequest(why) => format!("Fix the request parameters: {why}."),
            TextError::Guard(_) => "The edit was refused to protect the file and nothing was written; read the file again and retry, or edit by find instead.".to_string(),
        }
    }
}
