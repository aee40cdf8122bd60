//! Bounded memory under load (ADR 0008): many connections sending 5 MiB
//! writes at the same moment, connections that stop in the middle of a long
//! line, and a long run of sequential 5 MiB overwrites, each against the
//! daemon's peak resident memory (`VmHWM` from `/proc`). A memory bound is
//! asserted; no time is (the waits only fail a broken daemon instead of
//! hanging).

use crate::common::{BIN, Clients, Daemon, Opts, TIMEOUT, Tree, TreeAudit, truncate};
use serde_json::{Value, json};
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::{Arc, Barrier};

const MIB: u64 = 1024 * 1024;
/// The content of every write: 5 MiB of 64-byte lines (a JSON-escaped
/// `\n` each), the largest `max_write_bytes` allows.
const WRITE_BYTES: usize = 5 * 1024 * 1024;

/// The issue's bound for 16 and for 64 connections writing 5 MiB each.
const CONCURRENT_BOUND: u64 = 160 * MIB;

fn content(tag: &str) -> String {
    let line = format!("{tag:>8} 0123456789 the quick brown fox jumps over the lazy dog\n");
    assert_eq!(line.len(), 64);
    line.repeat(WRITE_BYTES / 64)
}

/// A `/proc/<pid>/status` field of `d` in bytes: `VmHWM` (peak resident
/// set), `VmRSS`, `RssAnon` (heap and stacks), `RssFile` (mapped files: the
/// binary's code, larger in the debug build the tests run).
fn status_bytes(d: &Daemon, key: &str) -> u64 {
    d.status_kib(key) * 1024
}

/// A raw socket connection for big lines: the request is written in pieces
/// (prefix, the shared escaped content, suffix), so the test holds one copy
/// of the content however many connections send it.
struct Conn {
    w: UnixStream,
    r: BufReader<UnixStream>,
}

impl Conn {
    fn open(sock: &Path) -> Conn {
        let w = UnixStream::connect(sock).unwrap();
        w.set_read_timeout(Some(TIMEOUT)).unwrap();
        w.set_write_timeout(Some(TIMEOUT)).unwrap();
        let r = BufReader::new(w.try_clone().unwrap());
        Conn { w, r }
    }

    /// Sends a `fs/write_text_file` of `path` with id `id` whose content is
    /// `escaped` (already JSON-escaped, with its quotes) and returns the
    /// answer.
    fn write(&mut self, id: u64, path: &Path, escaped: &[u8]) -> Value {
        let (prefix, suffix) = pieces(id, path);
        self.w.write_all(&prefix).unwrap();
        self.w.write_all(escaped).unwrap();
        self.w.write_all(suffix).unwrap();
        self.answer()
    }

    fn answer(&mut self) -> Value {
        let mut line = String::new();
        let n = self
            .r
            .read_line(&mut line)
            .expect("an answer before the timeout");
        assert!(n > 0, "the daemon closed the connection");
        serde_json::from_str(&line).unwrap()
    }
}

