//! `writegate mcp` through the real binary, driven by the
//! official MCP client (`rmcp`, client side) over the binary's real
//! stdin/stdout: the three tools, every refusal as a tool error a model can
//! act on, held writes asked through elicitation (accepted, always,
//! declined, dismissed) or refused with how to allow them, client roots,
//! bad arguments, files at the size caps, concurrent calls on one file, and
//! one audit event per tool call that touched a path.

#![allow(deprecated)] // MCP roots are deprecated by the 2026 protocol; clients of today use them

use crate::common::{
    Audit, BIN, Clients, EPOLLIN, TIMEOUT, Tree, TreeAudit, epoll_registrations, nonblocking, temps,
};
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
mod history_without_daemon;
mod own_files;
mod questions;
mod undo;

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

#[test]
fn tools_list_offers_the_three_tools_with_schemas_for_a_model() {
    let t = Tree::new(BIN);
    let m = start(&t, &["--workspace", &ws_arg(&t)], &PLAIN, &[]);
    let tools =
        m.rt.block_on(m.client().list_all_tools())
            .expect("tools/list");
    let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    assert_eq!(names, ["read_file", "write_file", "edit_file"]);
    for tool in &tools {
        let d = tool.description.as_deref().unwrap();
        assert!(d.contains(&ws_arg(&t)), "names the workspace: {d}");
        assert!(tool.output_schema.is_some(), "{}", tool.name);
        assert_eq!(tool.input_schema["type"], "object");
        let required = tool.input_schema["required"].as_array().unwrap();
        assert!(required.contains(&json!("path")), "{}", tool.name);
    }
    let edit = tools.iter().find(|t| t.name == "edit_file").unwrap();
    let d = edit.description.as_deref().unwrap();
    for must in [
        "exactly once",
        "read_file",
        "expectedHash",
        "ambiguous_text_match",
        "hash_mismatch",
    ] {
        assert!(
            d.contains(must),
            "edit_file's description mentions {must}: {d}"
        );
    }
    let info = m.client().peer_info().unwrap();
    assert_eq!(info.server_info.as_ref().unwrap().name, "writegate");
    m.close();
}

#[test]
fn read_write_and_edit_keep_the_file_format_and_leave_one_audit_event_each() {
    let t = Tree::new(BIN);
    let mut audit = t.audit();
    let m = start(&t, &["--workspace", &ws_arg(&t)], &PLAIN, &[]);
    let file = t.ws.join("notes.txt");

    // write_file creates (relative paths start at the workspace root).
    let (txt, w) = m.ok(
        "write_file",
        json!({"path": "notes.txt", "content": "one\ntwo\nthree\n"}),
    );
    assert!(txt.contains("created"), "{txt}");
    assert_eq!(w["created"], true);
    assert_eq!(fs::read(&file).unwrap(), b"one\ntwo\nthree\n");
    let e = one_event(&mut audit, "fs.access", "write_file");
    assert_eq!(e["intent"], "write");

    // read_file: numbered lines, hash, format; text and structured content.
    let (txt, r) = m.ok("read_file", json!({"path": file}));
    assert!(txt.starts_with("1\tone\n2\ttwo\n3\tthree\n"), "{txt}");
    assert_eq!(r["totalLines"], 3);
    assert_eq!(r["lines"][1], json!({"n": 2, "text": "two"}));
    assert_eq!(r["encoding"], "utf-8");
    assert_eq!(r["lineEnding"], "lf");
    assert_eq!(r["bom"], false);
    let hash = r["hash"].as_str().unwrap().to_string();
    assert!(txt.contains(&hash), "{txt}");
    one_event(&mut audit, "fs.access", "read_file");
    let (txt, r) = m.ok("read_file", json!({"path": file, "line": 2, "limit": 1}));
    assert_eq!(r["lines"], json!([{"n": 2, "text": "two"}]));
    assert!(txt.contains("lines 2-2 of 3; read on with line=3"), "{txt}");
    one_event(&mut audit, "fs.access", "read_file");

    // edit_file: replace by find, with the hash just read.
    let (txt, e) = m.ok(
        "edit_file",
        json!({"path": file, "find": "two", "content": "TWO", "expectedHash": hash}),
    );
    assert!(txt.contains("line 2"), "{txt}");
    assert_eq!(fs::read(&file).unwrap(), b"one\nTWO\nthree\n");
    let new_hash = e["hash"].as_str().unwrap().to_string();
    let ev = one_event(&mut audit, "fs.access", "edit_file");
    assert_eq!(ev["intent"], "edit");
    assert_eq!(ev["mode"], "replace");
    // By line, insert, delete, append.
    m.ok(
        "edit_file",
        json!({"path": file, "line": 3, "content": "3", "expectedHash": new_hash}),
    );
    m.ok(
        "edit_file",
        json!({"path": file, "mode": "insert", "line": 1, "content": "zero"}),
    );
    m.ok(
        "edit_file",
        json!({"path": file, "mode": "delete", "line": 2}),
    );
    m.ok(
        "edit_file",
        json!({"path": file, "mode": "append", "content": "four\n"}),
    );
    assert_eq!(fs::read(&file).unwrap(), b"zero\nTWO\n3\nfour\n");
    assert_eq!(audit.new_events().len(), 4);

    // A dry run reports the diff and writes nothing.
    let before = t.snapshot();
    let (txt, e) = m.ok(
        "edit_file",
        json!({"path": file, "find": "TWO", "content": "two", "dryRun": true}),
    );
    assert!(txt.contains("-TWO\n+two"), "{txt}");
    assert_eq!(e["dryRun"], true);
    assert_eq!(t.snapshot(), before);
    assert_eq!(
        one_event(&mut audit, "fs.access", "edit_file")["dryRun"],
        true
    );

    // An existing CRLF, UTF-16LE file with a BOM keeps all three, on a whole
    // write and on an edit; the model sends "\n".
    let wide = t.ws.join("wide.txt");
    let mut bytes = vec![0xFF, 0xFE];
    for u in "a\r\nb\r\n".encode_utf16() {
        bytes.extend(u.to_le_bytes());
    }
    fs::write(&wide, &bytes).unwrap();
    let (_, r) = m.ok("read_file", json!({"path": wide}));
    assert_eq!(
        (
            r["encoding"].as_str(),
            r["bom"].as_bool(),
            r["lineEnding"].as_str()
        ),
        (Some("utf-16le"), Some(true), Some("crlf"))
    );
    m.ok("write_file", json!({"path": wide, "content": "x\ny\nz\n"}));
    m.ok(
        "edit_file",
        json!({"path": wide, "find": "y", "content": "Y"}),
    );
    let mut want = vec![0xFF, 0xFE];
    for u in "x\r\nY\r\nz\r\n".encode_utf16() {
        want.extend(u.to_le_bytes());
    }
    assert_eq!(fs::read(&wide).unwrap(), want);
    assert_eq!(audit.new_events().len(), 3);
    assert!(temps(&t.base).is_empty());
    m.close();
}

