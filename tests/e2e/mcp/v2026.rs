//! `writegate mcp` in the 2026-07-28 era of MCP, through the real binary:
//! raw lines of the new wire (`server/discover`, a call without
//! `initialize`, `resultType`, the `input_required` round trip of a held
//! write, tampered and replayed `requestState`), and the official client
//! (`rmcp`) in both eras: `server/discover` with per-request `_meta`, and
//! `initialize` on 2025-11-25, which keeps elicitation requests.

use crate::common::{Audit, BIN, Client, Clients, Daemon, TIMEOUT, Tree, TreeAudit};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult,
    ElicitationAction, Implementation, ProtocolVersion,
};
use rmcp::service::{RequestContext, RoleClient};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ClientLifecycleMode, ClientServiceExt, ErrorData};
use serde_json::{Value, json};
use std::fs;
use std::path::Path;
use std::sync::{Arc, Mutex};

const V2026: &str = "2026-07-28";

/// `writegate mcp --workspace <ws>` on pipes, with a raw line client.
fn raw(t: &Tree) -> (Daemon, Client) {
    let mut cmd = t.command();
    cmd.args(["mcp", "--workspace"])
        .arg(&t.ws)
        .arg("--audit-log")
        .arg(&t.audit_log);
    let mut d = t.spawn(cmd, true, None);
    let c = d.stdio_client();
    (d, c)
}

