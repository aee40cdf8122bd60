//! Long lines under the daemon-wide budget (ADR 0008): a connection that
//! has buffered more than 64 KiB of a line reads on only while it holds a
//! reservation of room for the longest line (`max_frame_bytes`). With the
//! defaults two such lines are read at a time, and a peer that stops in the
//! middle of one loses its reservation and its connection after
//! `line_stall_timeout_ms` without a byte, while a slow but steady sender
//! keeps its. Raw Unix socket connections; nothing asserts on speed (the
//! waits only fail a broken daemon instead of hanging).

use crate::common::{BIN, Daemon, Opts, TIMEOUT, Tree, TreeAudit, truncate};
use serde_json::{Value, json};
use std::fs;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// Bytes of content a stalled peer sends: more than 64 KiB of a line, so
/// the daemon reads it only under a reservation.
const HALF: usize = 70_000;

/// A socket daemon with `line_stall_timeout_ms` set to `ms`.
fn daemon_with_stall_timeout(t: &Tree, ms: &str) -> Daemon {
    t.daemon(Opts {
        socket: true,
        env: &[("WRITEGATE_LINE_STALL_TIMEOUT_MS", ms)],
        ..Opts::default()
    })
}

/// The start of an `fs/write_text_file` of `path` with id `id`, up to and
/// including the content's opening quote.
fn prefix(id: u64, path: &Path) -> Vec<u8> {
    let mut line = format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"fs/write_text_file","params":{{"sessionId":"stall","path":"#
    )
    .into_bytes();
    line.extend_from_slice(&serde_json::to_vec(path).unwrap());
    line.extend_from_slice(br#","content":""#);
    line
}

/// The end of the line [`prefix`] starts (after the content).
const SUFFIX: &[u8] = b"\"}}\n";

fn connect(t: &Tree) -> UnixStream {
    let s = UnixStream::connect(&t.sock).unwrap();
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    s.set_write_timeout(Some(TIMEOUT)).unwrap();
    s
}

/// Bytes written on `s` that the daemon has not read yet.
fn unread(s: &UnixStream) -> i32 {
    let mut n: libc::c_int = 0;
    // SAFETY: TIOCOUTQ (SIOCOUTQ) on a socket descriptor we own writes one
    // int through the pointer, which is valid for the call.
    let rc = unsafe { libc::ioctl(s.as_raw_fd(), libc::TIOCOUTQ, &raw mut n) };
    assert_eq!(
        rc,
        0,
        "ioctl(TIOCOUTQ): {}",
        std::io::Error::last_os_error()
    );
    n
}

/// A connection that sent [`HALF`] bytes of a write's content and stops,
/// once the daemon has read all of them (and so has reached the budget:
/// past 64 KiB of a line it takes a reservation before reading on).
fn stalled_half_line(t: &Tree, id: u64) -> UnixStream {
    let mut s = connect(t);
    let mut line = prefix(id, &t.ws.join(format!("stalled-{id}.txt")));
    line.extend(std::iter::repeat_n(b'x', HALF));
    s.write_all(&line).unwrap();
    let start = Instant::now();
    while unread(&s) > 0 {
        assert!(
            start.elapsed() < TIMEOUT,
            "the daemon never read the half-line"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // The read that completed it is followed at once by the reservation;
    // give the daemon's loop a moment to get there (nothing is asserted on
    // it: on the old code a second long line then never fitted).
    std::thread::sleep(Duration::from_millis(200));
    s
}

/// Writes 1 MiB to `path` on a connection of its own and returns the
/// answer (waiting up to the harness timeout for it).
fn write_1_mib(t: &Tree, path: &Path) -> (Value, String) {
    let content = "0123456789abcdef the quick brown fox jumps over the lazy dog...\n"
        .repeat(1024 * 1024 / 64);
    assert_eq!(content.len(), 1024 * 1024);
    let mut s = connect(t);
    let mut line = prefix(1, path);
    line.pop(); // the quote: the escaped content brings its own
    line.extend_from_slice(&serde_json::to_vec(&content).unwrap());
    line.extend_from_slice(b"}}\n");
    s.write_all(&line).unwrap();
    let mut answer = String::new();
    BufReader::new(&s)
        .read_line(&mut answer)
        .expect("an answer to the 1 MiB write before the timeout");
    let answer = serde_json::from_str(&answer)
        .unwrap_or_else(|e| panic!("no JSON answer ({e}): {answer:?}"));
    (answer, content)
}

/// Whether the daemon closed `s` (end of input, or a reset) within the
/// harness timeout. A stalled peer is sent nothing before it is closed.
fn closed_by_daemon(s: &mut UnixStream) -> bool {
    let mut buf = [0u8; 256];
    match s.read(&mut buf) {
        Ok(0) => true,
        Ok(n) => panic!(
            "the daemon sent a stalled peer {:?}",
            String::from_utf8_lossy(&buf[..n])
        ),
        Err(e) if e.kind() == ErrorKind::ConnectionReset => true,
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => false,
        Err(e) => panic!("reading a stalled peer: {e}"),
    }
}

/// Whether `s` is still open with nothing to read (the daemon has neither
/// answered nor closed it).
fn still_open(s: &UnixStream) -> bool {
    s.set_nonblocking(true).unwrap();
    let mut buf = [0u8; 1];
    let open = matches!((&*s).read(&mut buf), Err(e) if e.kind() == ErrorKind::WouldBlock);
    s.set_nonblocking(false).unwrap();
    open
}

/// Defect pinned: a reservation for a long line was `max_frame_bytes + 2`
/// bytes, and two did not fit the default budget (32 MiB for 16 MiB
/// lines), though docs/behaviour.md says two long lines are read at a
/// time: a connection that sent 70 KB of a request and stopped kept every
/// other client's write over 64 KiB waiting (for ever, before the stall
/// timeout existed). Now a 1 MiB write from another client is answered and
/// lands while the stalled connection is still open (its stall timeout is
/// set long here, so that nothing depends on how fast the write is), and
/// the stalled line still completes when its peer sends the rest.
#[test]
fn regression_a_stalled_long_line_does_not_hold_up_another_clients_1_mib_write() {
    let t = Tree::new(BIN);
    let _d = daemon_with_stall_timeout(&t, "600000");
    let mut staller = stalled_half_line(&t, 7);
    let path = t.ws.join("big.txt");
    let (answer, content) = write_1_mib(&t, &path);
    assert_eq!(
        answer["result"],
        json!({}),
        "{}",
        truncate(&answer.to_string())
    );
    assert!(fs::read_to_string(&path).unwrap() == content);
    assert!(still_open(&staller), "the stalled peer was closed");
    // The half-line was kept: its peer sends the rest and it is answered.
    staller.write_all(SUFFIX).unwrap();
    let mut a = String::new();
    BufReader::new(&staller).read_line(&mut a).unwrap();
    let a: Value = serde_json::from_str(&a).unwrap();
    assert_eq!(a["id"], 7, "{a}");
    assert_eq!(a["result"], json!({}), "{a}");
    assert_eq!(
        fs::read(t.ws.join("stalled-7.txt")).unwrap(),
        vec![b'x'; HALF]
    );
}

/// Defect pinned: a peer that stops in the middle of a long line kept its
/// reservation for ever. Three of them hold more than the default budget
/// (two reservations fit); a 1 MiB write from another client waits behind
/// them. With `line_stall_timeout_ms` = 1 s, each staller loses its
/// reservation and its connection (closed by the daemon, with a logged
/// reason) once nothing has arrived for a second, the write is answered
/// and lands, and the time a connection spends waiting for a reservation
/// (the write's, and the third staller's) is not counted as a stall.
#[test]
fn regression_stalled_long_lines_lose_their_reservation_and_connection() {
    let t = Tree::new(BIN);
    let d = daemon_with_stall_timeout(&t, "1000");
    let mut stallers: Vec<UnixStream> = (1..=3).map(|i| stalled_half_line(&t, i)).collect();
    let path = t.ws.join("big.txt");
    let (answer, content) = write_1_mib(&t, &path);
    assert_eq!(
        answer["result"],
        json!({}),
        "{}",
        truncate(&answer.to_string())
    );
    assert!(fs::read_to_string(&path).unwrap() == content);
    for (i, s) in stallers.iter_mut().enumerate() {
        assert!(
            closed_by_daemon(s),
            "stalled peer {} was never closed:\n{}",
            i + 1,
            d.stderr_text()
        );
    }
    let log = d.stderr_text();
    // A peer that sends nothing falls behind `line_min_bytes_per_sec` too,
    // and that one-second grace may end before the stall timeout.
    assert_eq!(
        log.matches("its long line made no progress").count()
            + log
                .matches("its long line arrives slower than line_min_bytes_per_sec")
                .count(),
        3,
        "one warning per stalled peer:\n{log}"
    );
    for i in 1..=3 {
        assert!(!t.ws.join(format!("stalled-{i}.txt")).exists());
    }
    let events = t.audit_events();
    assert_eq!(events.len(), 1, "only the 1 MiB write ran: {events:?}");
}

/// "Progress" is bytes arriving: a long line sent slowly but steadily (a
/// piece every 100 ms, for longer than `line_stall_timeout_ms` in all) is
/// read to its end and answered; only a gap of the whole timeout is a
/// stall.
#[test]
fn a_slow_but_steady_long_line_is_not_a_stall() {
    let t = Tree::new(BIN);
    let d = daemon_with_stall_timeout(&t, "2000");
    let mut s = connect(&t);
    let path = t.ws.join("slow.txt");
    let mut line = prefix(1, &path);
    line.extend(std::iter::repeat_n(b'x', HALF));
    s.write_all(&line).unwrap();
    let start = Instant::now();
    let mut sent = HALF;
    while start.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(100));
        s.write_all(&[b'y'; 1024]).unwrap();
        sent += 1024;
    }
    s.write_all(SUFFIX).unwrap();
    let mut a = String::new();
    BufReader::new(&s).read_line(&mut a).unwrap();
    assert!(!a.is_empty(), "closed:\n{}", d.stderr_text());
    let a: Value = serde_json::from_str(&a).unwrap();
    assert_eq!(a["result"], json!({}), "{a}");
    assert_eq!(fs::read(&path).unwrap().len(), sent);
    assert!(!d.stderr_text().contains("made no progress"));
}

/// Peers that send 70 KB of a line and then one byte every 2 s never went
/// quiet for `line_stall_timeout_ms`, so each kept its reservation for as
/// long as it liked: two of them blocked every other client's write over
/// 64 KiB indefinitely. With the defaults (no setting changed here) each
/// now loses its reservation and connection once its line falls behind
/// `line_min_bytes_per_sec` (after a one-second grace), so eight of them
/// leave a 1 MiB write from another client answered within 10 s.
#[test]
fn regression_peers_trickling_a_byte_every_two_seconds_do_not_hold_up_a_1_mib_write() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let t = Tree::new(BIN);
    let d = t.daemon(Opts {
        socket: true,
        ..Opts::default()
    });
    let stop = Arc::new(AtomicBool::new(false));
    let mut trickles = Vec::new();
    for id in 1..=8u64 {
        let mut s = connect(&t);
        let mut line = prefix(id, &t.ws.join(format!("trickle-{id}.txt")));
        line.extend(std::iter::repeat_n(b'x', HALF));
        s.write_all(&line).unwrap();
        let stop = stop.clone();
        trickles.push(std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_secs(2));
                if s.write_all(b"x").is_err() {
                    return true; // closed by the daemon
                }
            }
            closed_by_daemon(&mut s)
        }));
    }
    std::thread::sleep(Duration::from_millis(300));
    let path = t.ws.join("big.txt");
    let start = Instant::now();
    let (answer, content) = write_1_mib(&t, &path);
    let took = start.elapsed();
    eprintln!("the 1 MiB write behind eight trickling peers took {took:?}");
    assert_eq!(
        answer["result"],
        json!({}),
        "{}",
        truncate(&answer.to_string())
    );
    assert!(
        took < Duration::from_secs(10),
        "the 1 MiB write waited {took:?} behind the trickling peers:\n{}",
        d.stderr_text()
    );
    assert!(fs::read_to_string(&path).unwrap() == content);
    stop.store(true, Ordering::Relaxed);
    for (i, h) in trickles.into_iter().enumerate() {
        assert!(
            h.join().unwrap(),
            "trickling peer {} was never closed:\n{}",
            i + 1,
            d.stderr_text()
        );
    }
    assert!(
        d.stderr_text()
            .contains("arrives slower than line_min_bytes_per_sec"),
        "{}",
        d.stderr_text()
    );
    for id in 1..=8 {
        assert!(!t.ws.join(format!("trickle-{id}.txt")).exists());
    }
}

