//! writegate's core: workspaces and runtimes with generation guards
//! (SPEC 2), routing decisions (SPEC 4), the approval gate (SPEC 12), the
//! write/edit/read pipeline that ties the resolver (`writegate-paths`), the
//! text core (`writegate-text`) and the publisher (`writegate-fs`) together
//! (`op`, `service`), audit records (SPEC 10), error kinds (SPEC 11) and
//! configuration (SPEC 13).
//!
//! Front ends (ACP serve, ACP proxy, MCP, the CLI) pass an [`OpCtx`] and
//! typed parameters ([`api`]) and get typed outcomes or a [`Failure`]; each
//! maps those to its own wire. The audit event format is core's own.
//!
//! It is synchronous: callers at the edge run operations on blocking
//! threads. It must never write to disk itself (every write goes through
//! `writegate-fs`), never speak a wire (no JSON, no JSON-RPC codes, no
//! `_meta` parsing in its API), and never depend on an async runtime.

pub mod api;
pub mod audit;
pub mod config;
pub mod error;
mod event_line;
mod op;
pub mod policy;
pub mod receipts;
pub mod routing;
pub mod runtime;
pub mod service;
pub mod sessions;

pub use api::{
    Allowances, ApprovalAnswer, ApprovalQuestion, Approver, EditParams, EditReport, FileFormat,
    LineEnding, LinesRead, OpCtx, ReadParams, Receipt, TextRead, WriteOutcome, WriteParams,
};
pub use config::Config;
pub use error::{Detail, ErrorKind, Failure, Refusal};
pub use routing::MarkerSource;
pub use runtime::{Registry, Runtime};
pub use service::{DynamicWorkspaceError, Service};
pub use sessions::SessionWorkspaceError;
pub use writegate_text::{EditMode, LineEndingChoice, WriteOptions};

use sha2::{Digest, Sha256};
use std::path::Path;

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len() * 2);
    push_hex(&mut s, bytes);
    s
}

/// Appends the lowercase hex of `bytes` to `out`: the digits are built in a
/// 128-byte buffer and appended 64 input bytes at a time (one capacity
/// check per piece, not one per digit).
fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut buf = [0u8; 128];
    for chunk in bytes.chunks(buf.len() / 2) {
        let digits = &mut buf[..chunk.len() * 2];
        for (pair, b) in digits.chunks_exact_mut(2).zip(chunk) {
            pair[0] = DIGITS[usize::from(b >> 4)];
            pair[1] = DIGITS[usize::from(b & 0x0f)];
        }
        out.push_str(std::str::from_utf8(digits).expect("hex digits are ASCII"));
    }
}

/// `sha256:<64 hex>` of `bytes` (the `hash` of SPEC 3 and 8).
pub fn sha256_tagged(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(7 + 64);
    s.push_str("sha256:");
    push_hex(&mut s, &Sha256::digest(bytes));
    s
}

/// `path` as text, exactly as `path.display().to_string()` writes it (bytes
/// that are not UTF-8 become U+FFFD), but a path that is valid UTF-8 (every
/// path from JSON) is copied as it is, without the formatter (issue 12: a
/// few paths a write).
pub fn path_text(path: &Path) -> String {
    match path.to_str() {
        Some(s) => s.to_owned(),
        None => path.display().to_string(),
    }
}

/// First 16 hex digits of sha256 of a path's bytes (audit `pathHash`, SPEC 10).
pub fn path_hash(path: &Path) -> String {
    hex(&Sha256::digest(path.as_os_str().as_encoded_bytes())[..8])
}

#[cfg(test)]
mod tests {
    #[test]
    fn path_text_is_the_display_text() {
        use std::os::unix::ffi::OsStrExt;
        for bytes in [
            b"/w/a.txt".as_slice(),
            b"",
            "/w/é😀 x".as_bytes(),
            b"/w/\xff\xfe/a",
            b"/w/ok\xc3",
        ] {
            let p = std::path::Path::new(std::ffi::OsStr::from_bytes(bytes));
            assert_eq!(super::path_text(p), p.display().to_string(), "{bytes:?}");
        }
    }

    #[test]
    fn hashes() {
        assert_eq!(
            super::sha256_tagged(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        // The first 16 digits of the whole hash.
        assert_eq!(
            super::path_hash(std::path::Path::new("")),
            "e3b0c44298fc1c14"
        );
        assert_eq!(super::path_hash(std::path::Path::new("/a")).len(), 16);
    }

    #[test]
    fn hex_is_lowercase_two_digits_per_byte() {
        assert_eq!(super::hex(&[0x00, 0x0f, 0xa0, 0xff, 0x5c]), "000fa0ff5c");
        assert_eq!(super::hex(&[]), "");
        let all: Vec<u8> = (0..=255).collect();
        let expect: String = all.iter().fold(String::new(), |mut s, b| {
            use std::fmt::Write as _;
            let _ = write!(s, "{b:02x}");
            s
        });
        assert_eq!(super::hex(&all), expect);
        // Longer than one buffer.
        let long: Vec<u8> = all.iter().cycle().step_by(7).take(1000).copied().collect();
        let expect = long.iter().fold(String::new(), |mut s, b| {
            use std::fmt::Write as _;
            let _ = write!(s, "{b:02x}");
            s
        });
        assert_eq!(super::hex(&long), expect);
    }
}
