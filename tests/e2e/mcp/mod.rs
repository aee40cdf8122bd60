//! `writegate mcp` through the real binary, driven by the official MCP
//! client (`rmcp`, client side) over the binary's real stdin/stdout, one
//! module per topic: the tools ([`tools`]), held writes asked through
//! elicitation ([`elicitation`]) and questions that end ([`questions`]),
//! client roots ([`roots`]), the stdio transport ([`stdio`]), the 2026
//! protocol era ([`v2026`]), Streamable HTTP ([`http`]), the relay to the
//! daemon ([`connect`]), the `undo` tool ([`undo`]), history from the
//! command line without a daemon ([`history_without_daemon`]) and
//! writegate's own files ([`own_files`]). This module holds what they
//! share: a client that answers roots and elicitation as a test says, and
//! a server started under it.

#![allow(deprecated)] // MCP roots are deprecated by the 2026 protocol; clients of today use them

use crate::common::{Audit, TIMEOUT, Tree};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ContentBlock,
    ElicitRequestParams, ElicitResult, ElicitationAction, Implementation, ListRootsResult,
    ProtocolVersion, Root,
};
use rmcp::service::{RequestContext, RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ErrorData, ServiceExt};
use serde_json::{Map, Value, json};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

mod connect;
mod elicitation;
mod history_without_daemon;
mod http;
mod own_files;
mod questions;
mod roots;
mod stdio;
mod tools;
mod undo;
mod v2026;

/// What the test person answers when asked.
#[derive(Clone, Copy, Debug)]
enum Answer {
    AllowOnce,
    AllowAlways,
    Deny,
    Decline,
    Dismiss,
    /// Never answers (the question stays open until withdrawn).
    Never,
}