/// The `_meta` of a 2026-07-28 request; `elicitation`: the client can show
/// forms.
fn meta(elicitation: bool) -> Value {
    let caps = if elicitation {
        json!({"elicitation": {"form": {}}})
    } else {
        json!({})
    };
    json!({
        "io.modelcontextprotocol/protocolVersion": V2026,
        "io.modelcontextprotocol/clientInfo": {"name": "raw-e2e", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": caps,
    })
}

/// A `tools/call` of the new era.
fn call(c: &mut Client, id: i64, tool: &str, args: Value, elicitation: bool) -> Value {
    call_with(c, id, tool, args, elicitation, &json!({}))
}

/// A `tools/call` of the new era with `extra` params (`inputResponses`,
/// `requestState`).
fn call_with(
    c: &mut Client,
    id: i64,
    tool: &str,
    args: Value,
    elicitation: bool,
    extra: &Value,
) -> Value {
    let mut params = json!({"name": tool, "arguments": args, "_meta": meta(elicitation)});
    drop(args);
    for (k, v) in extra.as_object().unwrap() {
        params[k] = v.clone();
    }
    let r = c.call_id(id, "tools/call", params);
    assert!(r.get("error").is_none(), "{r}");
    r["result"].clone()
}

fn accept(decision: &str) -> Value {
    json!({"approval": {"action": "accept", "content": {"decision": decision}}})
}

/// The one new audit event, a `kind` of `tool`.
fn one_event(audit: &mut Audit, kind: &str, tool: &str) -> Value {
    let e = audit.one(kind);
    assert_eq!(e["route"], format!("mcp {tool}"), "{e}");
    e
}

#[test]
fn discover_and_a_call_without_initialize() {
    let t = Tree::new(BIN);
    let mut audit = t.audit();
    let (mut d, mut c) = raw(&t);
    let r = c.call_id(1, "server/discover", json!({"_meta": meta(false)}));
    let res = &r["result"];
    let versions: Vec<_> = res["supportedVersions"]
        .as_array()
        .unwrap_or_else(|| panic!("{r}"))
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    assert!(versions.contains(&V2026.to_string()), "{r}");
    assert!(versions.contains(&"2025-11-25".to_string()), "{r}");
    assert_eq!(
        res["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "writegate",
        "{r}"
    );
    assert!(res["capabilities"]["tools"].is_object(), "{r}");

    // No initialize: the first call carries its own context.
    let list = c.call_id(2, "tools/list", json!({"_meta": meta(false)}));
    let names: Vec<_> = list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{list}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(names, ["read_file", "write_file", "edit_file"]);
    assert_eq!(list["result"]["resultType"], "complete", "{list}");

    let f = t.ws.join("new.txt");
    let r = call(
        &mut c,
        3,
        "write_file",
        json!({"path": f, "content": "one\n"}),
        false,
    );
    assert_eq!(r["resultType"], "complete", "{r}");
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(r["structuredContent"]["created"], true, "{r}");
    assert_eq!(fs::read(&f).unwrap(), b"one\n");
    one_event(&mut audit, "fs.access", "write_file");

    // A refusal is a complete result too, with isError.
    let r = call(
        &mut c,
        4,
        "write_file",
        json!({"path": "/etc/x", "content": "x"}),
        false,
    );
    assert_eq!(r["resultType"], "complete", "{r}");
    assert_eq!(r["isError"], true, "{r}");

    // A request of the new era without its _meta is invalid params.
    let r = c.call_id(
        5,
        "tools/call",
        json!({"name": "read_file", "arguments": {"path": f}, "_meta": {}}),
    );
    assert_eq!(r["error"]["code"], -32602, "{r}");
    c.close_write();
    assert!(d.wait_exit().success());
}

#[test]
fn a_held_write_is_asked_with_input_required_and_retried_with_the_answer() {
    let t = Tree::new(BIN);
    let mut audit = t.audit();
    let (mut d, mut c) = raw(&t);
    let env = t.ws.join(".env");
    let args = json!({"path": env, "content": "A=1\n"});

    let r = call(&mut c, 1, "write_file", args.clone(), true);
    assert_eq!(r["resultType"], "input_required", "{r}");
    let form = &r["inputRequests"]["approval"];
    assert_eq!(form["method"], "elicitation/create", "{r}");
    assert_eq!(form["params"]["mode"], "form", "{r}");
    let message = form["params"]["message"].as_str().unwrap();
    assert!(message.contains(&env.display().to_string()), "{message}");
    let schema = form["params"]["requestedSchema"].to_string();
    for choice in ["allow_once", "allow_always", "deny"] {
        assert!(schema.contains(choice), "{schema}");
    }
    let state = r["requestState"].as_str().unwrap().to_string();
    assert!(!env.exists());
    // The held attempt is audited as held.
    let e = one_event(&mut audit, "fs.denied", "write_file");
    assert_eq!(e["errorKind"], "approval_required", "{e}");

    // Tampered: approves nothing, and asks again.
    let mut tampered = state.clone();
    tampered.replace_range(0..1, if state.starts_with('0') { "1" } else { "0" });
    let extra = json!({"inputResponses": accept("allow_once"), "requestState": tampered});
    let r = call_with(&mut c, 2, "write_file", args.clone(), true, &extra);
    assert_eq!(r["resultType"], "input_required", "{r}");
    assert!(!env.exists());
    one_event(&mut audit, "fs.denied", "write_file");
    let state2 = r["requestState"].as_str().unwrap().to_string();

    // Declined, then dismissed: nothing written, one event each.
    for (id, response, approval, kind) in [
        (
            3,
            json!({"approval": {"action": "decline"}}),
            "denied",
            "approval_required",
        ),
        (
            4,
            json!({"approval": {"action": "cancel"}}),
            "cancelled",
            "cancelled",
        ),
    ] {
        let r = call(&mut c, id * 10, "write_file", args.clone(), true);
        let s = r["requestState"].as_str().unwrap().to_string();
        audit.new_events();
        let extra = json!({"inputResponses": response, "requestState": s});
        let r = call_with(&mut c, id, "write_file", args.clone(), true, &extra);
        assert_eq!(r["isError"], true, "{r}");
        assert_eq!(r["_meta"]["writegate/error"]["errorKind"], kind, "{r}");
        assert!(!env.exists());
        let e = one_event(&mut audit, "fs.denied", "write_file");
        assert_eq!(e["approval"], approval, "{e}");
    }

    // Allowed once, with the state issued: written, audited once.
    let extra = json!({"inputResponses": accept("allow_once"), "requestState": state2});
    let r = call_with(&mut c, 5, "write_file", args.clone(), true, &extra);
    assert_eq!(r["resultType"], "complete", "{r}");
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(fs::read(&env).unwrap(), b"A=1\n");
    let e = one_event(&mut audit, "fs.access", "write_file");
    assert_eq!(e["approval"], "allowed_once", "{e}");

    // Replayed: the state is used up; a new content is not written.
    let extra = json!({"inputResponses": accept("allow_once"), "requestState": state2});
    let r = call_with(
        &mut c,
        6,
        "write_file",
        json!({"path": env, "content": "B=2\n"}),
        true,
        &extra,
    );
    assert_eq!(r["resultType"], "input_required", "{r}");
    assert_eq!(fs::read(&env).unwrap(), b"A=1\n");
    one_event(&mut audit, "fs.denied", "write_file");

    // A state issued for the write does not approve an edit.
    let r = call(&mut c, 7, "write_file", args.clone(), true);
    let s = r["requestState"].as_str().unwrap().to_string();
    audit.new_events();
    let extra = json!({"inputResponses": accept("allow_once"), "requestState": s});
    let r = call_with(
        &mut c,
        8,
        "edit_file",
        json!({"path": env, "mode": "append", "content": "C=3\n"}),
        true,
        &extra,
    );
    assert_eq!(r["resultType"], "input_required", "{r}");
    assert_eq!(fs::read(&env).unwrap(), b"A=1\n");

    // Without elicitation in the request's capabilities: the refusal says
    // how a person allows it, as in the 2025 era.
    let r = call(&mut c, 9, "write_file", args, false);
    assert_eq!(r["isError"], true, "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("[policy] rules"), "{text}");
    c.close_write();
    assert!(d.wait_exit().success());
}

/// A valid `requestState` sent back with a call on another path was
/// answered "the question to the user got no answer", although nobody had
/// been asked about that path: the call runs as a first call, held and
/// asked about (`input_required`, naming its own path), its attempt
/// audited with no `approval`; the answer to that question writes it.
#[test]
fn regression_a_request_state_sent_back_with_another_path_asks_about_that_path() {
    let t = Tree::new(BIN);
    let mut audit = t.audit();
    let (mut d, mut c) = raw(&t);
    let env = t.ws.join(".env");
    let other = t.ws.join(".env.local");
    let r = call(
        &mut c,
        1,
        "write_file",
        json!({"path": env, "content": "A=1\n"}),
        true,
    );
    assert_eq!(r["resultType"], "input_required", "{r}");
    let state = r["requestState"].as_str().unwrap().to_string();
    audit.new_events();

    // The person's "allow once" about .env, sent back with .env.local.
    let other_args = json!({"path": other, "content": "B=2\n"});
    let extra = json!({"inputResponses": accept("allow_once"), "requestState": state});
    let r = call_with(&mut c, 2, "write_file", other_args.clone(), true, &extra);
    assert_eq!(r["resultType"], "input_required", "{r}");
    let message = r["inputRequests"]["approval"]["params"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("{r}"));
    assert!(
        message.contains(&other.display().to_string()),
        "asks about the path of this call: {message}"
    );
    assert!(!r.to_string().contains("got no answer"), "{r}");
    let fresh = r["requestState"].as_str().unwrap().to_string();
    assert_ne!(fresh, state);
    assert!(!env.exists() && !other.exists());
    let e = one_event(&mut audit, "fs.denied", "write_file");
    assert_eq!(e["errorKind"], "approval_required", "{e}");
    assert!(e.get("approval").is_none(), "nobody was asked: {e}");

    // The answer to the question about .env.local writes it.
    let extra = json!({"inputResponses": accept("allow_once"), "requestState": fresh});
    let r = call_with(&mut c, 3, "write_file", other_args, true, &extra);
    assert_eq!(r["resultType"], "complete", "{r}");
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(fs::read(&other).unwrap(), b"B=2\n");
    let e = one_event(&mut audit, "fs.access", "write_file");
    assert_eq!(e["approval"], "allowed_once", "{e}");

    // The state about .env was used by the call on .env.local: it
    // approves nothing now.
    let extra = json!({"inputResponses": accept("allow_once"), "requestState": state});
    let r = call_with(
        &mut c,
        4,
        "write_file",
        json!({"path": env, "content": "A=1\n"}),
        true,
        &extra,
    );
    assert_eq!(r["resultType"], "input_required", "{r}");
    assert!(!env.exists());
    c.close_write();
    assert!(d.wait_exit().success());
}

/// The person the rmcp test client asks.
struct Person {
    info: ClientConfig,
    decision: &'static str,
    asked: Arc<Mutex<Vec<String>>>,
}

impl ClientHandler for Person {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _cx: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let ElicitRequestParams::FormElicitationParams { message, .. } = request else {
            return Err(ErrorData::invalid_params("only form elicitation", None));
        };
        self.asked.lock().unwrap().push(message);
        Ok(ElicitResult::new(ElicitationAction::Accept)
            .with_content(json!({"decision": self.decision})))
    }
}

/// Writes a held file with the official client in `lifecycle`, the person
/// allowing it once; returns the questions asked.
fn rmcp_held_write(t: &Tree, lifecycle: ClientLifecycleMode, env: &Path) -> Vec<String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let mut cmd = t.command();
    cmd.args(["mcp", "--workspace"])
        .arg(&t.ws)
        .arg("--audit-log")
        .arg(&t.audit_log)
        .stderr(std::process::Stdio::null());
    let caps: ClientCapabilities =
        serde_json::from_value(json!({"elicitation": {"form": {}}})).unwrap();
    let mut info = ClientConfig::new(caps, Implementation::new("wg-e2e-2026", "1"));
    info.protocol_version = ProtocolVersion::V_2025_11_25;
    let asked = Arc::new(Mutex::new(Vec::new()));
    let person = Person {
        info,
        decision: "allow_once",
        asked: asked.clone(),
    };
    rt.block_on(async {
        let transport = TokioChildProcess::new(tokio::process::Command::from(cmd)).unwrap();
        let client =
            tokio::time::timeout(TIMEOUT, person.serve_with_lifecycle(transport, lifecycle))
                .await
                .expect("started in time")
                .expect("started");
        let args = json!({"path": env, "content": "K=v\n"});
        let params = CallToolRequestParams::new("write_file")
            .with_arguments(args.as_object().unwrap().clone());
        let r = tokio::time::timeout(TIMEOUT, client.call_tool(params))
            .await
            .expect("answered in time")
            .expect("a result");
        assert_eq!(r.is_error, Some(false), "{r:?}");
        let _ = client.cancel().await;
    });
    asked.lock().unwrap().clone()
}

#[test]
fn the_official_client_writes_a_held_file_in_either_era() {
    let t = Tree::new(BIN);
    let mut audit = t.audit();
    // 2026-07-28: server/discover, then input_required and a retry.
    let env = t.ws.join(".env");
    let asked = rmcp_held_write(
        &t,
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
        &env,
    );
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert!(asked[0].contains(&env.display().to_string()), "{asked:?}");
    assert_eq!(fs::read(&env).unwrap(), b"K=v\n");
    let events = audit.new_events();
    assert_eq!(
        events.len(),
        2,
        "the held attempt and the write: {events:?}"
    );
    assert_eq!(events[0]["errorKind"], "approval_required");
    assert_eq!(events[1]["approval"], "allowed_once");

    // 2025-11-25: initialize, and an elicitation request while the call waits.
    let env = t.ws.join(".env.local");
    let asked = rmcp_held_write(&t, ClientLifecycleMode::Initialize, &env);
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(fs::read(&env).unwrap(), b"K=v\n");
    let events = audit.new_events();
    assert_eq!(events.len(), 1, "one operation: {events:?}");
    assert_eq!(events[0]["approval"], "allowed_once");
}

/// `writegate mcp --client-roots trusted --cwd-workspace`, as `writegate
/// setup` starts it for a command-line agent, started in `dir`.
fn raw_in(t: &Tree, dir: &Path) -> (Daemon, Client) {
    let mut cmd = t.command();
    cmd.args(["mcp", "--client-roots", "trusted", "--cwd-workspace"])
        .arg("--audit-log")
        .arg(&t.audit_log)
        .current_dir(dir);
    let mut d = t.spawn(cmd, true, None);
    let c = d.stdio_client();
    (d, c)
}

#[test]
fn regression_a_client_of_2026_without_roots_had_no_workspace() {
    let t = Tree::new(BIN);
    let mut audit = t.audit();
    let (mut d, mut c) = raw_in(&t, &t.ws);
    let r = c.call_id(1, "server/discover", json!({"_meta": meta(false)}));
    assert!(r["result"]["supportedVersions"].is_array(), "{r}");
    // A relative path starts in the directory the agent started writegate in.
    let r = call(
        &mut c,
        2,
        "write_file",
        json!({"path": "made.txt", "content": "one\r\ntwo\r\n"}),
        false,
    );
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(fs::read(t.ws.join("made.txt")).unwrap(), b"one\r\ntwo\r\n");
    one_event(&mut audit, "fs.access", "write_file");
    let r = call(
        &mut c,
        3,
        "edit_file",
        json!({"path": t.ws.join("made.txt"), "mode": "append", "content": "three\n"}),
        false,
    );
    assert_eq!(r["isError"], false, "{r}");
    assert_eq!(
        fs::read(t.ws.join("made.txt")).unwrap(),
        b"one\r\ntwo\r\nthree\r\n"
    );
    one_event(&mut audit, "fs.access", "edit_file");
    // Outside it, the usual refusal, naming the workspace.
    let r = call(
        &mut c,
        4,
        "write_file",
        json!({"path": t.wsb.join("x.txt"), "content": "x"}),
        false,
    );
    assert_eq!(r["isError"], true, "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(text.starts_with("path_outside_workspace: "), "{text}");
    assert!(!t.wsb.join("x.txt").exists());
    one_event(&mut audit, "fs.denied", "write_file");
    // A held write is still held.
    let r = call(
        &mut c,
        5,
        "write_file",
        json!({"path": ".env", "content": "K=v\n"}),
        false,
    );
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(
        r["_meta"]["writegate/error"]["errorKind"], "approval_required",
        "{r}"
    );
    assert!(!t.ws.join(".env").exists());
    one_event(&mut audit, "fs.denied", "write_file");
    c.close_write();
    assert!(d.wait_exit().success());
}

#[test]
fn the_started_in_directory_is_no_workspace_at_home_or_the_root() {
    let t = Tree::new(BIN);
    let home = t.base.join("home");
    fs::create_dir_all(&home).unwrap();
    for (dir, words) in [
        (home.clone(), "the home directory"),
        (t.base.clone(), "above the home directory"),
        (Path::new("/").to_path_buf(), "the root of the file system"),
    ] {
        let mut audit = t.audit();
        let (mut d, mut c) = raw_in(&t, &dir);
        let r = call(
            &mut c,
            1,
            "write_file",
            json!({"path": "notes.txt", "content": "x"}),
            false,
        );
        assert_eq!(r["isError"], true, "{r}");
        assert_eq!(
            r["_meta"]["writegate/error"]["errorKind"], "no_workspace",
            "{r}"
        );
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(text.starts_with("no_workspace: "), "{text}");
        assert!(text.contains(words), "{}: {text}", dir.display());
        assert!(
            text.contains("start the agent in a project directory"),
            "{text}"
        );
        assert!(!dir.join("notes.txt").exists());
        assert!(audit.new_events().is_empty(), "no operation ran");
        c.close_write();
        assert!(d.wait_exit().success());
    }
}
