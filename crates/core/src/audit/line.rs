//! An [`AuditEvent`]'s JSON line, written by hand: the bytes
//! `serde_json::to_vec` gives for it, without sending every key through
//! `serde_json`'s generic string escaper (ADR 0009: two events a write, about
//! 12,000 instructions). Keys are literals and only values are escaped,
//! with `serde_json`'s escapes. A property test in this module holds the
//! output to serde's for arbitrary events, and the struct is destructured
//! without `..`, so a field added to [`AuditEvent`] does not compile until
//! it is written here too.
//!
//! Pure: bytes in, bytes out; never does I/O.

use super::event::{AuditEvent, EventKind, Intent, Recovered, Writer};
use crate::api::ApprovalAnswer;
use crate::error::ErrorKind;
use crate::routing::MarkerSource;
use writegate_text::EditMode;

/// The event as one JSON object, keys in declaration order, `None` fields
/// left out (the `skip_serializing_if` of the derive), no trailing newline:
/// byte for byte what `serde_json::to_vec(event)` gives.
pub(crate) fn event_line(event: &AuditEvent) -> Vec<u8> {
    write_line(event, None)
}

/// What a commit's intent says its event will hold beyond the operation's
/// draft (see `AuditSink::prepare`): `type` `fs.access` and these fields.
pub(crate) struct AsCommitted<'a> {
    /// `ts`: RFC 3339, when the intent is written.
    pub(crate) ts: &'a str,
    /// `created`: the commit makes a new file.
    pub(crate) created: bool,
    /// `bytesAfter`.
    pub(crate) bytes_after: u64,
    /// `hashAfter`: `sha256:<hex>`.
    pub(crate) hash_after: &'a str,
    /// `durationMs` so far.
    pub(crate) duration_ms: u64,
    /// `path`, set only with `audit.raw_paths` (else the draft's).
    pub(crate) path: Option<&'a str>,
}

/// The line of `draft` as it reads once committed: exactly
/// [`event_line`] of a copy of `draft` with `kind` set to
/// [`EventKind::Access`] and the fields of `c` set (a test holds them
/// equal), without copying the draft's strings.
pub(crate) fn committed_event_line(draft: &AuditEvent, c: &AsCommitted<'_>) -> Vec<u8> {
    write_line(draft, Some(c))
}

