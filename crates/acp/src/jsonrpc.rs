//! JSON-RPC 2.0 message classification and error responses (SPEC 1, 11).
//! Pure: a line's bytes in, an [`Incoming`] out.

use agent_client_protocol_schema::v1::RequestId;
use serde_json::{Map, Value, json};
use writegate_core::{ErrorKind, Failure};

/// Parse error.
pub const PARSE_ERROR: i64 = -32700;
/// Invalid request (batch, not an object, bad id, frame too long).
pub const INVALID_REQUEST: i64 = -32600;
/// Unknown method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Params that do not fit the method.
pub const INVALID_PARAMS: i64 = -32602;
/// Every refusal but `path_not_found`.
pub const INTERNAL_ERROR: i64 = -32603;
/// ACP's resource-not-found, used for `path_not_found`.
pub const RESOURCE_NOT_FOUND: i64 = -32002;
/// Request cancelled.
pub const REQUEST_CANCELLED: i64 = -32800;

/// What one line holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A request: answer exactly once, echoing `id`.
    Request {
        id: RequestId,
        method: String,
        params: Value,
    },
    /// A notification: never answered.
    Notification { method: String, params: Value },
    /// A response or something else the daemon does not act on.
    Ignored,
    /// Answer this error now (`id` null unless the request's id was readable).
    Error(Value),
}

/// Classifies a line (without its terminator).
pub fn classify(line: &[u8]) -> Incoming {
    let value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => return parse_failure(line, &e),
    };
    let mut obj = match value {
        Value::Object(o) => o,
        Value::Array(_) => {
            return Incoming::Error(error(
                &RequestId::Null,
                INVALID_REQUEST,
                "batch requests are not supported",
                Some(json!("send one JSON object per line")),
            ));
        }
        _ => {
            return Incoming::Error(error(
                &RequestId::Null,
                INVALID_REQUEST,
                "invalid request",
                Some(json!("a message must be a JSON object")),
            ));
        }
    };
    let id = match obj.get("id") {
        None => None,
        Some(raw) => match serde_json::from_value::<RequestId>(raw.clone()) {
            Ok(id) => Some(id),
            Err(_) => {
                return Incoming::Error(error(
                    &RequestId::Null,
                    INVALID_REQUEST,
                    "invalid request",
                    Some(json!("id must be null, an integer within i64, or a string")),
                ));
            }
        },
    };
    let invalid = |why: &str| {
        Incoming::Error(error(
            id.as_ref().unwrap_or(&RequestId::Null),
            INVALID_REQUEST,
            "invalid request",
            Some(json!(why)),
        ))
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid("jsonrpc must be \"2.0\"");
    }
    let method = match obj.get("method") {
        Some(Value::String(m)) => m.clone(),
        Some(_) => return invalid("method must be a string"),
        None if obj.contains_key("result") || obj.contains_key("error") => {
            return Incoming::Ignored;
        }
        None => return invalid("method is missing"),
    };
    // Moved out, not cloned: a whole file can travel in params.
    let params = obj.remove("params").unwrap_or(Value::Null);
    let Some(id) = id else {
        // A notification is never answered, whatever its params.
        return Incoming::Notification { method, params };
    };
    if !matches!(params, Value::Object(_) | Value::Array(_) | Value::Null) {
        return Incoming::Error(error(
            &id,
            INVALID_REQUEST,
            "invalid request",
            Some(json!("params must be an object or an array")),
        ));
    }
    Incoming::Request { id, method, params }
}

