//! Shutdown and start-up: SIGTERM mid-pipeline leaves no torn file, stdin
//! EOF answers everything first, SIGTERM and SIGINT exit 0 and remove the
//! socket; start-up removes the temp files of dead processes only.

use crate::common::{
    BIN, Clients, Opts, TIMEOUT, Tree, TreeAudit, big_content, by_id, nonblocking, req,
    small_content, write_params,
};
use rustix::process::Signal;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[test]
fn shutdown_sigterm_mid_pipeline_leaves_no_torn_files() {
    const CONNS: i64 = 4;
    const PER: i64 = 50;
    let s = Tree::new(BIN);
    let mut d = s.socket_daemon(&[]);
    let answered = Arc::new(AtomicUsize::new(0));
    let responses = Arc::new(Mutex::new(Vec::<(i64, Value)>::new()));
    let mut threads = Vec::new();
    for conn in 0..CONNS {
        let stream = UnixStream::connect(&s.sock).unwrap();
        let mut w = stream.try_clone().unwrap();
        let ws = s.ws.clone();
        threads.push(std::thread::spawn(move || {
            for i in 0..PER {
                let p = ws.join(format!("big-{conn}-{i}.txt"));
                let mut line = req(
                    i,
                    "fs/write_text_file",
                    write_params(&p, &big_content(conn, i)),
                )
                .to_string();
                line.push('\n');
                if w.write_all(line.as_bytes()).is_err() {
                    break; // the daemon has gone: expected after SIGTERM
                }
            }
        }));
        let answered = answered.clone();
        let responses = responses.clone();
        threads.push(std::thread::spawn(move || {
            let mut r = BufReader::new(stream);
            let mut line = Vec::new();
            loop {
                line.clear();
                match r.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let v: Value = serde_json::from_slice(&line).expect("a JSON response line");
                        responses.lock().unwrap().push((conn, v));
                        answered.fetch_add(1, Ordering::SeqCst);
                    }
                }
            }
        }));
    }
    // Mid-way: once some writes are answered.
    let start = Instant::now();
    while answered.load(Ordering::SeqCst) < 20 && start.elapsed() < TIMEOUT {
        std::thread::sleep(Duration::from_millis(2));
    }
    let at_signal = answered.load(Ordering::SeqCst);
    d.signal(Signal::TERM);
    let status = d.wait_exit();
    assert!(
        status.success(),
        "exit status 0 after SIGTERM, got {status:?}\n{}",
        d.stderr_text()
    );
    for t in threads {
        t.join().unwrap();
    }
    assert!(!s.sock.exists(), "the socket file is removed at shutdown");

    let responses = responses.lock().unwrap();
    eprintln!(
        "shutdown test: SIGTERM after {at_signal} answers; {} answers in all of {} ({} cancelled)",
        responses.len(),
        CONNS * PER,
        responses
            .iter()
            .filter(|(_, r)| r["error"]["code"] == -32800)
            .count()
    );
    let mut seen = BTreeSet::new();
    for (conn, r) in responses.iter() {
        let i = r["id"]
            .as_i64()
            .unwrap_or_else(|| panic!("a response to a request: {r}"));
        assert!(seen.insert((*conn, i)), "answered twice: {conn} {i}");
        let p = s.ws.join(format!("big-{conn}-{i}.txt"));
        if r["result"] == json!({}) {
            assert_eq!(
                fs::read_to_string(&p).ok().as_deref(),
                Some(big_content(*conn, i).as_str()),
                "{p:?}"
            );
        } else {
            assert_eq!(r["error"]["code"], -32800, "success or cancelled only: {r}");
            assert!(!p.exists(), "a cancelled write wrote nothing: {p:?}");
        }
    }
    // Every file is either absent or complete, and every write that was
    // published was also answered.
    for e in fs::read_dir(&s.ws).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        assert!(
            !(name.starts_with('.') && Path::new(&name).extension().is_some_and(|x| x == "tmp")),
            "temp file left: {name}"
        );
        let rest = name
            .strip_prefix("big-")
            .and_then(|r| r.strip_suffix(".txt"))
            .unwrap_or_else(|| panic!("unexpected file {name}"));
        let (conn, i) = rest.split_once('-').unwrap();
        let (conn, i): (i64, i64) = (conn.parse().unwrap(), i.parse().unwrap());
        assert_eq!(
            fs::read_to_string(s.ws.join(&name)).unwrap(),
            big_content(conn, i),
            "torn file {name}"
        );
        assert!(
            seen.contains(&(conn, i)),
            "{name} was written but its request never answered"
        );
    }
    let accesses = s
        .audit_events()
        .iter()
        .filter(|e| e["type"] == "fs.access")
        .count();
    assert_eq!(
        accesses,
        fs::read_dir(&s.ws).unwrap().count(),
        "one fs.access per file written"
    );
}

