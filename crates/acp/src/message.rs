//! JSON-RPC 2.0 messages, both directions (SPEC 1): one line's bytes in, a
//! typed [`Incoming`] out; typed responses and requests out as lines.
//! Pure: no IO.
//!
//! Every message is kept, responses included, so a peer that sends its own
//! requests (a proxy, a server asking its client) can match their answers
//! (see `outgoing`).

use crate::scan;
use agent_client_protocol::v1::schema::RequestId;
use bytes::Bytes;
use serde::Serialize;
use serde_json::{Map, Value, json};

/// Parse error.
pub const PARSE_ERROR: i64 = -32700;
/// Invalid request (batch, not an object, bad id, frame too long).
pub const INVALID_REQUEST: i64 = -32600;
/// Unknown method.
pub const METHOD_NOT_FOUND: i64 = -32601;
/// Params that do not fit the method.
pub const INVALID_PARAMS: i64 = -32602;
/// Internal error: the `internal_error` kind (a bug caught by a guard, a
/// panic). Refusals have codes of their own (`wire::refusal_code`).
pub const INTERNAL_ERROR: i64 = -32603;
/// ACP's resource-not-found, used for `path_not_found`.
pub const RESOURCE_NOT_FOUND: i64 = -32002;
/// Request cancelled.
pub const REQUEST_CANCELLED: i64 = -32800;

/// A JSON-RPC error object: `{code, message, data?}`.
#[derive(Debug, Clone, PartialEq, Serialize, serde::Deserialize)]
pub struct ErrorObject {
    /// The JSON-RPC code.
    pub code: i64,
    /// A short sentence.
    pub message: String,
    /// Structured detail.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl ErrorObject {
    /// An error with `code`, `message` and optional `data`.
    pub fn new(code: i64, message: impl Into<String>, data: Option<Value>) -> ErrorObject {
        ErrorObject {
            code,
            message: message.into(),
            data,
        }
    }

    /// `-32601` with the method name in `data`.
    pub fn method_not_found(method: &str) -> ErrorObject {
        ErrorObject::new(METHOD_NOT_FOUND, "method not found", Some(json!(method)))
    }

    /// `-32602` with the reason in `data`.
    pub fn invalid_params(why: impl Into<String>) -> ErrorObject {
        ErrorObject::new(
            INVALID_PARAMS,
            "invalid params",
            Some(Value::String(why.into())),
        )
    }

    /// `-32600` with the reason in `data`.
    pub fn invalid_request(message: &str, why: impl Into<String>) -> ErrorObject {
        ErrorObject::new(INVALID_REQUEST, message, Some(Value::String(why.into())))
    }
}

/// A request: answer exactly once, echoing `id`.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The id, echoed exactly in the answer.
    pub id: RequestId,
    /// The method name.
    pub method: String,
    /// `params` (`Null` when absent).
    pub params: Value,
}

/// A notification: never answered.
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    /// The method name.
    pub method: String,
    /// `params` (`Null` when absent).
    pub params: Value,
}

/// A response to a request the other side received.
#[derive(Debug, Clone, PartialEq)]
pub struct Response {
    /// The id of the request it answers.
    pub id: RequestId,
    /// `result`, or `error`.
    pub result: Result<Value, ErrorObject>,
}

/// A well-formed message.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A request.
    Request(Request),
    /// A notification.
    Notification(Notification),
    /// A response.
    Response(Response),
}

/// What one line holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// A well-formed message.
    Message(Message),
    /// A line that is not a well-formed message: answer `error` with `id`
    /// (null unless the request's id was readable).
    Malformed {
        /// The id to answer with.
        id: RequestId,
        /// The error to answer.
        error: ErrorObject,
    },
    /// A line that is not a well-formed message and must not be answered
    /// (a malformed notification, a malformed response).
    Dropped,
}

fn malformed(id: RequestId, code: i64, message: &str, why: &str) -> Incoming {
    Incoming::Malformed {
        id,
        error: ErrorObject::new(code, message, Some(json!(why))),
    }
}

