//! `writegate mcp` next to the MCP filesystem servers people use today,
//! on the same workload, side by side in one run:
//! `@modelcontextprotocol/server-filesystem` (npm) and `rust-mcp-filesystem`
//! (crates.io). Run it through `scripts/bench-mcp-peers.sh`, which installs
//! the peers and passes their paths in `WG_PEER_NODE_FS` (the server's
//! `dist/index.js`) and `WG_PEER_RUST_FS` (the binary); a peer without its
//! variable is skipped.
//!
//! One driver for all three: raw JSON-RPC lines over each server's stdio,
//! one request in flight, request lines built before the clock starts, at
//! 1 KiB, 64 KiB, 1 MiB and 5 MiB of ASCII lines:
//!
//! - write: `write_file {path, content}`, a new file per write;
//! - edit: one exact replacement in the middle of a file (writegate:
//!   `edit_file {path, find, content}`; the peers: `edit_file {path,
//!   edits: [{oldText, newText}]}`), a fresh file per edit, made before the
//!   clock starts.
//!
//! Every file is read back and compared after each batch; a wrong byte
//! stops the bench. Rounds rotate the servers' order (disk drift hits all
//! of them); ops/s is a server's operations over its time summed over the
//! rounds.
//!
//! writegate is durable (fsync of the temp file and of the directory, one
//! audit line per operation); the peers write without fsync. Also printed:
//! each server's resident memory after `initialize` (`VmRSS`) and its time
//! from spawn to the `initialize` answer (median of 15 starts).
//!
//! This prints figures; it asserts nothing about time.

#![allow(clippy::print_stdout)] // a benchmark prints its figures to stdout

mod common;

use common::{
    BIN, BareWrite, KIB, MIB, Tree, bare_write_as, fmt_size, median, print_preamble, scaled,
    text_of, tree,
};
use serde_json::{Value, json};
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// The three servers.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Writegate,
    NodeFs,
    RustFs,
    /// writegate's ACP front end (`serve --stdio --allow-read`): the read
    /// rows only.
    WritegateAcp,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Writegate => "writegate mcp",
            Kind::NodeFs => "server-filesystem",
            Kind::RustFs => "rust-mcp-filesystem",
            Kind::WritegateAcp => "writegate acp",
        }
    }

    fn dir(self) -> &'static str {
        match self {
            Kind::Writegate => "wg",
            Kind::NodeFs => "node",
            Kind::RustFs => "rust",
            Kind::WritegateAcp => "acp",
        }
    }
}

/// A server's program and how to start it on `dir`.
struct Peer {
    kind: Kind,
    program: PathBuf,
}

impl Peer {
    fn command(&self, t: &Tree, dir: &Path) -> Command {
        let mut c = match self.kind {
            Kind::Writegate => {
                let mut c = Command::new(&self.program);
                c.arg("mcp")
                    .arg("--workspace")
                    .arg(dir)
                    .arg("--audit-log")
                    .arg(&t.audit_log);
                c
            }
            Kind::NodeFs => {
                let mut c = Command::new("node");
                c.arg(&self.program).arg(dir);
                c
            }
            Kind::RustFs => {
                let mut c = Command::new(&self.program);
                c.arg("--allow-write").arg(dir);
                c
            }
            Kind::WritegateAcp => {
                let mut c = Command::new(&self.program);
                c.args(["serve", "--stdio", "--allow-read", "--workspace"])
                    .arg(dir)
                    .arg("--audit-log")
                    .arg(&t.audit_log);
                c
            }
        };
        c.env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default());
        t.set_home(&mut c);
        c.current_dir(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        c
    }

    #[allow(clippy::unused_self)] // every server gets the same arguments; a method for symmetry with edit_args
    fn write_args(&self, path: &Path, content: &str) -> Value {
        json!({"path": path, "content": content})
    }

    fn edit_args(&self, path: &Path, find: &str, new: &str) -> Value {
        match self.kind {
            Kind::Writegate => json!({"path": path, "find": find, "content": new}),
            Kind::NodeFs | Kind::RustFs | Kind::WritegateAcp => {
                json!({"path": path, "edits": [{"oldText": find, "newText": new}]})
            }
        }
    }

