//! The transports an MCP connection can come over and what each allows
//! ([`Transport`]), and the stdio transport ([`Stdio`]): MCP messages are
//! lines (SPEC of MCP's stdio transport).
//! Incoming lines are read here with the line reader every front end
//! shares (`writegate_stdio::lines`), bounded by `max_frame_bytes` (a
//! longer line is skipped and logged; the connection goes on), and parsed in one pass
//! when they are a `tools/call` request: `rmcp`'s general parser buffers a
//! message and copies it once per shape it tries, which for a 5 MiB
//! `write_file` cost about 2.5x a plain parse, plus the page faults of the
//! copies. A `tools/call` whose arguments hold a `content` string (a whole
//! file, for `write_file` and `edit_file`) is read with the strict line scan
//! of `writegate-jsonscan` and its `content` decoded in the line's own
//! memory; the other members still go through serde. Every other line goes
//! to `rmcp`'s parser as it is. Outgoing messages are lines written by
//! [`crate::out`].

use crate::out::{Out, Pending};
use rmcp::model::{
    CallToolRequest, CallToolRequestMethod, CallToolRequestParams, ClientNotification,
    ClientRequest, ErrorData, GetMeta, JsonRpcMessage, JsonRpcRequest, JsonRpcVersion2_0,
    RequestId,
};
use rmcp::service::{RoleServer, RxJsonRpcMessage, TxJsonRpcMessage};
use serde::Deserialize;
use serde_json::Value;
use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncRead;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use writegate_core::Allowances;
use writegate_jsonscan::{Checked, Lookup, Member, StringsAhead};
use writegate_stdio::lines::{Frame, LineReader};
use writegate_stdio::{Restore, StdioEnds};

/// Which transport an MCP connection came over. What each allows is
/// decided here, in one match: a variant added later must state its
/// allowances, and core's [`Allowances::default`] allows nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transport {
    /// stdin/stdout of the client that spawned `writegate mcp`.
    Stdio,
    /// MCP Streamable HTTP on the daemon's loopback listener
    /// (`serve --mcp-http`, [`crate::http`]), behind its bearer token.
    Http,
    /// A same-UID peer of the daemon's MCP socket (`writegate serve`;
    /// `writegate mcp --connect` relays an agent's stdio to it). The UID is
    /// checked at accept.
    Socket,
}

impl Transport {
    /// What a connection over this transport may do. Over stdio: read
    /// files, yes; the external host writer, no (an MCP tool call carries
    /// no tool-write-origin marker, so it never writes outside a
    /// workspace); choosing its workspace by name, no (client roots are
    /// registered as `[mcp] client_roots` says, never by a request).
    #[expect(
        clippy::match_same_arms,
        reason = "each transport states its own allowances, even when two agree"
    )]
    pub(crate) fn allowances(self) -> Allowances {
        match self {
            Transport::Stdio => Allowances {
                external_writer: false,
                choose_workspace: false,
                reads: true,
            },
            // Over HTTP, what stdio allows, for the same reasons: reads of
            // the workspaces, yes (an agent edits what it read, and the
            // token proves it is one the person configured); the external
            // writer and a workspace by name, no. Approving is the
            // person's and is served on no MCP transport: a held call is
            // asked about (elicitation, `input_required`) or refused.
            Transport::Http => Allowances {
                external_writer: false,
                choose_workspace: false,
                reads: true,
            },
            // Over the daemon's MCP socket: the same, for the same reasons;
            // a socket peer is an agent (or its relay), never the person, so
            // it chooses no workspace by name either (its starting directory
            // becomes one only through `--cwd-workspace`'s checks).
            Transport::Socket => Allowances {
                external_writer: false,
                choose_workspace: false,
                reads: true,
            },
        }
    }
}

/// A `tools/call` request, parsed without buffering. Any other key, method
/// or shape fails here and goes to the general parser.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolCallLine {
    #[allow(dead_code)] // checked by its type: only "2.0" parses
    jsonrpc: JsonRpcVersion2_0,
    id: RequestId,
    #[allow(dead_code)] // checked by its type: only "tools/call" parses
    method: CallToolRequestMethod,
    params: CallToolRequestParams,
}

