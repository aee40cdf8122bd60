//! The stdio transport of `writegate mcp`: stdout carries only MCP
//! messages; pipes, socket pairs and one socket for both directions, read
//! through the runtime without a flag of a shared descriptor changed;
//! over-long and invalid lines; the end of stdin, before `initialize` and
//! after calls still running; `SIGTERM` with a write under way.

use super::{mcp_command, read_facts};
use crate::common::{
    BIN, Clients, EPOLLIN, Tree, TreeAudit, epoll_registrations, nonblocking, temps,
};
use serde_json::{Value, json};
use std::fs;
use std::path::Path;
use std::process::Stdio;

/// Nothing but MCP messages on stdout (logs go to stderr), and the server
/// exits 0 when the client closes stdin. Raw lines, not the SDK (which
/// skips lines that are not JSON).
#[test]
fn stdout_carries_only_mcp_messages_and_stdin_eof_ends_the_server() {
    use std::io::{BufRead, BufReader, Write};
    let t = Tree::new(BIN);
    fs::write(t.ws.join("a.txt"), "a\n").unwrap();
    let mut cmd = mcp_command(&t);
    cmd.env("WRITEGATE_LOG", "debug")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(
            fs::File::create(t.base.join("logs/raw.stderr")).unwrap(),
        ));
    let mut child = cmd.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let lines = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "read_file", "arguments": {"path": "a.txt"}}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "edit_file", "arguments": {"path": "a.txt", "line": "one"}}}),
    ];
    for l in &lines {
        writeln!(stdin, "{l}").unwrap();
    }
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut answers = Vec::new();
    while answers.len() < 4 {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "stdout closed early");
        let v: Value =
            serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
        assert_eq!(v["jsonrpc"], "2.0", "{v}");
        answers.push(v);
    }
    let by_id = |id: u64| answers.iter().find(|a| a["id"] == id).unwrap();
    assert_eq!(by_id(1)["result"]["protocolVersion"], "2025-06-18");
    // The server enlarged its stdin pipe to 1 MiB (the client's end is the
    // same pipe): whole-file requests cross in a few pipe-fulls. Only root
    // may go over pipe-max-size; others keep the default then.
    let max: usize = fs::read_to_string("/proc/sys/fs/pipe-max-size")
        .map_or(0, |s| s.trim().parse().unwrap_or(0));
    let size = rustix::pipe::fcntl_getpipe_size(&stdin).unwrap();
    assert!(
        size == 1 << 20 || (max < 1 << 20 && !rustix::process::geteuid().is_root()),
        "stdin pipe of {size} bytes (pipe-max-size {max})"
    );
    assert_eq!(by_id(2)["result"]["tools"].as_array().unwrap().len(), 3);
    assert_eq!(by_id(3)["result"]["isError"], false, "{}", by_id(3));
    assert_eq!(by_id(4)["result"]["isError"], true, "{}", by_id(4));
    drop(stdin);
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert_eq!(rest, "", "nothing after the answers");
    assert!(child.wait().unwrap().success());
    let log = fs::read_to_string(t.base.join("logs/raw.stderr")).unwrap();
    assert!(log.contains("MCP connection closed"), "{log}");
}

/// Whether process `pid` has a descriptor for the same socket or pipe as
/// our `fd` registered with an epoll instance for reading: the server
/// reads it through the runtime, not through a blocking thread.
fn registered_for_reading(pid: u32, fd: &impl std::os::fd::AsFd) -> bool {
    let ours = fs::read_link(format!(
        "/proc/self/fd/{}",
        std::os::fd::AsRawFd::as_raw_fd(&fd.as_fd())
    ))
    .unwrap();
    epoll_registrations(pid)
        .iter()
        .any(|(_, events, target)| events & EPOLLIN != 0 && Path::new(target) == ours)
}

