//! One `write_file` through `writegate mcp` against the same write through
//! `writegate serve --stdio` (ACP `fs/write_text_file`), side by side in
//! one run (target: an MCP call costs at most 1.10x the ACP call).
//!
//! Run: `cargo bench -p writegate --bench mcp_vs_acp`
//! (optional: `WG_BENCH_SCALE`; `WG_BENCH_BIN=<older writegate>` runs the
//! same on another build; `WG_BENCH_CASES=new,over` picks cases).
//!
//! Both servers are spawned the way hosts spawn them, on pipes, with the
//! same workspace, audit log settings and environment; one request in
//! flight; request lines built before the clock starts. Cases, 1 KiB of
//! ASCII lines each: `new` (a new file per call) and `over` (overwriting 64
//! files round-robin). Rounds alternate the two servers (the order flips
//! every round, so disk drift hits both); the figure is the median of the
//! per-round means and of the per-round MCP/ACP ratios. Every file is read
//! back after each batch. Also printed: each server's idle resident memory
//! and threads after the handshake, and its time from spawn to the
//! handshake's answer (median of 15 starts).
//!
//! This prints figures; it asserts nothing about time.

#![allow(clippy::print_stdout)] // a benchmark prints its figures to stdout

mod common;

use common::{KIB, Tree, audit_flush, daemon_bin, median, print_preamble, scaled, text_of};
use serde_json::{Value, json};
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// The two front ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    Acp,
    Mcp,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Acp => "serve --stdio (ACP)",
            Side::Mcp => "mcp (MCP)",
        }
    }
}

/// A spawned server and its pipes.
struct Server {
    side: Side,
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    line: String,
    id: u64,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn command(t: &Tree, side: Side) -> Command {
    let mut cmd = Command::new(daemon_bin());
    match side {
        Side::Acp => cmd.args(["serve", "--stdio"]),
        Side::Mcp => cmd.arg("mcp"),
    };
    cmd.arg("--workspace")
        .arg(&t.ws)
        .arg("--audit-log")
        .arg(&t.audit_log)
        .env_clear()
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
    cmd
}

impl Server {
    /// Spawns and finishes the handshake; returns the server and the time
    /// from spawn to the handshake's answer.
    fn start(t: &Tree, side: Side) -> (Server, Duration) {
        let started = Instant::now();
        let mut child = command(t, side).spawn().expect("spawn writegate");
        let mut s = Server {
            side,
            stdin: child.stdin.take().unwrap(),
            stdout: BufReader::new(child.stdout.take().unwrap()),
            child,
            line: String::new(),
            id: 0,
        };
        match side {
            Side::Acp => {
                s.call(
                    "initialize",
                    br#"{"protocolVersion":1,"clientCapabilities":{}}"#,
                );
            }
            Side::Mcp => {
                s.call(
                    "initialize",
                    br#"{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}"#,
                );
            }
        }
        let ready = started.elapsed();
        if side == Side::Mcp {
            s.stdin
                .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
                .unwrap();
        }
        (s, ready)
    }

    /// One request line out, its answer's `result` back.
    fn call(&mut self, method: &str, params: &[u8]) -> Value {
        self.id += 1;
        let mut line = format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"{method}","params":"#,
            self.id
        )
        .into_bytes();
        line.extend_from_slice(params);
        line.extend_from_slice(b"}\n");
        self.send(&line)
    }

    /// Sends a whole request line (id `self.id`), returns its `result`.
    fn send(&mut self, line: &[u8]) -> Value {
        self.stdin.write_all(line).unwrap();
        self.line.clear();
        let n = self.stdout.read_line(&mut self.line).unwrap();
        assert!(n > 0, "{} closed its stdout", self.side.name());
        let mut v: Value = serde_json::from_str(&self.line).unwrap();
        match v.get_mut("result") {
            Some(r) if r.get("isError") != Some(&Value::Bool(true)) => r.take(),
            _ => panic!("{} failed: {}", self.side.name(), self.line.trim_end()),
        }
    }

    /// The request line writing `content` to `path`, with id `id`.
    fn write_line(&self, id: u64, path: &Path, content: &str) -> Vec<u8> {
        let v = match self.side {
            Side::Acp => json!({"jsonrpc": "2.0", "id": id, "method": "fs/write_text_file",
                "params": {"sessionId": "bench", "path": path, "content": content}}),
            Side::Mcp => json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "write_file", "arguments": {"path": path, "content": content}}}),
        };
        let mut line = serde_json::to_vec(&v).unwrap();
        line.push(b'\n');
        line
    }

    /// A `/proc/<pid>/status` field (`VmRSS` in KiB, `Threads`).
    fn status(&self, key: &str) -> u64 {
        let s = fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        s.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key} in /proc/pid/status"))
    }
}