/// What one incoming line is.
#[derive(Debug)]
enum Line {
    /// A message for the service.
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Nothing to do (blank, not JSON, or a notification nobody handles).
    Skip,
    /// A JSON object that is no valid message: answered with "Invalid
    /// request" (with its id when it has one).
    Invalid(Option<RequestId>),
    /// A request answered "Invalid params" (`-32602`) with its id and this
    /// message: one whose strings hold a lone surrogate escape (`\ud800`:
    /// JSON by RFC 8259, but not valid Unicode, so `serde_json` refuses it
    /// as a syntax error; SPEC 9, as the ACP front end answers it), or a
    /// `tools/call` whose params do not parse (`arguments` not an object:
    /// `rmcp` would take it for an unknown method).
    InvalidParams(RequestId, String),
}

/// The message of the "Invalid params" answer to a request with a lone
/// surrogate ([`Line::InvalidParams`]).
const LONE_SURROGATE: &str = "a string is not valid Unicode: it holds a lone surrogate (\\ud800-\\udfff escape); send valid UTF-16 pairs";

/// A `tools/call` line in the plain form `{jsonrpc, id, method, params:
/// {name, arguments: {content, ...}, _meta?}}` with `content` a string,
/// read with the strict line scan: `content` is decoded in the line's own
/// memory (the line becomes its `String`: a whole file needs no second
/// buffer), every other member is parsed with serde from its own text.
/// `None`, with `line` untouched, for any other line: [`parse`] reads it.
/// `checked`: the line's long strings checked as it arrived
/// ([`Stdio::next_frame`]), not read again.
fn tool_call_with_content(line: &mut Vec<u8>, checked: &Checked) -> Option<Line> {
    let (top, found) =
        writegate_jsonscan::object_members_checked(line, &["params", "arguments"], checked)?;
    let text = &line[..];
    let [Some(params), Some(args)] = &found[..] else {
        return None;
    };
    let one = |members: &[Member], key: &str| match writegate_jsonscan::find(text, members, key) {
        Lookup::One(m) => Some(m.value.clone()),
        Lookup::Absent | Lookup::Repeated => None,
    };
    // Exactly the four members `ToolCallLine` allows, each once.
    if top.len() != 4
        || text[one(&top, "jsonrpc")?] != *b"\"2.0\""
        || text[one(&top, "method")?] != *b"\"tools/call\""
    {
        return None;
    }
    one(&top, "params")?;
    let id: RequestId = serde_json::from_slice(&text[one(&top, "id")?]).ok()?;
    // `params` without `arguments`, and `arguments` without `content`, as
    // JSON objects of their members' own text (keys hold no escapes).
    let object_of = |members: &[Member], skip: &str| {
        let mut out = vec![b'{'];
        for m in members
            .iter()
            .filter(|m| text[m.key.clone()] != *skip.as_bytes())
        {
            if out.len() > 1 {
                out.push(b',');
            }
            out.extend_from_slice(&text[(m.key.start - 1)..=m.key.end]);
            out.push(b':');
            out.extend_from_slice(&text[m.value.clone()]);
        }
        out.push(b'}');
        out
    };
    if params
        .iter()
        .any(|m| !matches!(&text[m.key.clone()], b"name" | b"arguments" | b"_meta"))
    {
        return None;
    }
    one(params, "arguments")?;
    let mut call: CallToolRequestParams =
        serde_json::from_slice(&object_of(params, "arguments")).ok()?;
    let content = one(args, "content")?;
    if text[content.start] != b'"' {
        return None;
    }
    let mut arguments: serde_json::Map<String, Value> =
        serde_json::from_slice(&object_of(args, "content")).ok()?;
    // Everything else is read: now the line becomes the content.
    let content = writegate_jsonscan::unescape_to_string(std::mem::take(line), content)
        .expect("a string the line scan accepted decodes to UTF-8");
    arguments.insert("content".to_string(), Value::String(content));
    call.arguments = Some(arguments);
    Some(tool_call(id, call))
}

/// The message for a `tools/call` request.
fn tool_call(id: RequestId, mut params: CallToolRequestParams) -> Line {
    let meta = params.meta.take();
    let mut request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    if let Some(meta) = meta {
        *request.get_meta_mut() = meta;
    }
    Line::Message(Box::new(JsonRpcMessage::Request(JsonRpcRequest::new(
        id, request,
    ))))
}

