//! A small ACP agent built on the official ACP Rust SDK
//! (`agent-client-protocol`), for the end-to-end tests of `writegate proxy`
//! (tests/e2e/proxy.rs) and for trying the proxy by hand:
//!
//! ```text
//! cargo build -p writegate --example acp_test_agent
//! writegate proxy -- target/debug/examples/acp_test_agent
//! ```
//!
//! It speaks ACP v1 on stdin/stdout. `initialize` answers with what the
//! client offered under `_meta.testAgent.clientFs` (so a test sees what the
//! proxy forwarded) and its pid under `_meta.testAgent.pid`; `session/new`
//! (ids `sess-1`, `sess-2`, ...) and `session/load` accept any session;
//! `session/new` answers with the `_meta` it received under
//! `_meta.testAgent.sessionMeta` (so a test sees what the proxy added).
//! A `session/prompt` is a script, one command per line of its text:
//!
//! - `read PATH` — `fs/read_text_file`
//! - `write PATH JSON` — `fs/write_text_file` with the JSON string as content
//! - `external PATH JSON` — the same, marked as a tool write (`_meta` marker)
//! - `roundtrip PATH FROM TO` — read, replace FROM with TO, write it back with
//!   `_meta {"encoding": "utf-8", "bom": false}` (what qwen-code sends)
//! - `call METHOD JSON` — any request, with the JSON as its params
//! - `ask` — its own `session/request_permission` to the client
//! - `updates N SIZE` — N `session/update` text chunks of SIZE bytes each
//! - `direct PATH JSON` — writes the file itself (`std::fs::write`), not
//!   through the client; the report's error is the OS error's text and
//!   `errno`
//! - `exit CODE` — exits at once with CODE (a crash in the middle of a prompt)
//!
//! Each command's outcome is reported as an `agent_message_chunk` whose text
//! is one JSON object: `{"op", "path"?, "ok", "result" | "error"}`. The
//! prompt then ends with `end_turn`.

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, ContentBlock, ContentChunk, InitializeRequest, InitializeResponse,
    LoadSessionRequest, LoadSessionResponse, NewSessionRequest, NewSessionResponse,
    PermissionOption, PermissionOptionKind, PromptRequest, PromptResponse, ReadTextFileRequest,
    RequestPermissionRequest, SessionNotification, SessionUpdate, StopReason, TextContent,
    ToolCallUpdate, ToolCallUpdateFields, WriteTextFileRequest,
};
use agent_client_protocol::{Agent, Client, Lines, UntypedMessage};
use futures::{SinkExt, StreamExt};
use serde_json::{Map, Value, json};
use std::sync::atomic::{AtomicU64, Ordering};
use tokio_util::codec::{FramedRead, FramedWrite, LinesCodec};

static SESSIONS: AtomicU64 = AtomicU64::new(1);

