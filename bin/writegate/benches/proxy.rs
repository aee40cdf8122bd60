//! What `writegate proxy` costs the traffic it forwards: 10,000
//! `session/update` notifications of 1 KiB each from the agent, read by the
//! editor through the proxy and straight from the agent, and the latency of
//! one small request's round trip both ways (the added p50 is the proxy's).
//!
//! Run: `cargo bench -p writegate --bench proxy`
//! (optional: `WG_BENCH_SCALE=0.5` or `=2` scales the counts;
//! `WG_BENCH_BIN=/path/to/writegate` runs another build as the proxy).
//!
//! Two agents. The minimal one is this bench's own executable started with
//! `WG_BENCH_AGENT=1`: a line agent (no SDK) that answers `initialize` and
//! `ping` at once and, for `session/prompt`, writes the number of 1 KiB
//! notifications its params ask for from one prebuilt line, then the
//! answer: nearly free, so the proxy's share is as visible as it can be.
//! The SDK agent is the tests' `acp_test_agent` (the official ACP SDK,
//! serialising each notification), measured when its release build exists
//! (`cargo build --release -p writegate --example acp_test_agent`). Rounds
//! rotate straight, relayed and proxied runs; the median of the rounds is
//! reported. The relay is this bench's executable started with
//! `WG_BENCH_RELAY=<agent>`: it copies bytes both ways like `cat`, parsing
//! nothing, which is the least any process between editor and agent costs
//! on the same machine. It prints figures; it asserts nothing about time.

#![allow(clippy::print_stdout)] // a benchmark prints its figures to stdout

mod common;

use common::{BIN, Tree, daemon_bin, median, print_preamble, scaled, tree};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

/// Notifications per flood.
const UPDATES: usize = 10_000;
/// Bytes per notification line (about).
const UPDATE_BYTES: usize = 1024;
/// Rounds of each side.
const ROUNDS: usize = 7;
/// Round trips per latency run.
const PINGS: usize = 2_000;

fn main() {
    if let Some(agent) = std::env::var_os("WG_BENCH_RELAY") {
        relay(Path::new(&agent));
        return;
    }
    if std::env::var_os("WG_BENCH_AGENT").is_some() {
        agent();
        return;
    }
    let t = tree("proxy");
    print_preamble("proxy", &t);
    let me = std::env::current_exe().expect("the bench's own path");
    measure(&t, "minimal line agent", &me);
    let sdk = Path::new(BIN)
        .parent()
        .expect("the binary's directory")
        .join("examples/acp_test_agent");
    if sdk.is_file() {
        measure(&t, "SDK agent (acp_test_agent)", &sdk);
    } else {
        println!();
        println!(
            "SDK agent: {} not built; `cargo build --release -p writegate --example acp_test_agent` adds its figures",
            sdk.display()
        );
    }
}

/// How the bench's editor side reaches the agent.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Via {
    /// Straight to the agent's stdin and stdout.
    Straight,
    /// Through a bare relay: this bench's executable copying bytes both
    /// ways with `read`/`write` and a 128 KiB buffer, like `cat`, parsing
    /// nothing. The least any process in the middle costs.
    Relay,
    /// Through `writegate proxy`.
    Proxy,
}

const VIAS: [Via; 3] = [Via::Straight, Via::Relay, Via::Proxy];

