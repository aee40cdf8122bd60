//! Socket security: a 0600 socket in a 0700 directory, one daemon per
//! socket path, stale sockets replaced but regular files kept, and peers
//! of another UID closed without an answer.

use crate::common::{
    BIN, Clients, EPOLLIN, EPOLLOUT, Opts, Tree, check_initialize, epoll_registrations,
    find_program, mode_of, nobody_reachable_binary, run_with_stdin, running_as_root, write_params,
};
use rustix::process::Signal;
use serde_json::json;
use std::fs;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::process::Command;

#[test]
fn socket_file_is_0600_in_a_0700_directory_and_stdout_stays_empty() {
    let s = Tree::new(BIN);
    let mut d = s.socket_daemon(&[]);
    assert_eq!(mode_of(&s.sock), 0o600, "socket mode");
    assert_eq!(
        mode_of(s.sock.parent().unwrap()),
        0o700,
        "socket directory mode"
    );
    let mut c = d.connect();
    let r = c.call_id(
        1,
        "fs/write_text_file",
        write_params(&s.ws.join("s.txt"), "s"),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    d.signal(Signal::TERM);
    assert!(d.wait_exit().success());
    let out = fs::read(d.stdout_file.as_ref().unwrap()).unwrap();
    assert!(
        out.is_empty(),
        "a socket daemon writes nothing to stdout: {:?}",
        String::from_utf8_lossy(&out)
    );
}

#[test]
fn socket_second_daemon_on_the_same_path_refuses_to_start() {
    let s = Tree::new(BIN);
    let d1 = s.socket_daemon(&[]);
    let ino = fs::symlink_metadata(&s.sock).unwrap().ino();
    let mut d2 = s.daemon(Opts {
        socket: true,
        no_wait: true,
        ..Default::default()
    });
    let status = d2.wait_exit();
    assert!(!status.success(), "the second daemon must fail: {status:?}");
    // The first one is untouched and still answers on its socket.
    assert_eq!(fs::symlink_metadata(&s.sock).unwrap().ino(), ino);
    let mut c = d1.connect();
    check_initialize(
        &c.call_id(1, "initialize", json!({"protocolVersion": 1})),
        &s.ws,
        false,
    );
}

#[test]
fn socket_stale_file_is_replaced() {
    let s = Tree::new(BIN);
    let dir = s.sock.parent().unwrap();
    fs::DirBuilder::new().mode(0o700).create(dir).unwrap();
    drop(UnixListener::bind(&s.sock).unwrap());
    assert!(s.sock.exists(), "a stale socket file is left behind");
    assert!(
        UnixStream::connect(&s.sock).is_err(),
        "nothing answers on it"
    );
    let d = s.socket_daemon(&[]);
    let mut c = d.connect();
    check_initialize(
        &c.call_id(1, "initialize", json!({"protocolVersion": 1})),
        &s.ws,
        false,
    );
    assert_eq!(mode_of(&s.sock), 0o600);
}

#[test]
fn socket_path_holding_a_regular_file_is_not_replaced() {
    let s = Tree::new(BIN);
    let dir = s.sock.parent().unwrap();
    fs::DirBuilder::new().mode(0o700).create(dir).unwrap();
    fs::write(&s.sock, "precious").unwrap();
    let mut d = s.daemon(Opts {
        socket: true,
        no_wait: true,
        ..Default::default()
    });
    assert!(!d.wait_exit().success());
    assert_eq!(fs::read(&s.sock).unwrap(), b"precious");
}

#[test]
fn socket_peer_with_another_uid_is_closed_without_an_answer() {
    if !running_as_root("socket_peer_with_another_uid_is_closed_without_an_answer") {
        return;
    }
    let Some(setpriv) = find_program("setpriv") else {
        eprintln!("note: setpriv is missing; skipping the peer-UID test");
        return;
    };
    let s = Tree::new(BIN);
    let d = s.socket_daemon(&[]);
    // Let `nobody` reach the socket, so that only the UID check refuses it.
    for dir in [
        s.base.clone(),
        s.base.join("run"),
        s.sock.parent().unwrap().to_path_buf(),
    ] {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o711)).unwrap();
    }
    fs::set_permissions(&s.sock, fs::Permissions::from_mode(0o666)).unwrap();

    // A system python (not a per-user shim nobody cannot reach).
    let python = ["/usr/bin/python3", "/usr/local/bin/python3", "/bin/python3"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| p.is_file());
    if let Some(python) = python {
        let script = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(20)
s.connect(sys.argv[1])
print("CONNECTED")
try:
    s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n')
    d = s.recv(65536)
except socket.timeout:
    print("TIMEOUT"); sys.exit(0)
except OSError as e:
    print("CLOSED", e); sys.exit(0)
print("CLOSED eof" if d == b"" else "DATA " + d.decode(errors="replace"))
"#;
        let out = Command::new(&setpriv)
            .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&python)
            .args(["-c", script])
            .arg(&s.sock)
            .env_clear()
            .current_dir("/")
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            stdout.starts_with("CONNECTED\n"),
            "nobody could not even connect: {stdout}"
        );
        assert!(
            stdout.contains("\nCLOSED"),
            "the daemon must close without answering: {stdout}"
        );
    } else {
        eprintln!("note: no system python3; checking the peer-UID refusal with the CLI only");
    }

    // The CLI run as nobody cannot write through the daemon either.
    let target = s.ws.join("by-nobody.txt");
    let mut cmd = Command::new(&setpriv);
    cmd.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(nobody_reachable_binary(&s.base))
        .arg("write")
        .arg(&target)
        .arg("--socket")
        .arg(&s.sock)
        .env_clear()
        .current_dir("/");
    let out = run_with_stdin(cmd, b"from nobody\n");
    assert_eq!(
        out.code,
        Some(3),
        "unreachable for another UID: {}",
        out.stderr
    );
    assert!(!target.exists(), "nothing written for a foreign peer");

    assert!(
        d.stderr_text().contains("65534"),
        "the refusal is logged with the peer UID"
    );
    // Same-UID peers still work.
    let mut c = d.connect();
    check_initialize(
        &c.call_id(1, "initialize", json!({"protocolVersion": 1})),
        &s.ws,
        false,
    );
}