#[tokio::main]
async fn main() -> agent_client_protocol::Result<()> {
    let incoming = FramedRead::new(tokio::io::stdin(), LinesCodec::new())
        .map(|line| line.map_err(std::io::Error::other));
    let outgoing = SinkExt::<String>::sink_map_err(
        FramedWrite::new(tokio::io::stdout(), LinesCodec::new()),
        std::io::Error::other,
    );
    Agent
        .v1()
        .name("writegate-acp-test-agent")
        .on_receive_request(
            async |init: InitializeRequest, responder, _cx| {
                let fs = &init.client_capabilities.fs;
                let mut meta = Map::new();
                meta.insert(
                    "testAgent".into(),
                    json!({
                        "clientFs": {
                            "readTextFile": fs.read_text_file,
                            "writeTextFile": fs.write_text_file,
                        },
                        "pid": std::process::id(),
                    }),
                );
                responder.respond(
                    InitializeResponse::new(ProtocolVersion::V1)
                        .agent_capabilities(AgentCapabilities::new().load_session(true))
                        .meta(meta),
                )
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async |req: NewSessionRequest, responder, _cx| {
                let n = SESSIONS.fetch_add(1, Ordering::Relaxed);
                let mut meta = Map::new();
                meta.insert(
                    "testAgent".into(),
                    json!({ "sessionMeta": req.meta.map(Value::Object) }),
                );
                responder.respond(NewSessionResponse::new(format!("sess-{n}")).meta(meta))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async |_req: LoadSessionRequest, responder, _cx| {
                responder.respond(LoadSessionResponse::new())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async |prompt: PromptRequest, responder, cx: ConnectionTo<Client>| {
                // Work that waits for the client's answers runs outside the
                // dispatch loop (the SDK's ordering rules).
                let task_cx = cx.clone();
                cx.spawn(async move {
                    run_script(&task_cx, &prompt).await?;
                    responder.respond(PromptResponse::new(StopReason::EndTurn))
                })
            },
            agent_client_protocol::on_receive_request!(),
        )
        .connect_to(Lines::new(outgoing, incoming))
        .await
}

/// Runs the prompt's commands in order, reporting each.
async fn run_script(
    cx: &ConnectionTo<Client>,
    prompt: &PromptRequest,
) -> agent_client_protocol::Result<()> {
    let session = prompt.session_id.clone();
    let text: String = prompt
        .prompt
        .iter()
        .filter_map(|b| match b {
            ContentBlock::Text(t) => Some(t.text.as_str()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n");
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let (op, rest) = line.split_once(' ').unwrap_or((line, ""));
        let report = match op {
            "read" => {
                let r = cx
                    .send_request(ReadTextFileRequest::new(session.clone(), rest))
                    .block_task()
                    .await;
                outcome(op, rest, r)
            }
            "write" | "external" => {
                let (path, content) = rest.split_once(' ').unwrap_or((rest, "\"\""));
                let content: String = serde_json::from_str(content).unwrap_or_default();
                let mut req = WriteTextFileRequest::new(session.clone(), path, content);
                if op == "external" {
                    let mut meta = Map::new();
                    meta.insert(
                        "qwen-code/tool-write-origin".into(),
                        json!({"version": 1, "source": "write_file"}),
                    );
                    req = req.meta(meta);
                }
                let r = cx.send_request(req).block_task().await;
                outcome(op, path, r)
            }
            "roundtrip" => roundtrip(cx, &session, rest).await,
            "call" => {
                let (method, params) = rest.split_once(' ').unwrap_or((rest, "{}"));
                let params: Value = serde_json::from_str(params).unwrap_or(Value::Null);
                let r = match UntypedMessage::new(method, params) {
                    Ok(m) => cx.send_request(m).block_task().await,
                    Err(e) => Err(e),
                };
                outcome(method, "", r)
            }
            "ask" => {
                let req = RequestPermissionRequest::new(
                    session.clone(),
                    ToolCallUpdate::new(
                        "agent-tool-1",
                        ToolCallUpdateFields::new().title("run tests"),
                    ),
                    vec![
                        PermissionOption::new("yes", "Yes", PermissionOptionKind::AllowOnce),
                        PermissionOption::new("no", "No", PermissionOptionKind::RejectOnce),
                    ],
                );
                let r = cx.send_request(req).block_task().await;
                outcome(op, "", r)
            }
            "updates" => {
                let mut it = rest.split(' ');
                let n: usize = it.next().and_then(|s| s.parse().ok()).unwrap_or(0);
                let size: usize = it.next().and_then(|s| s.parse().ok()).unwrap_or(16);
                let chunk = "u".repeat(size);
                for _ in 0..n {
                    say(cx, &session, &chunk)?;
                }
                json!({"op": op, "ok": true, "result": n})
            }
            "direct" => {
                let (path, content) = rest.split_once(' ').unwrap_or((rest, "\"\""));
                let content: String = serde_json::from_str(content).unwrap_or_default();
                match std::fs::write(path, content) {
                    Ok(()) => json!({"op": op, "path": path, "ok": true}),
                    Err(e) => json!({"op": op, "path": path, "ok": false, "error": {
                        "message": e.to_string(), "errno": e.raw_os_error(),
                    }}),
                }
            }
            "exit" => std::process::exit(rest.parse().unwrap_or(1)),
            _ => json!({"op": op, "ok": false, "error": "unknown command"}),
        };
        say(cx, &session, &report.to_string())?;
    }
    Ok(())
}

/// `roundtrip PATH FROM TO`: read, replace, write back declaring UTF-8
/// without BOM, as qwen-code does for a file whose read reported nothing.
async fn roundtrip(
    cx: &ConnectionTo<Client>,
    session: &agent_client_protocol::v1::schema::SessionId,
    rest: &str,
) -> Value {
    let mut it = rest.splitn(3, ' ');
    let (path, from, to) = (
        it.next().unwrap_or(""),
        it.next().unwrap_or(""),
        it.next().unwrap_or(""),
    );
    let read = match cx
        .send_request(ReadTextFileRequest::new(session.clone(), path))
        .block_task()
        .await
    {
        Ok(r) => r,
        Err(e) => return outcome::<Value>("roundtrip", path, Err(e)),
    };
    let mut meta = Map::new();
    meta.insert("encoding".into(), json!("utf-8"));
    meta.insert("bom".into(), json!(false));
    let content = read.content.replacen(from, to, 1);
    let r = cx
        .send_request(WriteTextFileRequest::new(session.clone(), path, content).meta(meta))
        .block_task()
        .await;
    outcome("roundtrip", path, r)
}

/// One command's report.
fn outcome<T: serde::Serialize>(
    op: &str,
    path: &str,
    r: Result<T, agent_client_protocol::Error>,
) -> Value {
    match r {
        Ok(v) => json!({"op": op, "path": path, "ok": true, "result": v}),
        Err(e) => json!({"op": op, "path": path, "ok": false, "error": {
            "code": e.code.value(), "message": e.message, "data": e.data,
        }}),
    }
}

/// A `session/update` with an agent message chunk.
fn say(
    cx: &ConnectionTo<Client>,
    session: &agent_client_protocol::v1::schema::SessionId,
    text: &str,
) -> agent_client_protocol::Result<()> {
    cx.send_notification(SessionNotification::new(
        session.clone(),
        SessionUpdate::AgentMessageChunk(ContentChunk::new(ContentBlock::Text(TextContent::new(
            text,
        )))),
    ))
}