#[test]
fn every_refusal_is_a_tool_error_a_model_can_act_on_and_the_server_keeps_answering() {
    let t = Tree::new(BIN);
    let mut audit = t.audit();
    let m = start(&t, &["--workspace", &ws_arg(&t)], &PLAIN, &[]);
    let file = t.ws.join("a.py");
    fs::write(&file, "x = 1\nprint(x)\nx = 1\n").unwrap();
    let before = t.snapshot();

    // Ambiguous find: the count and the lines.
    let txt = m.refused(
        "edit_file",
        json!({"path": file, "find": "x = 1", "content": "x = 2"}),
        "ambiguous_text_match",
    );
    assert!(
        txt.contains("2 times") && txt.contains("lines 1, 3"),
        "{txt}"
    );
    let r = m.call(
        "edit_file",
        json!({"path": file, "find": "x = 1", "content": "x = 2"}),
    );
    assert_eq!(error_meta(&r)["lines"], json!([1, 3]));
    assert_eq!(audit.new_events().len(), 2);
    // Not found.
    m.refused(
        "edit_file",
        json!({"path": file, "find": "y = 1", "content": "z"}),
        "text_not_found",
    );
    one_event(&mut audit, "fs.denied", "edit_file");
    // Outside the workspace: the hint names the workspace root.
    let outside = t.out.join("o.txt");
    let txt = m.refused(
        "write_file",
        json!({"path": outside, "content": "x"}),
        "path_outside_workspace",
    );
    assert!(txt.contains(&ws_arg(&t)), "{txt}");
    one_event(&mut audit, "fs.denied", "write_file");
    let txt = m.refused(
        "read_file",
        json!({"path": "../out/o.txt"}),
        "path_outside_workspace",
    );
    assert!(txt.contains(&ws_arg(&t)), "{txt}");
    one_event(&mut audit, "fs.denied", "read_file");
    // A stale hash: the current one.
    let stale = format!("sha256:{}", "0".repeat(64));
    let txt = m.refused(
        "edit_file",
        json!({"path": file, "line": 2, "content": "pass", "expectedHash": stale}),
        "hash_mismatch",
    );
    let (_, r) = m.ok("read_file", json!({"path": file}));
    assert!(txt.contains(r["hash"].as_str().unwrap()), "{txt}");
    assert_eq!(audit.new_events().len(), 2);
    // Line out of range, line mismatch, missing file.
    let txt = m.refused(
        "edit_file",
        json!({"path": file, "line": 9, "content": "x"}),
        "line_out_of_range",
    );
    assert!(txt.contains("3 lines"), "{txt}");
    let txt = m.refused(
        "edit_file",
        json!({"path": file, "line": 2, "find": "nothing here", "content": "x"}),
        "line_mismatch",
    );
    assert!(txt.contains("print(x)"), "{txt}");
    m.refused(
        "read_file",
        json!({"path": "missing.txt"}),
        "path_not_found",
    );
    m.refused(
        "edit_file",
        json!({"path": "missing.txt", "line": 1, "content": "x"}),
        "path_not_found",
    );
    assert_eq!(audit.new_events().len(), 4);

    // Bad arguments: tool errors naming the argument; no operation, no event.
    for (tool, args, says) in [
        (
            "read_file",
            json!({"path": file, "line": "2"}),
            "line: invalid type",
        ),
        ("read_file", json!({"line": 2}), "missing field `path`"),
        ("read_file", json!({"path": 7}), "path: invalid type"),
        (
            "write_file",
            json!({"path": file}),
            "missing field `content`",
        ),
        (
            "edit_file",
            json!({"path": file, "edits": [{"oldText": "a", "newText": "b"}]}),
            "unknown field `edits`",
        ),
        (
            "edit_file",
            json!({"path": file, "mode": "replace_all", "content": "x", "find": "x"}),
            "mode: unknown variant",
        ),
        (
            "edit_file",
            json!({"path": file, "content": "x"}),
            "replace needs find, line, or both",
        ),
        (
            "edit_file",
            json!({"path": file, "mode": "insert", "content": "x"}),
            "insert needs line",
        ),
        (
            "edit_file",
            json!({"path": file, "mode": "delete"}),
            "delete needs line",
        ),
        (
            "edit_file",
            json!({"path": file, "find": "x"}),
            "needs content",
        ),
        (
            "edit_file",
            json!({"path": file, "line": 3, "endLine": 2, "content": "x"}),
            "endLine must not be before line",
        ),
        (
            "write_file",
            json!({"path": "", "content": "x"}),
            "path is empty",
        ),
    ] {
        let txt = m.refused(tool, args.clone(), "invalid_arguments");
        assert!(txt.contains(says), "{tool} {args}: {txt}");
    }
    assert!(
        audit.new_events().is_empty(),
        "bad arguments are not audited"
    );

    // An unknown tool is a protocol error; the server keeps answering.
    let params = CallToolRequestParams::new("delete_file").with_arguments(Map::new());
    let err = m.rt.block_on(m.client().call_tool(params)).unwrap_err();
    assert!(
        err.to_string()
            .contains("read_file, write_file and edit_file"),
        "{err}"
    );

    assert_eq!(
        t.snapshot(),
        before,
        "every refusal left every file byte-identical"
    );
    assert!(temps(&t.base).is_empty());
    m.ok(
        "edit_file",
        json!({"path": file, "line": 2, "content": "print(x + 1)"}),
    );
    assert_eq!(
        fs::read_to_string(&file).unwrap(),
        "x = 1\nprint(x + 1)\nx = 1\n"
    );
    m.close();
}