/// The MCP client: roots to offer (if any), a person to ask (if any).
struct TestClient {
    info: ClientConfig,
    roots: Arc<Mutex<Vec<PathBuf>>>,
    answer: Arc<Mutex<Answer>>,
    asked: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for TestClient {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn list_roots(
        &self,
        _cx: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        let roots = self.roots.lock().unwrap().clone();
        Ok(ListRootsResult::new(
            roots
                .iter()
                .map(|p| Root::new(format!("file://{}", p.display())))
                .collect(),
        ))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _cx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = request
        else {
            return Err(ErrorData::invalid_params("only form elicitation", None));
        };
        // The form offers the three choices.
        let schema = serde_json::to_string(&requested_schema).unwrap();
        for choice in ["allow_once", "allow_always", "deny"] {
            assert!(schema.contains(choice), "{schema}");
        }
        self.asked.lock().unwrap().push(message);
        let decision = |d: &str| {
            ElicitResult::new(ElicitationAction::Accept).with_content(json!({"decision": d}))
        };
        let answer = *self.answer.lock().unwrap();
        if let Answer::Never = answer {
            std::future::pending::<()>().await;
        }
        Ok(match answer {
            Answer::AllowOnce => decision("allow_once"),
            Answer::AllowAlways => decision("allow_always"),
            Answer::Deny => decision("deny"),
            Answer::Decline => ElicitResult::new(ElicitationAction::Decline),
            Answer::Dismiss | Answer::Never => ElicitResult::new(ElicitationAction::Cancel),
        })
    }
}

/// How the client presents itself.
#[derive(Clone)]
struct Caps {
    roots: bool,
    elicitation: bool,
    version: ProtocolVersion,
}

const PLAIN: Caps = Caps {
    roots: false,
    elicitation: false,
    version: ProtocolVersion::V_2025_06_18,
};

/// A `writegate mcp` process and the client connected to it.
struct Mcp {
    rt: tokio::runtime::Runtime,
    client: Option<RunningService<RoleClient, TestClient>>,
    roots: Arc<Mutex<Vec<PathBuf>>>,
    answer: Arc<Mutex<Answer>>,
    asked: Arc<Mutex<Vec<String>>>,
    stderr: PathBuf,
}

/// `args` after `mcp --audit-log <log>`.
fn start(t: &Tree, args: &[&str], caps: &Caps, roots: &[&Path]) -> Mcp {
    start_in(t, &t.base, args, caps, roots)
}

/// [`start`], with `dir` as writegate's working directory.
fn start_in(t: &Tree, dir: &Path, args: &[&str], caps: &Caps, roots: &[&Path]) -> Mcp {
    let mut cmd = t.command();
    cmd.arg("mcp")
        .arg("--audit-log")
        .arg(&t.audit_log)
        .args(args)
        .current_dir(dir);
    start_command(t, cmd, caps, roots)
}

/// The client on `cmd`'s stdio (a `writegate mcp` command line).
fn start_command(t: &Tree, cmd: std::process::Command, caps: &Caps, roots: &[&Path]) -> Mcp {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let n = fs::read_dir(t.base.join("logs")).unwrap().count();
    let stderr = t.base.join(format!("logs/mcp-{n}.stderr"));
    let err = fs::File::create(&stderr).unwrap();
    let mut capabilities = Map::new();
    if caps.roots {
        capabilities.insert("roots".into(), json!({"listChanged": true}));
    }
    if caps.elicitation {
        capabilities.insert("elicitation".into(), json!({}));
    }
    let capabilities: ClientCapabilities =
        serde_json::from_value(Value::Object(capabilities)).unwrap();
    let mut info = ClientConfig::new(capabilities, Implementation::new("wg-e2e", "1"));
    info.protocol_version = caps.version.clone();
    let roots = Arc::new(Mutex::new(roots.iter().map(|p| p.to_path_buf()).collect()));
    let answer = Arc::new(Mutex::new(Answer::Deny));
    let asked = Arc::new(Mutex::new(Vec::new()));
    let handler = TestClient {
        info,
        roots: roots.clone(),
        answer: answer.clone(),
        asked: asked.clone(),
    };
    let client = rt.block_on(async {
        let (transport, _) = TokioChildProcess::builder(tokio::process::Command::from(cmd))
            .stderr(Stdio::from(err))
            .spawn()
            .unwrap();
        tokio::time::timeout(TIMEOUT, handler.serve(transport))
            .await
            .expect("initialize in time")
            .expect("initialize")
    });
    Mcp {
        rt,
        client: Some(client),
        roots,
        answer,
        asked,
        stderr,
    }
}

impl Mcp {
    fn client(&self) -> &RunningService<RoleClient, TestClient> {
        self.client.as_ref().unwrap()
    }

    /// Calls `tool` with `args` (an object).
    fn call(&self, tool: &str, args: Value) -> CallToolResult {
        let Value::Object(args) = args else {
            panic!("arguments are an object")
        };
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args);
        self.rt.block_on(async {
            tokio::time::timeout(TIMEOUT, self.client().call_tool(params))
                .await
                .expect("answered in time")
                .unwrap_or_else(|e| panic!("{tool}: protocol error {e}"))
        })
    }

    /// Calls `tool`; it must succeed. Returns its text.
    #[allow(clippy::needless_pass_by_value)] // call sites pass json! literals
    fn ok(&self, tool: &str, args: Value) -> (String, Value) {
        let r = self.call(tool, args.clone());
        assert_eq!(r.is_error, Some(false), "{tool} {args}: {}", text(&r));
        (
            text(&r),
            r.structured_content.clone().unwrap_or(Value::Null),
        )
    }

    /// Calls `tool`; it must fail with `kind`. Returns its text.
    #[allow(clippy::needless_pass_by_value)] // call sites pass json! literals
    fn refused(&self, tool: &str, args: Value, kind: &str) -> String {
        let r = self.call(tool, args.clone());
        assert_eq!(r.is_error, Some(true), "{tool} {args}: {}", text(&r));
        let t = text(&r);
        assert!(t.starts_with(&format!("{kind}: ")), "{tool} {args}: {t}");
        assert_eq!(error_meta(&r)["errorKind"], kind, "{t}");
        assert!(r.structured_content.is_none(), "{t}");
        t
    }