/// A line serde_json refused. Content holding a lone surrogate (`\ud800`)
/// is not valid Unicode: SPEC 9 refuses it before anything is touched, as
/// invalid params of the request when the line is otherwise valid JSON and
/// its id can be read; anything else is a parse error with `id: null`.
fn parse_failure(line: &[u8], e: &serde_json::Error) -> Incoming {
    if let Some(sanitized) = without_surrogates(line) {
        let Some(id) = sanitized.as_object().and_then(|o| o.get("id")) else {
            // A notification is never answered, even a malformed one.
            return Incoming::Ignored;
        };
        let id: RequestId = serde_json::from_value(id.clone()).unwrap_or(RequestId::Null);
        return Incoming::Error(error(
            &id,
            INVALID_PARAMS,
            "invalid params",
            Some(json!(
                "a string is not valid Unicode: it holds a lone surrogate (\\ud800-\\udfff escape); send valid UTF-16 pairs"
            )),
        ));
    }
    Incoming::Error(error(
        &RequestId::Null,
        PARSE_ERROR,
        "parse error",
        Some(json!(e.to_string())),
    ))
}

/// Parses a line whose only fault is surrogate escapes: every
/// `\uD800`-`\uDFFF` escape is replaced with `\uFFFD` (for reading the id
/// only; the content itself is refused). `None` when the line holds no such
/// escape or is still not valid JSON after the replacement.
fn without_surrogates(line: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(line).ok()?;
    let mut out = String::with_capacity(text.len());
    let mut replaced = false;
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\' && i + 1 < bytes.len() {
            if bytes[i + 1] == b'u'
                && i + 6 <= bytes.len()
                && let Some(hex) = text.get(i + 2..i + 6)
                && let Ok(cp) = u32::from_str_radix(hex, 16)
                && (0xD800..=0xDFFF).contains(&cp)
            {
                out.push_str("\\uFFFD");
                replaced = true;
                i += 6;
                continue;
            }
            out.push_str(text.get(i..i + 2)?);
            i += 2;
            continue;
        }
        let ch = text.get(i..)?.chars().next()?;
        out.push(ch);
        i += ch.len_utf8();
    }
    if !replaced {
        return None;
    }
    serde_json::from_str(&out).ok()
}