#[test]
fn shutdown_stdin_eof_answers_everything_then_exits_zero() {
    let s = Tree::new(BIN);
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    let mut all = req(0, "initialize", json!({"protocolVersion": 1})).to_string();
    all.push('\n');
    for i in 1..=20 {
        all.push_str(
            &req(
                i,
                "fs/write_text_file",
                write_params(&s.ws.join(format!("e{i}.txt")), &small_content(2, i)),
            )
            .to_string(),
        );
        all.push('\n');
    }
    c.send_raw(all.as_bytes());
    c.close_write();
    let got = by_id(c.recv_until_eof());
    assert_eq!(got.len(), 21, "everything sent before EOF is answered");
    for i in 1..=20 {
        assert_eq!(got.get(i)["result"], json!({}), "{}", got.get(i));
        assert_eq!(
            fs::read_to_string(s.ws.join(format!("e{i}.txt"))).unwrap(),
            small_content(2, i)
        );
    }
    let status = d.wait_exit();
    assert!(status.success(), "{status:?}\n{}", d.stderr_text());
}

#[test]
fn shutdown_sigterm_on_idle_stdio_daemon_exits_zero() {
    let s = Tree::new(BIN);
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    let r = c.call_id(
        1,
        "fs/write_text_file",
        write_params(&s.ws.join("x.txt"), "x"),
    );
    assert_eq!(r["result"], json!({}));
    d.signal(Signal::TERM);
    let status = d.wait_exit();
    assert!(status.success(), "{status:?}\n{}", d.stderr_text());
}