#[test]
fn a_held_write_asks_the_person_through_elicitation() {
    let t = Tree::new(BIN);
    let mut audit = t.audit();
    let caps = Caps {
        elicitation: true,
        version: ProtocolVersion::V_2025_11_25,
        ..PLAIN
    };
    let m = start(&t, &["--workspace", &ws_arg(&t)], &caps, &[]);
    let env = t.ws.join(".env");

    // Declined (the form's "deny"), then dismissed: nothing written.
    for (answer, kind, approval) in [
        (Answer::Deny, "approval_required", "denied"),
        (Answer::Decline, "approval_required", "denied"),
        (Answer::Dismiss, "cancelled", "cancelled"),
    ] {
        m.set_answer(answer);
        let txt = m.refused("write_file", json!({"path": env, "content": "A=1\n"}), kind);
        if kind == "approval_required" {
            assert!(txt.contains("the user declined"), "{txt}");
        }
        assert!(!env.exists());
        let e = one_event(&mut audit, "fs.denied", "write_file");
        assert_eq!(e["approval"], approval, "{answer:?}: {e}");
    }
    assert_eq!(m.asked(), 3);
    let question = m.asked.lock().unwrap()[0].clone();
    assert!(question.contains(&env.display().to_string()), "{question}");

    // Allowed once: written; the next write asks again.
    m.set_answer(Answer::AllowOnce);
    m.ok("write_file", json!({"path": env, "content": "A=1\n"}));
    assert_eq!(fs::read(&env).unwrap(), b"A=1\n");
    assert_eq!(
        one_event(&mut audit, "fs.access", "write_file")["approval"],
        "allowed_once"
    );
    m.ok(
        "edit_file",
        json!({"path": env, "mode": "append", "content": "B=2\n"}),
    );
    assert_eq!(m.asked(), 5, "asked again after allow once");
    audit.new_events();

    // Allowed for the session: later writes of the same command are not asked.
    m.set_answer(Answer::AllowAlways);
    m.ok("write_file", json!({"path": env, "content": "C=3\n"}));
    assert_eq!(
        one_event(&mut audit, "fs.access", "write_file")["approval"],
        "allowed_always"
    );
    m.set_answer(Answer::Deny);
    m.ok("write_file", json!({"path": env, "content": "D=4\n"}));
    assert_eq!(m.asked(), 6, "not asked again");
    assert_eq!(fs::read(&env).unwrap(), b"D=4\n");
    assert!(
        one_event(&mut audit, "fs.access", "write_file")
            .get("approval")
            .is_none()
    );
    m.close();
}

#[test]
fn without_elicitation_a_held_write_says_how_to_allow_it() {
    let t = Tree::new(BIN);
    let mut audit = t.audit();
    let m = start(&t, &["--workspace", &ws_arg(&t)], &PLAIN, &[]);
    fs::create_dir(t.ws.join(".git")).unwrap();
    let cfg = t.ws.join(".git/config");
    fs::write(&cfg, "[core]\n").unwrap();
    let txt = m.refused(
        "edit_file",
        json!({"path": cfg, "mode": "append", "content": "x\n"}),
        "approval_required",
    );
    let command = format!("edit_file append {}", cfg.display());
    assert!(txt.contains(&format!("pattern = '{command}'")), "{txt}");
    assert!(txt.contains("cannot ask"), "{txt}");
    assert!(!txt.contains("_writegate/approve"), "{txt}");
    assert_eq!(fs::read(&cfg).unwrap(), b"[core]\n");
    let e = one_event(&mut audit, "fs.denied", "edit_file");
    assert_eq!(e["errorKind"], "approval_required");
    assert!(e.get("approval").is_none(), "nobody was asked: {e}");
    m.close();

    // The rule the message proposes allows it.
    let config = t.base.join("config/allow.toml");
    fs::write(
        &config,
        format!("[policy]\nrules = [{{ pattern = '{command}', level = \"moderate\" }}]\n"),
    )
    .unwrap();
    let m = start(
        &t,
        &[
            "--workspace",
            &ws_arg(&t),
            "--config",
            &config.display().to_string(),
        ],
        &PLAIN,
        &[],
    );
    m.ok(
        "edit_file",
        json!({"path": cfg, "mode": "append", "content": "x\n"}),
    );
    assert_eq!(fs::read(&cfg).unwrap(), b"[core]\nx\n");
    m.close();
}