/// Parses a line (without its terminator).
pub fn parse(line: &[u8]) -> Incoming {
    let value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => return parse_failure(line, &e),
    };
    let mut obj = match value {
        Value::Object(o) => o,
        Value::Array(_) => {
            return malformed(
                RequestId::Null,
                INVALID_REQUEST,
                "batch requests are not supported",
                "send one JSON object per line",
            );
        }
        _ => {
            return malformed(
                RequestId::Null,
                INVALID_REQUEST,
                "invalid request",
                "a message must be a JSON object",
            );
        }
    };
    let id = match obj.get("id") {
        None => None,
        Some(raw) => match serde_json::from_value::<RequestId>(raw.clone()) {
            Ok(id) => Some(id),
            Err(_) => {
                return malformed(
                    RequestId::Null,
                    INVALID_REQUEST,
                    "invalid request",
                    "id must be null, an integer within i64, or a string",
                );
            }
        },
    };
    let invalid = |why: &str| {
        malformed(
            id.clone().unwrap_or(RequestId::Null),
            INVALID_REQUEST,
            "invalid request",
            why,
        )
    };
    if obj.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        return invalid("jsonrpc must be \"2.0\"");
    }
    let method = match obj.get("method") {
        Some(Value::String(m)) => m.clone(),
        Some(_) => return invalid("method must be a string"),
        None if obj.contains_key("result") || obj.contains_key("error") => {
            return response(obj, id);
        }
        None => return invalid("method is missing"),
    };
    // Moved out, not cloned: a whole file can travel in params.
    let params = obj.remove("params").unwrap_or(Value::Null);
    let Some(id) = id else {
        // A notification is never answered, whatever its params.
        return Incoming::Message(Message::Notification(Notification { method, params }));
    };
    if !matches!(params, Value::Object(_) | Value::Array(_) | Value::Null) {
        return malformed(
            id,
            INVALID_REQUEST,
            "invalid request",
            "params must be an object or an array",
        );
    }
    Incoming::Message(Message::Request(Request { id, method, params }))
}

/// A line that turned out malformed after all: the id and error to answer
/// (what [`parse`] gives as [`Incoming::Malformed`]).
#[derive(Debug, Clone, PartialEq)]
pub struct MalformedLine {
    /// The id to answer with.
    pub id: RequestId,
    /// The error to answer.
    pub error: ErrorObject,
}

/// A request whose `params` are still the JSON text of its line, so a
/// handler can deserialize them straight into its own types: no
/// intermediate `Value`, and the line's bytes are read once (a whole file
/// can travel in `params`). Built by [`parse_line`] only for a well-formed
/// request; [`RawRequest::into_request`] gives the [`Request`] that
/// [`parse`] would have given.
#[derive(Debug, Clone)]
pub struct RawRequest {
    /// The id, echoed exactly in the answer.
    pub id: RequestId,
    /// The method name.
    pub method: String,
    /// The params, unparsed.
    pub params: RawParams,
}

/// The `params` of a [`RawRequest`]: a span of the line it came in.
#[derive(Debug, Clone)]
pub struct RawParams {
    line: Bytes,
    /// `None`: the request has no `params`.
    span: Option<(usize, usize)>,
    /// The params object's members, found by the line's scan (`None` when
    /// params are not an object).
    members: Option<Vec<scan::Member>>,
}

impl RawParams {
    /// The params' JSON text (an object, an array or `null`); `null` when
    /// the request has none.
    pub fn json(&self) -> &[u8] {
        match self.span {
            Some((start, end)) => &self.line[start..end],
            None => b"null",
        }
    }

    /// The whole line the request came in (without its terminator).
    pub fn line(&self) -> &[u8] {
        &self.line
    }

    /// The whole line, shared (no copy).
    pub fn line_bytes(&self) -> Bytes {
        self.line.clone()
    }

