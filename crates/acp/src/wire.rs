//! ACP's wire forms of core values: the one mapping from a core
//! [`Failure`] to a JSON-RPC error (SPEC 11), the `_meta` fields a request
//! may carry (the tool-write-origin marker and the format hints, SPEC 4),
//! and the `_meta` a read reports.

use crate::message::{ErrorObject, INTERNAL_ERROR, REQUEST_CANCELLED, RESOURCE_NOT_FOUND};
use serde::Serialize;
use serde_json::{Map, Value, json};
use writegate_core::{
    Detail, ErrorKind, Failure, FileFormat, LineEndingChoice, MarkerSource, RefusalFacts,
    WriteOptions,
};

/// The `_meta` key of the tool-write-origin marker.
pub(crate) const MARKER_KEY: &str = "qwen-code/tool-write-origin";

/// `_meta` key of an explicit encoding conversion: `true` lets
/// `_meta.encoding` / `_meta.bom` convert an existing file (SPEC 9).
pub(crate) const CONVERT_KEY: &str = "writegate/convertEncoding";

/// Whether `_meta["writegate/convertEncoding"]` is exactly `true`.
pub(crate) fn convert_encoding(meta: Option<&Map<String, Value>>) -> bool {
    meta.and_then(|m| m.get(CONVERT_KEY)) == Some(&Value::Bool(true))
}

/// `_meta` key naming the workspace of a socket connection in `initialize`.
pub(crate) const WORKSPACE_META_KEY: &str = "writegate/workspace";

/// Parses `_meta["qwen-code/tool-write-origin"]` (SPEC 4). Returns the
/// marker's source only for a JSON object with exactly the two keys
/// `version` (the integer 1, not `1.0` or `"1"`) and `source` (one of the
/// four sources). Anything else is no marker at all (fail closed; never an
/// error of its own).
pub(crate) fn parse_marker(meta: Option<&Map<String, Value>>) -> Option<MarkerSource> {
    let marker = meta?.get(MARKER_KEY)?.as_object()?;
    if marker.len() != 2 {
        return None;
    }
    let version = marker.get("version")?;
    if !(version.is_u64() && version.as_u64() == Some(1)) {
        return None;
    }
    MarkerSource::from_name(marker.get("source")?.as_str()?)
}

/// The only three `_meta` fields that reach the encoder (SPEC 4): `bom`
/// (boolean), `encoding` (string), `lineEnding` (`"lf"` or `"crlf"`).
/// Wrongly typed or unknown values are ignored.
pub(crate) fn write_options(meta: Option<&Map<String, Value>>) -> WriteOptions {
    let mut opts = WriteOptions::default();
    let Some(meta) = meta else { return opts };
    opts.bom = meta.get("bom").and_then(Value::as_bool);
    opts.encoding = meta
        .get("encoding")
        .and_then(Value::as_str)
        .map(str::to_string);
    opts.line_ending = match meta.get("lineEnding").and_then(Value::as_str) {
        Some("lf") => Some(LineEndingChoice::Lf),
        Some("crlf") => Some(LineEndingChoice::Crlf),
        _ => None,
    };
    opts
}

/// `_meta` as an object, or `None` (any other JSON type is ignored).
pub(crate) fn meta_object(meta: Option<Value>) -> Option<Map<String, Value>> {
    match meta {
        Some(Value::Object(m)) => Some(m),
        _ => None,
    }
}

/// The `_meta` a read reports: the file's format as found and its hash,
/// under the same names `_writegate/read_lines` uses.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub(crate) struct FormatMeta {
    /// Encoding name.
    pub(crate) encoding: &'static str,
    /// Whether the file has a BOM.
    pub(crate) bom: bool,
    /// `lf`, `crlf` or `cr`.
    pub(crate) line_ending: &'static str,
    /// `sha256:<hex>` of the file's bytes.
    pub(crate) hash: String,
}

impl FormatMeta {
    /// The meta of a file with `format` and `hash`.
    pub(crate) fn new(format: FileFormat, hash: String) -> FormatMeta {
        FormatMeta {
            encoding: format.encoding,
            bom: format.bom,
            line_ending: format.line_ending.as_str(),
            hash,
        }
    }
}