#[test]
fn client_roots_become_workspaces_as_the_config_says() {
    let t = Tree::new(BIN);
    let caps = Caps {
        roots: true,
        ..PLAIN
    };
    fs::write(t.wsb.join("b.txt"), "b\n").unwrap();

    // Default: untrusted. Readable; writes refused with how to trust them.
    let m = start(&t, &[], &caps, &[&t.wsb]);
    m.ok("read_file", json!({"path": t.wsb.join("b.txt")}));
    let txt = m.refused(
        "write_file",
        json!({"path": t.wsb.join("n.txt"), "content": "x"}),
        "untrusted_workspace",
    );
    assert!(
        txt.contains("client_roots") && txt.contains("--workspace"),
        "{txt}"
    );
    assert!(!t.wsb.join("n.txt").exists());
    m.close();

    // Trusted by the config; a nested root is logged and skipped; the
    // list changes: a new root is used, a dropped one is no longer routed to.
    let config = t.base.join("config/trusted.toml");
    fs::write(&config, "[mcp]\nclient_roots = \"trusted\"\n").unwrap();
    let nested = t.wsb.join("sub");
    fs::create_dir(&nested).unwrap();
    let m = start(
        &t,
        &["--config", &config.display().to_string()],
        &caps,
        &[&t.wsb, &nested],
    );
    m.ok(
        "write_file",
        json!({"path": t.wsb.join("n.txt"), "content": "x"}),
    );
    m.ok(
        "write_file",
        json!({"path": nested.join("in.txt"), "content": "y"}),
    );
    assert_eq!(fs::read(t.wsb.join("sub/in.txt")).unwrap(), b"y");
    assert!(
        m.stderr_text().contains("client root not registered"),
        "{}",
        m.stderr_text()
    );
    *m.roots.lock().unwrap() = vec![t.ws.clone()];
    m.rt.block_on(m.client().notify_roots_list_changed())
        .unwrap();
    // The change is applied when the notification is handled: wait for it
    // through the tools' descriptions, which name the workspaces.
    let deadline = std::time::Instant::now() + TIMEOUT;
    loop {
        let tools = m.rt.block_on(m.client().list_all_tools()).unwrap();
        if tools[0]
            .description
            .as_deref()
            .unwrap()
            .contains(&format!("The workspace is {};", t.ws.display()))
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "roots change not applied"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    m.ok("write_file", json!({"path": "new.txt", "content": "z"}));
    assert_eq!(fs::read(t.ws.join("new.txt")).unwrap(), b"z");
    let txt = m.refused(
        "write_file",
        json!({"path": t.wsb.join("n.txt"), "content": "x2"}),
        "path_outside_workspace",
    );
    assert!(txt.contains(&ws_arg(&t)), "{txt}");
    m.close();

    // "ignore": no workspace at all; a clear error, and the server answers on.
    let config = t.base.join("config/ignore.toml");
    fs::write(&config, "[mcp]\nclient_roots = \"ignore\"\n").unwrap();
    let m = start(
        &t,
        &["--config", &config.display().to_string()],
        &caps,
        &[&t.wsb],
    );
    for _ in 0..2 {
        let txt = m.refused(
            "read_file",
            json!({"path": t.wsb.join("b.txt")}),
            "no_workspace",
        );
        assert!(txt.contains("--workspace"), "{txt}");
    }
    m.close();

    // A --workspace root the client also lists keeps its trust; with the
    // default (untrusted) the other client root stays read-only.
    let m = start(&t, &["--workspace", &ws_arg(&t)], &caps, &[&t.ws, &t.wsb]);
    m.ok(
        "write_file",
        json!({"path": t.ws.join("w.txt"), "content": "w"}),
    );
    m.ok("read_file", json!({"path": t.wsb.join("b.txt")}));
    m.refused(
        "edit_file",
        json!({"path": t.wsb.join("b.txt"), "mode": "append", "content": "c"}),
        "untrusted_workspace",
    );
    m.close();
}

#[test]
fn files_at_the_size_caps() {
    let t = Tree::new(BIN);
    let mut audit = t.audit();
    let m = start(&t, &["--workspace", &ws_arg(&t)], &PLAIN, &[]);
    let cap = 5 * 1024 * 1024;
    // Exactly max_write_bytes: written; one byte more: file_too_large.
    let line = "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopq\n"; // 64 bytes
    let mut big = line.repeat(cap / line.len());
    assert_eq!(big.len(), cap);
    let file = t.ws.join("big.txt");
    m.ok("write_file", json!({"path": file, "content": big}));
    assert_eq!(fs::metadata(&file).unwrap().len(), cap as u64);
    one_event(&mut audit, "fs.access", "write_file");
    let over = format!("{big}x");
    m.refused(
        "write_file",
        json!({"path": t.ws.join("over.txt"), "content": over}),
        "file_too_large",
    );
    one_event(&mut audit, "fs.denied", "write_file");
    assert!(!t.ws.join("over.txt").exists());
    // A file of exactly max_edit_bytes: read and edited in the middle.
    let (_, r) = m.ok(
        "read_file",
        json!({"path": file, "line": 40_000, "limit": 1}),
    );
    assert_eq!(r["totalLines"], cap / line.len());
    let middle = cap / line.len() / 2;
    m.ok(
        "edit_file",
        json!({"path": file, "line": middle, "content": "MIDDLE"}),
    );
    let written = fs::read_to_string(&file).unwrap();
    big.replace_range((middle - 1) * 64..middle * 64 - 1, "MIDDLE");
    assert_eq!(written, big);
    audit.new_events();
    // A file over max_edit_bytes cannot be edited (or read whole).
    let mut f = fs::OpenOptions::new().append(true).open(&file).unwrap();
    // (the edit above made it 57 bytes shorter)
    std::io::Write::write_all(&mut f, "tail\n".repeat(20).as_bytes()).unwrap();
    drop(f);
    m.refused(
        "edit_file",
        json!({"path": file, "mode": "append", "content": "x"}),
        "file_too_large",
    );
    m.refused("read_file", json!({"path": file}), "file_too_large");
    assert_eq!(audit.new_events().len(), 2);
    assert!(temps(&t.base).is_empty());
    m.close();
}

#[test]
fn concurrent_calls_on_one_file_all_land_and_nothing_is_torn() {
    let t = Tree::new(BIN);
    let m = start(&t, &["--workspace", &ws_arg(&t)], &PLAIN, &[]);
    let file = t.ws.join("log.txt");
    fs::write(&file, "").unwrap();
    let peer = m.client().peer().clone();
    let call = |args: Value| {
        let peer = peer.clone();
        let Value::Object(args) = args else {
            unreachable!()
        };
        async move {
            peer.call_tool(CallToolRequestParams::new("edit_file").with_arguments(args))
                .await
                .unwrap()
        }
    };
    // 24 appends at once: every one lands (read-modify-write in the lock).
    let results = m.rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for i in 0..24 {
            set.spawn(call(
                json!({"path": file, "mode": "append", "content": format!("line {i}\n")}),
            ));
        }
        set.join_all().await
    });
    assert!(results.iter().all(|r| r.is_error == Some(false)));
    let all = fs::read_to_string(&file).unwrap();
    for i in 0..24 {
        assert!(all.contains(&format!("line {i}\n")), "line {i} lost: {all}");
    }
    assert_eq!(all.lines().count(), 24);

    // Whole writes of two large contents racing edits of the same file: the
    // file is always one whole version; each edit lands or is a clear error.
    let a = "a".repeat(1 << 20) + "\n";
    let b = "b".repeat(1 << 20) + "\n";
    let results = m.rt.block_on(async {
        let mut set = tokio::task::JoinSet::new();
        for i in 0..8 {
            let content = if i % 2 == 0 { &a } else { &b };
            set.spawn(call(
                json!({"path": file, "mode": "write", "content": content}),
            ));
            set.spawn(call(json!({"path": file, "find": "a\n", "content": "A\n"})));
        }
        set.join_all().await
    });
    for r in &results {
        if r.is_error == Some(true) {
            let t = text(r);
            assert!(t.starts_with("text_not_found: "), "{t}");
        }
    }
    let now = fs::read_to_string(&file).unwrap();
    let whole =
        |c: char| now.len() == (1 << 20) + 1 && now[..now.len() - 2].chars().all(|x| x == c);
    assert!(whole('a') || whole('b'), "torn: {} bytes", now.len());
    assert!(temps(&t.base).is_empty());
    assert_eq!(t.audit_events().len(), 24 + 16);
    m.close();
}