    /// The params as [`parse`] gives them: a `Value` (`Null` when absent),
    /// or, for a line `parse` refuses (a string holding a lone surrogate),
    /// the id and error to answer.
    pub fn to_value(&self) -> Result<Value, Box<MalformedLine>> {
        match self.span {
            None => Ok(Value::Null),
            Some(_) => match serde_json::from_slice(self.json()) {
                Ok(v) => Ok(v),
                Err(_) => match parse(&self.line) {
                    Incoming::Message(Message::Request(r)) => Ok(r.params),
                    Incoming::Malformed { id, error } => Err(Box::new(MalformedLine { id, error })),
                    // A line that parsed as a request once does so again.
                    _ => Err(Box::new(MalformedLine {
                        id: RequestId::Null,
                        error: ErrorObject::new(PARSE_ERROR, "parse error", None),
                    })),
                },
            },
        }
    }
}

/// The members of an object in params (see [`RawParams::object`]).
pub(crate) struct RawObject<'a> {
    text: &'a [u8],
    members: &'a [scan::Member],
}

impl RawParams {
    /// The members of the params object, when `params` is an object (the
    /// line's one scan found them).
    pub(crate) fn object(&self) -> Option<RawObject<'_>> {
        Some(RawObject {
            text: &self.line,
            members: self.members.as_deref()?,
        })
    }
}

/// A member of a [`RawObject`] by name.
pub(crate) enum RawMember<'a> {
    /// No member has the name.
    Absent,
    /// The JSON text of the one member with the name.
    One(&'a [u8]),
    /// Several have it.
    Repeated,
}

impl<'a> RawObject<'a> {
    /// Member `key`.
    pub(crate) fn get(&self, key: &str) -> RawMember<'a> {
        match scan::find(self.text, self.members, key) {
            scan::Lookup::Absent => RawMember::Absent,
            scan::Lookup::One(m) => RawMember::One(&self.text[m.value.clone()]),
            scan::Lookup::Repeated => RawMember::Repeated,
        }
    }

    /// The JSON text of member `key` when exactly one has the name.
    fn one(&self, key: &str) -> Option<&'a [u8]> {
        match self.get(key) {
            RawMember::One(text) => Some(text),
            _ => None,
        }
    }

    /// Member `key` deserialized with serde; `None` when absent, repeated
    /// or not of that type.
    pub(crate) fn parse<T: serde::de::DeserializeOwned>(&self, key: &str) -> Option<T> {
        serde_json::from_slice(self.one(key)?).ok()
    }

    /// The span in the line of member `key` when it is a string (with its
    /// quotes); `None` when absent, repeated or not a string.
    pub(crate) fn string_span(&self, key: &str) -> Option<std::ops::Range<usize>> {
        match scan::find(self.text, self.members, key) {
            scan::Lookup::One(m) if self.text[m.value.start] == b'"' => Some(m.value.clone()),
            _ => None,
        }
    }
}

impl RawParams {
    /// The string at `span` of the line (see [`RawObject::string_span`]),
    /// decoded. The line's own memory becomes the string's when nothing
    /// else shares it (a whole file then needs no second buffer); else the
    /// string is decoded into a new one.
    pub(crate) fn into_string(self, span: std::ops::Range<usize>) -> Option<String> {
        // The scan checked the whole line (UTF-8, escapes), so decoding
        // cannot fail half-way.
        self.line.get(span.clone())?;
        match self.line.try_into_mut() {
            Ok(unique) => scan::unescape_to_string(Vec::from(unique), span),
            Err(shared) => scan::unescape(std::str::from_utf8(&shared[span]).ok()?),
        }
    }
}

impl RawRequest {
    /// The request as [`parse`] gives it, or the malformed line's answer.
    pub fn into_request(self) -> Result<Request, Box<MalformedLine>> {
        let params = self.params.to_value()?;
        Ok(Request {
            id: self.id,
            method: self.method,
            params,
        })
    }
}

