//! The command line through the real binary: `write`, `edit`, `read`,
//! `approve`, `audit`, `completions`, `man`, `--version`, the logs of
//! `serve`, against a real daemon on a socket in a temp dir, with real files.
//!
//! Every process gets `HOME` and the XDG directories inside its test's temp
//! dir; the daemon listens on the default socket there
//! (`$XDG_RUNTIME_DIR/writegate/writegate.sock`), so the CLI runs without
//! `--socket` as a person would. Timeouts only keep a broken daemon from
//! hanging a test; nothing asserts on speed.

use serde_json::{Value, json};
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_writegate");
/// Upper bound for any single wait (a broken daemon fails instead of hanging).
const TIMEOUT: Duration = Duration::from_secs(90);

/// A temp tree: `ws/` and `ws-b/` (workspaces), `out/` (in none), `home/`,
/// `state/` (`XDG_STATE_HOME`), `config/` (`XDG_CONFIG_HOME`), `run/`
/// (`XDG_RUNTIME_DIR`), `logs/`.
struct Tree {
    _tmp: tempfile::TempDir,
    base: PathBuf,
    ws: PathBuf,
    wsb: PathBuf,
    out: PathBuf,
    /// The daemon's default socket in this tree.
    sock: PathBuf,
    /// The audit log the daemons of [`Tree::serve`] write.
    audit_log: PathBuf,
}

/// A finished CLI run.
struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl std::fmt::Display for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// A running daemon, killed when dropped.
struct Daemon {
    child: Child,
    stderr_file: PathBuf,
}

