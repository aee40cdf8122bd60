//! How a connection schedules its requests: the daemon-wide in-flight
//! budget (`max_inflight_bytes`), the per-connection limit of outstanding
//! lines (docs/behaviour.md, "Limits"), and small requests run on a runtime
//! worker without holding up the connection (`writegate_stdio::run::INLINE_MAX`).
//! Connections are served in-process over in-memory pipes, against a real
//! `Service` on a temp workspace with real files.

use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, ReadHalf, WriteHalf};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use writegate_acp::budget::{BUDGET_FREE_LINE, Budget};
use writegate_acp::conn::Shared;
use writegate_acp::serve_connection;
use writegate_acp::transport::Transport;
use writegate_core::{Config, Registry, Runtime, Service};

fn write_line(id: u64, path: &Path, content: &str) -> Vec<u8> {
    let mut line = serde_json::to_vec(&json!({
        "jsonrpc": "2.0", "id": id, "method": "fs/write_text_file",
        "params": {"sessionId": "s", "path": path, "content": content}
    }))
    .unwrap();
    line.push(b'\n');
    line
}

/// A `_writegate/receipt` request line with `id`.
fn receipt_line(id: u64) -> Vec<u8> {
    let mut line = serde_json::to_vec(&json!({
        "jsonrpc": "2.0", "id": id, "method": "_writegate/receipt",
        "params": {"sessionId": "s"}
    }))
    .unwrap();
    line.push(b'\n');
    line
}

/// A daemon's shared state over a real service on a temp workspace, and
/// in-process connections to it.
struct Fixture {
    runtime: Arc<Runtime>,
    shared: Arc<Shared>,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

impl Fixture {
    /// `config` for the service, a budget of `budget` bytes, `slots` worker
    /// slots.
    fn new(config: Config, budget: u64, slots: usize) -> Fixture {
        let ws = tempfile::tempdir().unwrap();
        let state = tempfile::tempdir().unwrap();
        let registry = Registry::default();
        let runtime = registry.register(ws.path(), true).unwrap();
        let service = Arc::new(Service::new(
            config,
            registry,
            &state.path().join("audit.jsonl"),
            state.path().join("approvals.json"),
        ));
        let shared = Arc::new(Shared {
            service,
            shutdown: CancellationToken::new(),
            budget: Budget::new(budget),
            line_stall: None,
            line_min_rate: None,
            worker_slots: Arc::new(Semaphore::new(slots)),
        });
        Fixture {
            runtime,
            shared,
            _dirs: (ws, state),
        }
    }

    /// A new connection served over an in-memory pipe of `pipe` bytes each
    /// way; returns the client's ends.
    fn connect(&self, pipe: usize) -> (ReadHalf<DuplexStream>, WriteHalf<DuplexStream>) {
        let (client, server) = tokio::io::duplex(pipe);
        let (sr, sw) = tokio::io::split(server);
        tokio::spawn(serve_connection(
            self.shared.clone(),
            self.runtime.clone(),
            sr,
            sw,
            Transport::Stdio,
            None,
        ));
        tokio::io::split(client)
    }
}

/// Three connections pipeline writes whose lines (about 40 KiB each once
/// JSON-escaped, and one of 125 KiB, larger than the whole budget) cannot be in flight two at a
/// time under a 48 KiB budget. Every request is answered `{}` and lands,
/// the oversized one included (it waits for an idle daemon, not forever),
/// and at no moment do two requests hold path locks at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_that_do_not_fit_together_run_one_at_a_time_and_all_land() {
    within(async {
        let f = Fixture::new(Config::default(), 48 * 1024, 1);
        assert_eq!(f.shared.budget.available(), 48);
        let root = f.runtime.root.clone();
        let service = f.shared.service.clone();

        // Watch the path locks from another thread while the writes run.
        let stop = Arc::new(AtomicBool::new(false));
        let most = Arc::new(AtomicUsize::new(0));
        let sampler = {
            let (stop, most, service) = (stop.clone(), most.clone(), service.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    most.fetch_max(service.live_locks(), Ordering::Relaxed);
                    std::thread::yield_now();
                }
            })
        };