/// The JSON-RPC code of a refusal with `kind` (each kind its own; the table is in
/// docs/errors.md, and a test keeps the two equal).
///
/// Refusals use the implementation-defined server range -32000..-32099,
/// one code per errorKind, grouped by tens: -3201x the path, -3202x trust
/// and approval, -3203x the file's state, -3204x its content and size,
/// -3205x the edit's match, -3206x the daemon's I/O. `path_not_found` keeps
/// ACP's `-32002` (resource not found). `internal_error` (a bug caught by a
/// guard, or a panic) keeps JSON-RPC's `-32603`: it is the server's fault,
/// not a refusal of the request. `-32000` (ACP: authentication required)
/// and `-32001` are never used. Clients should still branch on
/// `data.errorKind`; the code lets a plain JSON-RPC client tell a refusal
/// from a server fault.
pub(crate) fn refusal_code(kind: ErrorKind) -> i64 {
    match kind {
        ErrorKind::PathNotFound => RESOURCE_NOT_FOUND,
        ErrorKind::PathOutsideWorkspace => -32010,
        ErrorKind::SymlinkEscape => -32011,
        ErrorKind::ParseError => -32012,
        ErrorKind::NotAFile => -32013,
        ErrorKind::ReservedName => -32014,
        ErrorKind::UntrustedWorkspace => -32020,
        ErrorKind::PermissionDenied => -32021,
        ErrorKind::ApprovalRequired => -32022,
        ErrorKind::WritegateFile => -32023,
        ErrorKind::HashMismatch => -32030,
        ErrorKind::FileAlreadyExists => -32031,
        ErrorKind::GenerationClosed => -32032,
        ErrorKind::FileChanged => -32033,
        ErrorKind::NotUndoable => -32034,
        ErrorKind::NotPending => -32035,
        ErrorKind::FileTooLarge => -32040,
        ErrorKind::BinaryFile => -32041,
        ErrorKind::UnsupportedEncoding => -32042,
        ErrorKind::UnmappableCharacter => -32043,
        ErrorKind::TextNotFound => -32050,
        ErrorKind::AmbiguousTextMatch => -32051,
        ErrorKind::LineOutOfRange => -32052,
        ErrorKind::LineMismatch => -32053,
        ErrorKind::LineEndingConflict => -32054,
        ErrorKind::IoError => -32060,
        ErrorKind::InternalError => INTERNAL_ERROR,
    }
}