/// A notification whose `params` are still the JSON text of its line: a
/// proxy forwards it as read without building a `Value` (ADR 0011). Built
/// by [`parse_line`] only for a well-formed notification;
/// [`RawNotification::into_notification`] gives the [`Notification`] that
/// [`parse`] would have given.
#[derive(Debug, Clone)]
pub struct RawNotification {
    /// The method name.
    pub method: String,
    /// The params, unparsed (and the whole line: [`RawParams::line`]).
    pub params: RawParams,
}

impl RawNotification {
    /// The notification as [`parse`] gives it; `None` where `parse` would
    /// drop the line (it does not for any line [`parse_line`] reads raw).
    pub fn into_notification(self) -> Option<Notification> {
        let params = self.params.to_value().ok()?;
        Some(Notification {
            method: self.method,
            params,
        })
    }
}

/// What [`parse_line`] makes of a line.
#[derive(Debug, Clone)]
pub enum Parsed {
    /// A well-formed request, params unparsed.
    Request(RawRequest),
    /// A well-formed notification, params unparsed.
    Notification(RawNotification),
    /// Anything else, as [`parse`] gives it, and the line.
    Other(Incoming, Bytes),
}

/// Parses a line like [`parse`], but leaves a well-formed request's or
/// notification's params unparsed ([`RawRequest`], [`RawNotification`]).
/// The line is scanned once without building anything (`scan`); anything
/// that is not plainly a well-formed request or notification (a response,
/// a malformed or unusual line) goes through [`parse`], so every answer
/// stays exactly [`parse`]'s.
pub fn parse_line(line: Bytes) -> Parsed {
    parse_line_checked(line, &scan::Checked::NONE)
}

/// [`parse_line`] of a line whose long strings were checked as it arrived
/// (`writegate_jsonscan::StringsAhead`): the same result, without reading
/// those strings again.
pub fn parse_line_checked(line: Bytes, checked: &scan::Checked) -> Parsed {
    match raw_head(&line, checked) {
        Some(RawHead {
            id: Some(id),
            method,
            span,
            members,
        }) => Parsed::Request(RawRequest {
            id,
            method,
            params: RawParams {
                line,
                span,
                members,
            },
        }),
        Some(RawHead {
            id: None,
            method,
            span,
            members,
        }) => Parsed::Notification(RawNotification {
            method,
            params: RawParams {
                line,
                span,
                members,
            },
        }),
        None => Parsed::Other(parse(&line), line),
    }
}

/// What [`raw_head`] reads of a request or notification line.
struct RawHead {
    /// `None`: a notification.
    id: Option<RequestId>,
    method: String,
    span: Option<(usize, usize)>,
    /// The members of `params` when it is an object.
    members: Option<Vec<scan::Member>>,
}

/// The id (absent for a notification), method and params span of a plainly
/// well-formed request or notification line; `None` for anything else.
fn raw_head(line: &[u8], checked: &scan::Checked) -> Option<RawHead> {
    let (members, found) = scan::object_members_checked(line, &["params"], checked)?;
    let params_members = found.into_iter().next().flatten();
    let text = |m: &scan::Member| &line[m.value.clone()];
    let one = |key| match scan::find(line, &members, key) {
        scan::Lookup::One(m) => Some(Some(m)),
        scan::Lookup::Absent => Some(None),
        // `parse` keeps the last of repeated members: left to it.
        scan::Lookup::Repeated => None,
    };
    if text(one("jsonrpc")??) != b"\"2.0\"" {
        return None;
    }
    let id: Option<RequestId> = match one("id")? {
        Some(m) => Some(request_id(text(m))?),
        None => None,
    };
    let method = text(one("method")??);
    if !method.starts_with(b"\"") {
        return None;
    }
    let method: String = serde_json::from_slice(method).ok()?;
    let span = match one("params")? {
        None => None,
        Some(m) => {
            if !matches!(line[m.value.start], b'{' | b'[') && text(m) != b"null" {
                return None;
            }
            Some((m.value.start, m.value.end))
        }
    };
    Some(RawHead {
        id,
        method,
        span,
        members: params_members,
    })
}

