//! A temp tree with its own home and XDG directories, and the `writegate`
//! processes spawned in it.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use rustix::process::Signal;

use crate::TIMEOUT;
use crate::files::{Entry, audit_lines, snapshot};
use crate::lines::LineClient;
use crate::process::proc_status_kib;

/// A temp tree `<prefix>XXXXXX/`: `ws/` (workspace A, the primary), `ws-b/`
/// (workspace B), `out/` (outside every workspace), `home/`, `state/`
/// (`XDG_STATE_HOME`, and the audit log `state/audit.jsonl`), `config/`
/// (`XDG_CONFIG_HOME`), `run/` (`XDG_RUNTIME_DIR`; a daemon of
/// [`Tree::daemon`] creates `run/wg/` for its socket), and `logs/` (each
/// spawned process's stdout and stderr). Removed when dropped (unless
/// [`Tree::keep`]).
///
/// Every process spawned through the tree gets `HOME` and the XDG
/// directories inside it, so no test touches the real home.
pub struct Tree {
    tmp: tempfile::TempDir,
    /// A short private directory for the socket when the tree's own path
    /// is too long for one.
    _sock_dir: Option<tempfile::TempDir>,
    bin: PathBuf,
    prefix: String,
    /// The tree's canonical path.
    pub base: PathBuf,
    /// Workspace A, the primary: `ws/`.
    pub ws: PathBuf,
    /// Workspace B: `ws-b/`.
    pub wsb: PathBuf,
    /// Outside every workspace: `out/`.
    pub out: PathBuf,
    /// The socket of the daemons [`Tree::daemon`] starts with `--socket`
    /// (`run/wg/writegate.sock`).
    pub sock: PathBuf,
    /// The audit log the daemons of [`Tree::daemon`] write
    /// (`state/audit.jsonl`).
    pub audit_log: PathBuf,
    spawned: AtomicUsize,
}

/// How [`Tree::daemon`] starts `writegate serve`.
#[derive(Clone, Copy, Default)]
pub struct Opts<'a> {
    /// `--stdio`: the daemon's stdin and stdout are pipes to the test.
    pub stdio: bool,
    /// `--socket <tree.sock>`.
    pub socket: bool,
    /// Arguments after `--workspace <ws> --audit-log <log>`.
    pub args: &'a [&'a str],
    /// Extra environment (after the tree's own).
    pub env: &'a [(&'a str, &'a str)],
    /// Do not wait for the socket (for daemons expected to fail).
    pub no_wait: bool,
}

/// `sun_path` holds 108 bytes; a socket path longer than this goes to a
/// short temp directory instead.
const MAX_SOCKET_PATH: usize = 100;

impl Tree {
    /// A tree in the system's temp directory, named `wg-test-XXXXXX`, whose
    /// commands run `bin` (in tests: `env!("CARGO_BIN_EXE_writegate")`).
    pub fn new(bin: impl Into<PathBuf>) -> Tree {
        let tmp = tempfile::Builder::new()
            .prefix("wg-test-")
            .tempdir()
            .unwrap();
        Tree::around(tmp, bin.into(), "wg-test-")
    }

    /// A tree named `<prefix>XXXXXX` in `parent` (created if missing): the
    /// benches put theirs on the build's filesystem, where fsync costs what
    /// it costs on a disk.
    pub fn in_dir(bin: impl Into<PathBuf>, prefix: &str, parent: &Path) -> Tree {
        fs::create_dir_all(parent).unwrap();
        let tmp = tempfile::Builder::new()
            .prefix(prefix)
            .tempdir_in(parent)
            .unwrap();
        Tree::around(tmp, bin.into(), prefix)
    }