impl Daemon {
    fn stderr_text(&self) -> String {
        fs::read_to_string(&self.stderr_file).unwrap_or_default()
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

impl Tree {
    fn new() -> Tree {
        let tmp = tempfile::Builder::new()
            .prefix("wg-cli-")
            .tempdir()
            .unwrap();
        let base = fs::canonicalize(tmp.path()).unwrap();
        for d in [
            "ws", "ws-b", "out", "home", "state", "config", "run", "logs",
        ] {
            fs::create_dir(base.join(d)).unwrap();
        }
        Tree {
            ws: base.join("ws"),
            wsb: base.join("ws-b"),
            out: base.join("out"),
            sock: base.join("run/writegate/writegate.sock"),
            audit_log: base.join("state/audit.jsonl"),
            base,
            _tmp: tmp,
        }
    }

    /// The binary with a clean environment pointing into the tree.
    fn command(&self) -> Command {
        let mut c = Command::new(BIN);
        c.env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", self.base.join("home"))
            .env("XDG_RUNTIME_DIR", self.base.join("run"))
            .env("XDG_STATE_HOME", self.base.join("state"))
            .env("XDG_CONFIG_HOME", self.base.join("config"))
            .current_dir(&self.base);
        c
    }

    /// `writegate serve --workspace ws --workspace ws-b --audit-log
    /// state/audit.jsonl` plus `args`, on the default socket.
    fn serve(&self, args: &[&str]) -> Daemon {
        let mut all: Vec<String> = vec![
            "--workspace".into(),
            self.ws.display().to_string(),
            "--workspace".into(),
            self.wsb.display().to_string(),
            "--audit-log".into(),
            self.audit_log.display().to_string(),
            // `writegate read` needs reads on (issue 13: reads off means
            // `_writegate/read_lines` off too).
            "--allow-read".into(),
        ];
        all.extend(args.iter().map(ToString::to_string));
        self.serve_with(&all.iter().map(String::as_str).collect::<Vec<_>>(), &[])
    }

    /// `writegate serve` with exactly `args` and extra environment; waits
    /// until the default socket answers.
    fn serve_with(&self, args: &[&str], env: &[(&str, &str)]) -> Daemon {
        let stderr_file = self.base.join(format!(
            "logs/daemon-{}.stderr",
            fs::read_dir(self.base.join("logs")).unwrap().count()
        ));
        let mut cmd = self.command();
        cmd.arg("serve")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&stderr_file).unwrap());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut d = Daemon {
            child: cmd.spawn().expect("spawn writegate serve"),
            stderr_file,
        };
        let start = Instant::now();
        loop {
            if let Some(st) = d.child.try_wait().unwrap() {
                panic!("daemon exited early with {st:?}:\n{}", d.stderr_text());
            }
            if UnixStream::connect(&self.sock).is_ok() {
                return d;
            }
            assert!(
                start.elapsed() < TIMEOUT,
                "socket never answered:\n{}",
                d.stderr_text()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Runs `writegate <args>` with `stdin` piped in.
    fn run(&self, args: &[&str], stdin: &[u8]) -> Out {
        let mut cmd = self.command();
        cmd.args(args);
        run_cmd(cmd, stdin)
    }

    /// The audit log's events (none if the file is missing).
    fn audit_events(&self) -> Vec<Value> {
        fs::read_to_string(&self.audit_log)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

fn run_cmd(mut cmd: Command, input: &[u8]) -> Out {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn writegate");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    Out {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

// ---------------------------------------------------------------------------
// No accidental destruction
// ---------------------------------------------------------------------------

#[test]
fn edit_without_a_mode_is_a_usage_error_and_the_file_is_unchanged() {
    let t = Tree::new();
    let _d = t.serve(&[]);
    let f = t.ws.join("a.txt");
    fs::write(&f, "one\ntwo\n").unwrap();
    for stdin in [&b""[..], b"new whole content\n"] {
        let o = t.run(&["edit", &s(&f)], stdin);
        assert_eq!(o.code, Some(2), "{o}");
        assert!(o.stderr.contains("--find"), "names the modes: {o}");
        assert!(o.stderr.contains("writegate write"), "points to write: {o}");
        let o = t.run(&["edit", &s(&f), "--content", "x"], stdin);
        assert_eq!(o.code, Some(2), "{o}");
    }
    assert_eq!(fs::read(&f).unwrap(), b"one\ntwo\n");
    assert!(t.audit_events().is_empty(), "nothing was sent");
}

#[test]
fn edit_with_empty_stdin_and_no_content_is_a_usage_error() {
    let t = Tree::new();
    let _d = t.serve(&[]);
    let f = t.ws.join("a.txt");
    fs::write(&f, "one\ntwo\n").unwrap();
    for args in [
        vec!["--line", "2"],
        vec!["--line", "1", "--end-line", "2"],
        vec!["--find", "two"],
        vec!["--insert", "--line", "1"],
        vec!["--append"],
    ] {
        let mut all = vec!["edit", f.to_str().unwrap()];
        all.extend(args.iter().copied());
        let o = t.run(&all, b"");
        assert_eq!(o.code, Some(2), "{args:?}: {o}");
        assert!(o.stderr.contains("stdin is empty"), "{args:?}: {o}");
        assert!(o.stderr.contains("--content"), "{args:?}: {o}");
    }
    assert_eq!(fs::read(&f).unwrap(), b"one\ntwo\n");
    assert!(t.audit_events().is_empty(), "nothing was sent");

    // The text from stdin, or an explicit empty --content, is an edit.
    let o = t.run(&["edit", &s(&f), "--line", "2"], b"TWO");
    assert_eq!(o.code, Some(0), "{o}");
    assert_eq!(fs::read(&f).unwrap(), b"one\nTWO\n");
    let o = t.run(&["edit", &s(&f), "--find", "TWO", "--content", ""], b"");
    assert_eq!(o.code, Some(0), "{o}");
    assert_eq!(fs::read(&f).unwrap(), b"one\n\n");
}

#[test]
fn write_refuses_empty_stdin_unless_allow_empty() {
    let t = Tree::new();
    let _d = t.serve(&[]);
    let f = t.ws.join("keep.txt");
    fs::write(&f, "precious\n").unwrap();
    let o = t.run(&["write", &s(&f)], b"");
    assert_eq!(o.code, Some(2), "{o}");
    assert!(o.stderr.contains("--allow-empty"), "{o}");
    assert_eq!(fs::read(&f).unwrap(), b"precious\n");
    assert!(t.audit_events().is_empty(), "nothing was sent");

    let o = t.run(&["write", "--allow-empty", &s(&f)], b"");
    assert_eq!(o.code, Some(0), "{o}");
    assert_eq!(fs::read(&f).unwrap(), b"");
    let e = t.audit_events();
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0]["type"], "fs.access");
    assert_eq!(e[0]["bytesAfter"], 0);
}

#[test]
fn every_line_and_hash_argument_is_validated() {
    let t = Tree::new();
    let _d = t.serve(&[]);
    let f = t.ws.join("a.txt");
    fs::write(&f, "one\ntwo\nthree\n").unwrap();
    let p = s(&f);
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["edit", &p, "--line", "0", "--content", "x"],
            "start at 1",
        ),
        (vec!["edit", &p, "--line", "-1", "--content", "x"], "--line"),
        (
            vec!["edit", &p, "--line", "two", "--content", "x"],
            "not a line number",
        ),
        (
            vec![
                "edit",
                &p,
                "--line",
                "3",
                "--end-line",
                "2",
                "--content",
                "x",
            ],
            "before --line",
        ),
        (
            vec!["edit", &p, "--delete", "--line", "1", "--end-line", "0"],
            "start at 1",
        ),
        (
            vec!["edit", &p, "--end-line", "2", "--content", "x"],
            "--line",
        ),
        (vec!["edit", &p, "--insert", "--content", "x"], "--line"),
        (vec!["edit", &p, "--delete"], "--line"),
        (
            vec!["edit", &p, "--append", "--line", "1", "--content", "x"],
            "--append",
        ),
        (vec!["edit", &p, "--find", "", "--content", "x"], "--find"),
        (
            vec![
                "edit",
                &p,
                "--line",
                "1",
                "--content",
                "x",
                "--expected-hash",
                "abc",
            ],
            "sha256:",
        ),
        (
            vec![
                "edit",
                &p,
                "--line",
                "1",
                "--content",
                "x",
                "--expected-hash",
                "sha256:1234",
            ],
            "64 hex",
        ),
        (
            vec![
                "edit",
                &p,
                "--line",
                "1",
                "--content",
                "x",
                "--expected-hash",
                "sha256:zz00000000000000000000000000000000000000000000000000000000000000",
            ],
            "64 hex",
        ),
        (vec!["read", &p, "--line", "0"], "start at 1"),
        (vec!["read", &p, "--limit", "0"], "--limit"),
    ];
    for (args, says) in &cases {
        let o = t.run(args, b"");
        assert_eq!(o.code, Some(2), "{args:?}: {o}");
        assert!(o.stderr.contains(says), "{args:?} should say {says:?}: {o}");
    }
    assert_eq!(fs::read(&f).unwrap(), b"one\ntwo\nthree\n");
    assert!(
        t.audit_events().is_empty(),
        "no invalid request reached the daemon"
    );

    // A well-formed hash in capitals is accepted (and sent in lowercase);
    // a stale one is the daemon's refusal, exit 1.
    let read = t.run(&["read", &p], b"");
    assert_eq!(read.code, Some(0), "{read}");
    let hash = read
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("hash: "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_string();
    let upper = format!("sha256:{}", hash["sha256:".len()..].to_ascii_uppercase());
    let o = t.run(
        &[
            "edit",
            &p,
            "--line",
            "2",
            "--content",
            "TWO",
            "--expected-hash",
            &upper,
        ],
        b"",
    );
    assert_eq!(o.code, Some(0), "{o}");
    let o = t.run(
        &[
            "edit",
            &p,
            "--line",
            "2",
            "--content",
            "2",
            "--expected-hash",
            &hash,
        ],
        b"",
    );
    assert_eq!(o.code, Some(1), "stale hash: {o}");
    assert_eq!(fs::read(&f).unwrap(), b"one\nTWO\nthree\n");
    // An out-of-range line is the daemon's to judge: refused, exit 1.
    let o = t.run(&["edit", &p, "--line", "9", "--content", "x"], b"");
    assert_eq!(o.code, Some(1), "{o}");
    assert_eq!(fs::read(&f).unwrap(), b"one\nTWO\nthree\n");
}

// ---------------------------------------------------------------------------
// Exit statuses
// ---------------------------------------------------------------------------

#[test]
fn exit_status_one_for_a_refusal_lists_the_workspaces() {
    let t = Tree::new();
    let _d = t.serve(&[]);
    let outside = t.out.join("x.txt");
    let o = t.run(&["write", &s(&outside)], b"x\n");
    assert_eq!(o.code, Some(1), "{o}");
    assert!(o.stderr.contains("refused: path_outside_workspace"), "{o}");
    assert!(
        o.stderr.contains(&format!("{} (trusted)", s(&t.ws)))
            && o.stderr.contains(&format!("{} (trusted)", s(&t.wsb))),
        "the refusal lists the workspaces served: {o}"
    );
    assert!(!outside.exists());
}

#[test]
fn exit_status_three_when_the_daemon_is_unreachable() {
    let t = Tree::new();
    let f = t.ws.join("x.txt");
    for args in [
        vec!["write", f.to_str().unwrap()],
        vec!["edit", f.to_str().unwrap(), "--append", "--content", "x"],
        vec!["read", f.to_str().unwrap()],
        vec!["approve", "edit_file write /x/.env"],
    ] {
        let o = t.run(&args, b"x\n");
        assert_eq!(o.code, Some(3), "{args:?}: {o}");
        assert!(o.stderr.contains("cannot reach the daemon"), "{o}");
        assert!(o.stderr.contains(&s(&t.sock)), "names the socket: {o}");
    }
    let o = t.run(
        &[
            "write",
            f.to_str().unwrap(),
            "--socket",
            t.base.join("nobody.sock").to_str().unwrap(),
        ],
        b"x\n",
    );
    assert_eq!(o.code, Some(3), "{o}");
    assert!(!f.exists());
}

#[test]
fn every_subcommand_documents_its_exit_statuses() {
    let t = Tree::new();
    for sub in [
        "serve",
        "write",
        "edit",
        "read",
        "approve",
        "audit",
        "setup",
        "completions",
        "man",
    ] {
        let o = t.run(&[sub, "--help"], b"");
        assert_eq!(o.code, Some(0), "{sub}: {o}");
        assert!(o.stdout.contains("Exit status"), "{sub}: {o}");
        assert!(o.stdout.contains("  0  "), "{sub}: {o}");
        assert!(o.stdout.contains("  2  "), "{sub}: {o}");
    }
    for sub in ["write", "edit", "read", "approve"] {
        let o = t.run(&[sub, "--help"], b"");
        for code in ["  1  refused", "  3  the daemon could not be reached"] {
            assert!(o.stdout.contains(code), "{sub}: {o}");
        }
    }
}

// ---------------------------------------------------------------------------
// Every workspace
// ---------------------------------------------------------------------------

#[test]
fn initialize_lists_every_workspace() {
    let t = Tree::new();
    let _d = t.serve(&["--untrusted"]);
    let mut sock = UnixStream::connect(&t.sock).unwrap();
    sock.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\n")
        .unwrap();
    let mut line = String::new();
    BufReader::new(sock).read_line(&mut line).unwrap();
    let v: Value = serde_json::from_str(&line).unwrap();
    let list = v["result"]["_meta"]["writegate"]["workspaces"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"))
        .clone();
    assert_eq!(list.len(), 2, "{v}");
    assert_eq!(list[0]["root"], json!(t.ws), "primary first: {v}");
    assert_eq!(list[1]["root"], json!(t.wsb), "{v}");
    for w in &list {
        assert_eq!(w["trusted"], false, "{v}");
        assert_eq!(w["id"].as_str().unwrap().len(), 12, "{v}");
    }
}

#[test]
fn write_edit_read_reach_the_second_workspace() {
    let t = Tree::new();
    let _d = t.serve(&[]);
    let b = t.wsb.join("b.txt");
    let o = t.run(&["write", &s(&b)], b"bee\n");
    assert_eq!(o.code, Some(0), "{o}");
    assert_eq!(fs::read(&b).unwrap(), b"bee\n");

    // Relative to the current directory, through a symlinked directory.
    std::os::unix::fs::symlink(&t.wsb, t.base.join("link-b")).unwrap();
    let o = t.run(
        &["edit", "link-b/b.txt", "--find", "bee", "--content", "buzz"],
        b"",
    );
    assert_eq!(o.code, Some(0), "{o}");
    assert_eq!(fs::read(&b).unwrap(), b"buzz\n");
    let o = t.run(&["read", "link-b/b.txt"], b"");
    assert_eq!(o.code, Some(0), "{o}");
    assert!(o.stdout.starts_with("     1\tbuzz\n"), "{o}");

    // A file that does not exist yet, in a new subdirectory of B.
    let o = t.run(&["write", &s(&t.wsb.join("new.txt"))], b"n\n");
    assert_eq!(o.code, Some(0), "{o}");

    // The primary still works, and each event names its own workspace.
    let a = t.ws.join("a.txt");
    let o = t.run(&["write", &s(&a)], b"a\n");
    assert_eq!(o.code, Some(0), "{o}");
    let e = t.audit_events();
    assert_eq!(e.len(), 5, "{e:?}");
    assert!(e.iter().all(|e| e["type"] == "fs.access"), "{e:?}");
    let ws_ids: Vec<&str> = e.iter().map(|e| e["workspace"].as_str().unwrap()).collect();
    assert!(ws_ids[..4].iter().all(|w| *w == ws_ids[0]), "{ws_ids:?}");
    assert_ne!(ws_ids[4], ws_ids[0], "{ws_ids:?}");
}

#[test]
fn the_workspace_flag_chooses_the_workspace() {
    let t = Tree::new();
    let _d = t.serve(&[]);
    let b = t.wsb.join("b.txt");
    let o = t.run(&["write", &s(&b), "--workspace", &s(&t.wsb)], b"1\n");
    assert_eq!(o.code, Some(0), "{o}");
    assert_eq!(fs::read(&b).unwrap(), b"1\n");
    // Naming the other workspace: the daemon refuses a path outside it.
    let o = t.run(&["write", &s(&b), "--workspace", &s(&t.ws)], b"2\n");
    assert_eq!(o.code, Some(1), "{o}");
    assert!(o.stderr.contains("path_outside_workspace"), "{o}");
    assert_eq!(fs::read(&b).unwrap(), b"1\n");
    // A directory that is not a workspace: refused, and the list is shown.
    let o = t.run(
        &["write", &s(&t.out.join("x")), "--workspace", &s(&t.out)],
        b"3\n",
    );
    assert_eq!(o.code, Some(1), "{o}");
    assert!(
        o.stderr.contains(&s(&t.ws)) && o.stderr.contains(&s(&t.wsb)),
        "{o}"
    );
    assert!(!t.out.join("x").exists());
}

// ---------------------------------------------------------------------------
// Approvals
// ---------------------------------------------------------------------------

/// The command the refusal tells the person to run, parsed back out of
/// `writegate: to allow it once, run: writegate approve '<command>'`.
fn suggested_command(stderr: &str) -> String {
    let line = stderr
        .lines()
        .find_map(|l| l.split_once("run: writegate approve ").map(|(_, r)| r))
        .unwrap_or_else(|| panic!("no approve line: {stderr}"));
    let quoted = line.strip_prefix('\'').unwrap();
    quoted[..quoted.find('\'').unwrap()].to_string()
}

#[test]
fn approve_once_then_write_a_held_file() {
    let t = Tree::new();
    let _d = t.serve(&[]);
    let env = t.ws.join(".env");
    let o = t.run(&["write", &s(&env)], b"KEY=1\n");
    assert_eq!(o.code, Some(1), "{o}");
    assert!(o.stderr.contains("refused: approval_required"), "{o}");
    let command = suggested_command(&o.stderr);
    assert_eq!(command, format!("edit_file write {}", s(&env)));
    assert!(!env.exists());

    let o = t.run(&["approve", &command], b"");
    assert_eq!(o.code, Some(0), "{o}");
    assert!(
        o.stdout.contains("approved") && o.stdout.contains("once"),
        "{o}"
    );
    let o = t.run(&["write", &s(&env)], b"KEY=1\n");
    assert_eq!(o.code, Some(0), "{o}");
    assert_eq!(fs::read(&env).unwrap(), b"KEY=1\n");
    // Once is once.
    let o = t.run(&["write", &s(&env)], b"KEY=2\n");
    assert_eq!(o.code, Some(1), "{o}");
    assert_eq!(fs::read(&env).unwrap(), b"KEY=1\n");

    // The command may also be given as separate words.
    let words: Vec<&str> = command.split(' ').collect();
    let mut args = vec!["approve"];
    args.extend(&words);
    let o = t.run(&args, b"");
    assert_eq!(o.code, Some(0), "{o}");
    let o = t.run(&["write", &s(&env)], b"KEY=3\n");
    assert_eq!(o.code, Some(0), "{o}");
    assert_eq!(fs::read(&env).unwrap(), b"KEY=3\n");
}

/// Issue 13 item 1: approving what a refusal for a file literally named
/// `id_rsa*` shows approves that one file, never its look-alikes.
#[test]
fn issue_13_approving_a_glob_like_name_approves_that_file_only() {
    let t = Tree::new();
    let _d = t.serve(&[]);
    let star = t.ws.join("id_rsa*");
    let o = t.run(&["write", &s(&star)], b"x\n");
    assert_eq!(o.code, Some(1), "{o}");
    let command = suggested_command(&o.stderr);
    let o = t.run(&["approve", "--scope", "workspace", &command], b"");
    assert_eq!(o.code, Some(0), "{o}");
    let o = t.run(&["write", &s(&star)], b"x\n");
    assert_eq!(o.code, Some(0), "{o}");
    for other in ["id_rsa", "id_rsa.pub", "id_rsa_other"] {
        let p = t.ws.join(other);
        let o = t.run(&["write", &s(&p)], b"y\n");
        assert_eq!(o.code, Some(1), "{other} got through: {o}");
        assert!(o.stderr.contains("approval_required"), "{o}");
        assert!(!p.exists());
    }
}

#[test]
fn approve_session_scope_covers_that_session_only() {
    let t = Tree::new();
    let _d = t.serve(&[]);
    let env = t.wsb.join(".env");
    let o = t.run(&["write", &s(&env), "--session", "s2"], b"A=1\n");
    assert_eq!(o.code, Some(1), "{o}");
    assert!(
        o.stderr.contains("--session s2"),
        "the suggested line keeps the session: {o}"
    );
    let command = suggested_command(&o.stderr);
    let o = t.run(
        &["approve", &command, "--scope", "session", "--session", "s2"],
        b"",
    );
    assert_eq!(o.code, Some(0), "{o}");
    for n in 1..=2 {
        let o = t.run(
            &["write", &s(&env), "--session", "s2"],
            format!("A={n}\n").as_bytes(),
        );
        assert_eq!(o.code, Some(0), "write {n}: {o}");
    }
    let o = t.run(&["write", &s(&env)], b"A=9\n");
    assert_eq!(o.code, Some(1), "another session is not covered: {o}");
    assert_eq!(fs::read(&env).unwrap(), b"A=2\n");
    // A scope the method does not know is a usage error.
    let o = t.run(&["approve", &command, "--scope", "forever"], b"");
    assert_eq!(o.code, Some(2), "{o}");
}

// ---------------------------------------------------------------------------
// Audit
// ---------------------------------------------------------------------------

#[test]
fn audit_shows_and_filters_the_log() {
    let t = Tree::new();
    let _d = t.serve(&[]);
    let a = t.ws.join("a.txt");
    let b = t.wsb.join("b.txt");
    assert_eq!(t.run(&["write", &s(&a)], b"a\n").code, Some(0));
    assert_eq!(t.run(&["write", &s(&b)], b"b\n").code, Some(0));
    assert_eq!(
        t.run(
            &[
                "edit",
                &s(&a),
                "--append",
                "--content",
                "more\n",
                "--session",
                "other"
            ],
            b""
        )
        .code,
        Some(0)
    );
    assert_eq!(
        t.run(&["write", &s(&t.out.join("o.txt"))], b"o\n").code,
        Some(1)
    );
    let events = t.audit_events();
    assert_eq!(events.len(), 4, "{events:?}");
    let log = s(&t.audit_log);

    let all = t.run(&["audit", "--audit-log", &log], b"");
    assert_eq!(all.code, Some(0), "{all}");
    let lines: Vec<&str> = all.stdout.lines().collect();
    assert_eq!(lines.len(), 4, "{all}");
    for (line, e) in lines.iter().zip(&events) {
        assert!(line.starts_with(e["ts"].as_str().unwrap()), "{line}");
        assert!(line.contains(e["type"].as_str().unwrap()), "{line}");
        assert!(line.contains(e["pathHash"].as_str().unwrap()), "{line}");
    }
    assert!(
        lines[0].contains("write") && lines[0].contains(" ok "),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("new, 2 bytes"), "{}", lines[0]);
    assert!(
        lines[2].contains("edit/append") && lines[2].contains("session=other"),
        "{}",
        lines[2]
    );
    assert!(lines[3].contains("path_outside_workspace"), "{}", lines[3]);

    // --path: by the pathHash of the canonical path, given relative or
    // through a symlink.
    std::os::unix::fs::symlink(&t.ws, t.base.join("link-a")).unwrap();
    for p in [s(&a), "ws/a.txt".to_string(), "link-a/a.txt".to_string()] {
        let o = t.run(&["audit", "--audit-log", &log, "--path", &p], b"");
        assert_eq!(o.code, Some(0), "{o}");
        assert_eq!(o.stdout.lines().count(), 2, "{p}: {o}");
        assert!(
            o.stdout
                .lines()
                .all(|l| l.contains(events[0]["pathHash"].as_str().unwrap())),
            "{o}"
        );
    }
    let o = t.run(&["audit", "--audit-log", &log, "--kind", "fs.denied"], b"");
    assert_eq!(o.stdout.lines().count(), 1, "{o}");
    assert!(o.stdout.contains("path_outside_workspace"), "{o}");
    for kind in ["denied", "path_outside_workspace"] {
        let k = t.run(&["audit", "--audit-log", &log, "--kind", kind], b"");
        assert_eq!(k.stdout, o.stdout, "{kind}: {k}");
    }
    let o = t.run(&["audit", "--audit-log", &log, "--kind", "access"], b"");
    assert_eq!(o.stdout.lines().count(), 3, "{o}");
    let o = t.run(&["audit", "--audit-log", &log, "--session", "other"], b"");
    assert_eq!(o.stdout.lines().count(), 1, "{o}");
    assert!(o.stdout.contains("edit/append"), "{o}");
    let o = t.run(
        &[
            "audit",
            "--audit-log",
            &log,
            "--session",
            "cli",
            "--kind",
            "access",
        ],
        b"",
    );
    assert_eq!(o.stdout.lines().count(), 2, "{o}");

    // --json passes the log's lines through unchanged.
    let o = t.run(&["audit", "--audit-log", &log, "--json"], b"");
    assert_eq!(o.stdout, fs::read_to_string(&t.audit_log).unwrap(), "{o}");
    let o = t.run(
        &["audit", "--audit-log", &log, "--json", "--session", "other"],
        b"",
    );
    let v: Value = serde_json::from_str(o.stdout.trim_end()).unwrap();
    assert_eq!(v, events[2]);

    // A missing log is exit 1 and says where it looked.
    let missing = t.base.join("state/none.jsonl");
    let o = t.run(&["audit", "--audit-log", &s(&missing)], b"");
    assert_eq!(o.code, Some(1), "{o}");
    assert!(o.stderr.contains(&s(&missing)), "{o}");
}

#[test]
fn audit_finds_the_log_where_the_daemon_does() {
    let t = Tree::new();
    // Default location: $XDG_STATE_HOME/writegate/audit.jsonl.
    {
        let _d = t.serve_with(&["--workspace", &s(&t.ws)], &[]);
        assert_eq!(
            t.run(&["write", &s(&t.ws.join("d.txt"))], b"d\n").code,
            Some(0)
        );
        let o = t.run(&["audit"], b"");
        assert_eq!(o.code, Some(0), "{o}");
        assert_eq!(o.stdout.lines().count(), 1, "{o}");
    }
    // audit.path from a config file, given to both with --config.
    let log = t.base.join("state/from-config.jsonl");
    let config = t.base.join("config/wg.toml");
    fs::write(
        &config,
        format!(
            "[[workspace]]\nroot = \"{}\"\ntrusted = true\n\n[audit]\npath = \"{}\"\n",
            s(&t.ws),
            s(&log)
        ),
    )
    .unwrap();
    let _d = t.serve_with(&["--config", &s(&config)], &[]);
    assert_eq!(
        t.run(&["write", &s(&t.ws.join("c.txt"))], b"c\n").code,
        Some(0)
    );
    assert_eq!(
        t.run(&["write", &s(&t.ws.join("c.txt"))], b"cc\n").code,
        Some(0)
    );
    let o = t.run(&["audit", "--config", &s(&config)], b"");
    assert_eq!(o.code, Some(0), "{o}");
    assert_eq!(o.stdout.lines().count(), 2, "{o}");
    // WRITEGATE_AUDIT_PATH, as for the daemon.
    let mut cmd = t.command();
    cmd.args(["audit"]).env("WRITEGATE_AUDIT_PATH", &log);
    let o = run_cmd(cmd, b"");
    assert_eq!(o.stdout.lines().count(), 2, "{o}");
}

#[test]
fn audit_follow_prints_new_events() {
    let t = Tree::new();
    let _d = t.serve(&[]);
    assert_eq!(
        t.run(&["write", &s(&t.ws.join("first.txt"))], b"1\n").code,
        Some(0)
    );
    let mut cmd = t.command();
    cmd.args([
        "audit",
        "--follow",
        "--kind",
        "access",
        "--audit-log",
        &s(&t.audit_log),
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .stderr(Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let first = rx.recv_timeout(TIMEOUT).expect("the existing event");
    assert!(first.contains("fs.access"), "{first}");
    // Refused (not shown: --kind access), then written (shown).
    assert_eq!(
        t.run(&["write", &s(&t.out.join("x"))], b"x\n").code,
        Some(1)
    );
    assert_eq!(
        t.run(&["write", &s(&t.wsb.join("second.txt"))], b"22\n")
            .code,
        Some(0)
    );
    let second = rx.recv_timeout(TIMEOUT).expect("the new event");
    let hash = t.audit_events()[2]["pathHash"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        second.contains(&hash) && second.contains("new, 3 bytes"),
        "{second}"
    );
    assert!(child.try_wait().unwrap().is_none(), "still following");
    child.kill().unwrap();
    child.wait().unwrap();
}

// ---------------------------------------------------------------------------
// Completions, man page, version
// ---------------------------------------------------------------------------

#[test]
fn completions_and_man_page() {
    let t = Tree::new();
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef writegate"),
        ("fish", "complete -c writegate"),
        ("elvish", "writegate"),
        ("powershell", "writegate"),
    ] {
        let o = t.run(&["completions", shell], b"");
        assert_eq!(o.code, Some(0), "{shell}: {o}");
        assert!(o.stdout.contains(marker), "{shell}: {o}");
        assert!(
            o.stdout.contains("approve") && o.stdout.contains("allow-empty"),
            "{shell}"
        );
    }
    let o = t.run(&["completions", "tcsh"], b"");
    assert_eq!(o.code, Some(2), "{o}");

    let o = t.run(&["man"], b"");
    assert_eq!(o.code, Some(0), "{o}");
    assert!(o.stdout.contains(".TH writegate 1"), "{o}");
    assert!(
        o.stdout.contains("writegate\\-approve(1)"),
        "lists the subcommands: {o}"
    );
    for sub in [
        "serve",
        "proxy",
        "mcp",
        "write",
        "edit",
        "read",
        "approve",
        "audit",
        "setup",
        "completions",
        "man",
    ] {
        let o = t.run(&["man", sub], b"");
        assert_eq!(o.code, Some(0), "{sub}: {o}");
        assert!(
            o.stdout.contains(&format!(".TH writegate-{sub} 1")),
            "{sub}: {o}"
        );
        assert!(o.stdout.contains("Exit status"), "{sub}: {o}");
    }
    let o = t.run(&["man", "edit"], b"");
    assert!(o.stdout.contains("\\-\\-expected\\-hash"), "{o}");
    assert_eq!(t.run(&["man", "nope"], b"").code, Some(2));
}

#[test]
fn version_names_the_commit() {
    let t = Tree::new();
    let o = t.run(&["--version"], b"");
    assert_eq!(o.code, Some(0), "{o}");
    let v = o.stdout.trim_end();
    let rest = v
        .strip_prefix(&format!("writegate {} (", env!("CARGO_PKG_VERSION")))
        .and_then(|r| r.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{v:?}"));
    // The build script asks git in the source tree; without git (or outside
    // a checkout) the commit is "unknown".
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let head = Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(&root)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8(o.stdout).unwrap().trim().to_string());
    match head {
        Some(full) => {
            assert!(rest.len() >= 7, "{v:?}");
            assert!(full.starts_with(rest), "{v:?} is not HEAD {full}");
        }
        None => assert_eq!(rest, "unknown", "{v:?}"),
    }
}

// ---------------------------------------------------------------------------
// serve's logs
// ---------------------------------------------------------------------------

/// Starts a daemon with `flags` and `env`, waits for its socket, stops it
/// and returns its stderr.
fn daemon_log(t: &Tree, flags: &[&str], env: &[(&str, &str)]) -> String {
    let mut args = vec!["--workspace", t.ws.to_str().unwrap()];
    args.extend(flags);
    let mut d = t.serve_with(&args, env);
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&d.child),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let start = Instant::now();
    while d.child.try_wait().unwrap().is_none() {
        assert!(start.elapsed() < TIMEOUT, "daemon did not stop");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut text = String::new();
    fs::File::open(&d.stderr_file)
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    text
}

#[test]
fn start_up_logs_each_workspace_with_its_trust() {
    let t = Tree::new();
    let config = t.base.join("config/wg.toml");
    fs::write(
        &config,
        format!("[[workspace]]\nroot = \"{}\"\n", s(&t.wsb)),
    )
    .unwrap();
    let log = daemon_log(&t, &["--config", &s(&config)], &[]);
    let ws_lines: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("serving workspace"))
        .collect();
    assert_eq!(ws_lines.len(), 2, "{log}");
    assert!(ws_lines.iter().all(|l| l.contains("INFO")), "{log}");
    assert!(
        ws_lines[0].contains(&format!("root={}", s(&t.ws))) && ws_lines[0].contains("(trusted"),
        "{log}"
    );
    assert!(
        ws_lines[1].contains(&format!("root={}", s(&t.wsb))) && ws_lines[1].contains("(untrusted"),
        "{log}"
    );
}

#[test]
fn log_level_from_flags_writegate_log_and_rust_log() {
    let t = Tree::new();
    let info = "serving workspace";
    assert!(daemon_log(&t, &[], &[]).contains(info));
    assert!(!daemon_log(&t, &["-q"], &[]).contains(info));
    assert!(!daemon_log(&t, &[], &[("RUST_LOG", "warn")]).contains(info));
    assert!(!daemon_log(&t, &[], &[("WRITEGATE_LOG", "warn")]).contains(info));
    // WRITEGATE_LOG wins over RUST_LOG; a flag wins over both.
    assert!(
        daemon_log(&t, &[], &[("WRITEGATE_LOG", "info"), ("RUST_LOG", "error")]).contains(info)
    );
    assert!(
        daemon_log(
            &t,
            &["-v"],
            &[("WRITEGATE_LOG", "error"), ("RUST_LOG", "error")]
        )
        .contains(info)
    );
    // An invalid filter is named, and the default is used.
    let log = daemon_log(&t, &[], &[("WRITEGATE_LOG", "=[")]);
    assert!(
        log.contains("ignoring WRITEGATE_LOG") && log.contains(info),
        "{log}"
    );
}
