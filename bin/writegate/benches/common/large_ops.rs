//! The 5 MiB read and one-line edit rows of the throughput bench
//! (`WG_BENCH_CASES` names `5mread` and `5medit`), each against its bare
//! equivalent measured in the same rounds:
//!
//! - read: `fs/read_text_file` over the socket and MCP `read_file` over
//!   `writegate mcp`'s stdio, against the bare read and decode in this
//!   process (`std::fs::read` and `str::from_utf8`, the least any reader
//!   that answers text does);
//! - edit: `_writegate/edit_text_file` replacing one line of a 5 MiB file
//!   over the socket, against the bare durable write of the whole file
//!   (what an editor without writegate does to change one line).
//!
//! Rounds alternate their order; the verdict uses the median of the
//! per-round ratios, as the write rows do. Prints figures, asserts nothing
//! about time.

use super::{
    BareWrite, Client, MIB, Tree, bare_write_as, daemon_bin, median, scaled, stats, text_of,
};
use serde_json::{Value, json};
use sha2::Digest;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

/// Requests per side per round, and rounds.
const PER_ROUND: usize = 4;
const ROUNDS: usize = 6;

/// One row: a name and its per-round ratios against the bare side.
pub(crate) struct Row {
    pub(crate) name: &'static str,
    pub(crate) bare_ms: f64,
    pub(crate) ms: f64,
    pub(crate) paired: f64,
}

/// `writegate mcp` over stdio, initialized.
struct Mcp {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    id: u64,
    line: String,
}