    fn around(tmp: tempfile::TempDir, bin: PathBuf, prefix: &str) -> Tree {
        let base = fs::canonicalize(tmp.path()).unwrap();
        for d in [
            "ws", "ws-b", "out", "home", "state", "config", "run", "logs",
        ] {
            fs::create_dir(base.join(d)).unwrap();
        }
        let mut sock = base.join("run/wg/writegate.sock");
        let mut sock_dir = None;
        if sock.as_os_str().len() > MAX_SOCKET_PATH {
            let d = tempfile::Builder::new()
                .prefix("wg-sock-")
                .tempdir()
                .unwrap();
            sock = d.path().join("wg/writegate.sock");
            sock_dir = Some(d);
        }
        Tree {
            ws: base.join("ws"),
            wsb: base.join("ws-b"),
            out: base.join("out"),
            sock,
            audit_log: base.join("state/audit.jsonl"),
            base,
            prefix: prefix.to_string(),
            bin,
            tmp,
            _sock_dir: sock_dir,
            spawned: AtomicUsize::new(0),
        }
    }

    /// Leaves the tree on disk when it is dropped (to look at a daemon's
    /// stderr after a bench).
    pub fn keep(&mut self) {
        self.tmp.disable_cleanup(true);
    }

    /// The binary the tree's commands run.
    pub fn bin(&self) -> &Path {
        &self.bin
    }

    /// The start of the tree's directory name (`wg-test-`): a raw path of
    /// the tree contains `/<prefix>`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The socket a daemon listens on when no `--socket` is given:
    /// `$XDG_RUNTIME_DIR/writegate/writegate.sock` of the tree.
    pub fn default_sock(&self) -> PathBuf {
        self.base.join("run/writegate/writegate.sock")
    }

    /// Points `HOME` and the XDG directories into the tree (and leaves the
    /// rest of `c`'s environment alone).
    pub fn set_home(&self, c: &mut Command) {
        c.env("HOME", self.base.join("home"))
            .env("XDG_RUNTIME_DIR", self.base.join("run"))
            .env("XDG_STATE_HOME", self.base.join("state"))
            .env("XDG_CONFIG_HOME", self.base.join("config"));
    }

    /// A clean environment for `c`: only `PATH` and [`Tree::set_home`]'s
    /// variables, in the tree's base directory.
    pub fn set_env(&self, c: &mut Command) {
        c.env_clear().env("PATH", "/usr/local/bin:/usr/bin:/bin");
        self.set_home(c);
        c.current_dir(&self.base);
    }

    /// The binary with a clean environment (for the CLI subcommands).
    pub fn command(&self) -> Command {
        let mut c = Command::new(&self.bin);
        self.set_env(&mut c);
        c
    }

    /// `writegate serve --stdio` of the tree and `extra` arguments.
    pub fn stdio_daemon(&self, extra: &[&str]) -> Daemon {
        self.daemon(Opts {
            stdio: true,
            args: extra,
            ..Opts::default()
        })
    }

    /// `writegate serve --socket <sock>` of the tree and `extra`
    /// arguments, once the socket answers.
    pub fn socket_daemon(&self, extra: &[&str]) -> Daemon {
        self.daemon(Opts {
            socket: true,
            args: extra,
            ..Opts::default()
        })
    }

    /// Spawns `writegate serve [--stdio] [--socket <sock>] --workspace <ws>
    /// --audit-log <log>` and `o.args`; with a socket, waits until it
    /// answers (unless `o.no_wait`).
    pub fn daemon(&self, o: Opts) -> Daemon {
        let mut cmd = self.command();
        cmd.arg("serve");
        if o.stdio {
            cmd.arg("--stdio");
        }
        if o.socket {
            cmd.arg("--socket").arg(&self.sock);
        }
        cmd.arg("--workspace")
            .arg(&self.ws)
            .arg("--audit-log")
            .arg(&self.audit_log)
            .args(o.args);
        // External tool writes are off by default when the daemon runs as
        // root; the tests run as root in CI and expect the
        // non-root default. `--no-external-writes` and `o.env` still win.
        cmd.env("WRITEGATE_EXTERNAL_TOOL_WRITES", "true");
        for (k, v) in o.env {
            cmd.env(k, v);
        }
        let wait = (o.socket && !o.no_wait).then_some(self.sock.as_path());
        self.spawn(cmd, o.stdio, wait)
    }