/// Parses one line (without its line break).
fn parse(line: &[u8]) -> Line {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Line::Skip;
    }
    if let Ok(call) = serde_json::from_slice::<ToolCallLine>(line) {
        return tool_call(call.id, call.params);
    }
    match serde_json::from_slice::<RxJsonRpcMessage<RoleServer>>(line) {
        Ok(JsonRpcMessage::Request(JsonRpcRequest {
            id,
            request: ClientRequest::CustomRequest(custom),
            ..
        })) if custom.method == "tools/call" => {
            let why = serde_json::from_value::<CallToolRequestParams>(
                custom.params.unwrap_or(Value::Null),
            )
            .err()
            .map_or_else(|| "not a tools/call request".to_string(), |e| e.to_string());
            Line::InvalidParams(id, format!("invalid params of tools/call: {why}"))
        }
        Ok(m) => Line::Message(Box::new(m)),
        Err(e) if e.is_syntax() || e.is_eof() => {
            if let Some(id) = lone_surrogate_request(line) {
                tracing::debug!(error = %e, "a request holds a lone surrogate");
                return Line::InvalidParams(id, LONE_SURROGATE.to_string());
            }
            // Not JSON: no id to answer, and answering could start an
            // error storm with a peer that echoes (as rmcp's own transport).
            tracing::debug!(error = %e, "ignoring a line that is not JSON");
            Line::Skip
        }
        Err(e) => {
            #[derive(Deserialize)]
            struct Shape {
                id: Option<RequestId>,
                method: Option<String>,
            }
            let shape = serde_json::from_slice::<Shape>(line).ok();
            match shape {
                // A notification nobody handles (another protocol's, or a
                // newer one): ignored, as rmcp does.
                Some(Shape {
                    id: None,
                    method: Some(m),
                }) => {
                    tracing::debug!(method = %m, error = %e, "ignoring a notification");
                    Line::Skip
                }
                Some(s) => {
                    tracing::debug!(error = %e, "invalid request");
                    Line::Invalid(s.id)
                }
                None => Line::Invalid(None),
            }
        }
    }
}

/// The id of a request (an object with `method` and `id`) that is JSON
/// once its surrogate escapes are replaced; `None` for anything else, a
/// notification included (never answered).
fn lone_surrogate_request(line: &[u8]) -> Option<RequestId> {
    #[derive(Deserialize)]
    struct Shape {
        id: Option<RequestId>,
        method: Option<serde_json::Value>,
    }
    let text = writegate_jsonscan::surrogate_escapes_replaced(line)?;
    match serde_json::from_str::<Shape>(&text).ok()? {
        Shape {
            id: Some(id),
            method: Some(_),
        } => Some(id),
        _ => None,
    }
}

/// A reader of one end of the connection.
pub(crate) type Reader = Box<dyn AsyncRead + Unpin + Send>;

/// stdin lines in, [`Out`]'s lines out, both over the process's stdio
/// ends as `serve --stdio` has them (`writegate-stdio`), or over the ends
/// of one connection to the daemon's MCP socket ([`Stdio::socket`]).
pub(crate) struct Stdio {
    lines: LineReader<Reader>,
    /// A line read before the transport began (the daemon's socket reads
    /// the first line to look for the relay's hello): taken first.
    first: Option<Vec<u8>>,
    out: Out,
    /// The descriptors' flags to put back when the server is done.
    restore: Option<Restore>,
    /// Requests read and not answered yet: at the end of input they are
    /// answered before the service is told the input ended.
    unanswered: Arc<Unanswered>,
    /// How long the end of input waits for them (`shutdown_grace_ms`).
    grace: Duration,
    /// Cancelled at the end of input, before waiting for the answers: an
    /// approval question still open can get no answer any more, so its
    /// call is answered as cancelled instead of holding the exit.
    input_ended: CancellationToken,
    /// The long line arriving, its strings checked so far.
    ahead: Option<StringsAhead>,
}

/// A line this long so far has its strings checked as the rest arrives
/// ([`Stdio::next_frame`]): a `write_file` of a whole file.
const AHEAD_FROM: usize = 64 * 1024;

/// The ids of requests read and not yet answered.
#[derive(Default)]
struct Unanswered {
    ids: Mutex<HashSet<RequestId>>,
    answered: Notify,
}

impl Unanswered {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<RequestId>> {
        self.ids
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn done(&self, id: &RequestId) {
        self.lock().remove(id);
        self.answered.notify_waiters();
    }

