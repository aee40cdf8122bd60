//! `writegate serve --mcp-http`: MCP over Streamable HTTP through the real
//! daemon. The official client (`rmcp`'s Streamable HTTP client) in both
//! eras writes, reads and edits with one audit event each; raw HTTP
//! requests show the refusals (no token or a wrong one: 401; a foreign
//! `Host` or `Origin`: 403) and a non-loopback address stops the start.

use super::{read_facts, text};
use crate::common::{Audit, BIN, Daemon, TIMEOUT, Tree, TreeAudit};
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation, ProtocolVersion,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientLifecycleMode, ClientServiceExt};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::fs;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;

/// A daemon serving MCP over HTTP on a free loopback port, its port and
/// its token.
struct Http {
    _daemon: Daemon,
    port: u16,
    token: String,
}

/// `writegate serve --socket <sock> --mcp-http 127.0.0.1:0`; the port is
/// the one the start-up log names.
fn start(t: &Tree) -> Http {
    let daemon = t.socket_daemon(&["--mcp-http", "127.0.0.1:0"]);
    let log = daemon.stderr_text();
    let port = log
        .split("url=http://127.0.0.1:")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no MCP HTTP url in the log: {log}"));
    let token_file = t.base.join("run/writegate/mcp-token");
    let token = fs::read_to_string(&token_file).unwrap();
    Http {
        _daemon: daemon,
        port,
        token,
    }
}

/// The one new audit event of a tool call over HTTP.
fn one_event(audit: &mut Audit, tool: &str) -> Value {
    let e = audit.one("fs.access");
    assert_eq!(e["route"], format!("mcp {tool}"), "{e}");
    assert!(
        e["sessionId"].as_str().unwrap().starts_with("mcp-http-"),
        "{e}"
    );
    e
}

/// Writes, reads and edits a file with the official client over HTTP in
/// `lifecycle`.
fn write_read_edit(h: &Http, t: &Tree, lifecycle: ClientLifecycleMode, name: &str) {
    let mut audit = t.audit();
    audit.new_events();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let file = t.ws.join(name);
    rt.block_on(async {
        let config = StreamableHttpClientTransportConfig::with_uri(format!(
            "http://127.0.0.1:{}/mcp",
            h.port
        ))
        .auth_header(h.token.clone());
        let transport = StreamableHttpClientTransport::from_config(config);
        let mut info = ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("wg-e2e-http", "1"),
        );
        info.protocol_version = ProtocolVersion::V_2025_11_25;
        let client = tokio::time::timeout(TIMEOUT, info.serve_with_lifecycle(transport, lifecycle))
            .await
            .expect("started in time")
            .expect("started");
        let call = |tool: &'static str, args: Value| {
            let params =
                CallToolRequestParams::new(tool).with_arguments(args.as_object().unwrap().clone());
            let client = &client;
            async move {
                let r = tokio::time::timeout(TIMEOUT, client.call_tool(params))
                    .await
                    .expect("answered in time")
                    .expect("a result");
                assert_eq!(r.is_error, Some(false), "{tool}: {r:?}");
                r
            }
        };
        let listed = client.list_all_tools().await.unwrap();
        let names: Vec<_> = listed.iter().map(|t| t.name.to_string()).collect();
        assert!(names.contains(&"read_file".to_string()), "{names:?}");

        call("write_file", json!({"path": name, "content": "one\ntwo\n"})).await;
        assert_eq!(fs::read(&file).unwrap(), b"one\ntwo\n");
        one_event(&mut audit, "write_file");

        // The read comes back as the file: never the placeholder of a
        // prebuilt answer, never an empty success.
        let r = call("read_file", json!({"path": file})).await;
        let txt = text(&r);
        assert!(txt.starts_with("1\tone\n2\ttwo\n"), "{txt}");
        assert!(r.structured_content.is_none(), "the file once, as text");
        let s = read_facts(&txt);
        assert_eq!(s["totalLines"], 2, "{s}");
        assert_eq!(s["lines"][1], json!({"n": 2, "text": "two"}));
        let hash = s["hash"].as_str().unwrap().to_string();
        one_event(&mut audit, "read_file");

        call(
            "edit_file",
            json!({"path": file, "find": "two", "content": "TWO", "expectedHash": hash}),
        )
        .await;
        assert_eq!(fs::read(&file).unwrap(), b"one\nTWO\n");
        let e = one_event(&mut audit, "edit_file");
        assert_eq!(e["intent"], "edit");
        let _ = client.cancel().await;
    });
}

