//! Helpers shared by the benches (`throughput.rs`, `edit.rs`, `proxy.rs`,
//! `mcp_peers.rs`), on top of `writegate-testkit`'s tree and daemon: the
//! tree on the build's filesystem, the release daemon spawned in it
//! (listening on a socket, or serving one connection over its stdin/stdout
//! the way hosts spawn it), a client that costs one `write(2)` per request,
//! the bare durable write sequence, and statistics.

// Each bench uses a subset of these helpers.
#![allow(dead_code)]

pub(crate) mod large_ops;
pub(crate) mod pipe_floor;

use serde_json::{Value, json};
use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
pub(crate) use writegate_testkit::{Daemon, Opts, Tree};

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_writegate");

/// The daemon binary the bench spawns: `WG_BENCH_BIN` when set (to compare
/// an older build side by side on the same machine), else the one cargo
/// built with the bench.
pub(crate) fn daemon_bin() -> PathBuf {
    std::env::var_os("WG_BENCH_BIN").map_or_else(|| PathBuf::from(BIN), PathBuf::from)
}
pub(crate) const KIB: usize = 1024;
pub(crate) const MIB: usize = 1024 * 1024;

/// A temp tree on the same filesystem as the build (fsync cost matters):
/// `<target>/bench-tmp/<name>-XXXXXX/`, the layout of [`Tree`], whose
/// commands run [`daemon_bin`]. Removed at the end unless `WG_BENCH_KEEP=1`
/// (to look at the daemon's stderr in its `logs/`).
pub(crate) fn tree(name: &str) -> Tree {
    // BIN is <target>/<profile>/writegate.
    let target = Path::new(BIN)
        .parent()
        .and_then(Path::parent)
        .expect("binary inside a target dir");
    let mut t = Tree::in_dir(daemon_bin(), &format!("{name}-"), &target.join("bench-tmp"));
    if std::env::var_os("WG_BENCH_KEEP").is_some() {
        t.keep();
    }
    t
}

/// `fstype device (mount point)` of the mount holding `path`.
pub(crate) fn filesystem_of(path: &Path) -> String {
    writegate_testkit::MountInfo::of(path).map_or_else(
        || "unknown".into(),
        |m| {
            format!(
                "{} on {} (mounted at {})",
                m.fstype,
                m.source,
                m.point.display()
            )
        },
    )
}

/// glibc allocator settings passed from the bench's environment to the
/// daemon (the daemon's environment is otherwise cleared), to compare e.g.
/// `GLIBC_TUNABLES=glibc.malloc.mmap_threshold=131072`.
pub(crate) const ALLOCATOR_ENV: [&str; 2] = ["GLIBC_TUNABLES", "MALLOC_ARENA_MAX"];

/// `writegate serve` of the tree with `--allow-read` (the benches time
/// `_writegate/read_lines`, which reads need on), the bench's
/// `audit.flush` and the allocator settings passed on.
fn bench_daemon(t: &Tree, stdio: bool) -> Daemon {
    let mut env = vec![
        ("WRITEGATE_AUDIT_FLUSH", audit_flush()),
        // A bench writes gigabytes within the hour: the store keeps to
        // `history.max_bytes` by evicting the oldest images, as a store at
        // its limit does, instead of refusing writes once the last hour's
        // images fill it (`history.min_age_minutes`).
        ("WRITEGATE_HISTORY_MIN_AGE_MINUTES", "0".to_string()),
    ];
    env.extend(
        ALLOCATOR_ENV
            .iter()
            .filter_map(|k| Some((*k, std::env::var(k).ok()?))),
    );
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    t.daemon(Opts {
        stdio,
        socket: !stdio,
        args: &["--allow-read"],
        env: &env,
        no_wait: false,
    })
}

/// `writegate serve --socket`, once its socket answers.
pub(crate) fn start_daemon(t: &Tree) -> Daemon {
    bench_daemon(t, false)
}