    /// Waits until every request read so far has been answered.
    async fn drained(&self) {
        loop {
            let notified = self.answered.notified();
            if self.lock().is_empty() {
                return;
            }
            notified.await;
        }
    }
}

impl Stdio {
    /// The process's stdin and stdout; lines over `max_line` bytes are
    /// skipped. A pipe or a socket (what Node.js clients spawn a server
    /// with) is read and written through descriptors registered with the
    /// runtime, not through blocking threads, unless it is stderr's too,
    /// and a stdin pipe is enlarged to 1 MiB (`writegate_stdio::StdioEnds`,
    /// as for `serve --stdio`), a stdout pipe before the first large answer
    /// ([`Out`] writes the answers).
    /// Measured with a 5 MiB `write_file` from a Python client over a pipe:
    /// 9.9 ms from the first byte sent to the whole line read with a
    /// 64 KiB pipe, 4.7 ms with the larger one.
    ///
    /// At the end of input the requests already read are answered first
    /// (for at most `grace`), as `serve --stdio` does: a client that sends
    /// its calls and closes stdin still gets every answer. `input_ended` is
    /// cancelled then, so a call waiting for the person's answer is
    /// answered as cancelled at once.
    pub(crate) fn new(max_line: usize, grace: Duration, input_ended: CancellationToken) -> Stdio {
        let ends = StdioEnds::open();
        Stdio {
            lines: LineReader::new(ends.reader, max_line),
            first: None,
            out: Out::new(ends.writer, ends.direct),
            restore: Some(ends.restore),
            unanswered: Arc::default(),
            grace,
            input_ended,
            ahead: None,
        }
    }
}

impl Stdio {
    /// One connection of the daemon's MCP socket: `lines` already read
    /// `first` (a line that was no hello) or nothing; answers go out
    /// through an [`Out`] of this connection's own.
    pub(crate) fn socket(
        lines: LineReader<Reader>,
        first: Option<Vec<u8>>,
        writer: Box<dyn tokio::io::AsyncWrite + Unpin + Send>,
        direct: Option<writegate_stdio::NonBlockingFd>,
        grace: Duration,
        input_ended: CancellationToken,
    ) -> Stdio {
        Stdio {
            lines,
            first,
            out: Out::new(writer, direct),
            restore: None,
            unanswered: Arc::default(),
            grace,
            input_ended,
            ahead: None,
        }
    }

    /// The table of prebuilt answers this transport's writer sends.
    pub(crate) fn pending(&self) -> Pending {
        self.out.pending()
    }
}

impl Drop for Stdio {
    fn drop(&mut self) {
        if let Some(r) = self.restore.take() {
            r.put_back();
        }
    }
}

impl Stdio {
    /// The next frame, reading as much as it takes, with the strings of a
    /// long line checked while the rest of it still arrives (the peer is
    /// still sending: see `writegate_jsonscan::StringsAhead`); `Ok(None)`
    /// once the input has ended. Cancel-safe as `LineReader::next_line`
    /// is: what was read and checked stays in `self`.
    async fn next_frame(&mut self) -> std::io::Result<Option<(Frame, Checked)>> {
        loop {
            if let Some(frame) = self.lines.next_buffered() {
                let checked = self.ahead.take().map(StringsAhead::finish);
                return Ok(Some((frame, checked.unwrap_or_default())));
            }
            // Begun only here, after `next_buffered` gave nothing: the bytes
            // then start at the first byte of the line not yet whole (blank
            // lines before it dropped), and only reads change them, at
            // their end, until the line is handed over with what was
            // checked of it. Fed after each read too, so that the read
            // that ends the line (and its long string) is looked at.
            if self.ahead.is_none() && self.lines.partial() >= AHEAD_FROM {
                self.ahead = Some(StringsAhead::new());
            }
            self.feed_ahead();
            if self.lines.at_eof() {
                return Ok(None);
            }
            self.lines.fill(usize::MAX).await?;
            self.feed_ahead();
        }
    }

    /// Shows what arrived of the line to the strings being checked ahead.
    fn feed_ahead(&mut self) {
        if let Some(ahead) = &mut self.ahead {
            ahead.feed(self.lines.partial_bytes());
        }
    }