/// One batch of `n` writes of `content` by `s`: `new` writes new files
/// under `dir` (named from `seq`), else overwrites `files`. Returns the
/// mean time per write in ms; checks the bytes.
fn batch(
    s: &mut Server,
    dir: &Path,
    files: &[PathBuf],
    new: bool,
    n: usize,
    seq: &mut u64,
    content: &str,
) -> f64 {
    let paths: Vec<PathBuf> = (0..n)
        .map(|i| {
            if new {
                *seq += 1;
                dir.join(format!("n{seq}.txt"))
            } else {
                files[i % files.len()].clone()
            }
        })
        .collect();
    let lines: Vec<Vec<u8>> = paths
        .iter()
        .enumerate()
        .map(|(i, p)| s.write_line(s.id + 1 + i as u64, p, content))
        .collect();
    let start = Instant::now();
    for line in &lines {
        s.id += 1;
        s.send(line);
    }
    let ms = start.elapsed().as_secs_f64() * 1e3 / n as f64;
    for p in paths.iter().take(files.len().max(1)) {
        assert_eq!(fs::read_to_string(p).unwrap(), content, "{}", p.display());
    }
    if new {
        for p in &paths {
            let _ = fs::remove_file(p);
        }
    }
    ms
}

fn main() {
    let t = common::tree("mcp-vs-acp");
    print_preamble("mcp_vs_acp", &t);
    let cases: Vec<String> = std::env::var("WG_BENCH_CASES").map_or_else(
        |_| vec!["new".into(), "over".into()],
        |v| v.split(',').map(str::to_string).collect(),
    );
    let content = text_of(KIB, "bench");
    let rounds = 15;
    let per_round = scaled(200);

    // Start-up: time to the handshake's answer; idle memory and threads.
    println!("\nstart-up (spawn to handshake answered, median of 15; VmRSS and threads after it):");
    for side in [Side::Acp, Side::Mcp] {
        let (mut ready, mut rss, mut threads) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..15 {
            let (s, d) = Server::start(&t, side);
            ready.push(d.as_secs_f64() * 1e3);
            std::thread::sleep(Duration::from_millis(50));
            rss.push(s.status("VmRSS") as f64);
            threads.push(s.status("Threads") as f64);
        }
        println!(
            "  {:<20} ready {:>6.2} ms   idle VmRSS {:>6.0} KiB   threads {:>3.0}",
            side.name(),
            median(&mut ready),
            median(&mut rss),
            median(&mut threads)
        );
    }

    println!(
        "\n1 KiB write_file, one in flight, {rounds} rounds of {per_round} writes per server, order flipped every round:"
    );
    println!(
        "  {:<6} {:>12} {:>12} {:>10} {:>16}",
        "case", "ACP ms/op", "MCP ms/op", "MCP/ACP", "ratio min-max"
    );
    for case in &cases {
        let new = match case.as_str() {
            "new" => true,
            "over" => false,
            other => panic!("unknown case {other} (new, over)"),
        };
        let (mut acp, _) = Server::start(&t, Side::Acp);
        let (mut mcp, _) = Server::start(&t, Side::Mcp);
        let mut dirs = Vec::new();
        let mut files = Vec::new();
        for side in ["acp", "mcp"] {
            let dir = t.ws.join(format!("{case}-{side}"));
            fs::create_dir_all(&dir).unwrap();
            let f: Vec<PathBuf> = (0..64).map(|i| dir.join(format!("f{i}.txt"))).collect();
            for p in &f {
                fs::write(p, &content).unwrap();
            }
            dirs.push(dir);
            files.push(f);
        }
        let mut seq = 0;
        // Warm-up: one short batch each.
        batch(&mut acp, &dirs[0], &files[0], new, 20, &mut seq, &content);
        batch(&mut mcp, &dirs[1], &files[1], new, 20, &mut seq, &content);
        let (mut a_ms, mut m_ms, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        for r in 0..rounds {
            let (a, m) = if r % 2 == 0 {
                let a = batch(
                    &mut acp, &dirs[0], &files[0], new, per_round, &mut seq, &content,
                );
                let m = batch(
                    &mut mcp, &dirs[1], &files[1], new, per_round, &mut seq, &content,
                );
                (a, m)
            } else {
                let m = batch(
                    &mut mcp, &dirs[1], &files[1], new, per_round, &mut seq, &content,
                );
                let a = batch(
                    &mut acp, &dirs[0], &files[0], new, per_round, &mut seq, &content,
                );
                (a, m)
            };
            a_ms.push(a);
            m_ms.push(m);
            ratios.push(m / a);
        }
        let (lo, hi) = ratios.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), r| {
            (lo.min(*r), hi.max(*r))
        });
        println!(
            "  {:<6} {:>12.3} {:>12.3} {:>10.3} {:>8.2}-{:.2}",
            case,
            median(&mut a_ms),
            median(&mut m_ms),
            median(&mut ratios),
            lo,
            hi
        );
    }
    println!("\nload average at end: {}", common::load_average());
}
