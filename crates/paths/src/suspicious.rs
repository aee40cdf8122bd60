//! The suspicious-path rules of SPEC 6, as pure functions (no filesystem access).

use std::ffi::OsStr;
use std::path::{Component, Path, Prefix};

/// Names Windows reserves for devices, compared case-insensitively against a
/// component or the part of it before its first dot (trailing whitespace of
/// that part ignored, as Windows does). SPEC 6 lists `con`, `prn`, `aux`,
/// `nul`, `com1`-`com9`, `lpt1`-`lpt9`; we also refuse `com0`, `lpt0`, the
/// superscript forms `com¹`..`lpt³` and `conin$`/`conout$`, which current
/// Windows versions reserve too.
const DEVICE_NAMES: &[&str] = &["con", "prn", "aux", "nul", "conin$", "conout$"];

/// `Some(reason)` when `path` is suspicious per SPEC 6, else `None`.
///
/// Rules, on every platform:
/// - the path starts with two separators (`//`, `\\`, or a mix of `/` and
///   `\`): UNC-like, including the device prefixes `\\?\`, `\\.\`, `//?/`,
///   `//./`;
/// - any component for which [`is_suspicious_component`] holds.
///
/// On Windows also: a path prefix other than a plain drive letter (`C:`), an
/// NTFS stream colon in a component, and an 8.3 short name (`PROGRA~1`).
///
/// The components `.` and `..` are not suspicious (the resolver resolves them
/// lexically); empty components (`/a//b`) are ignored. The reason may quote
/// the offending component.
pub fn is_suspicious(path: &Path) -> Option<String> {
    let bytes = path.as_os_str().as_encoded_bytes();
    if let Some(reason) = unc_reason(bytes) {
        return Some(reason);
    }
    for component in path.components() {
        match component {
            Component::Prefix(prefix) => {
                if !matches!(prefix.kind(), Prefix::Disk(_)) {
                    return Some(format!(
                        "UNC or device prefix {:?}",
                        prefix.as_os_str().to_string_lossy()
                    ));
                }
            }
            Component::Normal(c) => {
                if let Some(reason) = component_reason(c.as_encoded_bytes()) {
                    return Some(reason);
                }
            }
            Component::RootDir | Component::CurDir | Component::ParentDir => {}
        }
    }
    None
}

/// Whether one path component is suspicious per SPEC 6.
///
/// True for: three or more dots (`...`); a name ending in a dot or in
/// whitespace (`a.`, `a `); a DOS device name, alone or before the first dot
/// (`aux`, `AUX.ts`, `com1.txt`; but not `concat.txt` or `com10`). `.`, `..`
/// and the empty string are not suspicious.
///
/// A backslash is a separator on Windows, so on every platform a component is
/// also split at `\` and each piece judged by the same rules; a piece equal to
/// `.` or `..` inside such a component (`a\..\b`) is suspicious as well. On
/// Windows additionally: a colon (NTFS stream) or an 8.3 short name (`~1`).
pub fn is_suspicious_component(c: &OsStr) -> bool {
    component_reason(c.as_encoded_bytes()).is_some()
}

fn is_sep(b: u8) -> bool {
    b == b'/' || b == b'\\'
}

/// Leading `//` or `\\` (or a mix): UNC-like, or a device namespace prefix.
fn unc_reason(bytes: &[u8]) -> Option<String> {
    if bytes.len() >= 2 && is_sep(bytes[0]) && is_sep(bytes[1]) {
        let device = bytes.len() >= 4 && (bytes[2] == b'?' || bytes[2] == b'.') && is_sep(bytes[3]);
        let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(4)]).into_owned();
        return Some(if device {
            format!("device namespace prefix {shown:?}")
        } else {
            format!("UNC-like leading double separator {shown:?}")
        });
    }
    None
}

fn component_reason(c: &[u8]) -> Option<String> {
    if c.is_empty() || c == b"." || c == b".." {
        return None;
    }
    let shown = || String::from_utf8_lossy(c).into_owned();
    if !c.contains(&b'\\') {
        // One piece (nearly every name): no list to build.
        return piece_rule(c).map(|rule| format!("component {:?} {rule}", shown()));
    }
    let pieces: Vec<&[u8]> = c.split(|b| *b == b'\\').collect();
    if pieces.len() > 1 && pieces.iter().any(|p| *p == b"." || *p == b"..") {
        return Some(format!(
            "component {:?} holds a backslash-separated `.` or `..`",
            shown()
        ));
    }
    for piece in pieces {
        if let Some(rule) = piece_rule(piece) {
            return Some(format!("component {:?} {rule}", shown()));
        }
    }
    None
}

/// The rule that makes a piece a DOS device name.
const DEVICE_RULE: &str = "is a DOS device name";

