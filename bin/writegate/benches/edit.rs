//! A one-line edit and a find-replace of a 5 MB file through the real daemon,
//! against a durable whole-file write of the same 5 MB, measured in the same
//! run; the daemon's peak memory for one such edit; and the in-process cost of
//! `writegate_text::apply_edit` on the same buffer (no disk).
//!
//! Run: `cargo bench -p writegate --bench edit`
//! (optional: `WG_BENCH_SCALE=0.5` or `=2` scales the number of iterations).
//!
//! Daemon part: one daemon, one socket connection, one 5,000,000-byte file of
//! 100,000 ASCII lines (under `max_edit_bytes` = 5 MiB). Each iteration does,
//! in an order that flips every iteration: `fs/write_text_file` of the whole
//! content, `_writegate/edit_text_file` replace by `line` (line 50,010),
//! replace by `find` (a unique marker on line 50,000), a `_writegate/read_lines`
//! of one line (read + hash, no publish), and the bare in-process durable
//! sequence for 5 MB (temp file, write, fsync, rename, fsync directory) on a
//! sibling file. Medians over all iterations.
//!
//! Memory part: a fresh daemon per measurement; VmHWM (peak RSS) read after
//! start + initialize, then one request, then VmHWM again. A line or find
//! request carries a few bytes, so the delta is the daemon's working memory
//! for the edit.
//!
//! This prints figures; it asserts nothing about time.

use serde_json::{Value, json};
use sha2::Digest;
use std::alloc::{GlobalAlloc, Layout, System};
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use writegate_text::{EditMode, EditRequest, WriteOptions};

const BIN: &str = env!("CARGO_BIN_EXE_writegate");
const KIB: usize = 1024;
const MIB: usize = 1024 * 1024;
/// The edited file: 100,000 lines of 50 bytes.
const FILE_BYTES: usize = 5_000_000;
const LINE_BYTES: usize = 50;
const LINES: usize = FILE_BYTES / LINE_BYTES;
/// The line holding the find marker, and the line replaced by number.
const FIND_LINE: usize = 50_000;
const EDIT_LINE: u64 = 50_010;

// ---------------------------------------------------------------------------
// Shared helpers (duplicated in benches/edit.rs: each bench is one file).
// ---------------------------------------------------------------------------

/// A temp tree on the same filesystem as the build (fsync cost matters):
/// `<target>/bench-tmp/<name>-<pid>/{ws,home,state,config,run}`.
struct Tree {
    base: PathBuf,
    ws: PathBuf,
    sock: PathBuf,
    audit: PathBuf,
}

impl Tree {
    fn new(name: &str) -> Tree {
        // BIN is <target>/<profile>/writegate.
        let target = Path::new(BIN)
            .parent()
            .and_then(Path::parent)
            .expect("binary inside a target dir");
        let base = target
            .join("bench-tmp")
            .join(format!("{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&base);
        for d in ["ws", "home", "state", "config", "run"] {
            fs::create_dir_all(base.join(d)).unwrap();
        }
        let base = fs::canonicalize(&base).unwrap();
        let mut sock = base.join("run/s.sock");
        if sock.as_os_str().len() > 100 {
            // sun_path is 108 bytes; the socket need not be on the same disk.
            sock = std::env::temp_dir().join(format!("wg-bench-{}.sock", std::process::id()));
        }
        Tree {
            ws: base.join("ws"),
            audit: base.join("state/audit.jsonl"),
            sock,
            base,
        }
    }
}

impl Drop for Tree {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.base);
        let _ = fs::remove_file(&self.sock);
    }
}

/// `fstype device (mount point)` of the mount holding `path`, from
/// /proc/self/mountinfo (longest mount-point prefix).
fn filesystem_of(path: &Path) -> String {
    let info = fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut best: Option<(usize, String)> = None;
    for line in info.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let Some(sep) = f.iter().position(|x| *x == "-") else {
            continue;
        };
        if f.len() < sep + 3 || f.len() < 5 {
            continue;
        }
        let mnt = f[4].replace("\\040", " ");
        if path.starts_with(&mnt) && best.as_ref().is_none_or(|(l, _)| mnt.len() > *l) {
            best = Some((
                mnt.len(),
                format!("{} on {} (mounted at {mnt})", f[sep + 1], f[sep + 2]),
            ));
        }
    }
    best.map(|b| b.1).unwrap_or_else(|| "unknown".into())
}

/// A running `writegate serve --socket`; killed (by its pid) when dropped.
struct Daemon {
    child: Child,
    sock: PathBuf,
}