    /// One incoming line: the message for the service, or `None` when it
    /// was skipped or answered here (an invalid request).
    fn take_line(
        &mut self,
        mut line: Vec<u8>,
        checked: &Checked,
    ) -> Option<RxJsonRpcMessage<RoleServer>> {
        let parsed = match tool_call_with_content(&mut line, checked) {
            Some(p) => p,
            None => parse(&line),
        };
        let (error, id) = match parsed {
            Line::Message(m) => {
                match &*m {
                    JsonRpcMessage::Request(r) => {
                        self.unanswered.lock().insert(r.id.clone());
                    }
                    JsonRpcMessage::Notification(n) => {
                        // A cancelled call is not answered.
                        if let ClientNotification::CancelledNotification(c) = &n.notification
                            && let Some(id) = &c.params.request_id
                        {
                            self.unanswered.done(id);
                        }
                    }
                    _ => {}
                }
                return Some(*m);
            }
            Line::Skip => return None,
            Line::Invalid(id) => (ErrorData::invalid_request("Invalid request", None), id),
            Line::InvalidParams(id, why) => (ErrorData::invalid_params(why, None), Some(id)),
        };
        let answer = TxJsonRpcMessage::<RoleServer>::error(error, id);
        // Written by a task of its own: `rmcp` polls `receive`
        // inside `select!`, and a send dropped there could lose
        // the answer after its line was consumed, or leave half
        // a line on stdout. The writer's lock keeps the answer
        // whole and in turn with the service's own sends.
        let send = self.out.send(&answer);
        tokio::spawn(async move {
            if let Err(e) = send.await {
                tracing::warn!(error = %e, "cannot answer an invalid request");
            }
        });
        None
    }
}

impl rmcp::transport::Transport<RoleServer> for Stdio {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let answers = match &item {
            JsonRpcMessage::Response(r) => Some(r.id.clone()),
            JsonRpcMessage::Error(e) => e.id.clone(),
            _ => None,
        };
        let unanswered = self.unanswered.clone();
        let send = self.out.send(&item);
        async move {
            let sent = send.await;
            if let Some(id) = answers {
                unanswered.done(&id);
            }
            sent
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if let Some(line) = self.first.take() {
                if let Some(m) = self.take_line(line, &Checked::NONE) {
                    return Some(m);
                }
                continue;
            }
            let next = self.next_frame().await.unwrap_or_else(|e| {
                tracing::error!(error = %e, "cannot read stdin");
                None
            });
            let Some(next) = next else {
                // End of input: what was asked is answered first; a
                // question to the person can get no answer now.
                self.input_ended.cancel();
                if tokio::time::timeout(self.grace, self.unanswered.drained())
                    .await
                    .is_err()
                {
                    tracing::warn!(
                        "stdin closed and some calls were not answered within shutdown_grace_ms"
                    );
                }
                return None;
            };
            let (line, checked) = match next {
                (Frame::Line(line), checked) => (Vec::from(line), checked),
                (Frame::TooLong, _) => {
                    tracing::error!(
                        max_line = self.lines.max(),
                        "an incoming message is longer than max_frame_bytes; skipping it"
                    );
                    continue;
                }
            };
            if let Some(m) = self.take_line(line, &checked) {
                return Some(m);
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        let out = self.out.clone();
        async move { out.close().await }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn line(v: &serde_json::Value) -> Vec<u8> {
        serde_json::to_vec(v).unwrap()
    }

    /// An MCP client over stdio reads files, but never takes the external
    /// writer (no tool-write-origin marker) or picks a workspace by name.
    #[test]
    fn stdio_and_the_daemon_socket_allow_reads_only() {
        assert_eq!(
            Transport::Socket.allowances(),
            Allowances {
                reads: true,
                ..Allowances::NONE
            }
        );
        assert_eq!(
            Transport::Stdio.allowances(),
            Allowances {
                reads: true,
                ..Allowances::NONE
            }
        );
    }

    /// An MCP client over HTTP reads files, as over stdio, and nothing more.
    #[test]
    fn http_allows_reads_only() {
        assert_eq!(
            Transport::Http.allowances(),
            Allowances {
                reads: true,
                ..Allowances::NONE
            }
        );
    }

    /// The one-pass parse gives what rmcp's own parser gives.
    #[test]
    fn a_tool_call_parses_as_rmcp_parses_it() {
        let msg = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
            "name": "write_file", "arguments": {"path": "/a", "content": "x\n"},
            "_meta": {"progressToken": "p1"}}});
        let Line::Message(fast) = parse(&line(&msg)) else {
            panic!()
        };
        let general: RxJsonRpcMessage<RoleServer> = serde_json::from_value(msg).unwrap();
        assert_eq!(
            serde_json::to_value(&*fast).unwrap(),
            serde_json::to_value(&general).unwrap()
        );
        let (JsonRpcMessage::Request(a), JsonRpcMessage::Request(b)) = (*fast, general) else {
            panic!()
        };
        assert_eq!(a.request.get_meta(), b.request.get_meta());
        assert!(a.request.get_meta().get_progress_token().is_some());
    }