/// SPEC 7.2: the workspace writer creates missing parents. That is the
/// publisher's (`crates/fs`, `open_creating`); `writegate mcp` adds nothing
/// for it, and gets it through the shared pipeline.
#[test]
fn missing_parent_directories_are_created_inside_the_workspace() {
    let t = Tree::new(BIN);
    let m = start(&t, &["--workspace", &ws_arg(&t)], &PLAIN, &[]);
    let deep = t.ws.join("src/new/mod.rs");
    m.ok("write_file", json!({"path": deep, "content": "x\n"}));
    assert_eq!(fs::read(&deep).unwrap(), b"x\n");
    m.close();
}

/// Nothing but MCP messages on stdout (logs go to stderr), and the server
/// exits 0 when the client closes stdin. Raw lines, not the SDK (which
/// skips lines that are not JSON).
#[test]
fn stdout_carries_only_mcp_messages_and_stdin_eof_ends_the_server() {
    use std::io::{BufRead, BufReader, Write};
    let t = Tree::new(BIN);
    fs::write(t.ws.join("a.txt"), "a\n").unwrap();
    let mut cmd = mcp_command(&t);
    cmd.env("WRITEGATE_LOG", "debug")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(
            fs::File::create(t.base.join("logs/raw.stderr")).unwrap(),
        ));
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "read_file", "arguments": {"path": "a.txt"}}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "edit_file", "arguments": {"path": "a.txt", "line": "one"}}}),
    ];
    for l in &lines {
        writeln!(stdin, "{l}").unwrap();
    }
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut answers = Vec::new();
    while answers.len() < 4 {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "stdout closed early");
        let v: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
        answers.push(v);
    }
    let by_id = |id: u64| answers.iter().find(|a| a["id"] == id).unwrap();
    assert_eq!(by_id(1)["result"]["protocolVersion"], "2025-06-18");
    // The server enlarged its stdin pipe to 1 MiB (the client's end is the
    // same pipe): whole-file requests cross in a few pipe-fulls. Only root
    // may go over pipe-max-size; others keep the default then.
    let max: usize = fs::read_to_string("/proc/sys/fs/pipe-max-size")
        .map_or(0, |s| s.trim().parse().unwrap_or(0));
    let size = rustix::pipe::fcntl_getpipe_size(&stdin).unwrap();
    assert!(
        size == 1 << 20 || (max < 1 << 20 && !rustix::process::geteuid().is_root()),
        "stdin pipe of {size} bytes (pipe-max-size {max})"
    );
    assert_eq!(by_id(2)["result"]["tools"].as_array().unwrap().len(), 3);
    assert_eq!(by_id(3)["result"]["isError"], false, "{}", by_id(3));
    assert_eq!(by_id(4)["result"]["isError"], true, "{}", by_id(4));
    drop(stdin);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert_eq!(rest, "", "nothing after the answers");
    assert!(child.wait().unwrap().success());
    let log = fs::read_to_string(t.base.join("logs/raw.stderr")).unwrap();
    assert!(log.contains("MCP connection closed"), "{log}");
}

/// Whether process `pid` has a descriptor for the same socket or pipe as
/// our `fd` registered with an epoll instance for reading: the server
/// reads it through the runtime, not through a blocking thread.
fn registered_for_reading(pid: u32, fd: &impl std::os::fd::AsFd) -> bool {
    let ours = fs::read_link(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&fd.as_fd())
    ))
    .unwrap();
    epoll_registrations(pid)
        .iter()
        .any(|(_, events, target)| events & EPOLLIN != 0 && Path::new(target) == ours)
}

/// A client that spawns the server on socket pairs, one for stdin and one
/// for stdout (as Node.js clients do; the TypeScript SDK's stdio transport does),
/// is served through descriptors registered with the runtime, as one on
/// pipes, without a flag of the shared sockets changed (each call passes
/// `MSG_DONTWAIT`): a whole-file write of 3 MiB and a read arrive whole,
/// and the end of input ends the server.
#[test]
fn a_client_on_socket_pairs_is_served_without_blocking_threads() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream;
    let t = Tree::new(BIN);
    let (mut to_server, server_in) = UnixStream::pair().unwrap();
    let (from_server, server_out) = UnixStream::pair().unwrap();
    // Our copies of the server's ends share their flags with the server's.
    let (in_copy, out_copy) = (
        server_in.try_clone().unwrap(),
        server_out.try_clone().unwrap(),
    );
    let mut cmd = mcp_command(&t);
    cmd.stdin(Stdio::from(std::os::fd::OwnedFd::from(server_in)))
        .stdout(Stdio::from(std::os::fd::OwnedFd::from(server_out)))
        .stderr(Stdio::from(
            fs::File::create(t.base.join("logs/pair.stderr")).unwrap(),
        ));
    let mut child = cmd.spawn().unwrap();
    let mut out = BufReader::new(from_server);
    let content = "0123456789abcdef\r\n".repeat(3 << 16);
    let file = t.ws.join("pair.txt");
    let mut answer = || {
        let mut line = String::new();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the server closed early"
        );
        serde_json::from_str::<Value>(&line).unwrap()
    };
    let mut send = |l: Value| writeln!(to_server, "{l}").unwrap();
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "pair", "version": "1"}}}),
    );
    assert_eq!(answer()["id"], 1);
    assert!(
        registered_for_reading(child.id(), &in_copy),
        "stdin is read through the runtime"
    );
    assert!(
        !nonblocking(&in_copy) && !nonblocking(&out_copy),
        "a shared description was made non-blocking"
    );
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "write_file", "arguments": {"path": file, "content": content}}}),
    );
    let a = answer();
    assert_eq!(
        (a["id"].clone(), a["result"]["isError"].clone()),
        (json!(2), json!(false)),
        "{a}"
    );
    assert!(fs::read(&file).unwrap() == content.as_bytes());
    send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "read_file", "arguments": {"path": file, "line": 3, "limit": 1}}}),
    );
    let a = answer();
    assert_eq!(a["result"]["isError"], false, "{a}");
    assert_eq!(a["result"]["structuredContent"]["totalLines"], 3 << 16);
    to_server.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(child.wait().unwrap().success());
    assert!(!nonblocking(&in_copy) && !nonblocking(&out_copy));
}