        let mut clients = Vec::new();
        for c in 0..3u64 {
            let (cr, mut cw) = f.connect(1 << 20);
            let root = root.clone();
            clients.push(tokio::spawn(async move {
                let mut expected = Vec::new();
                for i in 0..5u64 {
                    let size = if c == 0 && i == 4 {
                        100 * 1024
                    } else {
                        32 * 1024
                    };
                    let content = format!("{c}-{i}\n").repeat(size / 4);
                    let path = root.join(format!("c{c}-{i}.txt"));
                    cw.write_all(&write_line(i, &path, &content)).await.unwrap();
                    expected.push((path, content));
                }
                let mut lines = BufReader::new(cr).lines();
                for _ in 0..5 {
                    let line = lines.next_line().await.unwrap().expect("an answer");
                    let v: Value = serde_json::from_str(&line).unwrap();
                    assert_eq!(v["result"], json!({}), "{v}");
                }
                drop(cw); // end of input: the connection drains and returns
                expected
            }));
        }
        for client in clients {
            for (path, content) in client.await.unwrap() {
                assert_eq!(std::fs::read_to_string(&path).unwrap(), content);
            }
        }
        stop.store(true, Ordering::Relaxed);
        sampler.join().unwrap();
        assert!(
            most.load(Ordering::Relaxed) <= 1,
            "two requests held path locks at once under a budget that fits one"
        );
        // Everything was given back.
        assert_eq!(f.shared.budget.available(), 48);
    })
    .await;
}

#[test]
fn costs_are_whole_kib_above_the_free_size_capped_at_the_budget() {
    let b = Budget::new(10 * 1024);
    // Small lines never wait (see BUDGET_FREE_LINE).
    assert_eq!(b.cost(0), 0);
    assert_eq!(b.cost(BUDGET_FREE_LINE), 0);
    assert_eq!(b.cost(BUDGET_FREE_LINE + 1), 5);
    assert_eq!(b.cost(8 * 1024), 8);
    assert_eq!(b.cost(8 * 1024 + 1), 9);
    assert_eq!(b.cost(50 * 1024 * 1024), 10);
    assert_eq!(Budget::new(1).available(), 1);
    assert_eq!(Budget::new(1500).available(), 2);
}

/// A client that sends 2000 requests without reading any answer: once its
/// connection has `MAX_OUTSTANDING` lines unanswered-or-unwritten and both
/// small pipes are full, the daemon stops reading, so the client's writes
/// stall far short of 2000 (the daemon does not buffer without bound). When
/// the client starts reading, every request is answered exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_does_not_read_its_answers_is_no_longer_read() {
    within(async {
        const PIPE: usize = 4096;
        const TOTAL: usize = 2000;
        let f = Fixture::new(Config::default(), 64 * 1024 * 1024, 1);
        let (cr, mut cw) = f.connect(PIPE);
        let sent = Arc::new(AtomicUsize::new(0));
        let writer = {
            let sent = sent.clone();
            tokio::spawn(async move {
                for id in 0..TOTAL {
                    cw.write_all(&receipt_line(id as u64)).await.unwrap();
                    sent.fetch_add(1, Ordering::SeqCst);
                }
                cw
            })
        };
        // Wait until the writer has made no progress for 300 ms.
        let mut last = usize::MAX;
        let mut still_since = Instant::now();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            tokio::time::sleep(Duration::from_millis(20)).await;
            let now = sent.load(Ordering::SeqCst);
            if now != last {
                last = now;
                still_since = Instant::now();
            } else if still_since.elapsed() > Duration::from_millis(300) {
                break;
            }
            assert!(Instant::now() < deadline, "the writer never stalled");
        }
        // What the daemon can have read without its answers being read: the
        // MAX_OUTSTANDING lines it holds, the answers sitting in the 4 KiB
        // pipe and the writer task's 8 KiB buffer (~64 B each), and the
        // requests in the reader's buffer (one 4-8 KiB read, ~84 B each): about
        // 350 to 400. Without the limit it would read all 2000.
        let stalled_at = sent.load(Ordering::SeqCst);
        assert!(
            stalled_at < 700,
            "the daemon read {stalled_at} of {TOTAL} lines without their answers being read"
        );
        // Now read: everything is answered, each id once.
        let mut lines = BufReader::new(cr).lines();
        let mut seen = vec![false; TOTAL];
        for _ in 0..TOTAL {
            let line = lines.next_line().await.unwrap().expect("an answer");
            let v: Value = serde_json::from_str(&line).unwrap();
            let id = usize::try_from(v["id"].as_u64().unwrap()).unwrap();
            assert!(v.get("result").is_some(), "{v}");
            assert!(!seen[id], "id {id} answered twice");
            seen[id] = true;
        }
        drop(writer.await.unwrap());
    })
    .await;
}

