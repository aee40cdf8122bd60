//! writegate's pure text core: the line model (SPEC 8.1), encodings, BOMs and
//! whole-file encoding (SPEC 9), the edit engine with its forgiving rules and
//! integrity guard (SPEC 8), and numbered reads (SPEC 3). Every function takes bytes
//! or text and returns a decision, bytes, or text; the caller does all the reading,
//! locking, hashing and publishing.
//!
//! This crate must never do IO: no `std::fs`, no `std::io` reads or writes, no
//! sockets, no async runtime. And it must never panic, whatever bytes or parameters
//! it is given: every refusal is a [`TextError`], one variant per SPEC 11
//! `errorKind`. Edits keep every byte outside the edited range identical
//! (invalid bytes included), and the guard of SPEC 8.5 re-checks that before any
//! bytes are returned.
//!
//! Modules: [`lines`] (line model), [`format`](mod@format) (encodings, detection, whole-file
//! encoding), [`edit`] (edit engine and guard), [`read`] (numbered reads),
//! [`error`], [`escape`] (whitespace made visible for results).

pub mod edit;
mod encoding;
pub mod error;
pub mod escape;
pub mod format;
pub mod keep;
pub mod lines;
pub mod paged;
pub mod read;
mod repr;
pub mod skim;

pub use edit::{
    EditMode, EditOutcome, EditRequest, UnknownMode, apply_edit, diff_versions, indentation_words,
    is_binary, validate,
};
pub use error::TextError;
pub use escape::{escape_visible, show};
pub use format::{
    Encoding, Format, LineEndingChoice, WriteOptions, decode, detect, encode_text, encode_whole,
    encode_whole_bytes, sniff_bom,
};
pub use keep::align_endings;
pub use lines::{Ending, Line, convert_breaks, dominant, split_bytes, split_units};
pub use paged::{Paged, PagedRead, PagedStop};
pub use read::{
    NumberedLines, NumberedView, numbered_lines, numbered_view, read_text, read_text_borrowed,
};
pub use skim::FormatSkim;