/// Both figures for one agent.
fn measure(t: &Tree, name: &str, agent: &Path) {
    let updates = scaled(UPDATES);
    let pings = scaled(PINGS);
    let mut flood: [Vec<f64>; 3] = Default::default();
    // CPU seconds of the process the editor side talks to (the agent,
    // the relay, the proxy) during the flood.
    let mut cpu: [Vec<f64>; 3] = Default::default();
    let mut flood_bytes = 0;
    for round in 0..ROUNDS {
        // Rotate which side goes first, to cancel drift.
        for k in 0..VIAS.len() {
            let i = (round + k) % VIAS.len();
            let mut peer = Peer::start(t, agent, VIAS[i]);
            let before = peer.cpu_seconds();
            let (secs, bytes) = peer.flood(updates);
            cpu[i].push(peer.cpu_seconds() - before);
            flood_bytes = bytes;
            peer.finish();
            flood[i].push(secs);
        }
    }
    let [s, r, p] = flood.map(|mut v| median(&mut v));
    let [cs, cr, cp] = cpu.map(|mut v| median(&mut v) / updates as f64 * 1e6);
    let mib = flood_bytes as f64 / (1024.0 * 1024.0);
    println!();
    println!("{name}:");
    println!(
        "session/update flood: {updates} notifications of ~{UPDATE_BYTES} B ({mib:.1} MiB), median of {ROUNDS} rounds"
    );
    for (label, secs) in [
        ("straight from the agent:", s),
        ("through a bare relay:   ", r),
        ("through writegate proxy:", p),
    ] {
        println!(
            "  {label} {:8.1} ms  {:9.0} msg/s  {:7.1} MiB/s",
            secs * 1e3,
            updates as f64 / secs,
            mib / secs
        );
    }
    println!(
        "  throughput loss: {:.1}% vs straight (target <= 5%), {:.1}% vs the bare relay",
        (1.0 - s / p) * 100.0,
        (1.0 - r / p) * 100.0
    );
    println!(
        "  CPU per notification: agent {cs:.2} us (straight), bare relay {cr:.2} us, writegate proxy {cp:.2} us ({:.1}% of the agent's)",
        cp / cs * 100.0
    );

    let mut lat: [Vec<f64>; 3] = Default::default();
    for round in 0..3 {
        for k in 0..VIAS.len() {
            let i = (round + k) % VIAS.len();
            let mut peer = Peer::start(t, agent, VIAS[i]);
            let v = peer.pings(pings);
            peer.finish();
            lat[i].extend(v);
        }
    }
    let [(s50, s90), (r50, r90), (p50, p90)] = lat.map(|mut v| percentiles(&mut v));
    println!();
    println!(
        "one forwarded request (ping), round trip, {} requests per side:",
        3 * pings
    );
    println!("  straight: p50 {s50:7.1} us  p90 {s90:7.1} us");
    println!("  relay:    p50 {r50:7.1} us  p90 {r90:7.1} us");
    println!("  proxied:  p50 {p50:7.1} us  p90 {p90:7.1} us");
    println!(
        "  added p50: {:.1} us vs straight (target <= 50 us), {:.1} us vs the bare relay",
        p50 - s50,
        p50 - r50
    );
}

#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // an index within the length
fn percentiles(v: &mut [f64]) -> (f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize] * 1e6;
    (at(0.5), at(0.9))
}

/// The editor's end of an agent, straight or through the proxy.
struct Peer {
    child: Child,
    w: BufWriter<ChildStdin>,
    r: BufReader<ChildStdout>,
    next: u64,
    line: Vec<u8>,
    session: String,
}

/// Whether `needle` occurs in `hay`.
fn memfind(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

impl Peer {
    fn start(t: &Tree, me: &Path, via: Via) -> Peer {
        let mut cmd = match via {
            Via::Proxy => {
                let mut c = Command::new(daemon_bin());
                c.arg("proxy")
                    .arg("--audit-log")
                    .arg(&t.audit_log)
                    .arg("--")
                    .arg(me);
                c
            }
            Via::Relay => {
                let mut c = Command::new(std::env::current_exe().expect("the bench's own path"));
                c.env("WG_BENCH_RELAY", me);
                c
            }
            Via::Straight => Command::new(me),
        };
        t.set_home(&mut cmd);
        cmd.env("WG_BENCH_AGENT", "1")
            .env("WRITEGATE_LOG", "warn")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        let mut child = cmd.spawn().expect("spawn the agent");
        let w = BufWriter::new(child.stdin.take().unwrap());
        let r = BufReader::with_capacity(256 * 1024, child.stdout.take().unwrap());
        let mut p = Peer {
            child,
            w,
            r,
            next: 0,
            line: Vec::new(),
            session: String::new(),
        };
        let init = p.call(
            "initialize",
            &json!({"protocolVersion": 1, "clientCapabilities": {}}),
        );
        assert!(init.get("result").is_some(), "{init}");
        let s = p.call("session/new", &json!({"cwd": t.ws, "mcpServers": []}));
        p.session = s["result"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("session/new: {s}"))
            .to_string();
        p
    }

    /// CPU time the child process's live threads have used so far, in
    /// seconds (each thread's time on a CPU, from
    /// `/proc/<pid>/task/*/schedstat`; 0 for what cannot be read).
    fn cpu_seconds(&self) -> f64 {
        let tasks = format!("/proc/{}/task", self.child.id());
        let ns: u64 = std::fs::read_dir(tasks)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|t| {
                let s = std::fs::read_to_string(t.path().join("schedstat")).ok()?;
                s.split_whitespace().next()?.parse::<u64>().ok()
            })
            .sum();
        ns as f64 / 1e9
    }

    fn send(&mut self, method: &str, params: &Value) -> u64 {
        self.next += 1;
        let mut line = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params}),
        )
        .unwrap();
        line.push(b'\n');
        self.w.write_all(&line).unwrap();
        self.w.flush().unwrap();
        self.next
    }

    /// The next line (without parsing it).
    fn read_line(&mut self) -> usize {
        self.line.clear();
        let n = self.r.read_until(b'\n', &mut self.line).unwrap();
        assert!(n > 0, "the agent closed its output");
        n
    }

    fn call(&mut self, method: &str, params: &Value) -> Value {
        let id = self.send(method, params);
        loop {
            self.read_line();
            let v: Value = serde_json::from_slice(&self.line).unwrap();
            if v["id"] == id {
                return v;
            }
        }
    }

    /// Asks for `n` notifications (the minimal agent reads `_meta.count`,
    /// the SDK agent the prompt's text); returns the seconds until the
    /// prompt's answer arrived and the bytes of the notifications.
    fn flood(&mut self, n: usize) -> (f64, usize) {
        let text = format!("updates {n} {}", UPDATE_BYTES - 150);
        let start = Instant::now();
        let id = self.send(
            "session/prompt",
            &json!({"sessionId": self.session, "prompt": [{"type": "text", "text": text}], "_meta": {"count": n}}),
        );
        let mut bytes = 0;
        let mut seen = 0;
        let needle = format!("\"id\":{id}");
        loop {
            let len = self.read_line();
            if seen < n {
                bytes += len;
                seen += 1;
                continue;
            }
            // After the n notifications: the SDK agent's report, then the answer.
            if memfind(&self.line, needle.as_bytes()) {
                break;
            }
        }
        let secs = start.elapsed().as_secs_f64();
        let v: Value = serde_json::from_slice(&self.line).unwrap();
        assert!(v.get("result").is_some(), "{v}");
        (secs, bytes)
    }

    /// `n` round trips of a small request; each one's seconds.
    fn pings(&mut self, n: usize) -> Vec<f64> {
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let start = Instant::now();
            let session = self.session.clone();
            self.send("ping", &json!({"sessionId": session}));
            self.read_line();
            out.push(start.elapsed().as_secs_f64());
        }
        out
    }

    fn finish(mut self) {
        drop(self.w);
        let mut rest = Vec::new();
        let _ = std::io::Read::read_to_end(&mut self.r, &mut rest);
        let st = self.child.wait().unwrap();
        assert!(st.success(), "{st:?}");
    }
}