/// [`event_line`], with the fields of `c` (when given) in place of the
/// event's own.
fn write_line(event: &AuditEvent, c: Option<&AsCommitted<'_>>) -> Vec<u8> {
    let AuditEvent {
        v,
        ts,
        kind,
        op_id,
        intent,
        route,
        writer,
        session_id,
        workspace,
        path_hash,
        size_bytes,
        mode,
        created,
        bytes_before,
        bytes_after,
        hash_before,
        hash_after,
        error_kind,
        hint,
        duration_ms,
        source,
        approval,
        created_dirs,
        dry_run,
        path,
        recovered,
        undoes,
    } = event;
    let kind = if c.is_some() {
        &EventKind::Access
    } else {
        kind
    };
    let ts = c.map_or(ts.as_str(), |c| c.ts);
    let created = c.map_or(*created, |c| Some(c.created));
    let bytes_after = c.map_or(*bytes_after, |c| Some(c.bytes_after));
    // A commit that removes the file (an undo of a creation) leaves no
    // bytes to hash: no `hashAfter`.
    let hash_after = c.map_or(hash_after.as_deref(), |c| {
        Some(c.hash_after).filter(|h| !h.is_empty())
    });
    let duration_ms = c.map_or(*duration_ms, |c| c.duration_ms);
    let path = c.and_then(|c| c.path).or(path.as_deref());
    let mut out = Vec::with_capacity(512);
    let o = &mut out;
    o.extend_from_slice(b"{");
    num(o, b"\"v\":", u64::from(*v));
    text(o, b",\"ts\":", ts);
    o.extend_from_slice(match kind {
        EventKind::Access => b",\"type\":\"fs.access\"".as_slice(),
        EventKind::Denied => b",\"type\":\"fs.denied\"",
    });
    text(o, b",\"opId\":", op_id);
    o.extend_from_slice(match intent {
        Intent::Write => b",\"intent\":\"write\"".as_slice(),
        Intent::Edit => b",\"intent\":\"edit\"",
        Intent::Read => b",\"intent\":\"read\"",
        Intent::Undo => b",\"intent\":\"undo\"",
    });
    text(o, b",\"route\":", route);
    o.extend_from_slice(match writer {
        Writer::Workspace => b",\"writer\":\"workspace\"".as_slice(),
        Writer::External => b",\"writer\":\"external\"",
    });
    opt_text(o, b",\"sessionId\":", session_id.as_deref());
    text(o, b",\"workspace\":", workspace);
    text(o, b",\"pathHash\":", path_hash);
    opt_num(o, b",\"sizeBytes\":", *size_bytes);
    opt_text(o, b",\"mode\":", mode.map(EditMode::name));
    opt_boolean(o, b",\"created\":", created);
    opt_num(o, b",\"bytesBefore\":", *bytes_before);
    opt_num(o, b",\"bytesAfter\":", bytes_after);
    opt_text(o, b",\"hashBefore\":", hash_before.as_deref());
    opt_text(o, b",\"hashAfter\":", hash_after);
    opt_text(o, b",\"errorKind\":", error_kind.map(ErrorKind::as_str));
    opt_text(o, b",\"hint\":", hint.as_deref());
    num(o, b",\"durationMs\":", duration_ms);
    opt_text(o, b",\"source\":", source.map(MarkerSource::as_str));
    opt_text(o, b",\"approval\":", approval.map(ApprovalAnswer::as_str));
    if let Some(dirs) = created_dirs {
        o.extend_from_slice(b",\"createdDirs\":[");
        for (i, d) in dirs.iter().enumerate() {
            text(o, if i > 0 { b"," } else { b"" }, d);
        }
        o.push(b']');
    }
    opt_boolean(o, b",\"dryRun\":", *dry_run);
    opt_text(o, b",\"path\":", path);
    if let Some(r) = recovered {
        o.extend_from_slice(match r {
            Recovered::Committed => b",\"recovered\":\"committed\"".as_slice(),
            Recovered::NotCommitted => b",\"recovered\":\"not_committed\"",
            Recovered::Unconfirmed => b",\"recovered\":\"unconfirmed\"",
        });
    }
    opt_text(o, b",\"undoes\":", undoes.as_deref());
    o.push(b'}');
    out
}