/// The JSON-RPC error of a core failure (SPEC 11), the only place that maps
/// one: bad params `-32602`; cancellation `-32800`; a refusal its
/// [`refusal_code`] (`-32002` for `path_not_found`) with `data {errorKind,
/// hint, status, ...detail}`: the detail as core serialises it (the same
/// members MCP shows), plus what only ACP has: ready-made `approve` params
/// for `approval_required`, and for `path_not_found` ACP's `uri` (the
/// detail's path, else the request's `uri`).
pub(crate) fn failure_error(f: &Failure, uri: &str) -> ErrorObject {
    match f {
        Failure::InvalidParams(why) => ErrorObject::invalid_params(why.clone()),
        Failure::Cancelled => ErrorObject::new(REQUEST_CANCELLED, "request cancelled", None),
        Failure::Refused(r) => {
            let mut data = match serde_json::to_value(RefusalFacts::of(r)) {
                Ok(Value::Object(m)) => m,
                _ => Map::new(),
            };
            if !r.hint.is_empty() {
                data.insert("hint".into(), r.hint.clone().into());
            }
            let mut uri = uri.to_string();
            match &r.detail {
                Some(Detail::Approval {
                    command,
                    session,
                    asked: false,
                    ..
                }) => {
                    // Ready-made `_writegate/approve` params: `once` for
                    // this session, else (no session) the workspace; none
                    // when the person was asked through an approver (the
                    // caller cannot approve, and a "no" is final).
                    let approve = match session {
                        Some(s) => {
                            json!({"sessionId": s, "command": command, "scope": "once"})
                        }
                        None => json!({"command": command, "scope": "workspace"}),
                    };
                    data.insert("approve".into(), approve);
                }
                Some(Detail::NotFound { path }) => uri.clone_from(path),
                _ => {}
            }
            if r.kind == ErrorKind::PathNotFound {
                // ACP's wording, which agents match on, then the path.
                let message = format!("Resource not found: {uri}");
                data.insert("uri".into(), uri.into());
                ErrorObject::new(RESOURCE_NOT_FOUND, message, Some(Value::Object(data)))
            } else {
                // Agents show `message` to the model: one sentence with the
                // kind, what happened and what to do next.
                ErrorObject::new(
                    refusal_code(r.kind),
                    r.to_string(),
                    Some(Value::Object(data)),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use writegate_core::Refusal;

    fn meta(v: Value) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert(MARKER_KEY.to_string(), v);
        m
    }

    #[test]
    fn valid_markers() {
        for s in MarkerSource::ALL {
            let m = meta(json!({"version": 1, "source": s.as_str()}));
            assert_eq!(parse_marker(Some(&m)), Some(s));
        }
    }

    #[test]
    fn every_malformed_marker_is_no_marker() {
        let bad = [
            json!({"version": 2, "source": "edit"}),
            json!({"version": 1.0, "source": "edit"}),
            json!({"version": "1", "source": "edit"}),
            json!({"version": 1, "source": "shell"}),
            json!({"version": 1, "source": "edit", "extra": true}),
            json!({"version": 1}),
            json!({"source": "edit"}),
            json!({"version": 1, "source": null}),
            json!(null),
            json!([1, "edit"]),
            json!("write_file"),
            json!({"version": -1, "source": "edit"}),
        ];
        for b in bad {
            assert_eq!(parse_marker(Some(&meta(b.clone()))), None, "{b}");
        }
        assert_eq!(parse_marker(None), None);
        assert_eq!(parse_marker(Some(&Map::new())), None);
    }

    #[test]
    fn only_three_fields_cross_and_wrong_types_are_ignored() {
        let m: Map<String, Value> = serde_json::from_value(json!({
            "bom": "yes", "encoding": 7, "lineEnding": "cr", "other": 1
        }))
        .unwrap();
        assert_eq!(write_options(Some(&m)), WriteOptions::default());
        let m: Map<String, Value> = serde_json::from_value(json!({
            "bom": true, "encoding": "utf-16le", "lineEnding": "crlf"
        }))
        .unwrap();
        let o = write_options(Some(&m));
        assert_eq!(o.bom, Some(true));
        assert_eq!(o.encoding.as_deref(), Some("utf-16le"));
        assert_eq!(o.line_ending, Some(LineEndingChoice::Crlf));
    }

    #[test]
    fn refusals_map_to_codes() {
        let e = failure_error(&Refusal::new(ErrorKind::PathNotFound, "h").into(), "/x");
        assert_eq!(e.code, RESOURCE_NOT_FOUND);
        assert_eq!(e.message, "Resource not found: /x");
        let data = e.data.unwrap();
        assert_eq!(data["uri"], "/x");
        assert_eq!(data["errorKind"], "path_not_found");
        let e = failure_error(&Refusal::new(ErrorKind::SymlinkEscape, "h").into(), "/x");
        assert_eq!(e.code, -32011);
        assert_eq!(e.message, "symlink_escape: h");
        assert_eq!(e.data.unwrap()["status"], 400);
        assert_eq!(
            failure_error(&Failure::Cancelled, "").code,
            REQUEST_CANCELLED
        );
        let e = failure_error(
            &Refusal::new(ErrorKind::AmbiguousTextMatch, "h")
                .with_detail(Detail::Ambiguous {
                    count: 2,
                    lines: vec![1, 3],
                })
                .into(),
            "",
        );
        let data = e.data.unwrap();
        assert_eq!(
            (data["count"].clone(), data["lines"].clone()),
            (json!(2), json!([1, 3]))
        );
    }

    /// docs/errors.md's table lists every errorKind once, with the code
    /// [`refusal_code`] gives it and the status core gives it.
    #[test]
    fn errors_md_lists_every_kind_with_its_code_and_status() {
        let doc = include_str!("../../../docs/errors.md");
        let mut rows = std::collections::BTreeMap::new();
        for line in doc.lines().filter(|l| l.starts_with("| `")) {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let kind = cells[1].trim_matches('`').to_string();
            let code: i64 = cells[2].parse().unwrap_or_else(|_| panic!("code: {line}"));
            let status: u16 = cells[3]
                .parse()
                .unwrap_or_else(|_| panic!("status: {line}"));
            assert!(
                rows.insert(kind.clone(), (code, status)).is_none(),
                "{kind} twice"
            );
        }
        for k in ErrorKind::ALL {
            let row = rows.remove(k.as_str());
            assert_eq!(
                row,
                Some((refusal_code(k), k.status())),
                "docs/errors.md row of {}",
                k.as_str()
            );
        }
        assert!(rows.is_empty(), "rows of unknown kinds: {rows:?}");
    }

    /// Every errorKind reaches the wire as its string, with its own code:
    /// refusals in the server range and never -32000/-32001 (ACP's
    /// authentication required, and its neighbour), `path_not_found` -32002,
    /// `internal_error` -32603; no two kinds share a code.
    #[test]
    fn every_kind_has_one_wire_form() {
        let mut seen = std::collections::BTreeSet::new();
        for k in ErrorKind::ALL {
            let e = failure_error(&Refusal::new(k, "h").into(), "/p");
            assert_eq!(e.data.as_ref().unwrap()["errorKind"], k.as_str());
            assert_eq!(e.code, refusal_code(k), "{k:?}");
            assert!(seen.insert(e.code), "{k:?}: code {} used twice", e.code);
            match k {
                ErrorKind::PathNotFound => assert_eq!(e.code, RESOURCE_NOT_FOUND),
                ErrorKind::InternalError => assert_eq!(e.code, INTERNAL_ERROR),
                _ => assert!((-32099..=-32010).contains(&e.code), "{k:?}: {}", e.code),
            }
        }
    }
}
