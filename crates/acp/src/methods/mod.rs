//! The method table (SPEC 3): one module per method, each with its
//! `Params` type, `Result` type and handler (a [`Method`] impl); one
//! [`TABLE`] from which dispatch, the extension-method list and the
//! `initialize` capabilities are all derived. Handlers need a [`Call`]
//! (the service, the connection's state, the request's cancel flag), not
//! a connection: anything that can build a [`ConnState`] can call them.
//!
//! Adding a method: a new module with a `Method` impl, and one line in
//! [`TABLE`].

mod approve;
pub(crate) mod cancel_request;
mod edit_text_file;
mod history;
mod initialize;
mod pending;
mod read_lines;
mod read_text_file;
mod receipt;
mod undo;
mod write_text_file;

use crate::message::{
    ErrorObject, INVALID_PARAMS, METHOD_NOT_FOUND, RawParams, error_line, ok_line,
};
use crate::state::ConnState;
use crate::wire::failure_error;
use agent_client_protocol::v1::schema::RequestId;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;
use writegate_core::{Approver, Failure, OpCtx};

pub use cancel_request::CANCEL_REQUEST;

/// What a handler gets: the connection's state, this request's cancel
/// flag, and who to ask when the approval gate holds it.
pub struct Call<'a> {
    /// The connection's state (service, transport, runtime).
    pub conn: &'a ConnState,
    /// Set by `$/cancel_request` or shutdown.
    pub cancel: Arc<AtomicBool>,
    /// True for the connection's first request.
    pub first: bool,
    /// Who is asked when the gate holds the operation (the proxy's editor,
    /// through `session/request_permission`); `None` (serve): the
    /// `approval_required` refusal goes back to the client.
    pub approver: Option<Arc<dyn Approver>>,
}

impl Call<'_> {
    /// The operation context of a core call: the connection's runtime and
    /// allowances, this request's session, cancel flag, approver, and the
    /// audit `route`.
    pub fn ctx(&self, session_id: &str, route: &'static str) -> OpCtx {
        OpCtx {
            runtime: self.conn.runtime(),
            session_id: Some(session_id.to_string()),
            allows: self.conn.transport.allowances(),
            route,
            cancel: self.cancel.clone(),
            approver: self.approver.clone(),
            client_root: false,
        }
    }
}

/// Why a method did not produce a result.
#[derive(Debug)]
pub enum MethodError {
    /// A core failure (mapped once, by `wire::failure_error`).
    Failed(Failure),
    /// A protocol error of the method itself.
    Protocol(ErrorObject),
}

impl From<Failure> for MethodError {
    fn from(f: Failure) -> Self {
        MethodError::Failed(f)
    }
}

/// One method: its name, params, result and handler.
pub trait Method {
    /// The JSON-RPC method name.
    const NAME: &'static str;
    /// Answered on the connection's reader (cheap, no file IO), instead of
    /// a worker or blocking thread.
    const INLINE: bool = false;
    /// The params, parsed with serde (`-32602` when they do not fit).
    type Params: DeserializeOwned;
    /// The result, serialised as the response's `result`.
    type Result: Serialize;
    /// Whether the method is served on this connection at all
    /// (`-32601` otherwise).
    fn enabled(_conn: &ConnState) -> bool {
        true
    }
    /// Checks that need no IO and must come before cancellation is
    /// honoured (bad combinations are `-32602`, never audited).
    fn check(_params: &Self::Params) -> Result<(), Failure> {
        Ok(())
    }
    /// Params read straight from the request line without serde, for a
    /// method whose params can hold a whole file; `Err` with the params
    /// untouched (the default, and for anything unusual) leaves them to
    /// serde. Must give exactly what serde would.
    fn params_from_raw(raw: RawParams) -> Result<Self::Params, RawParams> {
        Err(raw)
    }
    /// The request's path, reported as `data.uri` of a `-32002`.
    fn uri(_params: &Self::Params) -> Option<&Path> {
        None
    }
    /// Runs the method.
    fn handle(call: &Call<'_>, params: Self::Params) -> Result<Self::Result, MethodError>;
    /// The success response line, `\n`-terminated: serde's ([`ok_line`]),
    /// unless the method writes the same bytes faster itself.
    fn result_line(id: &RequestId, result: Self::Result) -> Vec<u8> {
        ok_line(id, &result)
    }
}

/// A request's params as the connection loop hands them over.
pub enum Params {
    /// Parsed into a `Value` (the default route).
    Value(Value),
    /// Still the JSON text of the line: deserialized by the method itself,
    /// without building a `Value` first; the answer is the same as for
    /// the params parsed.
    Raw(RawParams),
}

/// One row of the table.
pub struct Entry {
    /// The method name.
    pub name: &'static str,
    /// See [`Method::INLINE`].
    pub inline: bool,
    answer: fn(&Call<'_>, &RequestId, Params) -> Vec<u8>,
}

impl Entry {
    /// Answers a request for this method: the response line.
    pub fn answer(&self, call: &Call<'_>, id: &RequestId, params: Params) -> Vec<u8> {
        (self.answer)(call, id, params)
    }
}

const fn entry<M: Method>() -> Entry {
    Entry {
        name: M::NAME,
        inline: M::INLINE,
        answer: answer_with::<M>,
    }
}

/// Every request method served, in the order `initialize` lists them.
pub static TABLE: [Entry; 11] = [
    entry::<initialize::Initialize>(),
    entry::<write_text_file::WriteTextFile>(),
    entry::<read_text_file::ReadTextFile>(),
    entry::<edit_text_file::EditTextFile>(),
    entry::<read_lines::ReadLines>(),
    entry::<receipt::Receipt>(),
    entry::<history::History>(),
    entry::<undo::Undo>(),
    entry::<approve::Approve>(),
    entry::<pending::Pending>(),
    entry::<pending::Answer>(),
];

/// The table's row for `method`.
pub fn find(method: &str) -> Option<&'static Entry> {
    TABLE.iter().find(|e| e.name == method)
}

/// The extension methods served (`_`-prefixed names), as `initialize`
/// lists them.
pub fn extension_methods() -> impl Iterator<Item = &'static str> {
    TABLE.iter().map(|e| e.name).filter(|n| n.starts_with('_'))
}