#[test]
fn the_official_client_writes_reads_and_edits_over_http_in_either_era() {
    let t = Tree::new(BIN);
    let h = start(&t);
    let mode = fs::metadata(t.base.join("run/writegate/mcp-token"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    assert!(
        h.token.len() == 64 && h.token.chars().all(|c| c.is_ascii_hexdigit()),
        "{}",
        h.token
    );
    write_read_edit(&h, &t, ClientLifecycleMode::Initialize, "a.txt");
    write_read_edit(
        &h,
        &t,
        ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        },
        "b.txt",
    );
}

/// One HTTP/1.1 request over a plain TCP connection; the status and body.
fn raw(port: u16, headers: &[(&str, String)]) -> (u16, String) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string();
    let mut req = format!(
        "POST /mcp HTTP/1.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        let _ = write!(req, "Host: 127.0.0.1:{port}\r\n");
    }
    for (k, v) in headers {
        let _ = write!(req, "{k}: {v}\r\n");
    }
    req.push_str("\r\n");
    req.push_str(&body);
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    // An SSE answer stays open: what came within the timeout is enough.
    let mut buf = [0u8; 4096];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        if out.windows(4).any(|w| w == b"\r\n\r\n") && !out.starts_with(b"HTTP/1.1 200") {
            continue;
        }
        if out.starts_with(b"HTTP/1.1 200") && out.windows(8).any(|w| w == b"\"result\"") {
            break;
        }
    }
    let text = String::from_utf8_lossy(&out).to_string();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status: {text}"));
    (status, text)
}

#[test]
fn a_request_without_the_token_or_with_a_wrong_one_is_401() {
    let t = Tree::new(BIN);
    let h = start(&t);
    let (status, text) = raw(h.port, &[]);
    assert_eq!(status, 401, "{text}");
    assert!(text.contains("Authorization: Bearer"), "{text}");
    assert!(text.contains("mcp-token"), "{text}");
    let wrong = format!("Bearer {}", "0".repeat(64));
    assert_eq!(raw(h.port, &[("Authorization", wrong)]).0, 401);
    let short = format!("Bearer {}", &h.token[..63]);
    assert_eq!(raw(h.port, &[("Authorization", short)]).0, 401);
    let basic = format!("Basic {}", h.token);
    assert_eq!(raw(h.port, &[("Authorization", basic)]).0, 401);
    let (status, text) = raw(h.port, &[("Authorization", format!("Bearer {}", h.token))]);
    assert_eq!(status, 200, "{text}");
}

/// DNS rebinding: a page whose name resolves to 127.0.0.1 sends its own
/// name as `Host` and its origin as `Origin`; both are refused, even with
/// the token.
#[test]
fn a_foreign_host_or_origin_is_refused_even_with_the_token() {
    let t = Tree::new(BIN);
    let h = start(&t);
    let auth = ("Authorization", format!("Bearer {}", h.token));
    let port = h.port;
    for (host, origin, want) in [
        (format!("evil.example:{port}"), None, 403),
        ("evil.example".to_string(), None, 403),
        (format!("127.0.0.1:{}", port.wrapping_add(1)), None, 403),
        (
            format!("127.0.0.1:{port}"),
            Some("http://evil.example".to_string()),
            403,
        ),
        (
            format!("127.0.0.1:{port}"),
            Some(format!("http://localhost:{}", port.wrapping_add(1))),
            403,
        ),
        (format!("localhost:{port}"), None, 200),
        (
            format!("[::1]:{port}"),
            Some(format!("http://localhost:{port}")),
            200,
        ),
        (
            format!("127.0.0.1:{port}"),
            Some(format!("http://127.0.0.1:{port}")),
            200,
        ),
    ] {
        let mut headers = vec![auth.clone(), ("Host", host.clone())];
        if let Some(o) = &origin {
            headers.push(("Origin", o.clone()));
        }
        let (status, text) = raw(port, &headers);
        assert_eq!(status, want, "Host {host}, Origin {origin:?}: {text}");
    }
}

#[test]
fn a_non_loopback_address_is_refused_at_start() {
    let t = Tree::new(BIN);
    // `serve` on the tree's socket and workspace, with `extra` arguments.
    let serve = |extra: &[&str]| {
        t.command()
            .args(["serve", "--socket"])
            .arg(&t.sock)
            .arg("--workspace")
            .arg(&t.ws)
            .args(extra)
            .output()
            .unwrap()
    };
    for addr in ["0.0.0.0:0", "[::]:0", "192.0.2.1:8080", "example.com:80"] {
        let out = serve(&["--mcp-http", addr]);
        assert_eq!(out.status.code(), Some(2), "{addr}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("binds loopback only"), "{addr}: {err}");
    }
    // The config key is checked the same way.
    let cfg = t.base.join("config/writegate/config.toml");
    fs::create_dir_all(cfg.parent().unwrap()).unwrap();
    fs::write(&cfg, "[mcp]\nhttp = \"0.0.0.0:0\"\n").unwrap();
    let out = serve(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("binds loopback only"));
}