/// A client that spawns the server on socket pairs, one for stdin and one
/// for stdout (as Node.js clients do; the TypeScript SDK's stdio transport does),
/// is served through descriptors registered with the runtime, as one on
/// pipes, without a flag of the shared sockets changed (each call passes
/// `MSG_DONTWAIT`): a whole-file write of 3 MiB and a read arrive whole,
/// and the end of input ends the server.
#[test]
fn a_client_on_socket_pairs_is_served_without_blocking_threads() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream;
    let t = Tree::new(BIN);
    let (mut to_server, server_in) = UnixStream::pair().unwrap();
    let (from_server, server_out) = UnixStream::pair().unwrap();
    // Our copies of the server's ends share their flags with the server's.
    let (in_copy, out_copy) = (
        server_in.try_clone().unwrap(),
        server_out.try_clone().unwrap(),
    );
    let mut cmd = mcp_command(&t);
    cmd.stdin(Stdio::from(std::os::fd::OwnedFd::from(server_in)))
        .stdout(Stdio::from(std::os::fd::OwnedFd::from(server_out)))
        .stderr(Stdio::from(
            fs::File::create(t.base.join("logs/pair.stderr")).unwrap(),
        ));
    let mut child = cmd.spawn().unwrap();
    let mut out = BufReader::new(from_server);
    let content = "0123456789abcdef\r\n".repeat(3 << 16);
    let file = t.ws.join("pair.txt");
    let mut answer = || {
        let mut line = String::new();
        assert!(
            out.read_line(&mut line).unwrap() > 0,
            "the server closed early"
        );
        serde_json::from_str::<Value>(&line).unwrap()
    };
    let mut send = |l: Value| writeln!(to_server, "{l}").unwrap();
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "pair", "version": "1"}}}),
    );
    assert_eq!(answer()["id"], 1);
    assert!(
        registered_for_reading(child.id(), &in_copy),
        "stdin is read through the runtime"
    );
    assert!(
        !nonblocking(&in_copy) && !nonblocking(&out_copy),
        "a shared description was made non-blocking"
    );
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "write_file", "arguments": {"path": file, "content": content}}}),
    );
    let a = answer();
    assert_eq!(
        (a["id"].clone(), a["result"]["isError"].clone()),
        (json!(2), json!(false)),
        "{a}"
    );
    assert!(fs::read(&file).unwrap() == content.as_bytes());
    send(
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "read_file", "arguments": {"path": file, "line": 3, "limit": 1}}}),
    );
    let a = answer();
    assert_eq!(a["result"]["isError"], false, "{a}");
    let txt = a["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(read_facts(txt)["totalLines"], 3 << 16);
    assert!(a["result"].get("structuredContent").is_none(), "{a}");
    to_server.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(child.wait().unwrap().success());
    assert!(!nonblocking(&in_copy) && !nonblocking(&out_copy));
}

/// stdin and stdout on one socket, stderr elsewhere: it is read through the
/// runtime, and its flags never change.
#[test]
fn one_socket_for_stdin_and_stdout_keeps_its_flags() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream;
    let t = Tree::new(BIN);
    let (mut client, server) = UnixStream::pair().unwrap();
    let copy = server.try_clone().unwrap();
    let mut cmd = mcp_command(&t);
    cmd.stdin(Stdio::from(std::os::fd::OwnedFd::from(
        server.try_clone().unwrap(),
    )))
    .stdout(Stdio::from(std::os::fd::OwnedFd::from(server)))
    .stderr(Stdio::from(
        fs::File::create(t.base.join("logs/one.stderr")).unwrap(),
    ));
    let mut child = cmd.spawn().unwrap();
    writeln!(client, "{}", json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "one", "version": "1"}}})).unwrap();
    let mut line = String::new();
    BufReader::new(client.try_clone().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("\"id\":1"), "{line}");
    assert!(
        registered_for_reading(child.id(), &copy),
        "the socket is read through the runtime"
    );
    assert!(
        !nonblocking(&copy),
        "a shared description was made non-blocking"
    );
    client.shutdown(std::net::Shutdown::Write).unwrap();
    assert!(child.wait().unwrap().success());
    assert!(!nonblocking(&copy));
}