/// stdin and stdout on one socket, stderr elsewhere: it is read through the
/// runtime, and its flags never change.
#[test]
fn one_socket_for_stdin_and_stdout_keeps_its_flags() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream;
    let t = Tree::new(BIN);
    let (mut client, server) = UnixStream::pair().unwrap();
    let copy = server.try_clone().unwrap();
    let mut cmd = mcp_command(&t);
    cmd.stdin(Stdio::from(std::os::fd::OwnedFd::from(
        server.try_clone().unwrap(),
    )))
    .stdout(Stdio::from(std::os::fd::OwnedFd::from(server)))
    .stderr(Stdio::from(
        fs::File::create(t.base.join("logs/one.stderr")).unwrap(),
    ));
    let mut child = cmd.spawn().unwrap();
    writeln!(client, "{}", json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "one", "version": "1"}}})).unwrap();
    let mut line = String::new();
    BufReader::new(client.try_clone().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("\"id\":1"), "{line}");
    assert!(
        registered_for_reading(child.id(), &copy),
        "the socket is read through the runtime"
    );
    assert!(
        !nonblocking(&copy),
        "a shared description was made non-blocking"
    );
    client.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(child.wait().unwrap().success());
    assert!(!nonblocking(&copy));
}

/// stdin, stdout and stderr on one socket (inetd, systemd `Accept=yes`):
/// nothing is made non-blocking (the flag is the shared description's, and
/// a log line would fail with EAGAIN), yet the socket is read through the
/// runtime, and answers larger than the socket's buffer, read late, all
/// arrive whole; the flags stay as they were.
#[test]
fn stdio_on_one_socket_with_stderr_stays_blocking_and_answers_whole() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream;
    let t = Tree::new(BIN);
    let (mut client, server) = UnixStream::pair().unwrap();
    let copy = server.try_clone().unwrap();
    let file = t.ws.join("big.txt");
    fs::write(&file, "a line of text for a large answer\n".repeat(60_000)).unwrap();
    let mut cmd = mcp_command(&t);
    cmd.env("WRITEGATE_LOG", "error")
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(
            server.try_clone().unwrap(),
        )))
        .stdout(Stdio::from(std::os::fd::OwnedFd::from(
            server.try_clone().unwrap(),
        )))
        .stderr(Stdio::from(std::os::fd::OwnedFd::from(server)));
    let mut child = cmd.spawn().unwrap();
    writeln!(client, "{}", json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "one", "version": "1"}}})).unwrap();
    writeln!(
        client,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .unwrap();
    for id in 2..6 {
        writeln!(client, "{}", json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "read_file", "arguments": {"path": file}}})).unwrap();
    }
    // Read nothing for a while: the answers (2 MiB and more each) fill the
    // socket's buffer and the server's writes wait.
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(
        !nonblocking(&copy),
        "a shared description was made non-blocking"
    );
    assert!(registered_for_reading(child.id(), &copy));
    client.shutdown(std::net::Shutdown::Write).unwrap();
    // Our copy of the server's end keeps the socket open: read the five
    // answers, not to the end.
    let mut ids = Vec::new();
    let mut lines = BufReader::new(client).lines();
    while ids.len() < 5 {
        let line = lines.next().expect("the server closed early").unwrap();
        let v: Value = serde_json::from_str(&line).expect("whole JSON lines only");
        if v["id"] != 1 {
            assert_eq!(v["result"]["isError"], false, "{}", v["id"]);
            assert_eq!(v["result"]["structuredContent"]["totalLines"], 60_000);
        }
        ids.push(v["id"].as_u64().unwrap());
    }
    ids.sort_unstable();
    assert_eq!(ids, [1, 2, 3, 4, 5]);
    assert!(child.wait().unwrap().success());
    assert!(!nonblocking(&copy));
}

/// SIGTERM stops the server with status 0; a write already running
/// finishes whole, one not yet begun is cancelled: the file is all new
/// (one `fs.access` event) or absent (no event, or the call's `fs.denied`).
#[test]
fn sigterm_stops_the_server_and_a_running_write_lands_whole() {
    let t = Tree::new(BIN);
    let mut d = t.spawn(mcp_command(&t), true, None);
    let mut c = d.stdio_client();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    c.send(&init);
    assert_eq!(c.recv()["id"], 1);
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let big = "x".repeat(4 << 20) + "\n";
    let file = t.ws.join("big.txt");
    c.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "write_file", "arguments": {"path": file, "content": big}}}));
    d.signal(rustix::process::Signal::TERM);
    assert!(d.wait_exit().success(), "{}", d.stderr_text());
    if let Ok(bytes) = fs::read(&file) {
        assert!(bytes == big.as_bytes(), "torn: {} bytes", bytes.len());
        assert_eq!(t.audit_events().len(), 1);
    } else {
        // Never started, or stopped before it began to commit (the signal
        // cancels calls whose operation had not begun): nothing written,
        // and at most the call's one `fs.denied` event, without errorKind.
        let events = t.audit_events();
        assert!(events.len() <= 1, "{events:?}");
        if let Some(e) = events.first() {
            assert_eq!(e["type"], "fs.denied", "{e}");
            assert_eq!(e["route"], "mcp write_file", "{e}");
            assert!(e.get("errorKind").is_none(), "{e}");
        }
    }
    assert!(temps(&t.base).is_empty());
}

/// `notifications/cancelled` for a call waiting on the person's answer
/// drops the question; the write is cancelled, nothing is written, and its
/// one audit event says so. The server answers on.
#[test]
fn a_cancelled_call_waiting_for_approval_writes_nothing() {
    let t = Tree::new(BIN);
    let mut d = t.spawn(mcp_command(&t), true, None);
    let mut c = d.stdio_client();
    c.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {"elicitation": {}}, "clientInfo": {"name": "raw", "version": "1"}}}));
    assert_eq!(c.recv()["id"], 1);
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let env = t.ws.join(".env");
    c.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "write_file", "arguments": {"path": env, "content": "A=1\n"}}}));
    let ask = c.recv();
    assert_eq!(ask["method"], "elicitation/create", "{ask}");
    assert!(
        ask["params"]["message"].as_str().unwrap().contains(".env"),
        "{ask}"
    );
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2, "reason": "user pressed Esc"}}));
    // The event is written when the operation ends; the server answers on.
    let deadline = std::time::Instant::now() + TIMEOUT;
    while t.audit_events().is_empty() {
        assert!(std::time::Instant::now() < deadline, "no audit event");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let e = &t.audit_events()[0];
    assert_eq!(e["type"], "fs.denied", "{e}");
    assert_eq!(e["approval"], "cancelled", "{e}");
    assert!(!env.exists());
    c.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}));
    let r = c.recv();
    assert_eq!(r["id"], 3, "{r}");
    assert_eq!(t.audit_events().len(), 1);
}

