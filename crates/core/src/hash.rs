//! The hashes and path text every front end and the audit log share:
//! lowercase hex, the `sha256:` tagged file hash (SPEC 3 and 8), the audit
//! `pathHash` (SPEC 10) and a path's display text.

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

/// 128 bits from the operating system's random source, as 32 hex digits:
/// the part of an id, a name or a handle that another party must not
/// guess (writegate's own request ids, approval tool-call ids, MCP
/// `requestState` handles). Without a random source (a kernel without
/// `getrandom(2)` and no `/dev/urandom`) there is no safe id: the process
/// stops rather than ask a question whose answer anyone could forge.
pub fn unpredictable_hex() -> String {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).expect("the operating system's random source");
    hex(&bytes)
}

/// [`sha256_tagged`] of bytes that arrive a piece at a time (a file read
/// in pages).
#[derive(Default)]
pub(crate) struct StreamHash(Sha256);

impl StreamHash {
    /// The next bytes.
    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// `sha256:<64 hex>` of every byte given.
    pub(crate) fn finish(self) -> String {
        let mut s = String::with_capacity(7 + 64);
        s.push_str("sha256:");
        push_hex(&mut s, &self.0.finalize());
        s
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
/// path from JSON) is copied as it is, without the formatter (ADR 0009: a
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