/// stdin, stdout and stderr on one socket (inetd, systemd `Accept=yes`):
/// nothing is made non-blocking (the flag is the shared description's, and
/// a log line would fail with EAGAIN), yet the socket is read through the
/// runtime, and answers larger than the socket's buffer, read late, all
/// arrive whole; the flags stay as they were.
#[test]
fn stdio_on_one_socket_with_stderr_stays_blocking_and_answers_whole() {
    use std::io::{BufRead, BufReader, Write};
    use std::os::unix::net::UnixStream;
    let t = Tree::new(BIN);
    let (mut client, server) = UnixStream::pair().unwrap();
    let copy = server.try_clone().unwrap();
    let file = t.ws.join("big.txt");
    fs::write(&file, "a line of text for a large answer\n".repeat(60_000)).unwrap();
    let mut cmd = mcp_command(&t);
    cmd.env("WRITEGATE_LOG", "error")
        .stdin(Stdio::from(std::os::fd::OwnedFd::from(
            server.try_clone().unwrap(),
        )))
        .stdout(Stdio::from(std::os::fd::OwnedFd::from(
            server.try_clone().unwrap(),
        )))
        .stderr(Stdio::from(std::os::fd::OwnedFd::from(server)));
    let mut child = cmd.spawn().unwrap();
    writeln!(client, "{}", json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "one", "version": "1"}}})).unwrap();
    writeln!(
        client,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .unwrap();
    for id in 2..6 {
        writeln!(client, "{}", json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "read_file", "arguments": {"path": file}}})).unwrap();
    }
    // Read nothing for a while: the answers (2 MiB and more each) fill the
    // socket's buffer and the server's writes wait.
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(
        !nonblocking(&copy),
        "a shared description was made non-blocking"
    );
    assert!(registered_for_reading(child.id(), &copy));
    client.shutdown(std::net::Shutdown::Write).unwrap();
    // Our copy of the server's end keeps the socket open: read the five
    // answers, not to the end.
    let mut ids = Vec::new();
    let mut lines = BufReader::new(client).lines();
    while ids.len() < 5 {
        let line = lines.next().expect("the server closed early").unwrap();
        let v: Value = serde_json::from_str(&line).expect("whole JSON lines only");
        if v["id"] != 1 {
            assert_eq!(v["result"]["isError"], false, "{}", v["id"]);
            let txt = v["result"]["content"][0]["text"].as_str().unwrap();
            assert_eq!(read_facts(txt)["totalLines"], 60_000);
        }
        ids.push(v["id"].as_u64().unwrap());
    }
    ids.sort_unstable();
    assert_eq!(ids, [1, 2, 3, 4, 5]);
    assert!(child.wait().unwrap().success());
    assert!(!nonblocking(&copy));
}

/// SIGTERM stops the server with status 0; a write already running
/// finishes whole, one not yet begun is cancelled: the file is all new
/// (one `fs.access` event) or absent (no event, or the call's `fs.denied`).
#[test]
fn sigterm_stops_the_server_and_a_running_write_lands_whole() {
    let t = Tree::new(BIN);
    let mut d = t.spawn(mcp_command(&t), true, None);
    let mut c = d.stdio_client();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}});
    c.send(&init);
    assert_eq!(c.recv()["id"], 1);
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let big = "x".repeat(4 << 20) + "\n";
    let file = t.ws.join("big.txt");
    c.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "write_file", "arguments": {"path": file, "content": big}}}));
    d.signal(rustix::process::Signal::TERM);
    assert!(d.wait_exit().success(), "{}", d.stderr_text());
    if let Ok(bytes) = fs::read(&file) {
        assert!(bytes == big.as_bytes(), "torn: {} bytes", bytes.len());
        assert_eq!(t.audit_events().len(), 1);
    } else {
        // Never started, or stopped before it began to commit (the signal
        // cancels calls whose operation had not begun): nothing written,
        // and at most the call's one `fs.denied` event, without errorKind.
        let events = t.audit_events();
        assert!(events.len() <= 1, "{events:?}");
        if let Some(e) = events.first() {
            assert_eq!(e["type"], "fs.denied", "{e}");
            assert_eq!(e["route"], "mcp write_file", "{e}");
            assert!(e.get("errorKind").is_none(), "{e}");
        }
    }
    assert!(temps(&t.base).is_empty());
}

/// A line over `max_frame_bytes` is skipped (logged) and a message that is
/// no valid request is answered "Invalid request"; the server answers on.
#[test]
fn an_over_long_or_invalid_line_does_not_stop_the_server() {
    let t = Tree::new(BIN);
    let mut cmd = mcp_command(&t);
    cmd.env("WRITEGATE_MAX_FRAME_BYTES", "4096");
    let mut d = t.spawn(cmd, true, None);
    let mut c = d.stdio_client();
    handshake(&mut c);
    let long = "x".repeat(8192);
    c.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "write_file", "arguments": {"path": "big.txt", "content": long}}}));
    c.send_raw(b"this is not JSON\n");
    c.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "result": {}}));
    let r = c.recv();
    assert_eq!(r["id"], 3, "{r}");
    assert_eq!(r["error"]["code"], -32600, "{r}");
    c.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "write_file", "arguments": {"path": "small.txt", "content": "ok\n"}}}));
    let r = c.recv();
    assert_eq!(r["id"], 4, "{r}");
    assert_eq!(r["result"]["isError"], false, "{r}");
    assert!(!t.ws.join("big.txt").exists());
    assert_eq!(fs::read(t.ws.join("small.txt")).unwrap(), b"ok\n");
    assert!(
        d.stderr_text().contains("longer than max_frame_bytes"),
        "{}",
        d.stderr_text()
    );
}