/// A line over `max_frame_bytes` is skipped (logged) and a message that is
/// no valid request is answered "Invalid request"; the server answers on.
#[test]
fn an_over_long_or_invalid_line_does_not_stop_the_server() {
    let t = Tree::new(BIN);
    let mut cmd = mcp_command(&t);
    cmd.env("WRITEGATE_MAX_FRAME_BYTES", "4096");
    let mut d = t.spawn(cmd, true, None);
    let mut c = d.stdio_client();
    c.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}));
    assert_eq!(c.recv()["id"], 1);
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let long = "x".repeat(8192);
    c.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "write_file", "arguments": {"path": "big.txt", "content": long}}}));
    c.send_raw(b"this is not JSON\n");
    c.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "result": {}}));
    let r = c.recv();
    assert_eq!(r["id"], 3, "{r}");
    assert_eq!(r["error"]["code"], -32600, "{r}");
    c.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "write_file", "arguments": {"path": "small.txt", "content": "ok\n"}}}));
    let r = c.recv();
    assert_eq!(r["id"], 4, "{r}");
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert!(!t.ws.join("big.txt").exists());
    assert_eq!(fs::read(t.ws.join("small.txt")).unwrap(), b"ok\n");
    assert!(
        d.stderr_text().contains("longer than max_frame_bytes"),
        "{}",
        d.stderr_text()
    );
}

/// Regression: a `tools/call` whose strings hold a lone surrogate
/// escape (`\ud83d` without its pair: a model's truncated emoji) is JSON by
/// RFC 8259, but `serde_json` refuses it as a syntax error, and the server
/// skipped it as "not JSON": the client waited for an answer forever. It is
/// answered "Invalid params" with its id now (as ACP answers it), nothing
/// is written, and a notification with one is still never answered.
#[test]
fn regression_a_call_with_a_lone_surrogate_is_answered_invalid_params() {
    let t = Tree::new(BIN);
    let mut d = t.spawn(mcp_command(&t), true, None);
    let mut c = d.stdio_client();
    c.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}));
    assert_eq!(c.recv()["id"], 1);
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"write_file\",\"arguments\":{\"path\":\"a.txt\",\"content\":\"smile \\ud83d\"}}}\n");
    let r = c.recv();
    assert_eq!(r["id"], 2, "{r}");
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("lone surrogate")),
        "{r}"
    );
    c.send_raw(
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\",\"params\":{\"a\":\"\\udc00\"}}\n",
    );
    c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":\"s\",\"method\":\"tools/call\",\"params\":{\"name\":\"edit_file\",\"arguments\":{\"path\":\"a.txt\",\"mode\":\"append\",\"content\":\"x\\udc00\"}}}\n");
    let r = c.recv();
    assert_eq!(r["id"], "s", "{r}");
    assert_eq!(r["error"]["code"], -32602, "{r}");
    c.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}));
    let r = c.recv();
    assert_eq!(r["id"], 3, "the notification got no answer: {r}");
    // `arguments` that are not an object are invalid params, not "method
    // not found" (-32601).
    c.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "write_file", "arguments": ["a.txt", "x"]}}));
    let r = c.recv();
    assert_eq!(r["id"], 4, "{r}");
    assert_eq!(r["error"]["code"], -32602, "{r}");
    assert!(!t.ws.join("a.txt").exists());
    assert!(t.audit_events().is_empty());
}

/// MCP client roots were readable whole: a client root of a home
/// directory let the model read `.ssh/id_rsa`. In a workspace that only
/// the client's roots named, a credential path is held like a write to it:
/// the person is asked (here the client cannot ask, so it is refused), and
/// ordinary files there still read freely.
#[test]
fn a_client_root_of_a_home_directory_cannot_read_ssh_keys() {
    let t = Tree::new(BIN);
    let caps = Caps {
        roots: true,
        ..PLAIN
    };
    let home = t.wsb.clone();
    fs::create_dir(home.join(".ssh")).unwrap();
    let key = home.join(".ssh/id_rsa");
    fs::write(&key, "SECRET KEY\n").unwrap();
    fs::write(home.join(".env"), "TOKEN=1\n").unwrap();
    fs::write(home.join("notes.txt"), "hello\n").unwrap();
    let mut audit = t.audit();
    let m = start(&t, &[], &caps, &[&home]);
    let (txt, _) = m.ok("read_file", json!({"path": home.join("notes.txt")}));
    assert!(txt.contains("hello"), "{txt}");
    one_event(&mut audit, "fs.access", "read_file");
    for secret in [key.clone(), home.join(".env")] {
        let txt = m.refused("read_file", json!({"path": secret}), "approval_required");
        assert!(!txt.contains("SECRET") && !txt.contains("TOKEN"), "{txt}");
        one_event(&mut audit, "fs.denied", "read_file");
    }
    m.close();
}

/// Defect pinned: `writegate mcp` exited 2 ("MCP initialization failed:
/// connection closed") when the client closed stdin before `initialize`,
/// though its `--help` says 0 when the client closed stdin. A client that
/// goes away is how a server is stopped, before the handshake as after it:
/// status 0 whenever stdin closes (at once, after half a line, after a
/// pre-initialize ping, or after `initialize`).
#[test]
fn regression_stdin_closed_before_initialize_exits_0() {
    for when in [
        "at once",
        "after half a line",
        "after a ping",
        "after initialize",
    ] {
        let t = Tree::new(BIN);
        let mut d = t.spawn(mcp_command(&t), true, None);
        let mut c = d.stdio_client();
        match when {
            "after half a line" => c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":1,"),
            "after a ping" => {
                c.send(&json!({"jsonrpc": "2.0", "id": 0, "method": "ping"}));
                assert_eq!(c.recv()["id"], 0);
            }
            "after initialize" => {
                c.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}));
                assert_eq!(c.recv()["id"], 1);
            }
            _ => {}
        }
        c.close_write();
        let status = d.wait_exit();
        assert_eq!(
            status.code(),
            Some(0),
            "stdin closed {when}: {status}\n{}",
            d.stderr_text()
        );
        assert!(
            !d.stderr_text().contains("initialization failed"),
            "stdin closed {when}:\n{}",
            d.stderr_text()
        );
    }
}