#[test]
fn shutdown_sigint_with_stdio_and_socket_together() {
    let s = Tree::new(BIN);
    let mut d = s.daemon(Opts {
        stdio: true,
        socket: true,
        ..Default::default()
    });
    let mut over_stdio = d.stdio_client();
    let mut over_socket = d.connect();
    let r = over_stdio.call_id(
        1,
        "fs/write_text_file",
        write_params(&s.ws.join("a.txt"), "a"),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    let r = over_socket.call_id(
        1,
        "fs/write_text_file",
        write_params(&s.ws.join("b.txt"), "b"),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    d.signal(Signal::INT);
    let status = d.wait_exit();
    assert!(status.success(), "{status:?}\n{}", d.stderr_text());
    assert!(!s.sock.exists(), "the socket file is removed");
    assert_eq!(fs::read(s.ws.join("a.txt")).unwrap(), b"a");
    assert_eq!(fs::read(s.ws.join("b.txt")).unwrap(), b"b");
}

#[test]
fn startup_removes_temp_files_of_dead_processes_only() {
    let s = Tree::new(BIN);
    // A pid that surely names no live process: a child that has exited.
    let mut gone = Command::new("/bin/sh")
        .args(["-c", "exit 0"])
        .spawn()
        .unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let live = std::process::id();
    fs::create_dir(s.ws.join("sub")).unwrap();
    let stale = [
        s.ws.join(format!(".a.txt.{dead}.0123456789ab.tmp")),
        s.ws.join(format!("sub/.b.txt.{dead}.abcdefabcdef.tmp")),
    ];
    let kept = [
        s.ws.join(format!(".c.txt.{live}.0123456789ab.tmp")), // a live writer's
        s.ws.join(format!(".d.txt.{dead}.not-hex-here.tmp")), // not our naming
        s.ws.join(format!("e.txt.{dead}.0123456789ab.tmp")),  // no leading dot
        s.ws.join("f.txt"),
    ];
    for p in stale.iter().chain(kept.iter()) {
        fs::write(p, "x").unwrap();
    }
    let d = s.socket_daemon(&[]);
    let start = Instant::now();
    while stale.iter().any(|p| p.exists()) {
        assert!(
            start.elapsed() < TIMEOUT,
            "stale temps never removed:\n{}",
            d.stderr_text()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Serve something, so the daemon is well past its start-up scan.
    let mut c = d.connect();
    let r = c.call_id(
        1,
        "fs/write_text_file",
        write_params(&s.ws.join("g.txt"), "g"),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    for p in &kept {
        assert!(p.exists(), "{p:?} must be kept");
    }
    assert!(d.stderr_text().contains(".a.txt."), "the removal is logged");
}

/// `writegate serve --stdio` on `t`'s workspace and audit log, its stderr
/// in `logs/<name>.stderr`; the caller sets stdin and stdout.
fn serve_stdio_command(t: &Tree, name: &str) -> Command {
    let mut cmd = t.command();
    cmd.args(["serve", "--stdio", "--workspace"])
        .arg(&t.ws)
        .arg("--audit-log")
        .arg(&t.audit_log)
        .stderr(std::process::Stdio::from(
            fs::File::create(t.base.join(format!("logs/{name}.stderr"))).unwrap(),
        ));
    cmd
}

/// A host that hands the daemon pipe descriptions it keeps using itself (a
/// shell pipeline, an editor passing its own descriptors on) finds them as
/// it left them: blocking while the daemon runs and after the daemon is
/// killed with SIGKILL, when nothing runs to put a flag back. The daemon
/// used to make them `O_NONBLOCK` (the flag belongs to the shared
/// description) and put the flag back only on a clean exit; now it reads
/// and writes pipes reopened through `/proc/self/fd`, descriptions of its
/// own.
#[test]
fn regression_shared_stdio_pipes_keep_their_flags_even_after_sigkill() {
    let t = Tree::new(BIN);
    let (in_r, in_w) = rustix::pipe::pipe().unwrap();
    let (out_r, out_w) = rustix::pipe::pipe().unwrap();
    // Our copies keep the daemon's ends' descriptions shared with us.
    let (in_copy, out_copy) = (in_r.try_clone().unwrap(), out_w.try_clone().unwrap());
    let mut cmd = serve_stdio_command(&t, "shared");
    cmd.stdin(std::process::Stdio::from(in_r))
        .stdout(std::process::Stdio::from(out_w));
    let mut child = cmd.spawn().unwrap();
    let mut to = fs::File::from(in_w);
    let mut from = BufReader::new(fs::File::from(out_r));
    let mut call = |id: i64, method: &str, params: Value| {
        writeln!(to, "{}", req(id, method, params)).unwrap();
        let mut line = String::new();
        assert!(from.read_line(&mut line).unwrap() > 0, "the daemon closed");
        serde_json::from_str::<Value>(&line).unwrap()
    };
    let r = call(1, "initialize", json!({"protocolVersion": 1}));
    assert!(r.get("result").is_some(), "{r}");
    let file = t.ws.join("shared.txt");
    let r = call(2, "fs/write_text_file", write_params(&file, "kept\n"));
    assert_eq!(r["result"], json!({}), "{r}");
    assert!(
        !nonblocking(&in_copy) && !nonblocking(&out_copy),
        "a shared description was made non-blocking"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        !nonblocking(&in_copy) && !nonblocking(&out_copy),
        "a flag was left changed after SIGKILL"
    );
    assert_eq!(fs::read_to_string(&file).unwrap(), "kept\n");
}

/// A named FIFO on stdin whose writers are gone before the daemon starts
/// still ends the stdio connection at end of input: the daemon answers
/// what was written and exits 0, and the FIFO's description has its flags
/// back. (A FIFO reopened through `/proc/self/fd` while it has no writer
/// never reports their hang-up, so it is not reopened but made
/// non-blocking until the daemon ends.)
#[test]
fn regression_a_named_fifo_on_stdin_still_reaches_end_of_input() {
    use rustix::fs::{Mode, OFlags};
    let t = Tree::new(BIN);
    let fifo = t.base.join("requests.fifo");
    rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, Mode::RUSR | Mode::WUSR).unwrap();
    let read_end =
        rustix::fs::open(&fifo, OFlags::RDONLY | OFlags::NONBLOCK, Mode::empty()).unwrap();
    rustix::fs::fcntl_setfl(&read_end, OFlags::empty()).unwrap();
    let copy = read_end.try_clone().unwrap();
    {
        let mut w = fs::OpenOptions::new().write(true).open(&fifo).unwrap();
        writeln!(w, "{}", req(1, "initialize", json!({"protocolVersion": 1}))).unwrap();
    }
    let mut cmd = serve_stdio_command(&t, "fifo");
    cmd.stdin(std::process::Stdio::from(read_end))
        .stdout(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(
        line.contains("\"id\":1") && line.contains("result"),
        "{line}"
    );
    let deadline = Instant::now() + TIMEOUT;
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the daemon did not see end of input on a named FIFO");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    assert!(!nonblocking(&copy), "the FIFO's flags were not put back");
}
