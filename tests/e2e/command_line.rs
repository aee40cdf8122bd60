//! The command line through the real binary: `write`, `edit`, `read`,
//! `approve`, `audit`, `completions`, `man`, `--version`, the logs of
//! `serve`, against a real daemon on a socket in a temp dir, with real files.
//!
//! Every process gets `HOME` and the XDG directories inside its test's temp
//! dir; the daemon mostly listens on the default socket there
//! (`$XDG_RUNTIME_DIR/writegate/writegate.sock`), so the CLI runs without
//! `--socket` as a person would; the tests of "Through `--socket`" name the
//! socket. The exit statuses are those of every `--help` and the README: 0
//! done, 1 refused, 2 usage error, 3 the daemon could not be reached.
//! Timeouts only keep a broken daemon from hanging a test; nothing asserts
//! on speed.

use crate::common::{BIN, Daemon, Finished, TIMEOUT, Tree, TreeAudit, mode_of, run_with_stdin};
use rustix::process::Signal;
use serde_json::{Value, json};
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;

/// `writegate serve --workspace ws --workspace ws-b --audit-log
/// state/audit.jsonl --allow-read` plus `args`, on the default socket.
fn serve(t: &Tree, args: &[&str]) -> Daemon {
    let mut all: Vec<String> = vec![
        "--workspace".into(),
        t.ws.display().to_string(),
        "--workspace".into(),
        t.wsb.display().to_string(),
        "--audit-log".into(),
        t.audit_log.display().to_string(),
        // `writegate read` needs reads on (reads off means
        // `_writegate/read_lines` off too).
        "--allow-read".into(),
    ];
    all.extend(args.iter().map(ToString::to_string));
    serve_with(t, &all.iter().map(String::as_str).collect::<Vec<_>>(), &[])
}

/// `writegate serve` with exactly `args` and extra environment; waits
/// until the default socket answers.
fn serve_with(t: &Tree, args: &[&str], env: &[(&str, &str)]) -> Daemon {
    let mut cmd = t.command();
    cmd.arg("serve").args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    t.spawn(cmd, false, Some(&t.default_sock()))
}

/// Runs `writegate <args>` with `stdin` piped in.
fn run(t: &Tree, args: &[&str], stdin: &[u8]) -> Finished {
    let mut cmd = t.command();
    cmd.args(args);
    run_with_stdin(cmd, stdin)
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

// ---------------------------------------------------------------------------
// No accidental destruction
// ---------------------------------------------------------------------------

#[test]
fn edit_without_a_mode_is_a_usage_error_and_the_file_is_unchanged() {
    let t = Tree::new(BIN);
    let _d = serve(&t, &[]);
    let f = t.ws.join("a.txt");
    fs::write(&f, "one\ntwo\n").unwrap();
    for stdin in [&b""[..], b"new whole content\n"] {
        let o = run(&t, &["edit", &s(&f)], stdin);
        assert_eq!(o.code, Some(2), "{o}");
        assert!(o.stderr.contains("--find"), "names the modes: {o}");
        assert!(o.stderr.contains("writegate write"), "points to write: {o}");
        let o = run(&t, &["edit", &s(&f), "--content", "x"], stdin);
        assert_eq!(o.code, Some(2), "{o}");
    }
    assert_eq!(fs::read(&f).unwrap(), b"one\ntwo\n");
    assert!(t.audit_events().is_empty(), "nothing was sent");
}

#[test]
fn edit_with_empty_stdin_and_no_content_is_a_usage_error() {
    let t = Tree::new(BIN);
    let _d = serve(&t, &[]);
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
        let o = run(&t, &all, b"");
        assert_eq!(o.code, Some(2), "{args:?}: {o}");
        assert!(o.stderr.contains("stdin is empty"), "{args:?}: {o}");
        assert!(o.stderr.contains("--content"), "{args:?}: {o}");
    }
    assert_eq!(fs::read(&f).unwrap(), b"one\ntwo\n");
    assert!(t.audit_events().is_empty(), "nothing was sent");

    // The text from stdin, or an explicit empty --content, is an edit.
    let o = run(&t, &["edit", &s(&f), "--line", "2"], b"TWO");
    assert_eq!(o.code, Some(0), "{o}");
    assert_eq!(fs::read(&f).unwrap(), b"one\nTWO\n");
    let o = run(&t, &["edit", &s(&f), "--find", "TWO", "--content", ""], b"");
    assert_eq!(o.code, Some(0), "{o}");
    assert_eq!(fs::read(&f).unwrap(), b"one\n\n");
}