/// `writegate mcp` dropped calls still running when the client closed
/// stdin (rmcp ends its service at the end of input), so a client that
/// sends its calls and closes its end lost answers: the server now answers
/// every call it read before it stops, as `serve --stdio` does.
#[test]
fn regression_calls_sent_before_stdin_closes_are_all_answered() {
    let t = Tree::new(BIN);
    let file = t.ws.join("big.txt");
    fs::write(&file, "a line of text for a large answer\n".repeat(30_000)).unwrap();
    let mut d = t.spawn(mcp_command(&t), true, None);
    let mut c = d.stdio_client();
    c.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}));
    assert_eq!(c.recv()["id"], 1);
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    for id in 2..8 {
        c.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "read_file", "arguments": {"path": file}}}));
    }
    c.send(&json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "write_file", "arguments": {"path": t.ws.join("w.txt"), "content": "x\n"}}}));
    c.close_write();
    let mut ids: Vec<u64> = c
        .recv_until_eof()
        .iter()
        .filter_map(|v| v["id"].as_u64())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (2..9).collect::<Vec<u64>>());
    assert_eq!(fs::read(t.ws.join("w.txt")).unwrap(), b"x\n");
    assert_eq!(d.wait_exit().code(), Some(0));
}

/// Both front ends serialise core's outcomes and refusal details once: for
/// the same edit, ACP's result and MCP's `structuredContent` are equal, and
/// ACP's `error.data` and MCP's `_meta["writegate/error"]` have the same
/// members with the same values (the hint is worded for each; ACP alone
/// adds `uri` to `path_not_found`).
#[test]
fn acp_and_mcp_show_the_same_fields_for_the_same_outcome() {
    let t = Tree::new(BIN);
    let file = t.ws.join("same.py");
    fs::write(&file, "x = 1\nprint(x)\nx = 1\n").unwrap();
    let mut d = t.stdio_daemon(&["--allow-read"]);
    let mut acp = d.stdio_client();
    let m = start(&t, &["--workspace", &ws_arg(&t)], &PLAIN, &[]);
    let acp_edit = |c: &mut crate::common::Client, args: &Value| {
        let mut params = args.clone();
        params["sessionId"] = json!("s1");
        c.call("_writegate/edit_text_file", params)
    };

    // A dry run: the same report, member for member.
    let args =
        json!({"path": file, "mode": "insert", "line": 2, "content": "y = 2", "dryRun": true});
    let r = acp_edit(&mut acp, &args);
    let (_, out) = m.ok("edit_file", args);
    assert_eq!(r["result"], out, "{r}");
    assert_eq!(out["dryRun"], true, "{out}");

    // A read: the same lines and facts (MCP adds the path it read).
    let r = acp.call(
        "_writegate/read_lines",
        json!({"sessionId": "s1", "path": file}),
    );
    let (_, mut out) = m.ok("read_file", json!({"path": file}));
    out.as_object_mut().unwrap().remove("path");
    assert_eq!(r["result"], out, "{r}");
    assert_eq!(
        out["lines"][1],
        json!({"n": 2, "text": "print(x)"}),
        "{out}"
    );

    let missing = t.ws.join("missing.py");
    let refusals = [
        (
            json!({"path": file, "mode": "replace", "find": "x = 1", "content": "x = 2"}),
            "ambiguous_text_match",
        ),
        (
            json!({"path": file, "mode": "replace", "line": 9, "content": "z"}),
            "line_out_of_range",
        ),
        (
            json!({"path": file, "mode": "replace", "find": "y", "content": "z", "expectedHash": format!("sha256:{}", "0".repeat(64))}),
            "hash_mismatch",
        ),
        (
            json!({"path": missing, "mode": "replace", "find": "a", "content": "b"}),
            "path_not_found",
        ),
    ];
    for (args, kind) in refusals {
        let r = acp_edit(&mut acp, &args);
        let mut data = r["error"]["data"].clone();
        assert_eq!(data["errorKind"], kind, "{r}");
        let meta = error_meta(&m.call("edit_file", args));
        if kind == "path_not_found" {
            assert_eq!(data["uri"], data["path"], "{r}");
            data.as_object_mut().unwrap().remove("uri");
        }
        let keys = |v: &Value| {
            let mut k: Vec<String> = v.as_object().unwrap().keys().cloned().collect();
            k.sort();
            k
        };
        assert_eq!(keys(&data), keys(&meta), "{kind}: ACP {data} MCP {meta}");
        for k in keys(&data).iter().filter(|k| *k != "hint") {
            assert_eq!(data[k], meta[k], "{kind}.{k}: ACP {data} MCP {meta}");
        }
    }
    assert_eq!(
        fs::read(&file).unwrap(),
        b"x = 1\nprint(x)\nx = 1\n",
        "nothing written"
    );
    m.close();
    drop(acp);
    d.wait_exit();
}

/// `--client-roots trusted` (what `writegate setup` writes): the session's
/// roots are writable workspaces with no `--workspace` and no config.
#[test]
fn client_roots_flag_trusts_the_sessions_roots() {
    let t = Tree::new(BIN);
    let caps = Caps {
        roots: true,
        ..PLAIN
    };
    let m = start(&t, &["--client-roots", "trusted"], &caps, &[&t.wsb]);
    m.ok(
        "write_file",
        json!({"path": t.wsb.join("n.txt"), "content": "x\n"}),
    );
    assert_eq!(fs::read(t.wsb.join("n.txt")).unwrap(), b"x\n");
    // Outside the roots is still refused.
    m.refused(
        "write_file",
        json!({"path": t.ws.join("o.txt"), "content": "x"}),
        "path_outside_workspace",
    );
    assert!(!t.ws.join("o.txt").exists());
    m.close();
}

#[test]
fn the_client_roots_come_before_the_directory_writegate_was_started_in() {
    let t = Tree::new(BIN);
    let caps = Caps {
        roots: true,
        elicitation: false,
        version: ProtocolVersion::V_2025_06_18,
    };
    let args = ["--client-roots", "trusted", "--cwd-workspace"];
    // The client shares a root: the started-in directory is no workspace.
    let m = start_in(&t, &t.ws, &args, &caps, &[&t.wsb]);
    m.ok(
        "write_file",
        json!({"path": t.wsb.join("r.txt"), "content": "r"}),
    );
    m.refused(
        "write_file",
        json!({"path": t.ws.join("c.txt"), "content": "c"}),
        "path_outside_workspace",
    );
    m.close();
    // It shares none: the started-in directory is the workspace.
    let m = start_in(&t, &t.ws, &args, &caps, &[]);
    m.ok("write_file", json!({"path": "c.txt", "content": "c"}));
    assert_eq!(fs::read(t.ws.join("c.txt")).unwrap(), b"c");
    m.close();
}
