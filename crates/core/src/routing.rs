//! Routing decisions (SPEC 4), pure: the tool-write-origin marker parser, the
//! three-condition external gate, and the `_meta` fields that cross into the
//! encoder.

use serde_json::{Map, Value};
use writegate_text::{LineEndingChoice, WriteOptions};

/// The `_meta` key of the tool-write-origin marker.
pub const MARKER_KEY: &str = "qwen-code/tool-write-origin";

/// The four sources a valid marker may name.
pub const MARKER_SOURCES: [&str; 4] = ["write_file", "edit", "notebook_edit", "shell_sed_edit"];

/// Parses `_meta["qwen-code/tool-write-origin"]`. Returns the marker's source
/// only for a JSON object with exactly the two keys `version` (the integer 1,
/// not `1.0` or `"1"`) and `source` (one of [`MARKER_SOURCES`]). Anything
/// else is no marker at all (fail closed; never an error of its own).
pub fn parse_marker(meta: Option<&Map<String, Value>>) -> Option<&'static str> {
    let marker = meta?.get(MARKER_KEY)?.as_object()?;
    if marker.len() != 2 {
        return None;
    }
    let version = marker.get("version")?;
    if !(version.is_u64() && version.as_u64() == Some(1)) {
        return None;
    }
    let source = marker.get("source")?.as_str()?;
    MARKER_SOURCES.into_iter().find(|s| *s == source)
}

/// Which writer handles a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route {
    /// The workspace writer (WFS).
    Workspace,
    /// The external host writer, with the marker's source.
    External(&'static str),
}

/// The three-condition gate of SPEC 4, given the resolver already said
/// `path_outside_workspace`: external writes enabled for this connection and
/// a valid marker. Returns `None` when the outside path must be refused.
pub fn external_route(enabled: bool, marker: Option<&'static str>) -> Option<Route> {
    match (enabled, marker) {
        (true, Some(source)) => Some(Route::External(source)),
        _ => None,
    }
}

/// The only three `_meta` fields that reach the encoder (SPEC 4): `bom`
/// (boolean), `encoding` (string), `lineEnding` (`"lf"` or `"crlf"`).
/// Wrongly typed or unknown values are ignored.
pub fn write_options(meta: Option<&Map<String, Value>>) -> WriteOptions {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(v: Value) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert(MARKER_KEY.to_string(), v);
        m
    }

    #[test]
    fn valid_markers() {
        for s in MARKER_SOURCES {
            let m = meta(json!({"version": 1, "source": s}));
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
    fn external_route_needs_both_conditions() {
        assert_eq!(
            external_route(true, Some("edit")),
            Some(Route::External("edit"))
        );
        assert_eq!(external_route(false, Some("edit")), None);
        assert_eq!(external_route(true, None), None);
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
}