/// Whether `method` is in the table.
pub fn serves(method: &str) -> bool {
    find(method).is_some()
}

/// The response line for a request of `method` (in the table or not).
pub fn answer(call: &Call<'_>, id: &RequestId, method: &str, params: Params) -> Vec<u8> {
    if let Some(e) = find(method) {
        return e.answer(call, id, params);
    }
    let started = RequestLog::start();
    let line = error_line(id, &ErrorObject::method_not_found(method));
    if let Some(log) = started {
        log.finish(method, id, Outcome::Protocol(METHOD_NOT_FOUND));
    }
    line
}

/// How a request ended, for its debug line.
#[derive(Clone, Copy)]
enum Outcome {
    /// Answered with a result.
    Ok,
    /// A core failure.
    Failed(&'static str),
    /// A protocol error with this code.
    Protocol(i64),
}

impl Outcome {
    fn of(f: &Failure) -> Outcome {
        match f {
            Failure::Refused(r) => Outcome::Failed(r.kind.as_str()),
            Failure::InvalidParams(_) => Outcome::Protocol(INVALID_PARAMS),
            Failure::Cancelled => Outcome::Failed("cancelled"),
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Failed(kind) => kind,
            Outcome::Protocol(INVALID_PARAMS) => "invalid_params",
            Outcome::Protocol(METHOD_NOT_FOUND) => "method_not_found",
            Outcome::Protocol(_) => "protocol_error",
        }
    }
}

/// The one debug line of a request: method, request id,
/// `pathHash` (of the path as requested: the audit event's `pathHash` when
/// that path is canonical), outcome (`ok`, the errorKind, `cancelled`,
/// `invalid_params`, `method_not_found`) and duration in milliseconds.
/// Exists only when debug logging is on for this module, so a request pays
/// one cached level check and nothing else when it is off.
struct RequestLog {
    started: Instant,
    path_hash: Option<String>,
}

impl RequestLog {
    /// `Some` when debug logs of requests are enabled.
    fn start() -> Option<RequestLog> {
        tracing::enabled!(tracing::Level::DEBUG).then(|| RequestLog {
            started: Instant::now(),
            path_hash: None,
        })
    }

