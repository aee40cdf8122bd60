//! The command line: `writegate write`, `edit` and `read` through a running
//! daemon, and their exit codes (1 refused, 2 unreachable).

use crate::common::{Tree, mode_of, run_with_stdin};
use std::fs;

#[test]
fn cli_write_through_the_daemon() {
    let s = Tree::new();
    let d = s.socket_daemon(&[]);
    let target = s.ws.join("cli.txt");
    let mut cmd = s.command();
    cmd.arg("write").arg(&target).arg("--socket").arg(&s.sock);
    let (status, _out, err) = run_with_stdin(cmd, "h\u{e9}llo\nworld\n".as_bytes());
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(fs::read(&target).unwrap(), "h\u{e9}llo\nworld\n".as_bytes());
    assert_eq!(mode_of(&target), 0o600);

    // A relative path is taken from the current directory.
    let mut cmd = s.command();
    cmd.current_dir(&s.ws)
        .args(["write", "rel.txt", "--socket"])
        .arg(&s.sock);
    let (status, _out, err) = run_with_stdin(cmd, b"relative\n");
    assert_eq!(status.code(), Some(0), "{err}");
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
    let s = Tree::new();
    let _d = s.socket_daemon(&[]);
    let outside = s.base.join("outside.txt");
    let mut cmd = s.command();
    cmd.arg("write").arg(&outside).arg("--socket").arg(&s.sock);
    let (status, _out, err) = run_with_stdin(cmd, b"x\n");
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(
        err.contains("path_outside_workspace"),
        "errorKind on stderr: {err}"
    );
    assert!(!outside.exists());
}

#[test]
fn cli_unreachable_daemon_exits_three() {
    let s = Tree::new();
    let mut cmd = s.command();
    cmd.arg("write")
        .arg(s.ws.join("x.txt"))
        .arg("--socket")
        .arg(s.base.join("nobody-listens.sock"));
    let (status, _out, err) = run_with_stdin(cmd, b"x\n");
    assert_eq!(status.code(), Some(3), "{err}");
    assert!(!err.is_empty());
    assert!(!s.ws.join("x.txt").exists());
}

#[test]
fn cli_edit_and_read_through_the_daemon() {
    let s = Tree::new();
    let _d = s.socket_daemon(&["--allow-read"]);
    let p = s.ws.join("a.py");
    fs::write(&p, "def f():\r\n    return 1\r\n").unwrap();
    let mut cmd = s.command();
    cmd.arg("edit")
        .arg(&p)
        .args(["--find", "return 1", "--content", "return 2", "--socket"])
        .arg(&s.sock);
    let (status, out, err) = run_with_stdin(cmd, b"");
    assert_eq!(status.code(), Some(0), "{out}{err}");
    assert_eq!(fs::read(&p).unwrap(), b"def f():\r\n    return 2\r\n");

    let mut cmd = s.command();
    cmd.arg("read").arg(&p).arg("--socket").arg(&s.sock);
    let (status, out, err) = run_with_stdin(cmd, b"");
    assert_eq!(status.code(), Some(0), "{err}");
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
    let s = Tree::new();
    let _d = s.socket_daemon(&[]);
    let p = s.ws.join("a.txt");
    fs::write(&p, "x\n").unwrap();
    let mut cmd = s.command();
    cmd.arg("read").arg(&p).arg("--socket").arg(&s.sock);
    let (status, out, err) = run_with_stdin(cmd, b"");
    assert_eq!(status.code(), Some(1), "{out}{err}");
    assert!(
        err.contains("does not serve reads") && err.contains("writegate serve --allow-read"),
        "{err}"
    );
    assert!(!err.contains("method not found"), "{err}");
    assert!(out.is_empty(), "{out}");
}

#[test]
fn cli_dos_device_name_inside_the_workspace_is_reserved_name() {
    let s = Tree::new();
    let _d = s.socket_daemon(&[]);
    for name in ["con.txt", "NUL", "sub/com1.log"] {
        let target = s.ws.join(name);
        let mut cmd = s.command();
        cmd.arg("write").arg(&target).arg("--socket").arg(&s.sock);
        let (status, _out, err) = run_with_stdin(cmd, b"x\n");
        assert_eq!(status.code(), Some(1), "{name}: {err}");
        assert!(err.contains("refused: reserved_name: "), "{name}: {err}");
        assert!(err.contains("DOS device name"), "{name}: {err}");
        assert!(!err.contains("path_outside_workspace"), "{name}: {err}");
        assert!(!target.exists());
    }
}

#[test]
fn cli_file_too_large_names_the_limit_and_its_key() {
    let s = Tree::new();
    let config = s.base.join("small.toml");
    fs::write(&config, "max_write_bytes = 16\n").unwrap();
    let _d = s.socket_daemon(&["--config", config.to_str().unwrap()]);
    let target = s.ws.join("big.txt");
    let mut cmd = s.command();
    cmd.arg("write").arg(&target).arg("--socket").arg(&s.sock);
    let (status, _out, err) = run_with_stdin(cmd, &[b'a'; 40]);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("file_too_large"), "{err}");
    assert!(
        err.contains("limit of 16 bytes") && err.contains("max_write_bytes"),
        "{err}"
    );
    assert!(!target.exists());
}

#[test]
fn cli_approve_refuses_text_that_is_no_operation() {
    let s = Tree::new();
    let _d = s.socket_daemon(&[]);
    let mut cmd = s.command();
    cmd.args(["approve", "rm -rf /", "--socket"]).arg(&s.sock);
    let (status, out, err) = run_with_stdin(cmd, b"");
    assert_eq!(status.code(), Some(2), "{out}{err}");
    assert!(err.contains("not an operation writegate judges"), "{err}");
    assert!(err.contains("edit_file <mode> <absolute path>"), "{err}");
    // Nothing reached the daemon's approvals.
    assert!(!s.base.join("state/writegate/approvals.json").exists());
}

#[test]
fn cli_approval_refusal_speaks_cli_words() {
    let s = Tree::new();
    let _d = s.socket_daemon(&[]);
    let target = s.ws.join(".env");
    let mut cmd = s.command();
    cmd.arg("write").arg(&target).arg("--socket").arg(&s.sock);
    let (status, _out, err) = run_with_stdin(cmd, b"K=1\n");
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("refused: approval_required: "), "{err}");
    assert!(err.contains("writegate approve 'edit_file write "), "{err}");
    assert!(
        !err.contains("_writegate/") && !err.contains("data.command"),
        "{err}"
    );
}