/// The refusal of a suspicious `input` (`reason` from [`is_suspicious`]):
/// `reserved_name` for a DOS device name, `path_outside_workspace` for the
/// other rules.
pub(crate) fn refusal(input: &Path, reason: &str) -> crate::ResolveError {
    let what = format!("{} is suspicious: {reason}", input.display());
    if reason.ends_with(DEVICE_RULE) {
        crate::ResolveError::ReservedName(what)
    } else {
        crate::ResolveError::OutsideWorkspace(what)
    }
}

/// Whether the suspicious component `c` is so because it is a DOS device
/// name.
pub(crate) fn is_device_component(c: &OsStr) -> bool {
    component_reason(c.as_encoded_bytes()).is_some_and(|r| r.ends_with(DEVICE_RULE))
}

/// The rule a single backslash-free piece breaks, if any.
fn piece_rule(piece: &[u8]) -> Option<&'static str> {
    if piece.is_empty() {
        return None;
    }
    let s = String::from_utf8_lossy(piece);
    if s.len() >= 3 && s.bytes().all(|b| b == b'.') {
        return Some("is three or more dots");
    }
    let last = s.chars().next_back()?;
    if last == '.' {
        return Some("ends in a dot");
    }
    if last.is_whitespace() {
        return Some("ends in whitespace");
    }
    let base = s.split('.').next().unwrap_or("");
    if is_device_name(base) {
        return Some(DEVICE_RULE);
    }
    if cfg!(windows) {
        return windows_only_rule(&s);
    }
    None
}

fn is_device_name(base: &str) -> bool {
    // Compared without case, with no lowercase copy (every component of
    // every path is checked).
    let b = base.trim_end_matches(char::is_whitespace);
    if DEVICE_NAMES.iter().any(|d| b.eq_ignore_ascii_case(d)) {
        return true;
    }
    ["com", "lpt"].iter().any(|prefix| {
        b.get(..prefix.len())
            .is_some_and(|head| head.eq_ignore_ascii_case(prefix))
            && {
                let mut chars = b[prefix.len()..].chars();
                matches!(
                    (chars.next(), chars.next()),
                    (Some(d), None) if d.is_ascii_digit() || matches!(d, '¹' | '²' | '³')
                )
            }
    })
}