/// A connection's socket and a stdio daemon's pipes are polled (ADR 0007)
/// only for what the daemon waits for. Registered for writing as well
/// (tokio's stream halves, its pipe sender), they woke a worker every time
/// the peer read an answer; answers are written directly, so nothing waits
/// to write while the peer keeps up.
#[test]
fn idle_connections_are_not_polled_for_writing() {
    let s = Tree::new(BIN);
    let mut d = s.socket_daemon(&[]);
    // What is registered before the connection (the listener, the
    // runtime's own signal and wake-up descriptors) is not looked at.
    let before = epoll_registrations(d.child.id());
    let mut c = d.connect();
    for k in 0..3 {
        let r = c.call_id(
            k,
            "fs/write_text_file",
            write_params(&s.ws.join("p.txt"), &format!("answer {k}\n")),
        );
        assert_eq!(r["result"], json!({}), "{r}");
    }
    let regs = epoll_registrations(d.child.id());
    let sockets: Vec<_> = regs
        .iter()
        .filter(|r| r.2.starts_with("socket:") && !before.contains(r))
        .collect();
    assert!(
        !sockets.is_empty(),
        "the connection is registered: {regs:?}"
    );
    // The connection costs two descriptors: the reader's, and the writer's,
    // which direct writes share.
    let conn_target = &sockets[0].2;
    let held = fs::read_dir(format!("/proc/{}/fd", d.child.id()))
        .unwrap()
        .flatten()
        .filter(|e| fs::read_link(e.path()).is_ok_and(|t| t.as_os_str() == conn_target.as_str()))
        .count();
    assert_eq!(held, 2, "descriptors for the connection");
    assert!(
        sockets.iter().all(|(_, ev, _)| ev & EPOLLOUT == 0),
        "a socket is polled for writing: {regs:?}"
    );
    assert!(
        sockets.iter().all(|(_, ev, _)| ev & EPOLLIN != 0),
        "{regs:?}"
    );
    d.signal(Signal::TERM);
    assert!(d.wait_exit().success());

    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    let spawned = d.child.id();
    let r = c.call_id(
        1,
        "fs/write_text_file",
        write_params(&s.ws.join("q.txt"), "stdio\n"),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    let regs = epoll_registrations(spawned);
    let pipes: Vec<_> = regs
        .iter()
        .filter(|(_, _, t)| t.starts_with("pipe:"))
        .collect();
    // stdin's pipe is registered; stdout's is not (its flags, if any,
    // would say EPOLLOUT).
    assert!(
        pipes.iter().any(|(_, ev, _)| ev & EPOLLIN != 0),
        "stdin's pipe is registered for reading: {regs:?}"
    );
    assert!(
        pipes.iter().all(|(_, ev, _)| ev & EPOLLOUT == 0),
        "a pipe is polled for writing: {regs:?}"
    );
    drop(c);
    assert!(d.wait_exit().success());
}

/// A daemon started with a low soft descriptor limit (64, as `prlimit`
/// sets it; the hard limit 4,096) raises it and serves 100 connections at
/// once: each holds two descriptors, so with the limit it was given,
/// accepts failed after about two dozen.
#[test]
fn the_daemon_raises_its_descriptor_limit() {
    let Some(prlimit) = find_program("prlimit") else {
        eprintln!("note: prlimit is missing; skipping the descriptor-limit test");
        return;
    };
    let s = Tree::new(BIN);
    let mut cmd = Command::new(prlimit);
    s.set_env(&mut cmd);
    cmd.arg("--nofile=64:4096")
        .arg(crate::common::BIN)
        .arg("serve")
        .arg("--socket")
        .arg(&s.sock)
        .arg("--workspace")
        .arg(&s.ws)
        .arg("--audit-log")
        .arg(&s.audit_log);
    let d = s.spawn(cmd, false, Some(&s.sock));
    let limits = fs::read_to_string(format!("/proc/{}/limits", d.child.id())).unwrap();
    let open_files = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("a descriptor limit");
    let soft: Vec<&str> = open_files.split_whitespace().skip(3).take(2).collect();
    assert_eq!(soft, ["4096", "4096"], "{open_files}");
    let mut clients: Vec<_> = (0..100).map(|_| d.connect()).collect();
    for (k, c) in (0_i64..).zip(clients.iter_mut()) {
        let r = c.call_id(k, "initialize", json!({"protocolVersion": 1}));
        assert!(r.get("result").is_some(), "connection {k}: {r}");
    }
}