    /// The request line that reads `path` whole: ACP `fs/read_text_file`,
    /// writegate's `read_file` tool, the peers' `read_text_file`.
    fn read_line(&self, s: &mut Server, path: &Path) -> (u64, Vec<u8>) {
        match self.kind {
            Kind::WritegateAcp => s.line(
                "fs/read_text_file",
                &json!({"sessionId": "bench", "path": path}),
            ),
            Kind::Writegate => s.tool_line("read_file", json!({"path": path})),
            Kind::NodeFs | Kind::RustFs => s.tool_line("read_text_file", json!({"path": path})),
        }
    }
}

/// A running server and its stdio.
struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next_id: u64,
    /// The last answer [`Server::roundtrip_raw`] read.
    answer: String,
}

impl Server {
    /// Spawns and initializes; returns the server and the time from spawn
    /// to the `initialize` answer.
    fn start(peer: &Peer, t: &Tree, dir: &Path) -> (Server, Duration) {
        let t0 = Instant::now();
        let mut child = peer
            .command(t, dir)
            .spawn()
            .unwrap_or_else(|e| panic!("{}: {e}", peer.kind.name()));
        let mut s = Server {
            stdin: child.stdin.take().unwrap(),
            // Large answers are read a MiB at a time, from every server.
            stdout: BufReader::with_capacity(MIB, child.stdout.take().unwrap()),
            child,
            next_id: 0,
            answer: String::new(),
        };
        let acp = peer.kind == Kind::WritegateAcp;
        let init = if acp {
            s.line(
                "initialize",
                &json!({"protocolVersion": 1, "clientCapabilities": {}}),
            )
        } else {
            s.line(
                "initialize",
                &json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "wg-bench", "version": "1"}}),
            )
        };
        let r = s.roundtrip(&init);
        let ready = t0.elapsed();
        assert!(r.get("result").is_some(), "{}: {r}", peer.kind.name());
        if !acp {
            s.stdin
                .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
                .unwrap();
        }
        (s, ready)
    }

    /// A request line (with its id) ready to send.
    fn line(&mut self, method: &str, params: &Value) -> (u64, Vec<u8>) {
        self.next_id += 1;
        let mut v = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}),
        )
        .unwrap();
        v.push(b'\n');
        (self.next_id, v)
    }

    #[allow(clippy::needless_pass_by_value)] // call sites build the arguments inline
    fn tool_line(&mut self, tool: &str, args: Value) -> (u64, Vec<u8>) {
        self.line("tools/call", &json!({"name": tool, "arguments": args}))
    }

    /// Sends one request and reads until its answer; requests from the
    /// server get "method not found", notifications are skipped.
    fn roundtrip(&mut self, (id, line): &(u64, Vec<u8>)) -> Value {
        self.stdin.write_all(line).unwrap();
        self.stdin.flush().unwrap();
        let mut buf = String::new();
        loop {
            buf.clear();
            let n = self.stdout.read_line(&mut buf).unwrap();
            assert!(n > 0, "server closed stdout");
            let Ok(v) = serde_json::from_str::<Value>(&buf) else {
                continue;
            };
            if v.get("method").is_some() {
                if let Some(rid) = v.get("id") {
                    let e = json!({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "not supported"}});
                    writeln!(self.stdin, "{e}").unwrap();
                }
                continue;
            }
            if v["id"] == *id {
                return v;
            }
        }
    }

    /// Sends one request and reads lines until one that is not a message
    /// from the server (no `"method"` near its start): its answer, kept
    /// unparsed in `self.answer` (every server's client parses the same
    /// JSON, so the read rows leave that out). Panics on an error answer,
    /// told by the bytes at either end of the line.
    fn roundtrip_raw(&mut self, (id, line): &(u64, Vec<u8>)) -> usize {
        self.stdin.write_all(line).unwrap();
        self.stdin.flush().unwrap();
        loop {
            self.answer.clear();
            let n = self.stdout.read_line(&mut self.answer).unwrap();
            assert!(n > 0, "server closed stdout");
            let a = self.answer.as_bytes();
            let (head, tail) = (&a[..a.len().min(120)], &a[a.len().saturating_sub(120)..]);
            let has = |hay: &[u8], needle: &str| {
                hay.windows(needle.len()).any(|w| w == needle.as_bytes())
            };
            if has(head, "\"method\"") {
                continue;
            }
            let id = format!("\"id\":{id}");
            assert!(
                has(head, &id) || has(tail, &id),
                "an answer to another request"
            );
            assert!(
                !has(head, "\"error\"")
                    && !has(tail, "\"isError\":true")
                    && !has(head, "\"isError\":true"),
                "an error answer: {}",
                &self.answer[..self.answer.len().min(400)]
            );
            return n;
        }
    }

    fn status_kib(&self, key: &str) -> u64 {
        writegate_testkit::proc_status_kib(self.child.id(), key).unwrap_or(0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An answer that is a tool error or a protocol error.
fn failed(r: &Value) -> Option<String> {
    if r.get("error").is_some() || r["result"]["isError"] == true {
        Some(r.to_string().chars().take(400).collect())
    } else {
        None
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Op {
    Write,
    Edit,
}

/// The content of edit file `i` of a size, with a 20-byte marker at the
/// start of the line in the middle, and the same after the edit.
fn edit_texts(size: usize, i: usize) -> (String, String, String, String) {
    let base = text_of(size, "edit");
    let mid = size / 2 + base[size / 2..].find('\n').unwrap() + 1;
    let find = format!("MARKER-{i:06}-MIDDLE");
    let new = format!("EDITED-{i:06}-MIDDLE");
    let mut before = base.clone();
    before.replace_range(mid..mid + find.len(), &find);
    let mut after = base;
    after.replace_range(mid..mid + new.len(), &new);
    (before, after, find, new)
}

/// One batch: `n` operations of `op` at `size` on one server. Returns the
/// seconds the operations took; checks every file afterwards.
fn batch(peer: &Peer, s: &mut Server, dir: &Path, op: Op, size: usize, n: usize, tag: &str) -> f64 {
    let mut lines = Vec::with_capacity(n);
    let mut expect = Vec::with_capacity(n);
    for i in 0..n {
        let path = dir.join(format!("{tag}-{i}.txt"));
        match op {
            Op::Write => {
                let content = text_of(size, &format!("{tag}-{i}"));
                lines.push(s.tool_line("write_file", peer.write_args(&path, &content)));
                expect.push((path, content));
            }
            Op::Edit => {
                let (before, after, find, new) = edit_texts(size, i);
                fs::write(&path, &before).unwrap();
                lines.push(s.tool_line("edit_file", peer.edit_args(&path, &find, &new)));
                expect.push((path, after));
            }
        }
    }
    let t0 = Instant::now();
    for l in &lines {
        let r = s.roundtrip(l);
        if let Some(e) = failed(&r) {
            panic!("{} {tag}: {e}", peer.kind.name());
        }
    }
    let secs = t0.elapsed().as_secs_f64();
    for (path, content) in &expect {
        let got = fs::read(path).unwrap();
        assert!(
            got == content.as_bytes(),
            "{}: {} is wrong on disk ({} bytes, want {})",
            peer.kind.name(),
            path.display(),
            got.len(),
            content.len()
        );
        fs::remove_file(path).unwrap();
    }
    secs
}

/// Ops/s of `n` bare durable writes of new `size`-byte files (the
/// sequence of `common::bare_write`, content written as `how` says), in a
/// directory of their own; the ceiling for any server that fsyncs file and
/// directory and writes that way.
fn bare_ops(t: &Tree, how: BareWrite, size: usize, n: usize) -> f64 {
    let dir = t.ws.join("bare");
    fs::create_dir_all(&dir).unwrap();
    let mut seq = 0;
    let contents: Vec<String> = (0..n)
        .map(|i| text_of(size, &format!("bare-{i}")))
        .collect();
    let t0 = Instant::now();
    for (i, c) in contents.iter().enumerate() {
        bare_write_as(
            how,
            &dir,
            &format!("b-{i}.txt"),
            c.as_bytes(),
            "bare",
            &mut seq,
        );
    }
    let ops = n as f64 / t0.elapsed().as_secs_f64();
    fs::remove_dir_all(&dir).unwrap();
    ops
}

/// The operations `WG_BENCH_OPS` names (`read,write,edit`; all when unset).
fn ops_wanted() -> Vec<String> {
    std::env::var("WG_BENCH_OPS")
        .unwrap_or_else(|_| "read,write,edit".to_string())
        .split(',')
        .map(|o| o.trim().to_string())
        .collect()
}

/// The read rows: every reader (writegate's ACP `fs/read_text_file` and
/// MCP `read_file`, the peers' `read_text_file`) reads the same file whole,
/// one request in flight, `n` times a round for three rounds in rotating
/// order. Each read is timed alone; a row is the median of a reader's
/// reads, with the lowest and highest of its per-round medians. Every
/// reader's answer is checked once to hold the file's last line.
fn read_rows(t: &Tree, readers: &[Peer]) {
    let mut servers: Vec<(Server, PathBuf)> = readers
        .iter()
        .map(|p| {
            let dir = t.ws.join(format!("read-{}", p.kind.dir()));
            fs::create_dir_all(&dir).unwrap();
            (Server::start(p, t, &dir).0, dir)
        })
        .collect();
    let rounds = 3;
    println!(
        "read a whole file, ms per read (median of every read; [lowest-highest per-round median]; one request in flight, {rounds} rounds):"
    );
    print!("  {:>8}", "size");
    for p in readers {
        print!("{:>32}", p.kind.name());
    }
    println!();
    let mut medians = Vec::new();
    for (size, per_round) in [(KIB, 200), (64 * KIB, 100), (MIB, 30), (5 * MIB, 12)] {
        let n = scaled(per_round);
        let content = text_of(size, "read");
        let last = content.lines().last().unwrap().to_string();
        let mut lines = Vec::new();
        for (p, (s, dir)) in readers.iter().zip(servers.iter_mut()) {
            let path = dir.join(format!("read-{}.txt", size / KIB));
            fs::write(&path, &content).unwrap();
            let line = p.read_line(s, &path);
            // Once, parsed: the answer holds the file.
            let r = s.roundtrip(&line);
            assert!(
                failed(&r).is_none() && r.to_string().contains(&last),
                "{}: the read answer lacks the file: {}",
                p.kind.name(),
                &r.to_string()[..400.min(r.to_string().len())]
            );
            lines.push(line);
        }
        let mut all: Vec<Vec<f64>> = vec![Vec::new(); readers.len()];
        let mut per_round: Vec<Vec<f64>> = vec![Vec::new(); readers.len()];
        for round in 0..rounds {
            for k in 0..readers.len() {
                let j = (k + round) % readers.len();
                let (s, _) = &mut servers[j];
                let mut ms = Vec::with_capacity(n);
                for _ in 0..n {
                    let t0 = Instant::now();
                    let got = s.roundtrip_raw(&lines[j]);
                    ms.push(t0.elapsed().as_secs_f64() * 1000.0);
                    assert!(got > size, "{}: a short answer", readers[j].kind.name());
                }
                per_round[j].push(median(&mut ms.clone()));
                all[j].extend(ms);
            }
        }
        print!("  {:>8}", fmt_size(size));
        let mut row = Vec::new();
        for (a, r) in all.iter_mut().zip(&per_round) {
            let m = median(a);
            let lo = r.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = r.iter().copied().fold(0.0, f64::max);
            print!("{:>32}", format!("{m:.3} [{lo:.3}-{hi:.3}]"));
            row.push(m);
        }
        println!();
        medians.push((size, row));
    }
    let at = |kind: Kind| readers.iter().position(|p| p.kind == kind);
    if let (Some(rust), Some(acp), Some(mcp)) = (
        at(Kind::RustFs),
        at(Kind::WritegateAcp),
        at(Kind::Writegate),
    ) {
        println!(
            "read targets against rust-mcp-filesystem (time ratio, lower is faster; printed, not asserted):"
        );
        for (size, row) in &medians {
            let (a, m) = (row[acp] / row[rust], row[mcp] / row[rust]);
            println!(
                "  {:>8}: fs/read_text_file {a:.2}x (target <= 1.00: {}); MCP read_file {m:.2}x (target <= 1.25: {})",
                fmt_size(*size),
                if a <= 1.0 { "met" } else { "NOT met" },
                if m <= 1.25 { "met" } else { "NOT met" },
            );
        }
    }
    println!();
}

fn main() {
    let t = tree("mcp-peers");
    print_preamble("mcp peers", &t);
    let mut peers = vec![Peer {
        kind: Kind::Writegate,
        program: PathBuf::from(BIN),
    }];
    for (var, kind) in [
        ("WG_PEER_NODE_FS", Kind::NodeFs),
        ("WG_PEER_RUST_FS", Kind::RustFs),
    ] {
        match std::env::var_os(var) {
            Some(p) => peers.push(Peer {
                kind,
                program: PathBuf::from(p),
            }),
            None => println!(
                "{} skipped: {var} is not set (scripts/bench-mcp-peers.sh sets it)",
                kind.name()
            ),
        }
    }
    for p in &peers {
        println!("{:<20} {}", p.kind.name(), p.program.display());
    }
    let wanted = ops_wanted();
    println!("operations: {} (WG_BENCH_OPS)", wanted.join(","));
    if wanted.iter().any(|o| o == "read") {
        let mut readers = vec![Peer {
            kind: Kind::WritegateAcp,
            program: PathBuf::from(BIN),
        }];
        readers.extend(peers.iter().map(|p| Peer {
            kind: p.kind,
            program: p.program.clone(),
        }));
        println!();
        read_rows(&t, &readers);
    }
    let table_ops: Vec<Op> = [(Op::Write, "write"), (Op::Edit, "edit")]
        .into_iter()
        .filter(|(_, name)| wanted.iter().any(|o| o == name))
        .map(|(op, _)| op)
        .collect();
    if table_ops.is_empty() {
        println!("load average at end: {}", common::load_average());
        return;
    }
    println!(
        "durability: writegate fsyncs each file and its directory and appends one audit line per operation; the peers do not fsync"
    );
    println!();

    // Start-up: time to the initialize answer, idle memory.
    println!("start-up (spawn to initialize answered, median of 15; VmRSS after initialize):");
    for p in &peers {
        let dir = t.ws.join(format!("start-{}", p.kind.dir()));
        fs::create_dir_all(&dir).unwrap();
        let mut ready = Vec::new();
        let mut rss = Vec::new();
        for _ in 0..15 {
            let (s, r) = Server::start(p, &t, &dir);
            ready.push(r.as_secs_f64() * 1000.0);
            std::thread::sleep(Duration::from_millis(100));
            rss.push(s.status_kib("VmRSS") as f64);
        }
        println!(
            "  {:<20} ready {:>7.1} ms   idle VmRSS {:>7.0} KiB ({:.1} MiB)",
            p.kind.name(),
            median(&mut ready),
            median(&mut rss),
            median(&mut rss) / 1024.0
        );
    }
    println!();

    let mut servers: Vec<(Server, PathBuf)> = peers
        .iter()
        .map(|p| {
            let dir = t.ws.join(p.kind.dir());
            fs::create_dir_all(&dir).unwrap();
            (Server::start(p, &t, &dir).0, dir)
        })
        .collect();
    let sizes = [(KIB, 100), (64 * KIB, 60), (MIB, 16), (5 * MIB, 6)];
    let rounds = 3;
    let mut table = Vec::new();
    // The bare durable sequence on the same workload: what no durable
    // server can beat (see `bare_ops`).
    let mut bare = Vec::new();
    for &op in &table_ops {
        for (size, per_round) in sizes {
            let n = scaled(per_round);
            let mut secs = vec![0.0; peers.len()];
            for round in 0..rounds {
                for k in 0..peers.len() {
                    let j = (k + round) % peers.len();
                    let (s, dir) = &mut servers[j];
                    let tag = format!(
                        "{}-{}-r{round}",
                        if op == Op::Write { "w" } else { "e" },
                        size / KIB
                    );
                    secs[j] += batch(&peers[j], s, dir, op, size, n, &tag);
                }
            }
            let ops: Vec<f64> = secs.iter().map(|s| (n * rounds) as f64 / s).collect();
            if op == Op::Write {
                bare.push((
                    BareWrite::Plain,
                    size,
                    bare_ops(&t, BareWrite::Plain, size, n * rounds),
                ));
                // Up to one chunk the chunked form is the same calls.
                if size > writegate_fs::WRITE_CHUNK {
                    let how = BareWrite::Chunked;
                    bare.push((how, size, bare_ops(&t, how, size, n * rounds)));
                }
            }
            table.push((op, size, ops));
        }
    }

    println!("ops/s (one request in flight, {rounds} rounds; every file checked on disk):");
    print!("  {:<6}{:>8}", "op", "size");
    for p in &peers {
        print!("{:>22}", p.kind.name());
    }
    for p in peers.iter().skip(1) {
        print!("{:>26}", format!("writegate / {}", p.kind.dir()));
    }
    println!();
    for (op, size, ops) in &table {
        print!(
            "  {:<6}{:>8}",
            if *op == Op::Write { "write" } else { "edit" },
            fmt_size(*size)
        );
        for o in ops {
            print!("{o:>22.1}");
        }
        for o in ops.iter().skip(1) {
            print!("{:>25.2}x", ops[0] / o);
        }
        println!();
    }
    println!();
    println!(
        "the bare durable sequence (temp file, write, fsync, rename, directory fsync; no IPC, no JSON, no audit), new file per write, same sizes;"
    );
    println!(
        "  plain = {}; chunked = {}; up to one chunk the two are the same calls",
        BareWrite::Plain.describe(),
        BareWrite::Chunked.describe()
    );
    for (how, size, ops) in &bare {
        let wg = table
            .iter()
            .find(|(o, s, _)| *o == Op::Write && s == size)
            .map_or(0.0, |(_, _, ops)| ops[0]);
        print!(
            "  write {:>8}  bare {:<8}{ops:>9.1} ops/s   writegate / bare {:.2}x",
            fmt_size(*size),
            if *how == BareWrite::Plain {
                "plain"
            } else {
                "chunked"
            },
            wg / ops
        );
        if let Some(rust) = peers.iter().position(|p| p.kind == Kind::RustFs) {
            let (_, _, peer_ops) = table
                .iter()
                .find(|(o, s, _)| *o == Op::Write && s == size)
                .unwrap();
            print!("   bare / rust-mcp-filesystem {:.2}x", ops / peer_ops[rust]);
        }
        println!();
    }
    if let Some(rust) = peers.iter().position(|p| p.kind == Kind::RustFs) {
        println!();
        println!("targets against rust-mcp-filesystem (printed, not asserted):");
        for (op, size, want) in [
            (Op::Write, KIB, 1.5),
            (Op::Write, 5 * MIB, 4.0),
            (Op::Edit, 5 * MIB, 3.0),
        ] {
            let Some((_, _, ops)) = table.iter().find(|(o, s, _)| *o == op && *s == size) else {
                continue;
            };
            let ratio = ops[0] / ops[rust];
            println!(
                "  {} {}: {ratio:.2}x (target {want}x): {}",
                if op == Op::Write { "write" } else { "edit" },
                fmt_size(size),
                if ratio >= want { "met" } else { "NOT met" }
            );
        }
    }
    let _ = servers.drain(..);
    println!("load average at end: {}", common::load_average());
}