impl Mcp {
    fn start(t: &Tree) -> Mcp {
        let mut child = Command::new(daemon_bin())
            .arg("mcp")
            .arg("--workspace")
            .arg(&t.ws)
            .arg("--audit-log")
            .arg(t.base.join("state/mcp-audit.jsonl"))
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", t.base.join("home"))
            .env("XDG_RUNTIME_DIR", t.base.join("run"))
            .env("XDG_STATE_HOME", t.base.join("state"))
            .env("XDG_CONFIG_HOME", t.base.join("config"))
            .current_dir(&t.base)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn writegate mcp");
        let mut m = Mcp {
            stdin: child.stdin.take().unwrap(),
            // Large answers are read a MiB at a time, not 8 KiB.
            stdout: BufReader::with_capacity(1 << 20, child.stdout.take().unwrap()),
            child,
            id: 0,
            line: String::new(),
        };
        m.call(
            "initialize",
            &json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "wg-bench", "version": "1"}}),
        );
        m.stdin
            .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
            .unwrap();
        m
    }

    /// One request; its `result` (panics on an error answer).
    fn call(&mut self, method: &str, params: &Value) -> Value {
        let line = self.call_raw(method, params).to_string();
        let mut v: Value = serde_json::from_str(&line).unwrap();
        match v.get_mut("result") {
            Some(r) if r["isError"] != json!(true) => r.take(),
            _ => panic!("{method} failed: {}", line.trim_end()),
        }
    }

    /// One request; its answer's line as it came, checked by its first
    /// bytes to be a result (see `Client::call_raw`).
    fn call_raw(&mut self, method: &str, params: &Value) -> &str {
        self.id += 1;
        let mut req = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": self.id, "method": method, "params": params}),
        )
        .unwrap();
        req.push(b'\n');
        self.stdin.write_all(&req).unwrap();
        let ok = format!(r#"{{"jsonrpc":"2.0","id":{},"result":"#, self.id);
        loop {
            self.line.clear();
            let n = self.stdout.read_line(&mut self.line).unwrap();
            assert!(n > 0, "writegate mcp closed stdout");
            if self.line.starts_with(&ok) {
                return &self.line;
            }
            assert!(
                !self.line.contains(&format!(r#""id":{},"#, self.id)),
                "{method} failed: {}",
                &self.line[..self.line.len().min(500)]
            );
        }
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Times `n` runs of `f`, in ms per run.
fn per_run(n: usize, mut f: impl FnMut()) -> f64 {
    let s = Instant::now();
    for _ in 0..n {
        f();
    }
    s.elapsed().as_secs_f64() * 1e3 / n as f64
}

/// The rows `names` selects (`5mread`, `5medit`), run over `client` (a
/// socket connection of the daemon).
pub(crate) fn run(t: &Tree, client: &mut Client, names: &[&str]) -> Vec<Row> {
    let n = scaled(PER_ROUND);
    let content = text_of(5 * MIB, "large");
    let big = t.ws.join("large.txt");
    std::fs::write(&big, &content).unwrap();
    let mut rows = Vec::new();
    if names.contains(&"5mread") {
        let params = serde_json::to_vec(&json!({"sessionId": "bench", "path": big})).unwrap();
        let mut mcp = Mcp::start(t);
        let args = json!({"name": "read_file", "arguments": {"path": big}});
        let mut bare = || {
            let bytes = std::fs::read(&big).unwrap();
            assert_eq!(std::str::from_utf8(&bytes).unwrap().len(), content.len());
        };
        // The answers are checked for their id and size; a client parses
        // them as it would any server's (see `Client::call_raw`).
        let mut acp = || {
            let r = client.call_raw("fs/read_text_file", &[&params]);
            assert!(r.len() > content.len(), "{}", r.len());
        };
        let mut tool = || {
            let r = mcp.call_raw("tools/call", &args);
            // The numbered text once (ADR 0034).
            assert!(r.len() > content.len(), "{}", r.len());
            assert!(r.ends_with("\"isError\":false}}\n"), "an error result");
        };
        // What the answer carries beyond the text: the file's SHA-256.
        let mut hashed = || {
            let bytes = std::fs::read(&big).unwrap();
            assert_eq!(std::str::from_utf8(&bytes).unwrap().len(), content.len());
            std::hint::black_box(sha2::Sha256::digest(&bytes));
        };
        let (mut b, mut h, mut a, mut m) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        bare();
        hashed();
        acp();
        tool();
        for round in 0..ROUNDS {
            if round % 2 == 0 {
                b.push(per_run(n, &mut bare));
                h.push(per_run(n, &mut hashed));
                a.push(per_run(n, &mut acp));
                m.push(per_run(n, &mut tool));
            } else {
                m.push(per_run(n, &mut tool));
                a.push(per_run(n, &mut acp));
                h.push(per_run(n, &mut hashed));
                b.push(per_run(n, &mut bare));
            }
        }
        rows.push(row(
            "5 MiB read: fs/read_text_file (socket) / bare read + UTF-8 check",
            &b,
            &a,
        ));
        rows.push(row(
            "5 MiB read: MCP read_file (stdio) / bare read + UTF-8 check",
            &b,
            &m,
        ));
        rows.push(row(
            "(information) 5 MiB read: bare read + UTF-8 check + SHA-256 / bare read + UTF-8 check",
            &b,
            &h,
        ));
        rows.push(row(
            "(information) 5 MiB read: fs/read_text_file (socket) / bare read + UTF-8 check + SHA-256",
            &h,
            &a,
        ));
    }
    if names.contains(&"5medit") {
        let how = BareWrite::from_env();
        let mut seq = 0u64;
        let mut k = 0usize;
        let mut bare = || {
            bare_write_as(
                how,
                &t.ws,
                "large-bare.txt",
                content.as_bytes(),
                "large",
                &mut seq,
            );
        };
        let mut edit = || {
            k += 1;
            edit_line(client, &big, k);
        };
        let (mut b, mut e) = (Vec::new(), Vec::new());
        bare();
        edit();
        for round in 0..ROUNDS {
            if round % 2 == 0 {
                b.push(per_run(n, &mut bare));
                e.push(per_run(n, &mut edit));
            } else {
                e.push(per_run(n, &mut edit));
                b.push(per_run(n, &mut bare));
            }
        }
        rows.push(row(
            "5 MiB one-line edit (socket) / bare durable 5 MiB write",
            &b,
            &e,
        ));
    }
    rows
}

/// `_writegate/edit_text_file` replacing line 40,000 of `path`.
fn edit_line(client: &mut Client, path: &Path, k: usize) {
    let params = serde_json::to_vec(&json!({
        "sessionId": "bench", "path": path, "mode": "replace",
        "line": 40_000, "content": format!("line 40000 edited in run {k}"),
    }))
    .unwrap();
    let r = client.call("_writegate/edit_text_file", &[&params]);
    assert_eq!(r["line"], json!(40_000), "{r}");
}

fn row(name: &'static str, bare: &[f64], side: &[f64]) -> Row {
    let mut paired: Vec<f64> = side.iter().zip(bare).map(|(s, b)| s / b).collect();
    Row {
        name,
        bare_ms: stats(bare).0,
        ms: stats(side).0,
        paired: median(&mut paired),
    }
}

/// Prints the rows as a table.
pub(crate) fn print(rows: &[Row]) {
    if rows.is_empty() {
        return;
    }
    println!(
        "| 5 MiB operation / its bare equivalent | bare ms | writegate ms | per-round ratio, median |"
    );
    println!("|---|---|---|---|");
    for r in rows {
        println!(
            "| {} | {:.2} | {:.2} | {:.3} |",
            r.name, r.bare_ms, r.ms, r.paired
        );
    }
    println!(
        "({} requests per side per round, {ROUNDS} rounds, order alternating; ms: median of round means)",
        scaled(PER_ROUND)
    );
}