    fn set_answer(&self, a: Answer) {
        *self.answer.lock().unwrap() = a;
    }

    fn asked(&self) -> usize {
        self.asked.lock().unwrap().len()
    }

    fn stderr_text(&self) -> String {
        fs::read_to_string(&self.stderr).unwrap_or_default()
    }

    /// Closes the connection and waits for the server to exit.
    fn close(mut self) {
        let client = self.client.take().unwrap();
        self.rt.block_on(async {
            let _ = tokio::time::timeout(TIMEOUT, client.cancel()).await;
        });
    }
}

fn text(r: &CallToolResult) -> String {
    r.content
        .iter()
        .map(|c| match c {
            ContentBlock::Text(t) => t.text.clone(),
            other => panic!("not text: {other:?}"),
        })
        .collect()
}

fn error_meta(r: &CallToolResult) -> Value {
    r.meta
        .as_ref()
        .and_then(|m| m.0.get("writegate/error"))
        .cloned()
        .unwrap_or(Value::Null)
}

/// The one new audit event of a tool call, with its route.
fn one_event(audit: &mut Audit, kind: &str, tool: &str) -> Value {
    let e = audit.one(kind);
    assert_eq!(e["route"], format!("mcp {tool}"), "{e}");
    assert!(e["sessionId"].as_str().unwrap().starts_with("mcp-"), "{e}");
    e
}

/// `writegate mcp --workspace <ws> --audit-log <log>` in the tree, for the
/// tests that set up its stdio themselves.
fn mcp_command(t: &Tree) -> std::process::Command {
    let mut cmd = t.command();
    cmd.args(["mcp", "--workspace"])
        .arg(&t.ws)
        .arg("--audit-log")
        .arg(&t.audit_log);
    cmd
}

fn ws_arg(t: &Tree) -> String {
    t.ws.display().to_string()
}

/// What a `read_file` result's text block says, as the members ACP's
/// `_writegate/read_lines` answers (`lines`, `totalLines`, `hash`,
/// `encoding`, `bom`, `lineEnding`): read back from the numbered lines and
/// the line of facts after them, which is all a model is shown (the
/// result has no `structuredContent`).
pub(super) fn read_facts(text: &str) -> Value {
    let (body, trailer) = text.rsplit_once('\n').unwrap_or(("", text));
    let trailer = trailer
        .strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .unwrap_or_else(|| panic!("no line of facts: {text:?}"));
    let (rest, hash) = trailer.rsplit_once("; hash ").expect("a hash");
    let (rest, format) = rest.rsplit_once("; ").expect("a format");
    let (_, shown) = rest.split_once(": ").expect("the path and the lines shown");
    let number = |s: &str| {
        s.trim()
            .parse::<u64>()
            .unwrap_or_else(|_| panic!("{s:?} in {text:?}"))
    };
    let total = if shown == "empty file" {
        0
    } else if let Some(n) = shown.split("the file has ").nth(1) {
        number(n.trim_end_matches(" lines"))
    } else if let Some(of) = shown.split(" of ").nth(1) {
        number(of.split(';').next().unwrap_or(of))
    } else {
        number(shown.trim_end_matches(" lines"))
    };
    let (encoding, ending) = format.split_once(", ").expect("encoding, endings");
    let (encoding, bom) = match encoding.strip_suffix(" with BOM") {
        Some(e) => (e, true),
        None => (encoding, false),
    };
    let lines: Vec<Value> = if body.is_empty() {
        Vec::new()
    } else {
        body.split('\n')
            .map(|l| {
                let (n, t) = l.split_once('\t').expect("a numbered line");
                serde_json::json!({"n": number(n), "text": t})
            })
            .collect()
    };
    serde_json::json!({
        "lines": lines,
        "totalLines": total,
        "hash": hash,
        "encoding": encoding,
        "bom": bom,
        "lineEnding": ending.trim_end_matches(" line endings").to_lowercase(),
    })
}
