//! MCP through the daemon (`writegate mcp --connect`): shared state,
//! measured. Two figures, as ratios:
//!
//! - 8 agents, each its own `writegate mcp --connect` relay, writing 1 KiB
//!   files at once through one daemon, against one agent alone: the
//!   throughput ratio (files per second). Every write is read back, and
//!   the audit log must hold one event per write.
//! - one `write_file` (1 KiB, a new file per call) through `--connect`
//!   against the same call through standalone `writegate mcp`: the same
//!   driver, one request in flight, rounds interleaved (the order flips
//!   every round); the median of the per-round ratios.
//!
//! Run: `cargo bench -p writegate --bench mcp_connect` (`WG_BENCH_SCALE`
//! scales the counts). This prints figures; it asserts nothing about time.

#![allow(clippy::print_stdout)] // a benchmark prints its figures to stdout

mod common;

use common::{
    KIB, Tree, audit_flush, daemon_bin, median, print_preamble, scaled, start_daemon, text_of, tree,
};
use serde_json::{Value, json};
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// One MCP server process on pipes: a relay or a standalone server.
struct Agent {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
    id: u64,
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `writegate mcp --connect <sock>` (`Some`) or `writegate mcp --workspace <ws>`.
fn spawn(t: &Tree, connect: Option<&Path>) -> Agent {
    let mut cmd = Command::new(daemon_bin());
    cmd.arg("mcp");
    match connect {
        Some(sock) => cmd.arg("--connect").arg(sock),
        None => cmd
            .arg("--workspace")
            .arg(&t.ws)
            .arg("--audit-log")
            .arg(&t.audit_log),
    };
    cmd.env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", t.base.join("home"))
        .env("XDG_RUNTIME_DIR", t.base.join("run"))
        .env("XDG_STATE_HOME", t.base.join("state"))
        .env("XDG_CONFIG_HOME", t.base.join("config"))
        .env("WRITEGATE_AUDIT_FLUSH", audit_flush())
        .current_dir(&t.base)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().expect("spawn writegate mcp");
    let mut a = Agent {
        stdin: child.stdin.take().unwrap(),
        stdout: BufReader::new(child.stdout.take().unwrap()),
        child,
        line: String::new(),
        id: 0,
    };
    a.send(
        &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"}}}),
    );
    a.stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .unwrap();
    a
}

impl Agent {
    fn send(&mut self, v: &Value) -> Value {
        let mut line = serde_json::to_vec(v).unwrap();
        line.push(b'\n');
        self.send_line(&line)
    }

    fn send_line(&mut self, line: &[u8]) -> Value {
        self.stdin.write_all(line).unwrap();
        self.line.clear();
        let n = self.stdout.read_line(&mut self.line).unwrap();
        assert!(n > 0, "the server closed its stdout");
        let v: Value = serde_json::from_str(&self.line).unwrap();
        assert!(
            v.get("result")
                .is_some_and(|r| r.get("isError") != Some(&Value::Bool(true))),
            "{}",
            self.line.trim_end()
        );
        v
    }

    /// The request line writing `content` to `path`.
    fn write_line(&mut self, path: &Path, content: &str) -> Vec<u8> {
        self.id += 1;
        let v = json!({"jsonrpc": "2.0", "id": self.id, "method": "tools/call",
            "params": {"name": "write_file", "arguments": {"path": path, "content": content}}});
        let mut line = serde_json::to_vec(&v).unwrap();
        line.push(b'\n');
        line
    }

    /// `n` new files under `dir`, one request in flight; the time taken.
    fn writes(&mut self, dir: &Path, tag: &str, n: usize, content: &str) -> Duration {
        let lines: Vec<(PathBuf, Vec<u8>)> = (0..n)
            .map(|i| {
                let p = dir.join(format!("{tag}-{i}.txt"));
                let l = self.write_line(&p, content);
                (p, l)
            })
            .collect();
        let start = Instant::now();
        for (_, l) in &lines {
            self.send_line(l);
        }
        let took = start.elapsed();
        for (p, _) in &lines {
            assert_eq!(fs::read_to_string(p).unwrap(), content, "{}", p.display());
        }
        took
    }
}

fn audit_writes(t: &Tree) -> usize {
    fs::read_to_string(&t.audit_log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("\"mcp write_file\""))
        .count()
}

fn main() {
    let t = tree("mcp-connect");
    print_preamble("mcp --connect", &t);
    let _d = start_daemon(&t);
    let sock = t.sock.with_file_name("mcp.sock");
    let content = text_of(KIB, "c");
    let dir = t.ws.join("out");
    fs::create_dir_all(&dir).unwrap();

    // 1. Eight agents at once against one.
    let per_agent = scaled(300);
    let before = audit_writes(&t);
    let mut one = spawn(&t, Some(&sock));
    one.writes(&dir, "warm", 20, &content);
    let alone = one.writes(&dir, "one", per_agent, &content);
    drop(one);
    let agents: Vec<Agent> = (0..8).map(|_| spawn(&t, Some(&sock))).collect();
    let start = Instant::now();
    let threads: Vec<_> = agents
        .into_iter()
        .enumerate()
        .map(|(i, mut a)| {
            let dir = dir.clone();
            let content = content.clone();
            std::thread::spawn(move || a.writes(&dir, &format!("a{i}"), per_agent, &content))
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
    let eight = start.elapsed();
    let one_rate = per_agent as f64 / alone.as_secs_f64();
    let eight_rate = (8 * per_agent) as f64 / eight.as_secs_f64();
    std::thread::sleep(Duration::from_millis(1500)); // audit.flush = interval
    let events = audit_writes(&t) - before;
    println!(
        "\n8 agents via --connect, 1 KiB new files, {per_agent} each: {eight_rate:.0} files/s; one agent: {one_rate:.0} files/s; ratio {:.2}x",
        eight_rate / one_rate
    );
    println!(
        "audit events for these writes: {events} (expected {})",
        20 + per_agent * 9
    );

    // 2. One call through --connect against standalone writegate mcp.
    let rounds = scaled(10);
    let n = scaled(100);
    let mut relay = spawn(&t, Some(&sock));
    let mut alone = spawn(&t, None);
    relay.writes(&dir, "wr", 20, &content);
    alone.writes(&dir, "ws", 20, &content);
    let mut ratios = Vec::new();
    let (mut rs, mut ss) = (Vec::new(), Vec::new());
    for r in 0..rounds {
        let time = |a: &mut Agent, tag: &str| {
            a.writes(&dir, &format!("{tag}{r}"), n, &content)
                .as_secs_f64()
                * 1000.0
                / n as f64
        };
        let (c, s) = if r % 2 == 0 {
            let c = time(&mut relay, "c");
            (c, time(&mut alone, "s"))
        } else {
            let s = time(&mut alone, "s");
            (time(&mut relay, "c"), s)
        };
        rs.push(c);
        ss.push(s);
        ratios.push(c / s);
    }
    println!(
        "one write_file, 1 KiB: --connect {:.3} ms, standalone {:.3} ms (medians of {rounds} rounds of {n}); ratio {:.2}x (median of per-round ratios)",
        median(&mut rs),
        median(&mut ss),
        median(&mut ratios)
    );
}