    /// Spawns `cmd` with stderr (and, without `stdio`, stdout) going to
    /// files in `logs/`; with `stdio`, its stdin and stdout are pipes (see
    /// [`Daemon::stdio_lines`]). With `wait_for`, waits until that socket
    /// answers.
    pub fn spawn(&self, mut cmd: Command, stdio: bool, wait_for: Option<&Path>) -> Daemon {
        let n = self.spawned.fetch_add(1, Ordering::SeqCst);
        let stderr_file = self.base.join(format!("logs/daemon-{n}.stderr"));
        cmd.stderr(fs::File::create(&stderr_file).unwrap());
        let mut stdout_file = None;
        if stdio {
            cmd.stdin(Stdio::piped()).stdout(Stdio::piped());
        } else {
            let f = self.base.join(format!("logs/daemon-{n}.stdout"));
            cmd.stdin(Stdio::null())
                .stdout(fs::File::create(&f).unwrap());
            stdout_file = Some(f);
        }
        let child = cmd.spawn().expect("spawn writegate");
        let mut d = Daemon {
            child,
            stderr_file,
            stdout_file,
            sock: Some(self.sock.clone()),
        };
        if let Some(sock) = wait_for {
            d.wait_for_socket(sock);
        }
        d
    }

    /// Everything under the tree except the daemon's own files (logs,
    /// state, socket directory, configs, home), without following links.
    pub fn snapshot(&self) -> BTreeMap<PathBuf, Entry> {
        snapshot(&self.base, &["logs", "state", "run", "config", "home"])
    }

    /// The lines of the tree's audit log (none if the file is missing).
    pub fn audit_lines(&self) -> Vec<String> {
        audit_lines(&self.audit_log)
    }
}

/// A running process spawned by a [`Tree`] (or adopted); killed if still
/// alive when dropped.
pub struct Daemon {
    /// The process.
    pub child: Child,
    /// Where its stderr goes.
    pub stderr_file: PathBuf,
    /// Where its stdout goes when it is not a pipe to the test.
    pub stdout_file: Option<PathBuf>,
    /// The socket [`Daemon::connect_lines`] connects to.
    sock: Option<PathBuf>,
}

impl Daemon {
    /// A daemon spawned elsewhere, its stderr in `stderr_file`: killed when
    /// dropped, like the tree's own.
    pub fn adopt(child: Child, stderr_file: PathBuf) -> Daemon {
        Daemon {
            child,
            stderr_file,
            stdout_file: None,
            sock: None,
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A line client over the daemon's stdin and stdout (taken: once).
    pub fn stdio_lines(&mut self) -> LineClient {
        LineClient::stdio(&mut self.child)
    }

    /// A line client connected to the tree's socket.
    pub fn connect_lines(&self) -> LineClient {
        LineClient::connect(self.sock.as_ref().expect("a daemon spawned by a tree"))
    }

    /// Waits until `sock` accepts a connection; panics with the daemon's
    /// stderr if it exits first or [`TIMEOUT`] passes.
    pub fn wait_for_socket(&mut self, sock: &Path) {
        let start = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                panic!("daemon exited early with {st:?}:\n{}", self.stderr_text());
            }
            if UnixStream::connect(sock).is_ok() {
                return;
            }
            assert!(
                start.elapsed() < TIMEOUT,
                "socket never answered:\n{}",
                self.stderr_text()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends `sig` (TERM, INT, HUP, ...) to the daemon.
    pub fn signal(&self, sig: Signal) {
        rustix::process::kill_process(rustix::process::Pid::from_child(&self.child), sig).unwrap();
    }

    /// Waits for the exit (at most [`TIMEOUT`]).
    pub fn wait_exit(&mut self) -> ExitStatus {
        let start = Instant::now();
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(
                start.elapsed() < TIMEOUT,
                "daemon did not exit:\n{}",
                self.stderr_text()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Everything the daemon wrote to stderr so far.
    pub fn stderr_text(&self) -> String {
        fs::read_to_string(&self.stderr_file).unwrap_or_default()
    }

    /// A `/proc/<pid>/status` field in KiB (`VmRSS`, `VmHWM`, `RssAnon`).
    pub fn status_kib(&self, key: &str) -> u64 {
        proc_status_kib(self.pid(), key).unwrap_or_else(|| panic!("no {key} in /proc/pid/status"))
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