impl Daemon {
    fn start(t: &Tree) -> Daemon {
        let stderr = File::create(t.base.join("daemon.stderr")).unwrap();
        let child = Command::new(BIN)
            .arg("serve")
            .arg("--socket")
            .arg(&t.sock)
            .arg("--workspace")
            .arg(&t.ws)
            .arg("--audit-log")
            .arg(&t.audit)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", t.base.join("home"))
            .env("XDG_RUNTIME_DIR", t.base.join("run"))
            .env("XDG_STATE_HOME", t.base.join("state"))
            .env("XDG_CONFIG_HOME", t.base.join("config"))
            .current_dir(&t.base)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .expect("spawn writegate");
        let mut d = Daemon {
            child,
            sock: t.sock.clone(),
        };
        let start = Instant::now();
        loop {
            if let Some(st) = d.child.try_wait().unwrap() {
                panic!(
                    "daemon exited early ({st:?}): {}",
                    fs::read_to_string(t.base.join("daemon.stderr")).unwrap_or_default()
                );
            }
            if UnixStream::connect(&t.sock).is_ok() {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "socket never answered"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        d
    }

    /// A `/proc/<pid>/status` field in KiB (VmRSS, VmHWM).
    fn status_kib(&self, key: &str) -> u64 {
        let s = fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        s.lines()
            .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key} in /proc/pid/status"))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = fs::remove_file(&self.sock);
    }
}

/// A socket connection sending one request at a time. Request lines are
/// assembled into one reusable buffer from pre-serialised pieces, so the
/// client costs one memcpy and one `write(2)` per request.
struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    buf: Vec<u8>,
    resp: String,
    id: u64,
}

impl Client {
    fn connect(sock: &Path) -> Client {
        let s = UnixStream::connect(sock).unwrap();
        let mut c = Client {
            reader: BufReader::new(s.try_clone().unwrap()),
            writer: s,
            buf: Vec::new(),
            resp: String::new(),
            id: 0,
        };
        let init =
            serde_json::to_vec(&json!({"protocolVersion": 1, "clientCapabilities": {}})).unwrap();
        c.call("initialize", &[&init]);
        c
    }

    /// Sends `{"jsonrpc","id","method","params": <pieces concatenated>}` and
    /// returns the `result`; panics on an error answer.
    fn call(&mut self, method: &str, params: &[&[u8]]) -> Value {
        self.id += 1;
        self.buf.clear();
        write!(
            self.buf,
            r#"{{"jsonrpc":"2.0","id":{},"method":"{method}","params":"#,
            self.id
        )
        .unwrap();
        for p in params {
            self.buf.extend_from_slice(p);
        }
        self.buf.extend_from_slice(b"}\n");
        self.writer.write_all(&self.buf).unwrap();
        self.resp.clear();
        let n = self.reader.read_line(&mut self.resp).unwrap();
        assert!(n > 0, "daemon closed the connection");
        let mut v: Value = serde_json::from_str(&self.resp).unwrap();
        assert_eq!(v["id"], json!(self.id), "response for another request");
        match v.get_mut("result") {
            Some(r) => r.take(),
            None => panic!("{method} failed: {}", self.resp.trim_end()),
        }
    }
}

/// The `params` of an `fs/write_text_file` as pieces: prefix with the path,
/// the JSON-escaped content, and `}`.
fn write_params_prefix(path: &Path, session: &str) -> Vec<u8> {
    let mut v = br#"{"sessionId":"#.to_vec();
    v.extend_from_slice(&serde_json::to_vec(session).unwrap());
    v.extend_from_slice(br#","path":"#);
    v.extend_from_slice(&serde_json::to_vec(path).unwrap());
    v.extend_from_slice(br#","content":"#);
    v
}

/// ASCII text of exactly `size` bytes: numbered lines ending in `\n`.
#[allow(dead_code)] // not every bench uses every helper
fn text_of(size: usize, salt: &str) -> String {
    let mut s = String::with_capacity(size + 80);
    let mut n = 0u64;
    while s.len() < size {
        n += 1;
        s.push_str(&format!(
            "{salt} line {n:07}: the quick brown fox jumps over the lazy dog\n"
        ));
    }
    s.truncate(size - 1);
    s.push('\n');
    s
}

/// The bare durable sequence with std only: exclusive 0600 temp file in the
/// target's directory, write_all, fsync, rename over the target, open the
/// directory and fsync it.
fn bare_write(dir: &Path, leaf: &str, bytes: &[u8], tag: &str, seq: &mut u64) {
    *seq += 1;
    let tmp = dir.join(format!(".{leaf}.{tag}.{}.{seq}.tmp", std::process::id()));
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .unwrap();
    f.write_all(bytes).unwrap();
    f.sync_all().unwrap();
    drop(f);
    fs::rename(&tmp, dir.join(leaf)).unwrap();
    File::open(dir).unwrap().sync_all().unwrap();
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn scale() -> f64 {
    std::env::var("WG_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0)
}

fn scaled(n: usize) -> usize {
    ((n as f64 * scale()).round() as usize).max(1)
}

#[allow(dead_code)]
fn fmt_size(size: usize) -> String {
    if size >= MIB {
        format!("{} MiB", size / MIB)
    } else {
        format!("{} KiB", size / KIB)
    }
}