#[test]
fn write_refuses_empty_stdin_unless_allow_empty() {
    let t = Tree::new(BIN);
    let _d = serve(&t, &[]);
    let f = t.ws.join("keep.txt");
    fs::write(&f, "precious\n").unwrap();
    let o = run(&t, &["write", &s(&f)], b"");
    assert_eq!(o.code, Some(2), "{o}");
    assert!(o.stderr.contains("--allow-empty"), "{o}");
    assert_eq!(fs::read(&f).unwrap(), b"precious\n");
    assert!(t.audit_events().is_empty(), "nothing was sent");

    let o = run(&t, &["write", "--allow-empty", &s(&f)], b"");
    assert_eq!(o.code, Some(0), "{o}");
    assert_eq!(fs::read(&f).unwrap(), b"");
    let e = t.audit_events();
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!(e[0]["type"], "fs.access");
    assert_eq!(e[0]["bytesAfter"], 0);
}

#[test]
fn every_line_and_hash_argument_is_validated() {
    let t = Tree::new(BIN);
    let _d = serve(&t, &[]);
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
        let o = run(&t, args, b"");
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
    let read = run(&t, &["read", &p], b"");
    assert_eq!(read.code, Some(0), "{read}");
    let hash = read
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("hash: "))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_string();
    let upper = format!("sha256:{}", hash["sha256:".len()..].to_ascii_uppercase());
    let o = run(
        &t,
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
    let o = run(
        &t,
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
    let o = run(&t, &["edit", &p, "--line", "9", "--content", "x"], b"");
    assert_eq!(o.code, Some(1), "{o}");
    assert_eq!(fs::read(&f).unwrap(), b"one\nTWO\nthree\n");
}

// ---------------------------------------------------------------------------
// Exit statuses
// ---------------------------------------------------------------------------

#[test]
fn exit_status_one_for_a_refusal_lists_the_workspaces() {
    let t = Tree::new(BIN);
    let _d = serve(&t, &[]);
    let outside = t.out.join("x.txt");
    let o = run(&t, &["write", &s(&outside)], b"x\n");
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
    let t = Tree::new(BIN);
    let f = t.ws.join("x.txt");
    for args in [
        vec!["write", f.to_str().unwrap()],
        vec!["edit", f.to_str().unwrap(), "--append", "--content", "x"],
        vec!["read", f.to_str().unwrap()],
        vec!["approve", "edit_file write /x/.env"],
    ] {
        let o = run(&t, &args, b"x\n");
        assert_eq!(o.code, Some(3), "{args:?}: {o}");
        assert!(o.stderr.contains("cannot reach the daemon"), "{o}");
        assert!(
            o.stderr.contains(&s(&t.default_sock())),
            "names the socket: {o}"
        );
    }
    let o = run(
        &t,
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
    let t = Tree::new(BIN);
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
        let o = run(&t, &[sub, "--help"], b"");
        assert_eq!(o.code, Some(0), "{sub}: {o}");
        assert!(o.stdout.contains("Exit status"), "{sub}: {o}");
        assert!(o.stdout.contains("  0  "), "{sub}: {o}");
        assert!(o.stdout.contains("  2  "), "{sub}: {o}");
    }
    for sub in ["write", "edit", "read", "approve"] {
        let o = run(&t, &[sub, "--help"], b"");
        for code in ["  1  refused", "  3  the daemon could not be reached"] {
            assert!(o.stdout.contains(code), "{sub}: {o}");
        }
    }
}

// ---------------------------------------------------------------------------
// Through `--socket`: `write`, `edit` and `read` with the socket named, and
// their exit statuses (1 refused, 3 unreachable)
// ---------------------------------------------------------------------------

#[test]
fn cli_write_through_the_daemon() {
    let s = Tree::new(BIN);
    let d = s.socket_daemon(&[]);
    let target = s.ws.join("cli.txt");
    let mut cmd = s.command();
    cmd.arg("write").arg(&target).arg("--socket").arg(&s.sock);
    let o = run_with_stdin(cmd, "h\u{e9}llo\nworld\n".as_bytes());
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(fs::read(&target).unwrap(), "h\u{e9}llo\nworld\n".as_bytes());
    assert_eq!(mode_of(&target), 0o600);

    // A relative path is taken from the current directory.
    let mut cmd = s.command();
    cmd.current_dir(&s.ws)
        .args(["write", "rel.txt", "--socket"])
        .arg(&s.sock);
    let o = run_with_stdin(cmd, b"relative\n");
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    assert_eq!(fs::read(s.ws.join("rel.txt")).unwrap(), b"relative\n");

    let a = s.audit_events();
    assert_eq!(
        a.iter().filter(|e| e["type"] == "fs.access").count(),
        2,
        "{a:?}"
    );
    assert!(a.iter().all(|e| e["sessionId"] == "cli"), "{a:?}");
    drop(d);
}

#[test]
fn cli_refused_write_exits_one_with_error_kind() {
    let s = Tree::new(BIN);
    let _d = s.socket_daemon(&[]);
    let outside = s.base.join("outside.txt");
    let mut cmd = s.command();
    cmd.arg("write").arg(&outside).arg("--socket").arg(&s.sock);
    let o = run_with_stdin(cmd, b"x\n");
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(
        o.stderr.contains("path_outside_workspace"),
        "errorKind on stderr: {}",
        o.stderr
    );
    assert!(!outside.exists());
}

#[test]
fn cli_unreachable_daemon_exits_three() {
    let s = Tree::new(BIN);
    let mut cmd = s.command();
    cmd.arg("write")
        .arg(s.ws.join("x.txt"))
        .arg("--socket")
        .arg(s.base.join("nobody-listens.sock"));
    let o = run_with_stdin(cmd, b"x\n");
    assert_eq!(o.code, Some(3), "{}", o.stderr);
    assert!(!o.stderr.is_empty());
    assert!(!s.ws.join("x.txt").exists());
}

#[test]
fn cli_edit_and_read_through_the_daemon() {
    let s = Tree::new(BIN);
    let _d = s.socket_daemon(&["--allow-read"]);
    let p = s.ws.join("a.py");
    fs::write(&p, "def f():\r\n    return 1\r\n").unwrap();
    let mut cmd = s.command();
    cmd.arg("edit")
        .arg(&p)
        .args(["--find", "return 1", "--content", "return 2", "--socket"])
        .arg(&s.sock);
    let o = run_with_stdin(cmd, b"");
    assert_eq!(o.code, Some(0), "{}{}", o.stdout, o.stderr);
    assert_eq!(fs::read(&p).unwrap(), b"def f():\r\n    return 2\r\n");

    let mut cmd = s.command();
    cmd.arg("read").arg(&p).arg("--socket").arg(&s.sock);
    let o = run_with_stdin(cmd, b"");
    assert_eq!(o.code, Some(0), "{}", o.stderr);
    let out = &o.stdout;
    assert!(
        out.contains("def f():") && out.contains("return 2"),
        "{out}"
    );
    // Numbers right-aligned in six columns, then a tab (as the README shows).
    assert!(
        out.starts_with("     1\tdef f():\n     2\t    return 2\n"),
        "{out:?}"
    );
    assert!(out.contains("sha256:"), "{out}");
}

#[test]
fn cli_read_without_reads_says_how_to_turn_them_on() {
    let s = Tree::new(BIN);
    let _d = s.socket_daemon(&[]);
    let p = s.ws.join("a.txt");
    fs::write(&p, "x\n").unwrap();
    let mut cmd = s.command();
    cmd.arg("read").arg(&p).arg("--socket").arg(&s.sock);
    let o = run_with_stdin(cmd, b"");
    assert_eq!(o.code, Some(1), "{}{}", o.stdout, o.stderr);
    assert!(
        o.stderr.contains("does not serve reads")
            && o.stderr.contains("writegate serve --allow-read"),
        "{}",
        o.stderr
    );
    assert!(!o.stderr.contains("method not found"), "{}", o.stderr);
    assert!(o.stdout.is_empty(), "{}", o.stdout);
}

#[test]
fn cli_dos_device_name_inside_the_workspace_is_reserved_name() {
    let s = Tree::new(BIN);
    let _d = s.socket_daemon(&[]);
    for name in ["con.txt", "NUL", "sub/com1.log"] {
        let target = s.ws.join(name);
        let mut cmd = s.command();
        cmd.arg("write").arg(&target).arg("--socket").arg(&s.sock);
        let o = run_with_stdin(cmd, b"x\n");
        assert_eq!(o.code, Some(1), "{name}: {}", o.stderr);
        assert!(
            o.stderr.contains("refused: reserved_name: "),
            "{name}: {}",
            o.stderr
        );
        assert!(o.stderr.contains("DOS device name"), "{name}: {}", o.stderr);
        assert!(
            !o.stderr.contains("path_outside_workspace"),
            "{name}: {}",
            o.stderr
        );
        assert!(!target.exists());
    }
}

#[test]
fn cli_file_too_large_names_the_limit_and_its_key() {
    let s = Tree::new(BIN);
    let config = s.base.join("small.toml");
    fs::write(&config, "max_write_bytes = 16\n").unwrap();
    let _d = s.socket_daemon(&["--config", config.to_str().unwrap()]);
    let target = s.ws.join("big.txt");
    let mut cmd = s.command();
    cmd.arg("write").arg(&target).arg("--socket").arg(&s.sock);
    let o = run_with_stdin(cmd, &[b'a'; 40]);
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(o.stderr.contains("file_too_large"), "{}", o.stderr);
    assert!(
        o.stderr.contains("limit of 16 bytes") && o.stderr.contains("max_write_bytes"),
        "{}",
        o.stderr
    );
    assert!(!target.exists());
}

#[test]
fn cli_approve_refuses_text_that_is_no_operation() {
    let s = Tree::new(BIN);
    let _d = s.socket_daemon(&[]);
    let mut cmd = s.command();
    cmd.args(["approve", "rm -rf /", "--socket"]).arg(&s.sock);
    let o = run_with_stdin(cmd, b"");
    assert_eq!(o.code, Some(2), "{}{}", o.stdout, o.stderr);
    assert!(
        o.stderr.contains("not an operation writegate judges"),
        "{}",
        o.stderr
    );
    assert!(
        o.stderr.contains("edit_file <mode> <absolute path>"),
        "{}",
        o.stderr
    );
    // Nothing reached the daemon's approvals.
    assert!(!s.base.join("state/writegate/approvals.json").exists());
}

#[test]
fn cli_approval_refusal_speaks_cli_words() {
    let s = Tree::new(BIN);
    let _d = s.socket_daemon(&[]);
    let target = s.ws.join(".env");
    let mut cmd = s.command();
    cmd.arg("write").arg(&target).arg("--socket").arg(&s.sock);
    let o = run_with_stdin(cmd, b"K=1\n");
    assert_eq!(o.code, Some(1), "{}", o.stderr);
    assert!(
        o.stderr.contains("refused: approval_required: "),
        "{}",
        o.stderr
    );
    assert!(
        o.stderr.contains("writegate approve 'edit_file write "),
        "{}",
        o.stderr
    );
    assert!(
        !o.stderr.contains("_writegate/") && !o.stderr.contains("data.command"),
        "{}",
        o.stderr
    );
}

// ---------------------------------------------------------------------------
// Every workspace
// ---------------------------------------------------------------------------

#[test]
fn initialize_lists_every_workspace() {
    let t = Tree::new(BIN);
    let _d = serve(&t, &["--untrusted"]);
    let mut sock = UnixStream::connect(t.default_sock()).unwrap();
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
    let t = Tree::new(BIN);
    let _d = serve(&t, &[]);
    let b = t.wsb.join("b.txt");
    let o = run(&t, &["write", &s(&b)], b"bee\n");
    assert_eq!(o.code, Some(0), "{o}");
    assert_eq!(fs::read(&b).unwrap(), b"bee\n");

    // Relative to the current directory, through a symlinked directory.
    std::os::unix::fs::symlink(&t.wsb, t.base.join("link-b")).unwrap();
    let o = run(
        &t,
        &["edit", "link-b/b.txt", "--find", "bee", "--content", "buzz"],
        b"",
    );
    assert_eq!(o.code, Some(0), "{o}");
    assert_eq!(fs::read(&b).unwrap(), b"buzz\n");
    let o = run(&t, &["read", "link-b/b.txt"], b"");
    assert_eq!(o.code, Some(0), "{o}");
    assert!(o.stdout.starts_with("     1\tbuzz\n"), "{o}");

    // A file that does not exist yet, in a new subdirectory of B.
    let o = run(&t, &["write", &s(&t.wsb.join("new.txt"))], b"n\n");
    assert_eq!(o.code, Some(0), "{o}");

    // The primary still works, and each event names its own workspace.
    let a = t.ws.join("a.txt");
    let o = run(&t, &["write", &s(&a)], b"a\n");
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
    let t = Tree::new(BIN);
    let _d = serve(&t, &[]);
    let b = t.wsb.join("b.txt");
    let o = run(&t, &["write", &s(&b), "--workspace", &s(&t.wsb)], b"1\n");
    assert_eq!(o.code, Some(0), "{o}");
    assert_eq!(fs::read(&b).unwrap(), b"1\n");
    // Naming the other workspace: the daemon refuses a path outside it.
    let o = run(&t, &["write", &s(&b), "--workspace", &s(&t.ws)], b"2\n");
    assert_eq!(o.code, Some(1), "{o}");
    assert!(o.stderr.contains("path_outside_workspace"), "{o}");
    assert_eq!(fs::read(&b).unwrap(), b"1\n");
    // A directory that is not a workspace: refused, and the list is shown.
    let o = run(
        &t,
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
    let t = Tree::new(BIN);
    let _d = serve(&t, &[]);
    let env = t.ws.join(".env");
    let o = run(&t, &["write", &s(&env)], b"KEY=1\n");
    assert_eq!(o.code, Some(1), "{o}");
    assert!(o.stderr.contains("refused: approval_required"), "{o}");
    let command = suggested_command(&o.stderr);
    assert_eq!(command, format!("edit_file write {}", s(&env)));
    assert!(!env.exists());

    let o = run(&t, &["approve", &command], b"");
    assert_eq!(o.code, Some(0), "{o}");
    assert!(
        o.stdout.contains("approved") && o.stdout.contains("once"),
        "{o}"
    );
    let o = run(&t, &["write", &s(&env)], b"KEY=1\n");
    assert_eq!(o.code, Some(0), "{o}");
    assert_eq!(fs::read(&env).unwrap(), b"KEY=1\n");
    // Once is once.
    let o = run(&t, &["write", &s(&env)], b"KEY=2\n");
    assert_eq!(o.code, Some(1), "{o}");
    assert_eq!(fs::read(&env).unwrap(), b"KEY=1\n");

    // The command may also be given as separate words.
    let words: Vec<&str> = command.split(' ').collect();
    let mut args = vec!["approve"];
    args.extend(&words);
    let o = run(&t, &args, b"");
    assert_eq!(o.code, Some(0), "{o}");
    let o = run(&t, &["write", &s(&env)], b"KEY=3\n");
    assert_eq!(o.code, Some(0), "{o}");
    assert_eq!(fs::read(&env).unwrap(), b"KEY=3\n");
}

/// Approving what a refusal for a file literally named
/// `id_rsa*` shows approves that one file, never its look-alikes.
#[test]
fn approving_a_glob_like_name_approves_that_file_only() {
    let t = Tree::new(BIN);
    let _d = serve(&t, &[]);
    let star = t.ws.join("id_rsa*");
    let o = run(&t, &["write", &s(&star)], b"x\n");
    assert_eq!(o.code, Some(1), "{o}");
    let command = suggested_command(&o.stderr);
    let o = run(&t, &["approve", "--scope", "workspace", &command], b"");
    assert_eq!(o.code, Some(0), "{o}");
    let o = run(&t, &["write", &s(&star)], b"x\n");
    assert_eq!(o.code, Some(0), "{o}");
    for other in ["id_rsa", "id_rsa.pub", "id_rsa_other"] {
        let p = t.ws.join(other);
        let o = run(&t, &["write", &s(&p)], b"y\n");
        assert_eq!(o.code, Some(1), "{other} got through: {o}");
        assert!(o.stderr.contains("approval_required"), "{o}");
        assert!(!p.exists());
    }
}

#[test]
fn approve_session_scope_covers_that_session_only() {
    let t = Tree::new(BIN);
    let _d = serve(&t, &[]);
    let env = t.wsb.join(".env");
    let o = run(&t, &["write", &s(&env), "--session", "s2"], b"A=1\n");
    assert_eq!(o.code, Some(1), "{o}");
    assert!(
        o.stderr.contains("--session s2"),
        "the suggested line keeps the session: {o}"
    );
    let command = suggested_command(&o.stderr);
    let o = run(
        &t,
        &["approve", &command, "--scope", "session", "--session", "s2"],
        b"",
    );
    assert_eq!(o.code, Some(0), "{o}");
    for n in 1..=2 {
        let o = run(
            &t,
            &["write", &s(&env), "--session", "s2"],
            format!("A={n}\n").as_bytes(),
        );
        assert_eq!(o.code, Some(0), "write {n}: {o}");
    }
    let o = run(&t, &["write", &s(&env)], b"A=9\n");
    assert_eq!(o.code, Some(1), "another session is not covered: {o}");
    assert_eq!(fs::read(&env).unwrap(), b"A=2\n");
    // A scope the method does not know is a usage error.
    let o = run(&t, &["approve", &command, "--scope", "forever"], b"");
    assert_eq!(o.code, Some(2), "{o}");
}

// ---------------------------------------------------------------------------
// Audit
// ---------------------------------------------------------------------------

#[test]
fn audit_shows_and_filters_the_log() {
    let t = Tree::new(BIN);
    let _d = serve(&t, &[]);
    let a = t.ws.join("a.txt");
    let b = t.wsb.join("b.txt");
    assert_eq!(run(&t, &["write", &s(&a)], b"a\n").code, Some(0));
    assert_eq!(run(&t, &["write", &s(&b)], b"b\n").code, Some(0));
    assert_eq!(
        run(
            &t,
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
        run(&t, &["write", &s(&t.out.join("o.txt"))], b"o\n").code,
        Some(1)
    );
    let events = t.audit_events();
    assert_eq!(events.len(), 4, "{events:?}");
    let log = s(&t.audit_log);

    let all = run(&t, &["audit", "--audit-log", &log], b"");
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
        let o = run(&t, &["audit", "--audit-log", &log, "--path", &p], b"");
        assert_eq!(o.code, Some(0), "{o}");
        assert_eq!(o.stdout.lines().count(), 2, "{p}: {o}");
        assert!(
            o.stdout
                .lines()
                .all(|l| l.contains(events[0]["pathHash"].as_str().unwrap())),
            "{o}"
        );
    }
    let o = run(
        &t,
        &["audit", "--audit-log", &log, "--kind", "fs.denied"],
        b"",
    );
    assert_eq!(o.stdout.lines().count(), 1, "{o}");
    assert!(o.stdout.contains("path_outside_workspace"), "{o}");
    for kind in ["denied", "path_outside_workspace"] {
        let k = run(&t, &["audit", "--audit-log", &log, "--kind", kind], b"");
        assert_eq!(k.stdout, o.stdout, "{kind}: {k}");
    }
    let o = run(&t, &["audit", "--audit-log", &log, "--kind", "access"], b"");
    assert_eq!(o.stdout.lines().count(), 3, "{o}");
    let o = run(
        &t,
        &["audit", "--audit-log", &log, "--session", "other"],
        b"",
    );
    assert_eq!(o.stdout.lines().count(), 1, "{o}");
    assert!(o.stdout.contains("edit/append"), "{o}");
    let o = run(
        &t,
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
    let o = run(&t, &["audit", "--audit-log", &log, "--json"], b"");
    assert_eq!(o.stdout, fs::read_to_string(&t.audit_log).unwrap(), "{o}");
    let o = run(
        &t,
        &["audit", "--audit-log", &log, "--json", "--session", "other"],
        b"",
    );
    let v: Value = serde_json::from_str(o.stdout.trim_end()).unwrap();
    assert_eq!(v, events[2]);

    // A missing log is exit 1 and says where it looked.
    let missing = t.base.join("state/none.jsonl");
    let o = run(&t, &["audit", "--audit-log", &s(&missing)], b"");
    assert_eq!(o.code, Some(1), "{o}");
    assert!(o.stderr.contains(&s(&missing)), "{o}");
}

#[test]
fn audit_finds_the_log_where_the_daemon_does() {
    let t = Tree::new(BIN);
    // Default location: $XDG_STATE_HOME/writegate/audit.jsonl.
    {
        let _d = serve_with(&t, &["--workspace", &s(&t.ws)], &[]);
        assert_eq!(
            run(&t, &["write", &s(&t.ws.join("d.txt"))], b"d\n").code,
            Some(0)
        );
        let o = run(&t, &["audit"], b"");
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
    let _d = serve_with(&t, &["--config", &s(&config)], &[]);
    assert_eq!(
        run(&t, &["write", &s(&t.ws.join("c.txt"))], b"c\n").code,
        Some(0)
    );
    assert_eq!(
        run(&t, &["write", &s(&t.ws.join("c.txt"))], b"cc\n").code,
        Some(0)
    );
    let o = run(&t, &["audit", "--config", &s(&config)], b"");
    assert_eq!(o.code, Some(0), "{o}");
    assert_eq!(o.stdout.lines().count(), 2, "{o}");
    // WRITEGATE_AUDIT_PATH, as for the daemon.
    let mut cmd = t.command();
    cmd.args(["audit"]).env("WRITEGATE_AUDIT_PATH", &log);
    let o = run_with_stdin(cmd, b"");
    assert_eq!(o.stdout.lines().count(), 2, "{o}");
}

#[test]
fn audit_follow_prints_new_events() {
    let t = Tree::new(BIN);
    let _d = serve(&t, &[]);
    assert_eq!(
        run(&t, &["write", &s(&t.ws.join("first.txt"))], b"1\n").code,
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
        run(&t, &["write", &s(&t.out.join("x"))], b"x\n").code,
        Some(1)
    );
    assert_eq!(
        run(&t, &["write", &s(&t.wsb.join("second.txt"))], b"22\n").code,
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
    let t = Tree::new(BIN);
    for (shell, marker) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef writegate"),
        ("fish", "complete -c writegate"),
        ("elvish", "writegate"),
        ("powershell", "writegate"),
    ] {
        let o = run(&t, &["completions", shell], b"");
        assert_eq!(o.code, Some(0), "{shell}: {o}");
        assert!(o.stdout.contains(marker), "{shell}: {o}");
        assert!(
            o.stdout.contains("approve") && o.stdout.contains("allow-empty"),
            "{shell}"
        );
    }
    let o = run(&t, &["completions", "tcsh"], b"");
    assert_eq!(o.code, Some(2), "{o}");

    let o = run(&t, &["man"], b"");
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
        let o = run(&t, &["man", sub], b"");
        assert_eq!(o.code, Some(0), "{sub}: {o}");
        assert!(
            o.stdout.contains(&format!(".TH writegate-{sub} 1")),
            "{sub}: {o}"
        );
        assert!(o.stdout.contains("Exit status"), "{sub}: {o}");
    }
    let o = run(&t, &["man", "edit"], b"");
    assert!(o.stdout.contains("\\-\\-expected\\-hash"), "{o}");
    assert_eq!(run(&t, &["man", "nope"], b"").code, Some(2));
}

#[test]
fn version_names_the_commit() {
    let t = Tree::new(BIN);
    let o = run(&t, &["--version"], b"");
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
    let mut d = serve_with(t, &args, env);
    d.signal(Signal::TERM);
    d.wait_exit();
    d.stderr_text()
}

#[test]
fn start_up_logs_each_workspace_with_its_trust() {
    let t = Tree::new(BIN);
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
    let t = Tree::new(BIN);
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

// ---------------------------------------------------------------------------
// Words for a person, and next steps
// ---------------------------------------------------------------------------

/// Before, edit messages and refusals spoke the request's fields ("the one
/// occurrence of find", "matches find exactly"), `read` counted "1 lines",
/// and a path outside every workspace said "ask the user to register".
#[test]
fn edit_and_read_messages_speak_flags_not_request_fields() {
    let t = Tree::new(BIN);
    let _d = serve(&t, &[]);
    let f = t.ws.join("one.txt");
    fs::write(&f, "hi\n").unwrap();
    let o = run(
        &t,
        &["edit", &s(&f), "--find", "hi", "--content", "ho"],
        b"",
    );
    assert_eq!(o.code, Some(0), "{o}");
    assert!(
        o.stdout.contains("the one occurrence of the --find text"),
        "{o}"
    );
    let o = run(
        &t,
        &["edit", &s(&f), "--find", "zz", "--content", "ho"],
        b"",
    );
    assert_eq!(o.code, Some(1), "{o}");
    assert!(o.stderr.contains("matches the --find text exactly"), "{o}");
    let o = run(&t, &["read", &s(&f)], b"");
    assert_eq!(o.code, Some(0), "{o}");
    assert!(o.stdout.contains("(1 line,"), "{o}");
    let outside = t.out.join("x.txt");
    let o = run(&t, &["write", &s(&outside)], b"x\n");
    assert_eq!(o.code, Some(1), "{o}");
    assert!(!o.stderr.contains("ask the user"), "{o}");
    assert!(o.stderr.contains("--workspace DIR"), "{o}");
}

/// Before, a second `--append --content` joined the first appended line:
/// appends are whole lines in the file's own ending, unless --no-newline.
#[test]
fn append_content_adds_whole_lines_in_the_files_line_ending() {
    let t = Tree::new(BIN);
    let _d = serve(&t, &[]);
    let f = t.ws.join("log.txt");
    fs::write(&f, "a\r\n").unwrap();
    for line in ["b", "c"] {
        let o = run(&t, &["edit", &s(&f), "--append", "--content", line], b"");
        assert_eq!(o.code, Some(0), "{o}");
    }
    assert_eq!(fs::read(&f).unwrap(), b"a\r\nb\r\nc\r\n");
    let o = run(
        &t,
        &["edit", &s(&f), "--append", "--no-newline", "--content", "d"],
        b"",
    );
    assert_eq!(o.code, Some(0), "{o}");
    assert_eq!(fs::read(&f).unwrap(), b"a\r\nb\r\nc\r\nd");
}

/// Before, reading a binary file was refused with advice about editing it,
/// and a missing file gave no next step.
#[test]
fn reading_a_binary_or_missing_file_says_what_to_do_for_a_read() {
    let t = Tree::new(BIN);
    let _d = serve(&t, &[]);
    let f = t.ws.join("blob.bin");
    fs::write(&f, b"a\0b\n").unwrap();
    let o = run(&t, &["read", &s(&f)], b"");
    assert_eq!(o.code, Some(1), "{o}");
    assert!(o.stderr.contains("refused: binary_file"), "{o}");
    assert!(o.stderr.contains("cannot be read as text"), "{o}");
    assert!(!o.stderr.contains("edited"), "{o}");
    let o = run(&t, &["read", &s(&t.ws.join("nope.txt"))], b"");
    assert_eq!(o.code, Some(1), "{o}");
    assert!(o.stderr.contains("refused: path_not_found"), "{o}");
    assert!(o.stderr.contains("writegate write"), "{o}");
}

/// Before, a symlink out of the workspace was refused with "write to the
/// real target path instead", which is refused too.
#[test]
fn the_symlink_refusal_advises_what_can_work() {
    let t = Tree::new(BIN);
    let _d = serve(&t, &[]);
    let target = t.out.join("real.txt");
    fs::write(&target, "x\n").unwrap();
    let link = t.ws.join("link.txt");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let o = run(&t, &["write", &s(&link)], b"y\n");
    assert_eq!(o.code, Some(1), "{o}");
    assert!(o.stderr.contains("refused: symlink_escape"), "{o}");
    assert!(!o.stderr.contains("real target path instead"), "{o}");
    assert!(o.stderr.contains("register it as a workspace"), "{o}");
    assert_eq!(fs::read(&target).unwrap(), b"x\n");
}

/// Before, `audit --kind TYPO` printed nothing and exited 0.
#[test]
fn audit_with_an_unknown_kind_is_a_usage_error() {
    let t = Tree::new(BIN);
    let o = run(
        &t,
        &["audit", "--audit-log", &s(&t.audit_log), "--kind", "denyed"],
        b"",
    );
    assert_eq!(o.code, Some(2), "{o}");
    assert!(o.stderr.contains("--kind takes one of"), "{o}");
    assert!(o.stderr.contains("fs.denied"), "{o}");
    assert!(o.stderr.contains("Usage: writegate audit"), "{o}");
}

/// Before, an `approval.grant` row pushed its columns one place right of
/// the `fs.*` rows'.
#[test]
fn audit_table_columns_line_up_on_approval_rows() {
    let t = Tree::new(BIN);
    let log = t.base.join("state/cols.jsonl");
    let rows = [
        json!({"v":1,"ts":"2026-12-04T10:00:00.000Z","type":"fs.access","opId":"a-1","intent":"write","mode":"write","pathHash":"0123456789abcdef","bytesAfter":3,"sessionId":"s"}),
        json!({"v":1,"ts":"2026-12-04T10:00:01.000Z","type":"approval.grant","opId":"a-2","route":"x","workspace":"w","scope":"once","form":"command","mode":"write","pathHash":"0123456789abcdef","sessionId":"s"}),
    ];
    let text = rows.iter().fold(String::new(), |mut acc, r| {
        acc.push_str(&r.to_string());
        acc.push('\n');
        acc
    });
    fs::write(&log, text).unwrap();
    let o = run(&t, &["audit", "--audit-log", &s(&log)], b"");
    assert_eq!(o.code, Some(0), "{o}");
    let cols: Vec<usize> = o
        .stdout
        .lines()
        .map(|l| l.find("0123456789abcdef").unwrap())
        .collect();
    assert_eq!(cols.len(), 2, "{o}");
    assert_eq!(cols[0], cols[1], "{o}");
}

/// Before, a second daemon on a socket already served logged its start-up
/// lines, then refused with no next step.
#[test]
fn a_second_daemon_on_the_same_socket_says_what_to_do() {
    let t = Tree::new(BIN);
    let _d = serve(&t, &[]);
    let o = run(&t, &["serve", "--workspace", &s(&t.ws)], b"");
    assert_eq!(o.code, Some(2), "{o}");
    assert!(o.stderr.contains("already answering"), "{o}");
    assert!(o.stderr.contains("--socket PATH"), "{o}");
    assert!(o.stderr.contains("stop it first"), "{o}");
    assert!(!o.stderr.contains("INFO"), "no start-up lines: {o}");
}

/// Before, a daemon that stopped mid-write left the CLI saying "Broken
/// pipe ... start it", not whether the write happened.
#[test]
fn the_cli_says_whether_a_write_happened_when_the_daemon_stops_mid_write() {
    let t = Tree::new(BIN);
    // A listener that accepts, answers initialize, then closes on the write.
    let sock = t.base.join("run/fake.sock");
    let listener = std::os::unix::net::UnixListener::bind(&sock).unwrap();
    let ws = t.ws.clone();
    let server = std::thread::spawn(move || {
        for _ in 0..1 {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut w = stream;
            let mut line = String::new();
            reader.read_line(&mut line).unwrap();
            let req: Value = serde_json::from_str(&line).unwrap();
            let ans = json!({"jsonrpc":"2.0","id":req["id"],"result":{"protocolVersion":1,
                "_meta":{"writegate":{"workspace":{"id":"000000000000","root":ws,"trusted":true}}}}});
            writeln!(w, "{ans}").unwrap();
            line.clear();
            reader.read_line(&mut line).unwrap();
            // Gone without answering.
        }
    });
    let f = t.ws.join("w.txt");
    fs::write(&f, "old\n").unwrap();
    let o = run(&t, &["write", &s(&f), "--socket", &s(&sock)], b"new\n");
    server.join().unwrap();
    assert_eq!(o.code, Some(3), "{o}");
    assert!(o.stderr.contains("stopped before answering"), "{o}");
    assert!(o.stderr.contains("nothing was written"), "{o}");
    assert_eq!(fs::read(&f).unwrap(), b"old\n");
}

/// Before, `writegate service` had no `--dry-run` and no way back, and a
/// usage error of `service install` showed `writegate service`'s usage.
#[test]
fn service_install_has_a_dry_run_and_an_uninstall_and_its_own_usage_line() {
    let t = Tree::new(BIN);
    let units = t.base.join("config/systemd/user");
    let o = run(
        &t,
        &["service", "install", "--workspace", &s(&t.ws), "--dry-run"],
        b"",
    );
    assert_eq!(o.code, Some(0), "{o}");
    assert!(o.stdout.contains("would write"), "{o}");
    assert!(o.stdout.contains("nothing was written"), "{o}");
    assert!(!units.exists(), "{o}");
    let o = run(
        &t,
        &[
            "service",
            "install",
            "--workspace",
            &s(&t.base.join("none")),
        ],
        b"",
    );
    assert_eq!(o.code, Some(2), "{o}");
    assert!(o.stderr.contains("Usage: writegate service install"), "{o}");
    let o = run(&t, &["service", "install", "--workspace", &s(&t.ws)], b"");
    assert_eq!(o.code, Some(0), "{o}");
    assert!(units.join("writegate.service").exists(), "{o}");
    let o = run(&t, &["service", "uninstall", "--dry-run"], b"");
    assert_eq!(o.code, Some(0), "{o}");
    assert!(o.stdout.contains("would remove"), "{o}");
    assert!(units.join("writegate.service").exists(), "{o}");
    let o = run(&t, &["service", "uninstall"], b"");
    assert_eq!(o.code, Some(0), "{o}");
    assert!(o.stdout.contains("systemctl --user disable --now"), "{o}");
    assert!(!units.join("writegate.service").exists(), "{o}");
    assert!(!units.join("writegate.socket").exists(), "{o}");
    assert!(
        t.base.join("config/writegate/config.toml").exists(),
        "the config stays"
    );
}