    /// A `tools/call` with a `content` string is read by the line scan and
    /// gives exactly what rmcp's parser gives; every line the scan path
    /// does not take is left untouched for [`parse`].
    #[test]
    fn the_content_path_parses_as_rmcp_parses_it() {
        let taken = [
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
                "name": "write_file", "arguments": {"path": "/a", "content": "x\ny\r\n\t\"q\" \\ é 😀 \u{1}"}}}),
            json!({"jsonrpc": "2.0", "id": "s", "method": "tools/call", "params": {
                "_meta": {"progressToken": 7}, "name": "edit_file",
                "arguments": {"path": "/a", "find": "a\nb", "content": "", "line": 3, "dryRun": true, "x": [1, {"y": null}]}}}),
            json!({"method": "tools/call", "params": {"arguments": {"content": "c", "path": "/p"}, "name": "write_file"}, "id": 2, "jsonrpc": "2.0"}),
        ];
        for msg in taken {
            let text = line(&msg);
            let mut owned = text.clone();
            let Some(Line::Message(fast)) = tool_call_with_content(&mut owned, &Checked::NONE)
            else {
                panic!("not taken: {msg}")
            };
            let general: RxJsonRpcMessage<RoleServer> = serde_json::from_slice(&text).unwrap();
            assert_eq!(
                serde_json::to_value(&*fast).unwrap(),
                serde_json::to_value(&general).unwrap(),
                "{msg}"
            );
            let (JsonRpcMessage::Request(a), JsonRpcMessage::Request(b)) = (*fast, general) else {
                panic!()
            };
            assert_eq!(a.request.get_meta(), b.request.get_meta(), "{msg}");
        }
        // Lines the scan path does not take are left to `parse` untouched.
        let left: [&[u8]; 10] = [
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"w","arguments":{"content":"a","content":"b"}}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"w","arguments":{"content":7}}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"w","arguments":{"path":"/a"}}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"w","task":{},"arguments":{"content":"a"}}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","extra":1,"params":{"name":"w","arguments":{"content":"a"}}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"name":"w","arguments":{"content":"a"}}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"content":"a"}}}"#,
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"w","arguments":{"content":"\ud800"}}}"#,
            br#"{"jsonrpc":"2.0","id":1.5,"method":"tools/call","params":{"name":"w","arguments":{"content":"a"}}}"#,
            b"\xEF\xBB\xBF{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"w\",\"arguments\":{\"content\":\"a\"}}}",
        ];
        for raw in left {
            let mut owned = raw.to_vec();
            assert!(
                tool_call_with_content(&mut owned, &Checked::NONE).is_none(),
                "{}",
                String::from_utf8_lossy(raw)
            );
            assert_eq!(owned, raw, "a line not taken is left as it was");
        }
    }

    /// A long `write_file` line has its strings checked while it arrives,
    /// also after a blank line, and what was checked reads it as the scan
    /// alone does; a short line after it has nothing checked.
    #[test]
    fn a_long_lines_strings_are_checked_while_it_arrives() {
        let content = "x\n\"q\" é ".repeat(20_000);
        let long = line(
            &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "write_file", "arguments": {"path": "/a", "content": content}}}),
        );
        let short = line(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
        let input = [b"\r\n".as_slice(), &long, b"\n", &short, b"\n"].concat();
        let frames = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(async {
                let reader: Reader = Box::new(std::io::Cursor::new(input));
                let mut stdio = Stdio::socket(
                    LineReader::new(reader, 1 << 24),
                    None,
                    Box::new(tokio::io::sink()),
                    None,
                    Duration::ZERO,
                    CancellationToken::new(),
                );
                let mut frames = Vec::new();
                while let Some(f) = stdio.next_frame().await.unwrap() {
                    frames.push(f);
                }
                frames
            });
        let [(Frame::Line(a), checked), (Frame::Line(b), none)] = &frames[..] else {
            panic!("{} frames", frames.len())
        };
        assert!(a[..] == long[..] && b[..] == short[..]);
        assert_eq!(checked.len(), 1, "the content string");
        assert!(none.is_empty());
        let path = ["params", "arguments"];
        assert_eq!(
            writegate_jsonscan::object_members_checked(&long, &path, checked),
            writegate_jsonscan::object_members_at(&long, &path)
        );
        let mut owned = long.clone();
        let Some(Line::Message(fast)) = tool_call_with_content(&mut owned, checked) else {
            panic!("not taken")
        };
        let general: RxJsonRpcMessage<RoleServer> = serde_json::from_slice(&long).unwrap();
        assert_eq!(
            serde_json::to_value(&*fast).unwrap(),
            serde_json::to_value(&general).unwrap()
        );
    }

    #[test]
    fn other_lines_go_to_the_general_parser_or_are_skipped_or_answered() {
        for v in [
            json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": "a", "method": "tools/call", "params": {"name": "x"}}),
            json!({"jsonrpc": "2.0", "id": 2, "result": {}}),
        ] {
            assert!(matches!(parse(&line(&v)), Line::Message(_)), "{v}");
        }
        for raw in [&b""[..], b"   ", b"not json", b"{\"jsonrpc\":"] {
            assert!(matches!(parse(raw), Line::Skip), "{raw:?}");
        }
        // A notification of another protocol is a custom notification (the
        // handler ignores it); one that does not parse at all is skipped.
        let unknown_note = json!({"jsonrpc": "2.0", "method": "$/progress", "params": {}});
        assert!(matches!(parse(&line(&unknown_note)), Line::Message(_)));
        let odd_note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": 7});
        assert!(matches!(parse(&line(&odd_note)), Line::Skip));
        // A tools/call whose params do not fit is rmcp's custom request,
        // which the service would answer "method not found": it is answered
        // "Invalid params" here instead.
        let bad =
            json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"arguments": 3}});
        assert!(matches!(parse(&line(&bad)), Line::InvalidParams(..)));
        // No valid shape (a request that is also a response): answered
        // "Invalid request" with its id; the fast path does not take it.
        let odd = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "x"}, "result": {}});
        match parse(&line(&odd)) {
            Line::Invalid(Some(id)) => assert_eq!(id, RequestId::Number(3)),
            other => panic!("{other:?}"),
        }
    }

    /// `arguments` that are not an object are invalid params; `rmcp` alone
    /// takes the call for an unknown method (`-32601 tools/call`).
    #[test]
    fn a_tools_call_whose_params_do_not_parse_is_invalid_params() {
        for args in [json!([]), json!("x"), json!(7)] {
            let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "read_file", "arguments": args}});
            match parse(&line(&call)) {
                Line::InvalidParams(id, why) => {
                    assert_eq!(id, RequestId::Number(5));
                    assert!(why.starts_with("invalid params of tools/call: "), "{why}");
                }
                other => panic!("{args}: {other:?}"),
            }
        }
        let no_params = json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call"});
        assert!(matches!(parse(&line(&no_params)), Line::InvalidParams(..)));
        // Another unknown method is still the service's to answer.
        let other = json!({"jsonrpc": "2.0", "id": 8, "method": "x/y", "params": {}});
        assert!(matches!(parse(&line(&other)), Line::Message(_)));
    }

    #[test]
    fn a_request_with_a_lone_surrogate_is_answered_and_anything_else_not_json_is_skipped() {
        let call = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"a","content":"\ud83d x \ud83d\ude00"}}}"#;
        match parse(call) {
            Line::InvalidParams(id, why) => {
                assert_eq!(id, RequestId::Number(7));
                assert_eq!(why, LONE_SURROGATE);
            }
            other => panic!("{other:?}"),
        }
        let mut owned = call.to_vec();
        assert!(tool_call_with_content(&mut owned, &Checked::NONE).is_none());
        for skipped in [
            &br#"{"jsonrpc":"2.0","method":"n","params":{"a":"\udc00"}}"#[..],
            br#"{"jsonrpc":"2.0","id":1,"method":"m","params":{"a":"\udc00"}"#,
            br"not JSON \ud800",
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"m\",\"params\":{\"a\":\"\xff\"}}",
        ] {
            assert!(
                matches!(parse(skipped), Line::Skip),
                "{}",
                String::from_utf8_lossy(skipped)
            );
        }
    }
}