/// The bare relay (see [`Via::Relay`]): starts `agent` and copies bytes
/// both ways until either side ends.
fn relay(agent: &Path) {
    use std::io::Read;
    fn pump(mut from: impl Read, mut to: impl Write) {
        let mut buf = vec![0u8; 128 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    if to.write_all(&buf[..n]).is_err() {
                        return;
                    }
                }
            }
        }
    }
    let mut child = Command::new(agent)
        .env_remove("WG_BENCH_RELAY")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the agent");
    let to_agent = child.stdin.take().unwrap();
    let from_agent = child.stdout.take().unwrap();
    let up = std::thread::spawn(move || pump(std::io::stdin().lock(), to_agent));
    // Straight to descriptor 1: `Stdout` buffers by line.
    let out = std::os::fd::AsFd::as_fd(&std::io::stdout())
        .try_clone_to_owned()
        .expect("dup stdout");
    pump(from_agent, std::fs::File::from(out));
    let _ = child.wait();
    drop(up);
}

/// The bench's agent: one JSON object per line in, answers and
/// notifications out.
fn agent() {
    let stdin = std::io::stdin();
    let mut out = BufWriter::with_capacity(256 * 1024, std::io::stdout());
    let mut text = String::new();
    // One ~1 KiB session/update line, built once.
    let filler = "x".repeat(UPDATE_BYTES - 120);
    let mut update = serde_json::to_vec(&json!({
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": filler}}}
    }))
    .unwrap();
    update.push(b'\n');
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        text.clear();
        text.push_str(&line);
        let Ok(v) = serde_json::from_str::<Value>(&text) else {
            continue;
        };
        let id = v["id"].clone();
        let result = match v["method"].as_str() {
            Some("initialize") => json!({"protocolVersion": 1}),
            Some("session/new") => json!({"sessionId": "s"}),
            Some("session/prompt") => {
                let n = v["params"]["_meta"]["count"].as_u64().unwrap_or(0);
                for _ in 0..n {
                    out.write_all(&update).unwrap();
                }
                json!({"stopReason": "end_turn"})
            }
            _ => json!({}),
        };
        if id.is_null() {
            continue;
        }
        let mut answer =
            serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "result": result})).unwrap();
        answer.push(b'\n');
        out.write_all(&answer).unwrap();
        out.flush().unwrap();
    }
}