/// `writegate serve --socket <sock>` beside the tree's own daemon, with
/// `env` added (e.g. a config key as `WRITEGATE_*`), once its socket
/// answers.
pub(crate) fn start_daemon_at(t: &Tree, sock: &Path, env: &[(&str, &str)]) -> Daemon {
    let flush = audit_flush();
    let mut all = vec![
        ("WRITEGATE_AUDIT_FLUSH", flush.as_str()),
        // As `bench_daemon`.
        ("WRITEGATE_HISTORY_MIN_AGE_MINUTES", "0"),
    ];
    all.extend_from_slice(env);
    let sock_arg = sock.to_str().expect("a UTF-8 socket path");
    let d = t.daemon(Opts {
        stdio: false,
        socket: false,
        args: &["--allow-read", "--socket", sock_arg],
        env: &all,
        no_wait: true,
    });
    let start = std::time::Instant::now();
    while UnixStream::connect(sock).is_err() {
        assert!(
            start.elapsed() < std::time::Duration::from_secs(20),
            "the socket {} never answered",
            sock.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    d
}

/// `writegate serve --stdio` (how hosts spawn it) and the client of its
/// one connection, initialized.
pub(crate) fn start_stdio_daemon(t: &Tree) -> (Daemon, Client) {
    let mut d = bench_daemon(t, true);
    let stdin = d.child.stdin.take().unwrap();
    let stdout = d.child.stdout.take().unwrap();
    let client = Client::over(Box::new(stdout), Box::new(stdin));
    (d, client)
}

/// A connection (a socket, or a daemon's stdin/stdout) sending one request
/// at a time. Request lines are assembled into one reusable buffer from
/// pre-serialised pieces, so the client costs one memcpy and one `write(2)`
/// per request.
pub(crate) struct Client {
    reader: BufReader<Box<dyn Read + Send>>,
    writer: Box<dyn Write + Send>,
    buf: Vec<u8>,
    resp: String,
    id: u64,
}

impl Client {
    pub(crate) fn connect(sock: &Path) -> Client {
        let s = UnixStream::connect(sock).unwrap();
        Client::over(Box::new(s.try_clone().unwrap()), Box::new(s))
    }

    /// A client over `reader`/`writer`, after `initialize`.
    pub(crate) fn over(reader: Box<dyn Read + Send>, writer: Box<dyn Write + Send>) -> Client {
        let mut c = Client {
            // Large answers are read a MiB at a time, not 8 KiB.
            reader: BufReader::with_capacity(1 << 20, reader),
            writer,
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
    pub(crate) fn call(&mut self, method: &str, params: &[&[u8]]) -> Value {
        self.call_raw(method, params);
        let mut v: Value = serde_json::from_str(&self.resp).unwrap();
        assert_eq!(v["id"], json!(self.id), "response for another request");
        match v.get_mut("result") {
            Some(r) => r.take(),
            None => panic!("{method} failed: {}", self.resp.trim_end()),
        }
    }

    /// [`Client::call`] up to the answer's line, returned as it came,
    /// checked to be the success answer of this request by its first
    /// bytes only (the large read rows: a client of any server parses the
    /// same JSON, so the bench leaves that out).
    pub(crate) fn call_raw(&mut self, method: &str, params: &[&[u8]]) -> &str {
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
        let ok = format!(r#"{{"jsonrpc":"2.0","id":{},"result":"#, self.id);
        assert!(
            self.resp.starts_with(&ok),
            "{method} failed: {}",
            &self.resp[..self.resp.len().min(500)]
        );
        &self.resp
    }
}

/// The `params` of an `fs/write_text_file` as pieces: prefix with the path,
/// the JSON-escaped content, and `}`.
pub(crate) fn write_params_prefix(path: &Path, session: &str) -> Vec<u8> {
    let mut v = br#"{"sessionId":"#.to_vec();
    v.extend_from_slice(&serde_json::to_vec(session).unwrap());
    v.extend_from_slice(br#","path":"#);
    v.extend_from_slice(&serde_json::to_vec(path).unwrap());
    v.extend_from_slice(br#","content":"#);
    v
}

/// ASCII text of exactly `size` bytes: numbered lines ending in `\n`.
pub(crate) fn text_of(size: usize, salt: &str) -> String {
    let mut s = String::with_capacity(size + 80);
    let mut n = 0u64;
    while s.len() < size {
        n += 1;
        let _ = writeln!(
            s,
            "{salt} line {n:07}: the quick brown fox jumps over the lazy dog"
        );
    }
    s.truncate(size - 1);
    s.push('\n');
    s
}

/// How the bare sequence hands the bytes to the kernel.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum BareWrite {
    /// One `write_all` of the whole content: the sequence as the issues
    /// state it, and the default baseline.
    Plain,
    /// The bytes in `writegate_fs::WRITE_CHUNK` pieces, each handed to the
    /// disk with `sync_file_range(SYNC_FILE_RANGE_WRITE)` as it is written
    /// (for content over one chunk): the way writegate's publisher writes,
    /// so the ceiling for a durable writer that does the same. Printed next
    /// to the plain row; selected for a whole bench by
    /// `WG_BENCH_BARE=chunked`.
    Chunked,
}

impl BareWrite {
    /// `WG_BENCH_BARE`: `chunked` or (default) `plain`.
    pub(crate) fn from_env() -> BareWrite {
        match std::env::var("WG_BENCH_BARE").as_deref() {
            Ok("chunked") => BareWrite::Chunked,
            _ => BareWrite::Plain,
        }
    }

    /// Prints which form the bench's bare sequence uses (the benches that
    /// follow `WG_BENCH_BARE`).
    pub(crate) fn print_choice() {
        println!(
            "bare sequence: {} (WG_BENCH_BARE)",
            BareWrite::from_env().describe()
        );
    }

    /// What the bench prints for it.
    pub(crate) fn describe(self) -> &'static str {
        match self {
            BareWrite::Plain => "plain (one write_all)",
            BareWrite::Chunked => {
                "chunked (256 KiB writes, each started to disk with sync_file_range, as writegate writes)"
            }
        }
    }
}

/// The bare durable sequence with std only: exclusive 0600 temp file in the
/// target's directory, `write_all`, fsync, rename over the target, open the
/// directory and fsync it.
pub(crate) fn bare_write(dir: &Path, leaf: &str, bytes: &[u8], tag: &str, seq: &mut u64) {
    bare_write_as(BareWrite::Plain, dir, leaf, bytes, tag, seq);
}

/// [`bare_write`] with the content written as `how` says.
pub(crate) fn bare_write_as(
    how: BareWrite,
    dir: &Path,
    leaf: &str,
    bytes: &[u8],
    tag: &str,
    seq: &mut u64,
) {
    *seq += 1;
    let tmp = dir.join(format!(".{leaf}.{tag}.{}.{seq}.tmp", std::process::id()));
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .unwrap();
    match how {
        BareWrite::Plain => f.write_all(bytes).unwrap(),
        BareWrite::Chunked => {
            use std::os::fd::AsRawFd;
            let chunk = writegate_fs::WRITE_CHUNK;
            let mut offset = 0;
            for piece in bytes.chunks(chunk) {
                f.write_all(piece).unwrap();
                if bytes.len() > chunk {
                    // SAFETY: a system call on a descriptor we hold open.
                    let _ = unsafe {
                        libc::sync_file_range(
                            f.as_raw_fd(),
                            i64::try_from(offset).unwrap(),
                            i64::try_from(piece.len()).unwrap(),
                            libc::SYNC_FILE_RANGE_WRITE,
                        )
                    };
                }
                offset += piece.len();
            }
        }
    }
    f.sync_all().unwrap();
    drop(f);
    fs::rename(&tmp, dir.join(leaf)).unwrap();
    File::open(dir).unwrap().sync_all().unwrap();
}

pub(crate) fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        f64::midpoint(v[n / 2 - 1], v[n / 2])
    }
}

/// `audit.flush` for the daemon and the in-process service:
/// `WG_BENCH_AUDIT_FLUSH=sync` (default `interval`, the daemon's default).
pub(crate) fn audit_flush() -> String {
    std::env::var("WG_BENCH_AUDIT_FLUSH").unwrap_or_else(|_| "interval".into())
}

pub(crate) fn scale() -> f64 {
    std::env::var("WG_BENCH_SCALE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1.0)
}

/// `n` scaled by `WG_BENCH_SCALE`, at least 1.
pub(crate) fn scaled(n: usize) -> usize {
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // a small positive count
    let k = (n as f64 * scale()).round().max(1.0) as usize;
    k
}

pub(crate) fn fmt_size(size: usize) -> String {
    if size >= MIB {
        format!("{} MiB", size / MIB)
    } else {
        format!("{} KiB", size / KIB)
    }
}

/// `(median, min, max)` of `v`.
pub(crate) fn stats(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    let min = s.iter().copied().fold(f64::INFINITY, f64::min);
    let max = s.iter().copied().fold(0.0, f64::max);
    (median(&mut s), min, max)
}

/// `/proc/loadavg`, trimmed.
pub(crate) fn load_average() -> String {
    fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The lines every bench prints first: what runs where, the machine's load,
/// the scale, the allocator settings passed on, and a warning on tmpfs.
pub(crate) fn print_preamble(bench: &str, t: &Tree) {
    println!("writegate {bench} bench");
    println!("binary:     {}", daemon_bin().display());
    println!("temp dir:   {}", t.base.display());
    println!("filesystem: {}", filesystem_of(&t.base));
    println!("load average at start: {}", load_average());
    println!(
        "cpus: {}; scale: {} (WG_BENCH_SCALE)",
        std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
        scale()
    );
    println!("audit.flush: {} (WG_BENCH_AUDIT_FLUSH)", audit_flush());

    for k in ALLOCATOR_ENV {
        if let Ok(v) = std::env::var(k) {
            println!("daemon allocator setting: {k}={v}");
        }
    }
    if filesystem_of(&t.base).starts_with("tmpfs") {
        println!("WARNING: tmpfs: fsync costs nothing here; figures are not representative");
    }
}