/// The pieces of a `fs/write_text_file` line for `path`, around the shared
/// JSON-escaped content.
fn pieces(id: u64, path: &Path) -> (Vec<u8>, &'static [u8]) {
    let mut prefix = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"fs/write_text_file","params":{{"sessionId":"load","path":"#
    )
    .into_bytes();
    prefix.extend_from_slice(&serde_json::to_vec(path).unwrap());
    prefix.extend_from_slice(br#","content":"#);
    (prefix, b"}}\n")
}

/// `n` connections each send one 5 MiB overwrite at the same moment; every
/// one is answered `{}` and lands.
fn burst(t: &Tree, n: usize, escaped: &Arc<Vec<u8>>, expect: &Arc<String>) {
    let barrier = Arc::new(Barrier::new(n));
    let threads: Vec<_> = (0..n)
        .map(|i| {
            let path = t.ws.join(format!("f{i:02}.txt"));
            let (barrier, escaped, sock) = (barrier.clone(), escaped.clone(), t.sock.clone());
            std::thread::spawn(move || {
                let mut c = Conn::open(&sock);
                barrier.wait();
                (c.write(i as u64, &path, &escaped), path)
            })
        })
        .collect();
    for th in threads {
        let (answer, path) = th.join().unwrap();
        assert_eq!(
            answer["result"],
            json!({}),
            "{}",
            truncate(&answer.to_string())
        );
        assert!(
            fs::read_to_string(&path).unwrap() == **expect,
            "{} holds other bytes",
            path.display()
        );
    }
}

/// 16 connections write 5 MiB each at once, then 64 do: the daemon's peak
/// resident memory stays within 160 MiB both times, because reading and
/// handling big lines waits for the daemon-wide budget (`max_inflight_bytes`)
/// instead of taking everything at once. Every write lands, none fails.
#[test]
fn sixteen_then_sixty_four_connections_writing_5_mib_at_once_stay_within_160_mib() {
    let t = Tree::new(BIN);
    for i in 0..64 {
        fs::write(t.ws.join(format!("f{i:02}.txt")), content("old")).unwrap();
    }
    let d = t.socket_daemon(&[]);
    let expect = Arc::new(content("new"));
    let escaped = Arc::new(serde_json::to_vec(&*expect).unwrap());
    burst(&t, 16, &escaped, &expect);
    let after16 = status_bytes(&d, "VmHWM");
    assert!(
        after16 <= CONCURRENT_BOUND,
        "16 connections x 5 MiB: peak {} MiB",
        after16 / MIB
    );
    burst(&t, 64, &escaped, &expect);
    let after64 = status_bytes(&d, "VmHWM");
    assert!(
        after64 <= CONCURRENT_BOUND,
        "64 connections x 5 MiB: peak {} MiB (after 16: {} MiB)",
        after64 / MIB,
        after16 / MIB
    );
    let events = t.audit_events();
    assert_eq!(events.len(), 80);
    assert!(events.iter().all(|e| e["type"] == "fs.access"));
}

/// Memory grew with concurrent writers (about 2.4 MiB per connection: 983
/// MiB at 400 connections sending two 5 MiB writes each): a connection
/// whose read brought the start of its next line along with the end of a
/// long one kept the long line's whole buffer for those few bytes while it
/// waited for budget for the next line. 200 connections each pipeline two
/// 5 MiB writes at the same moment: the peak stays within 160 MiB, every
/// write lands whole, one event each. (What one waiting connection holds
/// is pinned by `budget.rs`; 400 connections are measured in release
/// builds, docs/performance.md.)
#[test]
fn two_hundred_connections_pipelining_two_5_mib_writes_stay_within_160_mib() {
    const CONNS: usize = 200;
    let t = Tree::new(BIN);
    let d = t.socket_daemon(&[]);
    let expect = Arc::new(content("piped"));
    let escaped = Arc::new(serde_json::to_vec(&*expect).unwrap());
    let barrier = Arc::new(Barrier::new(CONNS));
    let threads: Vec<_> = (0..CONNS)
        .map(|i| {
            let paths = [0, 1].map(|k| t.ws.join(format!("c{i:03}-{k}.txt")));
            let (barrier, escaped, sock) = (barrier.clone(), escaped.clone(), t.sock.clone());
            std::thread::spawn(move || {
                let mut c = Conn::open(&sock);
                barrier.wait();
                for (k, path) in paths.iter().enumerate() {
                    let (prefix, suffix) = pieces(k as u64, path);
                    c.w.write_all(&prefix).unwrap();
                    c.w.write_all(&escaped).unwrap();
                    c.w.write_all(suffix).unwrap();
                }
                ([c.answer(), c.answer()], paths)
            })
        })
        .collect();
    for th in threads {
        let (answers, paths) = th.join().unwrap();
        for a in answers {
            assert_eq!(a["result"], json!({}), "{}", truncate(&a.to_string()));
        }
        for path in paths {
            assert!(
                fs::read_to_string(&path).unwrap() == *expect,
                "{} holds other bytes",
                path.display()
            );
        }
    }
    let peak = status_bytes(&d, "VmHWM");
    eprintln!("{CONNS} connections x 2 x 5 MiB: peak {} MiB", peak / MIB);
    assert!(
        peak <= CONCURRENT_BOUND,
        "{CONNS} connections x 2 x 5 MiB: peak {} MiB",
        peak / MIB
    );
    assert_eq!(t.audit_events().len(), 2 * CONNS);
}

/// 64 connections each send all of a 5 MiB line but its newline and wait:
/// a line still being read counts against the budget too, so the daemon
/// does not buffer 64 x 5 MiB (it reads on only with budget for the line,
/// and the others wait unread). When the newlines follow, every write is
/// answered and lands. The two lines read under a reservation are
/// complete but for their newline and wait for it as long as the test
/// samples memory: their stall timeout is set long, so that they are not
/// closed as stalled (`budget.rs` tests that).
#[test]
fn sixty_four_half_sent_5_mib_lines_are_not_all_buffered() {
    let t = Tree::new(BIN);
    let d = t.daemon(Opts {
        socket: true,
        env: &[("WRITEGATE_LINE_STALL_TIMEOUT_MS", "600000")],
        ..Opts::default()
    });
    let expect = content("partial");
    let escaped = serde_json::to_vec(&expect).unwrap();
    let idle = status_bytes(&d, "VmHWM");
    // Every sender stops before its newline until the gate opens.
    let gate = Arc::new(std::sync::RwLock::new(()));
    let closed = gate.write().unwrap();
    let escaped = Arc::new(escaped);
    let senders: Vec<_> = (0..64u64)
        .map(|i| {
            let path = t.ws.join(format!("p{i:02}.txt"));
            let (gate, escaped, sock) = (gate.clone(), escaped.clone(), t.sock.clone());
            std::thread::spawn(move || {
                let mut c = Conn::open(&sock);
                let (prefix, _) = pieces(i, &path);
                // Blocks while the daemon does not read this connection.
                c.w.write_all(&prefix).unwrap();
                c.w.write_all(&escaped).unwrap();
                c.w.write_all(b"}}").unwrap();
                drop(gate.read().unwrap());
                c.w.write_all(b"\n").unwrap();
                (c.answer(), path)
            })
        })
        .collect();
    // Wait until the daemon has read what it will read: its resident
    // memory stops growing (sampled; the bound below is what is asserted).
    let mut last = 0;
    let mut still = 0;
    let deadline = std::time::Instant::now() + TIMEOUT;
    while still < 10 {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let now = status_bytes(&d, "VmRSS");
        if now.abs_diff(last) < MIB {
            still += 1;
        } else {
            still = 0;
        }
        last = now;
        assert!(std::time::Instant::now() < deadline, "memory never settled");
    }
    let held = status_bytes(&d, "VmHWM");
    assert!(
        held <= CONCURRENT_BOUND,
        "64 half-sent 5 MiB lines: peak {} MiB (idle {} MiB)",
        held / MIB,
        idle / MIB
    );
    // Now the newlines: every line completes as the budget frees up.
    drop(closed);
    for s in senders {
        let (a, path) = s.join().unwrap();
        assert_eq!(a["result"], json!({}), "{}", truncate(&a.to_string()));
        assert!(fs::read_to_string(&path).unwrap() == expect);
    }
    let peak = status_bytes(&d, "VmHWM");
    assert!(
        peak <= CONCURRENT_BOUND,
        "after completing them: peak {} MiB",
        peak / MIB
    );
}

/// One 5 MiB write, then 24 more overwrites on one connection: the peak
/// stays within 3x the payload plus 16 MiB (memory does not creep with
/// repetition), and the daemon is small when idle (within 10 MiB). The
/// daemon's mapped files (its code: the tests run a debug build, several
/// MiB larger than the release one) are not request memory: the bounds
/// apply to the peak less the files mapped when idle, and to the idle
/// heap and stacks (`RssAnon`); docs/performance.md has the release
/// daemon's own figures.
#[test]
fn sequential_5_mib_overwrites_stay_within_three_times_the_payload() {
    let t = Tree::new(BIN);
    let d = t.socket_daemon(&[]);
    let mut c = Conn::open(&t.sock);
    c.w.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1,\"clientCapabilities\":{}}}\n")
        .unwrap();
    assert!(c.answer()["result"].is_object());
    let idle = status_bytes(&d, "RssAnon");
    assert!(
        idle <= 10 * MIB,
        "idle: {} MiB of heap and stacks",
        idle / MIB
    );
    let code = status_bytes(&d, "RssFile");
    let bound = 3 * WRITE_BYTES as u64 + 16 * MIB;
    let path = t.ws.join("seq.txt");
    for i in 0..25u64 {
        let body = content(&format!("v{i}"));
        let a = c.write(i + 1, &path, &serde_json::to_vec(&body).unwrap());
        assert_eq!(a["result"], json!({}), "{}", truncate(&a.to_string()));
        let peak = status_bytes(&d, "VmHWM").saturating_sub(code);
        assert!(
            peak <= bound,
            "after {} writes of 5 MiB: peak {} MiB besides {} MiB of code (bound {} MiB)",
            i + 1,
            peak / MIB,
            code / MIB,
            bound / MIB
        );
    }
    assert!(fs::read_to_string(&path).unwrap() == content("v24"));
}

/// The stdio transport (how hosts spawn the daemon) reads its pipe itself:
/// 5 MiB writes over stdin land, each answered once, within the same
/// memory bound as over the socket.
#[test]
fn five_mib_writes_over_stdio_land_within_the_same_bound() {
    let t = Tree::new(BIN);
    let mut d = t.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    let code = status_bytes(&d, "RssFile");
    let path = t.ws.join("stdio.txt");
    for i in 0..3u64 {
        let body = content(&format!("s{i}"));
        let (prefix, suffix) = pieces(i + 1, &path);
        let mut line = prefix;
        line.extend_from_slice(&serde_json::to_vec(&body).unwrap());
        line.extend_from_slice(suffix);
        c.send_raw(&line);
        let a = c.recv();
        assert_eq!(a["id"], i + 1);
        assert_eq!(a["result"], json!({}), "{}", truncate(&a.to_string()));
        assert!(fs::read_to_string(&path).unwrap() == body);
    }
    let peak = status_bytes(&d, "VmHWM").saturating_sub(code);
    assert!(
        peak <= 3 * WRITE_BYTES as u64 + 16 * MIB,
        "peak {} MiB besides the code",
        peak / MIB
    );
}

/// Sequential 5 MiB overwrites stay within the same bound (ADR 0008) after
/// the daemon has served concurrent connections. glibc gives each thread
/// that allocates an arena of its own (up to 8 per CPU) and keeps freed
/// large buffers in it: after 8 concurrent connections had run on the
/// daemon's threads, 24 sequential 5 MiB overwrites stayed at 65-70 MiB.
/// The daemon now limits glibc to two arenas (`main.rs`).
#[test]
fn sequential_5_mib_overwrites_after_concurrent_connections_stay_within_the_bound() {
    let t = Tree::new(BIN);
    let d = t.socket_daemon(&[]);
    let code = status_bytes(&d, "RssFile");
    // Eight connections at once, 64 KiB writes, on as many threads as the
    // daemon uses for them.
    let barrier = Arc::new(Barrier::new(8));
    let mid = "x".repeat(64 * 1024 - 1) + "\n";
    let mid = Arc::new(serde_json::to_vec(&mid).unwrap());
    let threads: Vec<_> = (0..8)
        .map(|i| {
            let (barrier, mid, sock, ws) =
                (barrier.clone(), mid.clone(), t.sock.clone(), t.ws.clone());
            std::thread::spawn(move || {
                let mut c = Conn::open(&sock);
                barrier.wait();
                for k in 0..40u64 {
                    let a = c.write(k, &ws.join(format!("m{i}-{}.txt", k % 4)), &mid);
                    assert_eq!(a["result"], json!({}), "{}", truncate(&a.to_string()));
                }
            })
        })
        .collect();
    for th in threads {
        th.join().unwrap();
    }
    let mut c = Conn::open(&t.sock);
    let bound = 3 * WRITE_BYTES as u64 + 16 * MIB;
    let before = status_bytes(&d, "VmHWM").saturating_sub(code);
    let path = t.ws.join("seq.txt");
    for i in 0..24u64 {
        let body = content(&format!("w{i}"));
        let a = c.write(i + 1, &path, &serde_json::to_vec(&body).unwrap());
        assert_eq!(a["result"], json!({}), "{}", truncate(&a.to_string()));
    }
    // The small writes alone stay far below the bound, so the bound below
    // is about the 5 MiB writes.
    assert!(
        before <= bound,
        "8 connections of 64 KiB writes: peak {} MiB",
        before / MIB
    );
    let peak = status_bytes(&d, "VmHWM").saturating_sub(code);
    assert!(
        peak <= bound,
        "24 writes of 5 MiB after 8 concurrent connections: peak {} MiB besides {} MiB of code (bound {} MiB; {} MiB before them)",
        peak / MIB,
        code / MIB,
        bound / MIB,
        before / MIB
    );
    assert!(fs::read_to_string(&path).unwrap() == content("w23"));
}