/// A connection waiting for room for a long line read on until it held
/// more than 64 KiB of it, and its last unbudgeted read could bring a
/// whole 64 KiB more: up to 128 KiB each, in a buffer grown by copying,
/// so 400 connections pipelining two 5 MiB writes peaked at 115-128 MiB
/// (150-172 MiB under load). Now an unbudgeted read stops at 64 KiB of
/// the line. Two peers hold the budget's room with all of a 5 MiB line
/// but its end; 300 more each send 200 KiB of a line and wait: the
/// daemon's resident memory grows by less than 96 KiB per waiting
/// connection.
#[test]
fn a_connection_waiting_for_room_holds_at_most_64_kib_of_its_line() {
    const WAITERS: usize = 300;
    let t = Tree::new(BIN);
    let d = daemon_with_stall_timeout(&t, "600000");
    let body = vec![b'x'; 5 * 1024 * 1024];
    let holders: Vec<UnixStream> = (1..=2u64)
        .map(|id| {
            let mut s = connect(&t);
            let mut line = prefix(id, &t.ws.join(format!("held-{id}.txt")));
            line.extend_from_slice(&body);
            s.write_all(&line).unwrap();
            s
        })
        .collect();
    let settled = |socks: &[UnixStream]| {
        // Until what the daemon has left unread stops changing.
        let mut last = -1i64;
        loop {
            std::thread::sleep(Duration::from_millis(300));
            let now: i64 = socks.iter().map(|s| i64::from(unread(s))).sum();
            if now == last {
                return now;
            }
            last = now;
        }
    };
    assert_eq!(settled(&holders), 0, "the holders' lines are read whole");
    let before = d.status_kib("VmRSS");
    let waiters: Vec<UnixStream> = (0..WAITERS)
        .map(|i| {
            let s = connect(&t);
            let mut line = prefix(100 + i as u64, &t.ws.join(format!("w{i}.txt")));
            line.extend(std::iter::repeat_n(b'y', 200 * 1024));
            s.set_nonblocking(true).unwrap();
            let n = (&s).write(&line).unwrap_or(0);
            s.set_nonblocking(false).unwrap();
            assert!(n > 64 * 1024, "the socket took only {n} bytes");
            s
        })
        .collect();
    settled(&waiters);
    let after = d.status_kib("VmRSS");
    let per = after.saturating_sub(before) * 1024 / WAITERS as u64;
    eprintln!(
        "{WAITERS} waiting connections: {before} -> {after} KiB resident, {} KiB each",
        per / 1024
    );
    assert!(
        per < 96 * 1024,
        "each waiting connection holds {} KiB ({before} -> {after} KiB)",
        per / 1024
    );
    drop(waiters);
    drop(holders);
}