    fn finish(self, method: &str, id: &RequestId, outcome: Outcome) {
        let ms = self.started.elapsed().as_secs_f64() * 1000.0;
        let id = serde_json::to_string(id).unwrap_or_default();
        tracing::debug!(
            method = %method,
            id = %id,
            path_hash = %self.path_hash.as_deref().unwrap_or("-"),
            outcome = %outcome.as_str(),
            duration_ms = %format_args!("{ms:.3}"),
            "request"
        );
    }
}

/// The response line of a request for `M`, with its debug line. Params
/// still in their line are deserialized straight from it; those that do
/// not deserialize take the `Value` route, so the answer (which error,
/// with which words) is exactly the parsed params'.
fn answer_with<M: Method>(call: &Call<'_>, id: &RequestId, params: Params) -> Vec<u8> {
    let mut log = RequestLog::start();
    let (line, outcome) = match params {
        Params::Value(v) => respond_value::<M>(call, id, v, log.as_mut()),
        Params::Raw(raw) => respond_raw::<M>(call, id, raw, log.as_mut()),
    };
    if let Some(log) = log {
        log.finish(M::NAME, id, outcome);
    }
    line
}

/// A protocol error's line and outcome.
fn protocol(id: &RequestId, e: &ErrorObject) -> (Vec<u8>, Outcome) {
    (error_line(id, e), Outcome::Protocol(e.code))
}

/// The response line of a request for `M` with parsed `params`, and how it
/// ended; fills in `log`'s path hash when there is a log.
fn respond_value<M: Method>(
    call: &Call<'_>,
    id: &RequestId,
    params: Value,
    log: Option<&mut RequestLog>,
) -> (Vec<u8>, Outcome) {
    if !M::enabled(call.conn) {
        return protocol(id, &ErrorObject::method_not_found(M::NAME));
    }
    let params: M::Params = match serde_json::from_value(params) {
        Ok(p) => p,
        Err(e) => return protocol(id, &ErrorObject::invalid_params(e.to_string())),
    };
    respond_params::<M>(call, id, params, log)
}

/// [`respond_value`] for params still in their line.
fn respond_raw<M: Method>(
    call: &Call<'_>,
    id: &RequestId,
    raw: RawParams,
    log: Option<&mut RequestLog>,
) -> (Vec<u8>, Outcome) {
    if !M::enabled(call.conn) {
        return protocol(id, &ErrorObject::method_not_found(M::NAME));
    }
    let raw = match M::params_from_raw(raw) {
        Ok(params) => return respond_params::<M>(call, id, params, log),
        Err(raw) => raw,
    };
    match serde_json::from_slice::<M::Params>(raw.json()) {
        Ok(params) => {
            // The line is no longer needed (a whole file may be in it).
            drop(raw);
            respond_params::<M>(call, id, params, log)
        }
        Err(_) => match raw.to_value() {
            Ok(params) => respond_value::<M>(call, id, params, log),
            Err(m) => protocol(&m.id, &m.error),
        },
    }
}

/// Checks, runs and answers a request whose params are parsed.
fn respond_params<M: Method>(
    call: &Call<'_>,
    id: &RequestId,
    params: M::Params,
    log: Option<&mut RequestLog>,
) -> (Vec<u8>, Outcome) {
    if let (Some(log), Some(path)) = (log, M::uri(&params)) {
        log.path_hash = Some(writegate_core::path_hash(path));
    }
    let uri = M::uri(&params)
        .map(writegate_core::path_text)
        .unwrap_or_default();
    if let Err(f) = M::check(&params) {
        return (error_line(id, &failure_error(&f, &uri)), Outcome::of(&f));
    }
    let result = if M::INLINE {
        M::handle(call, params)
    } else {
        run(call, M::NAME, || M::handle(call, params))
    };
    match result {
        Ok(r) => (M::result_line(id, r), Outcome::Ok),
        Err(MethodError::Failed(f)) => (error_line(id, &failure_error(&f, &uri)), Outcome::of(&f)),
        Err(MethodError::Protocol(e)) => protocol(id, &e),
    }
}

/// Runs a method unless it was cancelled before it began (then `-32800`,
/// and no audit event: it never reached routing). A panic in it becomes
/// `internal_error` (`writegate_core::guarded`), so the request is still
/// answered once; the publisher has removed its temp file on unwinding,
/// and the pipeline has written the operation's one audit event.
fn run<T>(
    call: &Call<'_>,
    name: &str,
    op: impl FnOnce() -> Result<T, MethodError>,
) -> Result<T, MethodError> {
    if call.cancel.load(std::sync::atomic::Ordering::SeqCst) {
        return Err(Failure::Cancelled.into());
    }
    writegate_core::guarded(name, op).unwrap_or_else(|f| Err(f.into()))
}

/// The answer to request `id` built by `answer`, or `internal_error`
/// ([`Failure::internal`]) when building it panicked outside an operation
/// (`writegate_core::guarded`): every request is answered once.
pub fn answer_guarded(id: &RequestId, method: &str, answer: impl FnOnce() -> Vec<u8>) -> Vec<u8> {
    writegate_core::guarded(method, answer)
        .unwrap_or_else(|f| error_line(id, &failure_error(&f, "")))
}

/// `-32602` for a relative path (SPEC 3: paths must be absolute).
fn absolute(path: &Path) -> Result<(), Failure> {
    if path.is_absolute() {
        Ok(())
    } else {
        Err(Failure::InvalidParams(format!(
            "path must be absolute, got {:?}",
            path.display().to_string()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_extensions_listed() {
        let mut names: Vec<_> = TABLE.iter().map(|e| e.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), TABLE.len());
        assert_eq!(
            extension_methods().collect::<Vec<_>>(),
            [
                "_writegate/edit_text_file",
                "_writegate/read_lines",
                "_writegate/receipt",
                "_writegate/history",
                "_writegate/undo",
                "_writegate/approve",
                "_writegate/pending",
                "_writegate/answer"
            ]
        );
        assert!(serves("fs/write_text_file") && !serves("fs/delete"));
        assert!(find("initialize").unwrap().inline);
        assert!(!find("fs/write_text_file").unwrap().inline);
    }
}