/// The request id whose JSON text is `text` (a number, a string or
/// `null`), as `RequestId`'s own `Deserialize` reads it; `None` where that
/// fails. `RequestId` is an untagged enum: deserialized directly, every
/// numeric id first fails as `Null` and formats an error message that is
/// thrown away (a measurable share of a small request's CPU: ADR 0009).
/// The common shapes are read directly; anything else goes to serde.
fn request_id(text: &[u8]) -> Option<RequestId> {
    match text.first()? {
        b'"' => serde_json::from_slice::<String>(text)
            .ok()
            .map(RequestId::Str),
        b'-' | b'0'..=b'9' => serde_json::from_slice::<i64>(text)
            .ok()
            .map(RequestId::Number)
            .or_else(|| serde_json::from_slice(text).ok()),
        _ if text == b"null" => Some(RequestId::Null),
        _ => serde_json::from_slice(text).ok(),
    }
}

/// A response object: `result`, or an `error` object. Never answered,
/// even when malformed (answering a response could loop between peers).
fn response(mut obj: Map<String, Value>, id: Option<RequestId>) -> Incoming {
    let Some(id) = id else {
        return Incoming::Dropped;
    };
    let result = match (obj.remove("result"), obj.remove("error")) {
        (Some(r), None) => Ok(r),
        (None, Some(e)) => match serde_json::from_value::<ErrorObject>(e) {
            Ok(e) => Err(e),
            Err(_) => return Incoming::Dropped,
        },
        _ => return Incoming::Dropped,
    };
    Incoming::Message(Message::Response(Response { id, result }))
}

/// A line `serde_json` refused. Content holding a lone surrogate (`\ud800`)
/// is not valid Unicode: SPEC 9 refuses it before anything is touched, as
/// invalid params of the request when the line is otherwise valid JSON and
/// its id can be read; anything else is a parse error with `id: null`.
fn parse_failure(line: &[u8], e: &serde_json::Error) -> Incoming {
    if let Some(sanitized) = without_surrogates(line) {
        let Some(id) = sanitized.as_object().and_then(|o| o.get("id")) else {
            // A notification is never answered, even a malformed one.
            return Incoming::Dropped;
        };
        let id: RequestId = serde_json::from_value(id.clone()).unwrap_or(RequestId::Null);
        return malformed(
            id,
            INVALID_PARAMS,
            "invalid params",
            "a string is not valid Unicode: it holds a lone surrogate (\\ud800-\\udfff escape); send valid UTF-16 pairs",
        );
    }
    malformed(RequestId::Null, PARSE_ERROR, "parse error", &e.to_string())
}

/// Parses a line whose only fault is surrogate escapes, with each
/// replaced by `\uFFFD` ([`scan::surrogate_escapes_replaced`]; for reading
/// the id only, the content itself is refused). `None` when the line holds
/// no such escape or is still not valid JSON after the replacement.
fn without_surrogates(line: &[u8]) -> Option<Value> {
    serde_json::from_str(&scan::surrogate_escapes_replaced(line)?).ok()
}

#[derive(Serialize)]
struct OkLine<'a, T: Serialize> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    result: &'a T,
}

#[derive(Serialize)]
struct ErrLine<'a> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    error: &'a ErrorObject,
}

#[derive(Serialize)]
struct RequestLine<'a, P: Serialize> {
    jsonrpc: &'static str,
    id: &'a RequestId,
    method: &'a str,
    params: &'a P,
}

#[derive(Serialize)]
struct NotificationLine<'a, P: Serialize> {
    jsonrpc: &'static str,
    method: &'a str,
    params: &'a P,
}

fn line_of(msg: &impl Serialize) -> Vec<u8> {
    // Serialising these shapes cannot fail: keys are strings and the values
    // come from serde types; an empty line would be a bug, never a panic.
    let mut line = serde_json::to_vec(msg).unwrap_or_default();
    line.push(b'\n');
    line
}

/// A success response line, `\n`-terminated.
pub fn ok_line<T: Serialize>(id: &RequestId, result: &T) -> Vec<u8> {
    line_of(&OkLine {
        jsonrpc: "2.0",
        id,
        result,
    })
}

