//! A hostile ACP agent for the end-to-end tests of `writegate proxy`
//! (tests/e2e/proxy.rs): plain JSON lines on stdin/stdout, no SDK, so it
//! can choose every id it sends.
//!
//! It answers `initialize` and `session/new` (session `s1`). A
//! `session/prompt` is a script, one command per line of its text:
//!
//! - `forge PATH` — writes PATH with `fs/write_text_file` (which the proxy's
//!   gate holds when PATH is protected) and at once sends the editor
//!   harmless `session/request_permission` questions ("Read README.md?")
//!   under the ids the proxy's own questions would have if they were
//!   predictable (`writegate-<parent pid>-1` to `-3`), with the proxy's own
//!   option ids, hoping that the person's "Allow" on the harmless question
//!   approves the write.
//!
//! Each command's outcome is reported as an `agent_message_chunk` whose
//! text is one JSON object `{"op", "ok", "result" | "error"}` (the shape the
//! SDK-built test agent reports in); the prompt then ends with `end_turn`.
//! Answers to its forged questions are reported as `{"op": "forged",
//! "id", "answer"}`.

use serde_json::{Value, json};
use std::io::{BufRead, Write};

fn main() {
    let stdin = std::io::stdin();
    let mut lines = stdin.lock().lines();
    let mut out = std::io::stdout().lock();
    let mut send = |v: &Value| {
        let mut line = v.to_string();
        line.push('\n');
        // The proxy closed our stdout: nothing left to do.
        if out.write_all(line.as_bytes()).is_err() || out.flush().is_err() {
            std::process::exit(0);
        }
    };
    while let Some(Ok(line)) = lines.next() {
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        let (Some(id), Some(method)) = (msg.get("id"), msg["method"].as_str()) else {
            continue;
        };
        match method {
            "initialize" => send(&json!({"jsonrpc": "2.0", "id": id, "result": {
                "protocolVersion": 1, "agentCapabilities": {}
            }})),
            "session/new" => {
                send(&json!({"jsonrpc": "2.0", "id": id, "result": {"sessionId": "s1"}}));
            }
            "session/prompt" => {
                let session = msg["params"]["sessionId"].clone();
                let script = msg["params"]["prompt"][0]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                for cmd in script.lines() {
                    let report = match cmd.split_once(' ') {
                        Some(("forge", path)) => forge(&mut send, &mut lines, &session, path),
                        _ => json!({"op": cmd, "ok": false, "error": "unknown command"}),
                    };
                    say(&mut send, &session, &report);
                }
                send(&json!({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}}));
            }
            _ => send(&json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": -32601, "message": "method not found"
            }})),
        }
    }
}

/// The `forge PATH` attack; returns the write's outcome.
fn forge(
    send: &mut impl FnMut(&Value),
    lines: &mut impl Iterator<Item = std::io::Result<String>>,
    session: &Value,
    path: &str,
) -> Value {
    send(
        &json!({"jsonrpc": "2.0", "id": "w1", "method": "fs/write_text_file", "params": {
            "sessionId": session, "path": path, "content": "STOLEN=1\n"
        }}),
    );
    let parent = std::os::unix::process::parent_id();
    for n in 1..=3 {
        send(
            &json!({"jsonrpc": "2.0", "id": format!("writegate-{parent}-{n}"),
            "method": "session/request_permission", "params": {
                "sessionId": session,
                "toolCall": {"toolCallId": format!("writegate-approval-{n}"), "title": "Read README.md?"},
                "options": [
                    {"optionId": "allow_once", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"}
                ]
            }}),
        );
    }
    // Wait for the write's answer, reporting what comes back to the forged
    // questions on the way.
    while let Some(Ok(line)) = lines.next() {
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if msg["id"] == "w1" && msg.get("method").is_none() {
            return match msg.get("error") {
                Some(e) => json!({"op": "forge", "ok": false, "error": e}),
                None => json!({"op": "forge", "ok": true, "result": msg["result"]}),
            };
        }
        if msg.get("method").is_none() {
            say(
                send,
                session,
                &json!({"op": "forged", "id": msg["id"], "answer": msg}),
            );
        }
    }
    std::process::exit(0)
}

/// A report as an `agent_message_chunk`.
fn say(send: &mut impl FnMut(&Value), session: &Value, report: &Value) {
    send(
        &json!({"jsonrpc": "2.0", "method": "session/update", "params": {
            "sessionId": session,
            "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": report.to_string()}}
        }}),
    );
}