/// `prefix` (a literal key with its comma and colon), then `n` in decimal,
/// as `serde_json` writes integers.
fn num(out: &mut Vec<u8>, prefix: &[u8], n: u64) {
    out.extend_from_slice(prefix);
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// [`num`] when there is a value; nothing for `None` (a skipped field).
fn opt_num(out: &mut Vec<u8>, prefix: &[u8], n: Option<u64>) {
    if let Some(n) = n {
        num(out, prefix, n);
    }
}

/// [`boolean`] when there is a value; nothing for `None`.
fn opt_boolean(out: &mut Vec<u8>, prefix: &[u8], b: Option<bool>) {
    if let Some(b) = b {
        boolean(out, prefix, b);
    }
}

/// [`text`] when there is a value; nothing for `None`.
fn opt_text(out: &mut Vec<u8>, prefix: &[u8], s: Option<&str>) {
    if let Some(s) = s {
        text(out, prefix, s);
    }
}

/// `prefix`, then `true` or `false`.
fn boolean(out: &mut Vec<u8>, prefix: &[u8], b: bool) {
    out.extend_from_slice(prefix);
    out.extend_from_slice(if b { b"true" } else { b"false" });
}

/// `prefix`, then `s` as a JSON string ([`string`]).
fn text(out: &mut Vec<u8>, prefix: &[u8], s: &str) {
    out.extend_from_slice(prefix);
    string(out, s);
}

/// A JSON string with `serde_json`'s escapes: `\"`, `\\`, `\b`, `\t`, `\n`,
/// `\f`, `\r`, and `\u00xx` (lowercase hex) for the other control
/// characters; everything else, DEL and non-ASCII included, as it is.
/// Runs without an escape are found 8 bytes at a time and copied whole.
fn string(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    out.push(b'"');
    let mut start = 0;
    while let Some(i) = next_special(bytes, start) {
        out.extend_from_slice(&bytes[start..i]);
        let b = bytes[i];
        let short = match b {
            b'"' => b'"',
            b'\\' => b'\\',
            0x08 => b'b',
            b'\t' => b't',
            b'\n' => b'n',
            0x0c => b'f',
            b'\r' => b'r',
            _ => b'u',
        };
        if short == b'u' {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 0x0f)]);
        } else {
            out.extend_from_slice(&[b'\\', short]);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// Whether JSON needs `b` escaped: a control character, `"` or `\`.
fn special(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// The index of the first byte at or after `from` that [`special`] holds
/// for. Whole 8-byte words are tested at once: a byte below 0x20, or equal
/// to `"` or `\`, makes the classic "has a zero byte" test true for the
/// word (itself, or XOR-ed with the byte repeated); the test has no false
/// positives as a yes/no answer, and the word that says yes is then
/// searched byte by byte.
fn next_special(bytes: &[u8], from: usize) -> Option<usize> {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
    let below = |w: u64, n: u64| w.wrapping_sub(ONES * n) & !w & HIGHS != 0;
    let mut i = from;
    while let Some(chunk) = bytes.get(i..i + 8) {
        let w = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
        if below(w, 0x20)
            || below(w ^ (ONES * u64::from(b'"')), 1)
            || below(w ^ (ONES * u64::from(b'\\')), 1)
        {
            break;
        }
        i += 8;
    }
    bytes[i..].iter().position(|&b| special(b)).map(|p| i + p)
}

#[cfg(test)]
mod tests {
    use super::{AsCommitted, committed_event_line, event_line};
    use crate::api::ApprovalAnswer;
    use crate::audit::{AuditEvent, EventKind, Intent, Recovered, Writer};
    use crate::error::ErrorKind;
    use crate::routing::MarkerSource;
    use proptest::prelude::*;
    use std::borrow::Cow;
    use writegate_text::EditMode;

    /// Every optional field set, with strings that need every escape.
    fn full() -> AuditEvent {
        let nasty = "q\"b\\s/\u{8}\t\n\u{c}\r\u{0}\u{1f}\u{7f}é€😀 end".to_string();
        AuditEvent {
            v: 1,
            ts: "2026-12-02T15:04:33.847Z".into(),
            kind: EventKind::Denied,
            op_id: "c4778c492130-1".into(),
            intent: Intent::Edit,
            route: Cow::Borrowed("ACP writeTextFile"),
            writer: Writer::External,
            session_id: Some(nasty.clone()),
            workspace: "w".into(),
            path_hash: "0123456789abcdef".into(),
            size_bytes: Some(u64::MAX),
            mode: Some(EditMode::Write),
            created: Some(true),
            bytes_before: Some(0),
            bytes_after: Some(1024),
            hash_before: Some("sha256:00".into()),
            hash_after: Some("sha256:ff".into()),
            error_kind: Some(ErrorKind::SymlinkEscape),
            hint: Some(nasty.clone()),
            duration_ms: 7,
            source: Some(MarkerSource::ShellSedEdit),
            approval: Some(ApprovalAnswer::AllowOnce),
            created_dirs: Some(vec!["a".into(), nasty.clone(), String::new()]),
            dry_run: Some(false),
            path: Some(nasty.clone()),
            recovered: Some(Recovered::NotCommitted),
            undoes: Some(nasty.clone()),
        }
    }

    #[test]
    fn every_field_and_every_escape_match_serde() {
        let e = full();
        assert_eq!(
            String::from_utf8(event_line(&e)).unwrap(),
            String::from_utf8(serde_json::to_vec(&e).unwrap()).unwrap()
        );
        let mut bare = e;
        bare.session_id = None;
        bare.size_bytes = None;
        bare.mode = None;
        bare.created = None;
        bare.bytes_before = None;
        bare.bytes_after = None;
        bare.hash_before = None;
        bare.hash_after = None;
        bare.error_kind = None;
        bare.hint = None;
        bare.source = None;
        bare.approval = None;
        bare.created_dirs = Some(Vec::new());
        bare.dry_run = None;
        bare.path = None;
        bare.recovered = None;
        bare.undoes = None;
        assert_eq!(event_line(&bare), serde_json::to_vec(&bare).unwrap());
        bare.created_dirs = None;
        assert_eq!(event_line(&bare), serde_json::to_vec(&bare).unwrap());
    }

    /// Every byte below 0x80, alone and at every position of a 20-byte
    /// string (so in every lane of the 8-byte words and in the tail).
    #[test]
    fn every_ascii_byte_in_every_position_matches_serde() {
        for b in 0u8..0x80 {
            for at in 0..20 {
                let mut text = vec![b'a'; 20];
                text[at] = b;
                let text = String::from_utf8(text).unwrap();
                let mut ours = Vec::new();
                super::string(&mut ours, &text);
                assert_eq!(
                    ours,
                    serde_json::to_vec(&text).unwrap(),
                    "byte {b:#x} at {at}"
                );
            }
        }
    }

    fn text() -> impl Strategy<Value = String> {
        // Mostly the characters that matter to escaping, some of anything.
        prop_oneof!["[\"\\\\\\x00-\\x1f\\x7f a-z/é😀]{0,12}", any::<String>(),]
    }

    fn opt<T: std::fmt::Debug + Clone>(
        s: impl Strategy<Value = T>,
    ) -> impl Strategy<Value = Option<T>> {
        proptest::option::of(s)
    }

    prop_compose! {
        fn event()(
            texts in proptest::collection::vec(text(), 15),
            enums in proptest::collection::vec(any::<usize>(), 4),
            numbers in proptest::collection::vec(any::<u64>(), 5),
            flags in proptest::collection::vec(any::<bool>(), 8),
            somes in proptest::collection::vec(any::<bool>(), 16),
            dirs in opt(proptest::collection::vec(text(), 0..3)),
            recovered in opt(prop_oneof![
                Just(Recovered::Committed),
                Just(Recovered::NotCommitted),
                Just(Recovered::Unconfirmed),
            ]),
            which in 0u8..6,
        ) -> AuditEvent {
            let some = |i: usize, s: &String| somes[i].then(|| s.clone());
            AuditEvent {
                v: u32::try_from(numbers[0] % 1000).unwrap(),
                ts: texts[0].clone(),
                kind: if flags[0] { EventKind::Access } else { EventKind::Denied },
                op_id: texts[1].clone(),
                intent: [Intent::Write, Intent::Edit, Intent::Read, Intent::Undo][usize::from(which % 4)],
                route: Cow::Owned(texts[2].clone()),
                writer: if flags[1] { Writer::Workspace } else { Writer::External },
                session_id: some(0, &texts[3]),
                workspace: texts[4].clone(),
                path_hash: texts[5].clone(),
                size_bytes: somes[1].then_some(numbers[1]),
                mode: somes[2].then(|| EditMode::ALL[enums[0] % EditMode::ALL.len()]),
                created: somes[3].then_some(flags[2]),
                bytes_before: somes[4].then_some(numbers[2]),
                bytes_after: somes[5].then_some(numbers[3]),
                hash_before: some(6, &texts[7]),
                hash_after: some(7, &texts[8]),
                error_kind: somes[8].then(|| ErrorKind::ALL[enums[1] % ErrorKind::ALL.len()]),
                hint: some(9, &texts[10]),
                duration_ms: numbers[4],
                source: somes[10].then(|| MarkerSource::ALL[enums[2] % MarkerSource::ALL.len()]),
                approval: somes[11].then(|| ApprovalAnswer::ALL[enums[3] % ApprovalAnswer::ALL.len()]),
                created_dirs: dirs,
                dry_run: somes[12].then_some(flags[3]),
                path: some(13, &texts[13]),
                recovered,
                undoes: some(14, &texts[14]),
            }
        }
    }

    proptest! {
        #[test]
        fn any_event_is_serdes_bytes(e in event()) {
            prop_assert_eq!(event_line(&e), serde_json::to_vec(&e).unwrap());
        }

        /// The intent's line is the line of the draft with the committed
        /// fields set, whatever the draft held and whether `path` is given.
        #[test]
        fn a_committed_line_is_the_draft_with_its_fields_set(
            draft in event(),
            ts in text(),
            hash in text(),
            path in opt(text()),
            created in any::<bool>(),
            bytes_after in any::<u64>(),
            duration_ms in any::<u64>(),
        ) {
            let c = AsCommitted {
                ts: &ts,
                created,
                bytes_after,
                hash_after: &hash,
                duration_ms,
                path: path.as_deref(),
            };
            let mut set = draft.clone();
            set.kind = EventKind::Access;
            set.ts.clone_from(&ts);
            set.created = Some(created);
            set.bytes_after = Some(bytes_after);
            // A removal's commit (no bytes to hash) has no `hashAfter`.
            set.hash_after = Some(hash.clone()).filter(|h| !h.is_empty());
            set.duration_ms = duration_ms;
            if let Some(p) = &path {
                set.path = Some(p.clone());
            }
            prop_assert_eq!(committed_event_line(&draft, &c), serde_json::to_vec(&set).unwrap());
        }
    }
}