/// A success response line (without `\n`).
pub fn success(id: &RequestId, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

/// An error response.
pub fn error(id: &RequestId, code: i64, message: &str, data: Option<Value>) -> Value {
    let mut err = Map::new();
    err.insert("code".into(), code.into());
    err.insert("message".into(), message.into());
    if let Some(d) = data {
        err.insert("data".into(), d);
    }
    json!({"jsonrpc": "2.0", "id": id, "error": Value::Object(err)})
}

/// The JSON-RPC error for an operation's failure (SPEC 11):
/// `path_not_found` is `-32002` with `data {uri, errorKind, hint}`; bad
/// params `-32602`; cancellation `-32800`; every other refusal `-32603` with
/// `data {errorKind, hint, status, ...}`.
pub fn failure(id: &RequestId, f: &Failure, uri: &str) -> Value {
    match f {
        Failure::InvalidParams(why) => {
            error(id, INVALID_PARAMS, "invalid params", Some(json!(why)))
        }
        Failure::Cancelled => error(id, REQUEST_CANCELLED, "request cancelled", None),
        Failure::Refused(r) => {
            let mut data = Map::new();
            data.insert("errorKind".into(), r.kind.as_str().into());
            if !r.hint.is_empty() {
                data.insert("hint".into(), r.hint.clone().into());
            }
            for (k, v) in &r.extra {
                data.insert(k.clone(), v.clone());
            }
            if r.kind == ErrorKind::PathNotFound {
                data.insert("uri".into(), uri.into());
                error(
                    id,
                    RESOURCE_NOT_FOUND,
                    "resource not found",
                    Some(Value::Object(data)),
                )
            } else {
                data.insert("status".into(), r.kind.status().into());
                error(
                    id,
                    INTERNAL_ERROR,
                    r.kind.as_str(),
                    Some(Value::Object(data)),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err_code(i: &Incoming) -> (i64, Value) {
        match i {
            Incoming::Error(v) => (v["error"]["code"].as_i64().unwrap(), v["id"].clone()),
            other => panic!("not an error: {other:?}"),
        }
    }

    #[test]
    fn parse_error_and_batch_have_null_id() {
        assert_eq!(err_code(&classify(b"{nope")), (PARSE_ERROR, Value::Null));
        assert_eq!(err_code(&classify(b"[{}]")), (INVALID_REQUEST, Value::Null));
        assert_eq!(err_code(&classify(b"42")), (INVALID_REQUEST, Value::Null));
    }

    #[test]
    fn ids_echoed_exactly() {
        for (raw, want) in [
            ("null", Value::Null),
            ("9223372036854775807", json!(9223372036854775807i64)),
            ("-5", json!(-5)),
            ("\"a b\"", json!("a b")),
        ] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{raw},"method":"m"}}"#);
            match classify(line.as_bytes()) {
                Incoming::Request { id, .. } => {
                    assert_eq!(success(&id, json!({}))["id"], want, "{raw}")
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn bad_ids_are_invalid_requests() {
        for raw in ["1.5", "9223372036854775808", "{}", "[1]", "true"] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{raw},"method":"m"}}"#);
            assert_eq!(
                err_code(&classify(line.as_bytes())).0,
                INVALID_REQUEST,
                "{raw}"
            );
        }
    }

    #[test]
    fn notification_and_response() {
        assert!(matches!(
            classify(br#"{"jsonrpc":"2.0","method":"x"}"#),
            Incoming::Notification { .. }
        ));
        assert_eq!(
            classify(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Incoming::Ignored
        );
    }

    #[test]
    fn lone_surrogate_is_invalid_params_with_the_id() {
        let line = br#"{"jsonrpc":"2.0","id":7,"method":"fs/write_text_file","params":{"content":"x\ud800y"}}"#;
        let (code, id) = err_code(&classify(line));
        assert_eq!((code, id), (INVALID_PARAMS, json!(7)));
        for content in [
            r"ok\ud83d",
            r"\ud800",
            r"\udc00",
            r"\ude00\ud83d",
            r"\ud800\u0041",
        ] {
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":"s","method":"fs/write_text_file","params":{{"content":"{content}"}}}}"#
            );
            let (code, id) = err_code(&classify(line.as_bytes()));
            assert_eq!((code, id), (INVALID_PARAMS, json!("s")), "{content}");
        }
        // Another syntax error with a surrogate is still a parse error.
        let (code, id) = err_code(&classify(br#"{"id":1,"x":"\ud800" nope}"#));
        assert_eq!((code, id), (PARSE_ERROR, Value::Null));
        // A notification with a lone surrogate is still never answered.
        assert_eq!(
            classify(br#"{"jsonrpc":"2.0","method":"x","params":{"c":"\ud800"}}"#),
            Incoming::Ignored
        );
        // A valid pair is fine.
        let ok = br#"{"jsonrpc":"2.0","id":7,"method":"m","params":{"content":"\ud83d\ude00"}}"#;
        assert!(matches!(classify(ok), Incoming::Request { .. }));
    }

    #[test]
    fn refusals_map_to_codes() {
        use writegate_core::Refusal;
        let id = RequestId::Number(1);
        let v = failure(
            &id,
            &Refusal::new(ErrorKind::PathNotFound, "h").into(),
            "/x",
        );
        assert_eq!(v["error"]["code"], RESOURCE_NOT_FOUND);
        assert_eq!(v["error"]["data"]["uri"], "/x");
        assert_eq!(v["error"]["data"]["errorKind"], "path_not_found");
        let v = failure(
            &id,
            &Refusal::new(ErrorKind::SymlinkEscape, "h").into(),
            "/x",
        );
        assert_eq!(v["error"]["code"], INTERNAL_ERROR);
        assert_eq!(v["error"]["data"]["status"], 400);
        assert_eq!(
            failure(&id, &Failure::Cancelled, "")["error"]["code"],
            REQUEST_CANCELLED
        );
    }
}