/// [`ok_line`] for a result already written as JSON text, in pieces
/// copied one after the other (a large read's text is not escaped twice).
pub fn ok_line_raw(id: &RequestId, result: &[&[u8]]) -> Vec<u8> {
    let id = serde_json::to_vec(id).unwrap_or_default();
    let len = result.iter().map(|p| p.len()).sum::<usize>();
    let mut line = Vec::with_capacity(len + id.len() + 32);
    line.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    line.extend_from_slice(&id);
    line.extend_from_slice(br#","result":"#);
    for piece in result {
        line.extend_from_slice(piece);
    }
    line.extend_from_slice(b"}\n");
    line
}

/// Bytes a result built for [`ok_line_in`] keeps free for the line around
/// it: the head (`{"jsonrpc":"2.0","id":…,"result":`, with an id of up to
/// about 90 bytes) and the end. A longer id costs one copy of the result.
pub const LINE_ROOM: usize = 128;

/// [`ok_line_raw`] of the pieces `lead`, `result` and `tail`, built in
/// `result`'s own buffer: the head and `lead` are put in front (the
/// result's bytes move back once, in memory already touched), then `tail`
/// and the line's end. A large read's answer then costs no fresh
/// buffer of its size, whose first touch of every page is a fault
/// (docs/decisions/0034-reads-ahead-of-the-peers.md); `result` should hold
/// [`LINE_ROOM`] spare bytes of capacity.
pub fn ok_line_in(id: &RequestId, lead: &[u8], mut result: Vec<u8>, tail: &[&[u8]]) -> Vec<u8> {
    let id = serde_json::to_vec(id).unwrap_or_default();
    let mut head = Vec::with_capacity(id.len() + 32 + lead.len());
    head.extend_from_slice(br#"{"jsonrpc":"2.0","id":"#);
    head.extend_from_slice(&id);
    head.extend_from_slice(br#","result":"#);
    head.extend_from_slice(lead);
    let tail_len = tail.iter().map(|p| p.len()).sum::<usize>();
    result.reserve(head.len() + tail_len + 2);
    result.splice(0..0, head);
    for piece in tail {
        result.extend_from_slice(piece);
    }
    result.extend_from_slice(b"}\n");
    result
}

/// An error response line, `\n`-terminated.
pub fn error_line(id: &RequestId, error: &ErrorObject) -> Vec<u8> {
    line_of(&ErrLine {
        jsonrpc: "2.0",
        id,
        error,
    })
}

/// A response line for `result`, `\n`-terminated.
pub fn response_line(id: &RequestId, result: &Result<Value, ErrorObject>) -> Vec<u8> {
    match result {
        Ok(v) => ok_line(id, v),
        Err(e) => error_line(id, e),
    }
}

/// A request line, `\n`-terminated.
pub fn request_line<P: Serialize>(id: &RequestId, method: &str, params: &P) -> Vec<u8> {
    line_of(&RequestLine {
        jsonrpc: "2.0",
        id,
        method,
        params,
    })
}

/// A notification line, `\n`-terminated.
pub fn notification_line<P: Serialize>(method: &str, params: &P) -> Vec<u8> {
    line_of(&NotificationLine {
        jsonrpc: "2.0",
        method,
        params,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err_code(i: &Incoming) -> (i64, Value) {
        match i {
            Incoming::Malformed { id, error } => (error.code, serde_json::to_value(id).unwrap()),
            other => panic!("not an error: {other:?}"),
        }
    }

    #[test]
    fn request_ids_read_directly_match_serde() {
        for text in [
            "1",
            "0",
            "-5",
            "9223372036854775807",
            "9223372036854775808",
            "-9223372036854775809",
            "1.5",
            "1.0",
            "1e3",
            "-",
            "01",
            "\"a\"",
            "\"\\u00e9\\n\"",
            "\"unterminated",
            "null",
            "nul",
            "true",
            "[1]",
            "{}",
            "",
        ] {
            let direct = request_id(text.as_bytes());
            let serde = serde_json::from_slice::<RequestId>(text.as_bytes()).ok();
            assert_eq!(direct, serde, "{text:?}");
        }
        assert_eq!(request_id(b"7"), Some(RequestId::Number(7)));
        assert_eq!(request_id(b"\"x\""), Some(RequestId::Str("x".into())));
        assert_eq!(request_id(b"null"), Some(RequestId::Null));
    }

    fn line_json(line: &[u8]) -> Value {
        serde_json::from_slice(line).unwrap()
    }

    #[test]
    fn parse_error_and_batch_have_null_id() {
        assert_eq!(err_code(&parse(b"{nope")), (PARSE_ERROR, Value::Null));
        assert_eq!(err_code(&parse(b"[{}]")), (INVALID_REQUEST, Value::Null));
        assert_eq!(err_code(&parse(b"42")), (INVALID_REQUEST, Value::Null));
    }

    #[test]
    fn ids_echoed_exactly() {
        for (raw, want) in [
            ("null", Value::Null),
            ("9223372036854775807", json!(9_223_372_036_854_775_807_i64)),
            ("-5", json!(-5)),
            ("\"a b\"", json!("a b")),
        ] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{raw},"method":"m"}}"#);
            match parse(line.as_bytes()) {
                Incoming::Message(Message::Request(r)) => {
                    assert_eq!(line_json(&ok_line(&r.id, &json!({})))["id"], want, "{raw}");
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
                err_code(&parse(line.as_bytes())).0,
                INVALID_REQUEST,
                "{raw}"
            );
        }
    }

    #[test]
    fn notifications_and_responses_are_kept() {
        assert!(matches!(
            parse(br#"{"jsonrpc":"2.0","method":"x"}"#),
            Incoming::Message(Message::Notification(_))
        ));
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#),
            Incoming::Message(Message::Response(Response {
                id: RequestId::Number(1),
                result: Ok(json!({})),
            }))
        );
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":"a","error":{"code":-32601,"message":"m"}}"#),
            Incoming::Message(Message::Response(Response {
                id: RequestId::Str("a".into()),
                result: Err(ErrorObject::new(-32601, "m", None)),
            }))
        );
        // A malformed response is dropped, never answered.
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","id":1,"error":"nope"}"#),
            Incoming::Dropped
        );
        assert_eq!(parse(br#"{"jsonrpc":"2.0","result":1}"#), Incoming::Dropped);
    }

    #[test]
    fn lone_surrogate_is_invalid_params_with_the_id() {
        let line = br#"{"jsonrpc":"2.0","id":7,"method":"fs/write_text_file","params":{"content":"x\ud800y"}}"#;
        let (code, id) = err_code(&parse(line));
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
            let (code, id) = err_code(&parse(line.as_bytes()));
            assert_eq!((code, id), (INVALID_PARAMS, json!("s")), "{content}");
        }
        // Another syntax error with a surrogate is still a parse error.
        let (code, id) = err_code(&parse(br#"{"id":1,"x":"\ud800" nope}"#));
        assert_eq!((code, id), (PARSE_ERROR, Value::Null));
        // A notification with a lone surrogate is still never answered.
        assert_eq!(
            parse(br#"{"jsonrpc":"2.0","method":"x","params":{"c":"\ud800"}}"#),
            Incoming::Dropped
        );
        // A valid pair is fine.
        let ok = br#"{"jsonrpc":"2.0","id":7,"method":"m","params":{"content":"\ud83d\ude00"}}"#;
        assert!(matches!(parse(ok), Incoming::Message(Message::Request(_))));
    }

    #[test]
    fn lines_have_the_envelope() {
        let id = RequestId::Number(3);
        assert_eq!(
            line_json(&error_line(&id, &ErrorObject::method_not_found("x"))),
            json!({"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"method not found","data":"x"}})
        );
        assert_eq!(
            line_json(&request_line(&id, "m", &json!({"a":1}))),
            json!({"jsonrpc":"2.0","id":3,"method":"m","params":{"a":1}})
        );
        assert_eq!(
            line_json(&notification_line("n", &json!([]))),
            json!({"jsonrpc":"2.0","method":"n","params":[]})
        );
        assert!(ok_line(&id, &json!({})).ends_with(b"}\n"));
    }

    /// `parse_line` answers every line exactly as `parse` does: a raw
    /// request becomes `parse`'s request (or `parse`'s error), anything
    /// else is `parse`'s own result.
    #[test]
    fn parse_line_agrees_with_parse() {
        let lines = [
            r#"{"jsonrpc":"2.0","id":1,"method":"fs/write_text_file","params":{"sessionId":"s","path":"/a","content":"x\ny"}}"#,
            r#"  {"id":"a b","params":[1,2],"method":"m","jsonrpc":"2.0"}  "#,
            r#"{"jsonrpc":"2.0","id":null,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"m","params":null}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"m","params":7}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"m","params":{"x":1e400}}"#,
            r#"{"jsonrpc":"2.0","id":5,"method":"m","params":{"x":1.5}}"#,
            r#"{"jsonrpc":"2.0","id":6,"method":"m","params":{"c":"\ud800"}}"#,
            r#"{"jsonrpc":"2.0","id":7,"method":"a","method":"b"}"#,
            r#"{"jsonrpc":"2.0","id":8,"method":"m","params":{"k":1,"k":2}}"#,
            r#"{"jsonrpc":"2.0","id":1.5,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":9223372036854775808,"method":"m"}"#,
            r#"{"jsonrpc":"1.0","id":9,"method":"m"}"#,
            r#"{"jsonrpc":"2\u002e0","id":10,"method":"m"}"#,
            r#"{"jsonrpc":"2.0","id":11,"method":7}"#,
            r#"{"jsonrpc":"2.0","id":12,"method":"m\u00e9"}"#,
            r#"{"jsonrpc":"2.0","id":13,"method":"m","params":{"a":[[[[]]]]}} x"#,
            r#"{"jsonrpc":"2.0","method":"n","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":14,"result":{}}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"m"}]"#,
            r#"{"jsonrpc":"2.0","id":15,"method":"m","params":{"a":1}"#,
            "{\"jsonrpc\":\"2.0\",\"id\":16,\"method\":\"m\",\"params\":{\"a\":\"\t\"}}",
            r#"{"jsonrpc":"2.0","id":17,"method":"m","params":{"a":"é😀\u20ac"}}"#,
            r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"text":"a\nb"}}}"#,
            r#"{"method":"n","jsonrpc":"2.0"}"#,
            r#"{"jsonrpc":"2.0","method":"n","params":null}"#,
            r#"{"jsonrpc":"2.0","method":"n","params":"x"}"#,
            r#"{"jsonrpc":"2.0","method":"n","params":{"c":"\udc00"}}"#,
            r#"{"jsonrpc":"2.0","method":"n","params":{"x":1e400}}"#,
            r#"{"jsonrpc":"1.0","method":"n"}"#,
            r#"{"jsonrpc":"2.0","method":"n","method":"m"}"#,
        ];
        for line in lines {
            let want = parse(line.as_bytes());
            let got = match parse_line(Bytes::from(line)) {
                Parsed::Other(i, _) => i,
                Parsed::Request(r) => match r.into_request() {
                    Ok(r) => Incoming::Message(Message::Request(r)),
                    Err(m) => Incoming::Malformed {
                        id: m.id,
                        error: m.error,
                    },
                },
                Parsed::Notification(n) => match n.into_notification() {
                    Some(n) => Incoming::Message(Message::Notification(n)),
                    None => Incoming::Dropped,
                },
            };
            assert_eq!(got, want, "{line}");
        }
        // The common request and notification are read without serde's parse.
        assert!(matches!(
            parse_line(Bytes::from_static(lines[0].as_bytes())),
            Parsed::Request(_)
        ));
        assert!(matches!(
            parse_line(Bytes::from_static(lines[23].as_bytes())),
            Parsed::Notification(_)
        ));
    }
}