/// The Windows-only rules of SPEC 6 for one piece: an NTFS stream colon, or an
/// 8.3 short name (`~` followed by digits at the end of the part before the
/// first dot, e.g. `PROGRA~1`, `FOO~12.TXT`). Always compiled so it can be
/// tested everywhere; applied only when `cfg!(windows)`.
pub(crate) fn windows_only_rule(s: &str) -> Option<&'static str> {
    if s.contains(':') {
        return Some("holds an NTFS stream colon");
    }
    let base = s.split('.').next().unwrap_or("");
    if let Some(idx) = base.rfind('~') {
        let digits = &base[idx + 1..];
        if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
            return Some("is an 8.3 short name");
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sus(p: &str) -> bool {
        is_suspicious(Path::new(p)).is_some()
    }
    fn comp(c: &str) -> bool {
        is_suspicious_component(OsStr::new(c))
    }

    #[test]
    fn case_p12_three_or_more_dots() {
        assert!(comp("..."));
        assert!(comp("...."));
        assert!(sus("/w/root/.../x"));
        assert!(!comp("."));
        assert!(!comp(".."));
        assert!(!comp("a...b"));
        assert!(!comp(".hidden"));
        assert!(!comp("..hidden"));
    }

    #[test]
    fn trailing_dot_or_whitespace() {
        assert!(comp("a."));
        assert!(comp("file.txt."));
        assert!(comp("a "));
        assert!(comp("a\t"));
        assert!(comp("a\n"));
        assert!(comp("a\u{3000}"));
        assert!(!comp(" a"));
        assert!(!comp("a b"));
        assert!(sus("/w/dir./x"));
        assert!(sus("/w/dir /x"));
    }

    /// The case-blind comparison agrees with lowercasing first (how the
    /// rule is stated), over every short name built from letters that
    /// matter, digits, superscripts, `$`, spaces and a non-ASCII letter.
    #[test]
    fn device_names_agree_with_the_lowercase_rule() {
        fn by_lowercase(base: &str) -> bool {
            let b = base
                .trim_end_matches(char::is_whitespace)
                .to_ascii_lowercase();
            DEVICE_NAMES.contains(&b.as_str())
                || ["com", "lpt"].iter().any(|prefix| {
                    b.strip_prefix(prefix).is_some_and(|rest| {
                        let mut chars = rest.chars();
                        matches!(
                            (chars.next(), chars.next()),
                            (Some(d), None) if d.is_ascii_digit() || matches!(d, '¹' | '²' | '³')
                        )
                    })
                })
        }
        let alphabet = [
            'c', 'O', 'n', 'M', 'p', 'T', 'l', 'u', 'x', 'R', 'i', '$', '1', '0', '²', ' ', 'ß',
        ];
        let mut names = vec![String::new()];
        for _ in 0..4 {
            let longer: Vec<String> = names
                .iter()
                .flat_map(|n| alphabet.iter().map(move |c| format!("{n}{c}")))
                .collect();
            names.extend(longer);
            names.dedup();
        }
        names.extend(["conout$", "CONOUT$ ", "conin$", "lpt³", "COM¹", "comß"].map(String::from));
        for name in &names {
            assert_eq!(is_device_name(name), by_lowercase(name), "{name:?}");
        }
    }

    /// The resolver skips its check of the canonical path's components when
    /// no symlink was followed, relying on this: a path is suspicious when
    /// one of its components is, by the same rule.
    #[test]
    fn a_path_is_suspicious_when_a_component_is() {
        for c in [
            "a",
            "...",
            "a.",
            "a ",
            "aux",
            "AUX.ts",
            "com1.txt",
            "concat.txt",
            "com10",
            ".env",
            "a\\b",
            "a\\..\\b",
            "x\u{3000}",
            "lpt²",
            "..",
            ".",
        ] {
            let path = format!("/w/{c}/f");
            assert_eq!(
                is_suspicious(Path::new(&path)).is_some(),
                is_suspicious_component(OsStr::new(c)),
                "{c:?}"
            );
        }
    }

    #[test]
    fn case_p14_device_names() {
        for bad in [
            "con",
            "CON",
            "Prn",
            "aux",
            "aux.ts",
            "AUX.tar.gz",
            "nul",
            "NUL.txt",
            "com1",
            "COM9.log",
            "lpt1",
            "lpt9.txt",
            "com0",
            "lpt²",
            "aux .txt",
            "conin$",
            "CONOUT$.x",
        ] {
            assert!(comp(bad), "{bad} should be suspicious");
        }
        for ok in [
            "concat.txt",
            "console",
            "auxiliary.ts",
            "nullable.rs",
            "com10",
            "lpt",
            "com",
            "com1x",
            "xcon",
            ".aux",
            "prn_notes",
        ] {
            assert!(!comp(ok), "{ok} should not be suspicious");
        }
        assert!(sus("/w/root/aux.ts"));
        assert!(!sus("/w/root/concat.txt"));
        assert!(sus("/w/aux/x.txt"));
    }

    #[test]
    fn unc_and_device_prefixes() {
        for bad in [
            "//server/share/x",
            "///x",
            "\\\\server\\share",
            "\\\\?\\C:\\x",
            "\\\\.\\pipe\\x",
            "//?/C:/x",
            "//./pipe/x",
            "/\\server",
            "\\/server",
        ] {
            assert!(sus(bad), "{bad:?} should be suspicious");
        }
        assert!(
            is_suspicious(Path::new("//./x"))
                .unwrap()
                .contains("device namespace")
        );
        assert!(!sus("/a//b"));
        assert!(!sus("/"));
        assert!(!sus(""));
    }

    #[test]
    fn dots_are_not_suspicious() {
        assert!(!sus("/w/root/./a/../b"));
        assert!(!sus("/w/root/.."));
    }

    #[test]
    fn backslash_pieces_are_judged_too() {
        assert!(comp("a\\con"));
        assert!(comp("a\\..\\b"));
        assert!(comp("dir.\\x"));
        assert!(!comp("a\\b"));
        assert!(!comp("a\\\\b"));
    }

    #[test]
    fn non_utf8_components() {
        use std::os::unix::ffi::OsStrExt;
        assert!(!is_suspicious_component(OsStr::from_bytes(b"a\xffb")));
        assert!(is_suspicious_component(OsStr::from_bytes(b"a\xff.")));
    }

    #[test]
    fn windows_only_rules() {
        assert_eq!(
            windows_only_rule("a:stream"),
            Some("holds an NTFS stream colon")
        );
        assert_eq!(windows_only_rule("PROGRA~1"), Some("is an 8.3 short name"));
        assert_eq!(
            windows_only_rule("FOO~12.TXT"),
            Some("is an 8.3 short name")
        );
        assert_eq!(windows_only_rule("a~b"), None);
        assert_eq!(windows_only_rule("backup~"), None);
        assert_eq!(windows_only_rule("plain.txt"), None);
        // Not applied on this platform.
        if !cfg!(windows) {
            assert!(!comp("PROGRA~1"));
            assert!(!comp("a:b"));
        }
    }
}