/// Defect pinned: `writegate mcp` exited 2 ("MCP initialization failed:
/// connection closed") when the client closed stdin before `initialize`,
/// though its `--help` says 0 when the client closed stdin. A client that
/// goes away is how a server is stopped, before the handshake as after it:
/// status 0 whenever stdin closes (at once, after half a line, after a
/// pre-initialize ping, or after `initialize`).
#[test]
fn regression_stdin_closed_before_initialize_exits_0() {
    for when in [
        "at once",
        "after half a line",
        "after a ping",
        "after initialize",
    ] {
        let t = Tree::new(BIN);
        let mut d = t.spawn(mcp_command(&t), true, None);
        let mut c = d.stdio_client();
        match when {
            "after half a line" => c.send_raw(b"{\"jsonrpc\":\"2.0\",\"id\":1,"),
            "after a ping" => {
                c.send(&json!({"jsonrpc": "2.0", "id": 0, "method": "ping"}));
                assert_eq!(c.recv()["id"], 0);
            }
            "after initialize" => {
                c.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}));
                assert_eq!(c.recv()["id"], 1);
            }
            _ => {}
        }
        c.close_write();
        let status = d.wait_exit();
        assert_eq!(
            status.code(),
            Some(0),
            "stdin closed {when}: {status}\n{}",
            d.stderr_text()
        );
        assert!(
            !d.stderr_text().contains("initialization failed"),
            "stdin closed {when}:\n{}",
            d.stderr_text()
        );
    }
}

/// `writegate mcp` dropped calls still running when the client closed
/// stdin (rmcp ends its service at the end of input), so a client that
/// sends its calls and closes its end lost answers: the server now answers
/// every call it read before it stops, as `serve --stdio` does.
#[test]
fn regression_calls_sent_before_stdin_closes_are_all_answered() {
    let t = Tree::new(BIN);
    let file = t.ws.join("big.txt");
    fs::write(&file, "a line of text for a large answer\n".repeat(30_000)).unwrap();
    let mut d = t.spawn(mcp_command(&t), true, None);
    let mut c = d.stdio_client();
    handshake(&mut c);
    for id in 2..8 {
        c.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "read_file", "arguments": {"path": file}}}));
    }
    c.send(&json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "write_file", "arguments": {"path": t.ws.join("w.txt"), "content": "x\n"}}}));
    c.close_write();
    let mut ids: Vec<u64> = c
        .recv_until_eof()
        .iter()
        .filter_map(|v| v["id"].as_u64())
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (2..9).collect::<Vec<u64>>());
    assert_eq!(fs::read(t.ws.join("w.txt")).unwrap(), b"x\n");
    assert_eq!(d.wait_exit().code(), Some(0));
}

/// A `write_file` line long enough to have its strings checked while it
/// arrives, sent in pieces with pauses between them, writes exactly its
/// content, and so does one sent in the same pieces of input as a line over
/// `max_frame_bytes` before it. (That the skipped line's bytes are never
/// fed to the check is `LineReader`'s unit test; that a long line's
/// strings are checked is the transport's.)
#[test]
fn long_write_file_lines_sent_in_pieces_or_after_an_over_long_line_write_exactly_their_content() {
    let t = Tree::new(BIN);
    let mut cmd = mcp_command(&t);
    cmd.env("WRITEGATE_MAX_FRAME_BYTES", "1048576");
    let mut d = t.spawn(cmd, true, None);
    let mut c = d.stdio_client();
    handshake(&mut c);
    let content = "line \"quoted\" \\ tab\t é ✓ 😀 \u{1}\r\n".repeat(12_000);
    let line = |id: u64, name: &str| {
        let mut l = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "write_file", "arguments": {"path": name, "content": content}}})).unwrap();
        l.push(b'\n');
        l
    };
    let first = line(2, "a.txt");
    assert!(first.len() > 256 * 1024 && first.len() < 1024 * 1024);
    for piece in first.chunks(70_001) {
        c.send_raw(piece);
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let r = c.recv();
    assert_eq!(r["result"]["isError"], false, "{r}");
    // An over-long line of short strings, then the next write in the same
    // pieces of input.
    let decoy = "\",\"content\":\"x\\\"".repeat(200_000);
    let mut input = format!("{{\"s\":\"{decoy}\"}}\n").into_bytes();
    input.extend_from_slice(&line(3, "b.txt"));
    for piece in input.chunks(100_003) {
        c.send_raw(piece);
    }
    let r = c.recv();
    assert_eq!(r["id"], 3, "{r}");
    assert_eq!(r["result"]["isError"], false, "{r}");
    for name in ["a.txt", "b.txt"] {
        assert!(
            fs::read(t.ws.join(name)).unwrap() == content.as_bytes(),
            "{name} differs"
        );
    }
}

/// The MCP handshake of a raw client: `initialize` (id 1) answered, then
/// `notifications/initialized`.
fn handshake(c: &mut crate::common::Client) {
    c.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}));
    assert_eq!(c.recv()["id"], 1);
    c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
}