/// A small request runs as a task on a runtime worker, but its connection
/// keeps reading and answering: an edit of a 24 MiB file (small line, so it
/// takes the worker path; tens of ms of reading, hashing and fsync) is
/// still running when a `_writegate/receipt` sent after it on the same
/// connection is answered (SPEC 1: requests on one connection are handled
/// concurrently).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_on_a_worker_does_not_hold_up_its_connection() {
    within(async {
        let config = Config {
            max_edit_bytes: 64 * 1024 * 1024,
            max_write_bytes: 64 * 1024 * 1024,
            ..Config::default()
        };
        let f = Fixture::new(config, 64 * 1024 * 1024, 1);
        let shared = f.shared.clone();
        let big = f.runtime.root.join("big.txt");
        let line = "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcd\n"; // 51 bytes
        let mut body = line.repeat(24 * 1024 * 1024 / line.len());
        body.push_str("UNIQUE-MARKER\n");
        std::fs::write(&big, &body).unwrap();
        let (cr, mut cw) = f.connect(1 << 16);
        let edit = json!({
            "jsonrpc": "2.0", "id": 1, "method": "_writegate/edit_text_file",
            "params": {"sessionId": "s", "path": big, "mode": "replace",
                       "find": "UNIQUE-MARKER", "content": "DONE"}
        });
        let mut first = serde_json::to_vec(&edit).unwrap();
        first.push(b'\n');
        cw.write_all(&first).await.unwrap();
        // The edit is running (it holds the only worker slot) before the
        // receipt is sent.
        let deadline = Instant::now() + Duration::from_secs(30);
        while shared.worker_slots.available_permits() != 0 {
            assert!(
                Instant::now() < deadline,
                "the edit never started on a worker"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        cw.write_all(&receipt_line(2)).await.unwrap();
        let mut lines = BufReader::new(cr).lines();
        let a: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        let b: Value = serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(a["id"], 2, "the receipt waited for the edit: {a}");
        assert!(a.get("result").is_some(), "{a}");
        assert_eq!(b["id"], 1);
        assert!(b.get("result").is_some(), "{b}");
        let after = std::fs::read_to_string(&big).unwrap();
        assert!(after.ends_with("DONE\n") && after.len() == body.len() - "UNIQUE-MARKER".len() + 4);
        assert_eq!(shared.worker_slots.available_permits(), 1);
    })
    .await;
}

/// Two slow small requests on two connections, with two workers and one
/// worker slot: the first runs on a worker, the second, finding no slot, on
/// a blocking thread. So the other worker is still free to read a third
/// connection, whose receipt is answered before either slow read is done
/// (with a slot for every worker both workers would be blocked and the
/// receipt would wait).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_worker_stays_free_for_other_connections() {
    within(async {
        let config = Config {
            max_edit_bytes: 64 * 1024 * 1024,
            // `_writegate/read_lines` is served only with reads on.
            read_text_file: true,
            ..Config::default()
        };
        let f = Fixture::new(config, 64 * 1024 * 1024, 1);
        let (runtime, shared) = (f.runtime.clone(), f.shared.clone());
        let line = "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcd\n";
        let body = line.repeat(48 * 1024 * 1024 / line.len());
        for name in ["a.txt", "b.txt"] {
            std::fs::write(runtime.root.join(name), &body).unwrap();
        }
        let start = Instant::now();
        // One connection: send `request`, return when its answer arrived.
        let open = |request: Value| {
            let (cr, mut cw) = f.connect(1 << 16);
            async move {
                let mut bytes = serde_json::to_vec(&request).unwrap();
                bytes.push(b'\n');
                cw.write_all(&bytes).await.unwrap();
                let mut lines = BufReader::new(cr).lines();
                let answer: Value =
                    serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
                assert!(answer.get("result").is_some(), "{answer}");
                (start.elapsed(), cw)
            }
        };
        let read = |name: &str| {
            json!({"jsonrpc": "2.0", "id": 1, "method": "_writegate/read_lines",
                   "params": {"sessionId": "s", "path": runtime.root.join(name),
                              "line": 1, "limit": 1}})
        };
        let a = tokio::spawn(open(read("a.txt")));
        // `a` holds the only slot before `b` is sent.
        while shared.worker_slots.available_permits() != 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let b = tokio::spawn(open(read("b.txt")));
        tokio::time::sleep(Duration::from_millis(2)).await;
        let receipt = json!({"jsonrpc": "2.0", "id": 1, "method": "_writegate/receipt",
                             "params": {"sessionId": "s"}});
        let (receipt_at, _) = tokio::spawn(open(receipt)).await.unwrap();
        let (a_at, _) = a.await.unwrap();
        let (b_at, _) = b.await.unwrap();
        assert!(
            receipt_at < a_at && receipt_at < b_at,
            "the receipt ({receipt_at:?}) waited for a slow read (a {a_at:?}, b {b_at:?})"
        );
        assert_eq!(shared.worker_slots.available_permits(), 1);
    })
    .await;
}

/// Fails a test that hangs (a deadlock) instead of hanging the suite.
async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(120), f)
        .await
        .expect("the test did not finish in 120 s: a deadlock?")
}
