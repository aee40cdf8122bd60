//! `writegate mcp --connect [SOCKET]`: hands the agent's stdio to the
//! daemon's MCP socket. It holds no policy and writes no audit event: the
//! daemon serves the connection (`writegate_mcp::serve_socket`). Its one
//! line of its own is the hello that asks for `--cwd-workspace` (the daemon
//! takes the directory from the relay's process, not from the hello) and
//! carries the agent's pipes, which the daemon then reads and writes
//! itself; a stdio that cannot be handed over is relayed byte for byte.
//!
//! Inside `writegate run` (`WRITEGATE_RUN_SOCKET` set), `writegate mcp`
//! relays the same way, with no hello, to the run's own writegate outside
//! the sandbox ([`relay_to_run`]).

use crate::{Status, absolutize, env_var};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The daemon's MCP socket by default: `mcp.sock` beside the ACP socket.
pub(crate) fn default_mcp_socket() -> PathBuf {
    let acp = writegate_acp::default_socket_path(&env_var);
    acp.with_file_name("mcp.sock")
}

/// How long the relay waits for a socket-activated daemon to serve MCP.
const ACTIVATION_WAIT: Duration = Duration::from_secs(5);

/// Connects to `socket`. When nothing listens there but the ACP socket
/// beside it answers (systemd's `writegate.socket` starts the daemon on
/// its first connection), the relay waits for the daemon to bind its MCP
/// socket.
fn connect(socket: &Path) -> std::io::Result<UnixStream> {
    let first = match UnixStream::connect(socket) {
        Ok(s) => return Ok(s),
        Err(e) => e,
    };
    let acp = socket.with_file_name("writegate.sock");
    if UnixStream::connect(&acp).is_err() {
        return Err(first);
    }
    let until = Instant::now() + ACTIVATION_WAIT;
    loop {
        std::thread::sleep(Duration::from_millis(50));
        match UnixStream::connect(socket) {
            Ok(s) => return Ok(s),
            Err(e) if Instant::now() >= until => return Err(e),
            Err(_) => {}
        }
    }
}

/// Relays stdin to the daemon and the daemon's answers to stdout until
/// the daemon closes the connection (after stdin ends, it answers what
/// was asked first). Status 3, with what to do, when no daemon listens.
pub(crate) fn relay(socket: Option<&Path>, cwd_workspace: bool) -> Status {
    let socket = socket.map_or_else(default_mcp_socket, absolutize);
    let stream = match connect(&socket) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "writegate: mcp --connect: no daemon serves MCP at {}: {e}. Start it with `writegate serve --workspace DIR` (or `systemctl --user enable --now writegate.socket` after `writegate service install`), pass the socket it serves MCP on (--connect PATH), or run `writegate mcp` without --connect to serve this agent on its own.",
                socket.display()
            );
            return Status::Unreachable;
        }
    };
    let hello = serde_json::json!({ writegate_mcp::HELLO_KEY: {"cwdWorkspace": cwd_workspace} });
    match (own_description(0, false), own_description(1, true)) {
        (Some(input), Some(output)) => hand_over(&stream, &hello, &socket, &input, &output),
        // A terminal or a file: relayed byte for byte.
        _ => pipe(stream, Some(hello), &socket, "mcp --connect", "the daemon"),
    }
}

/// Descriptor `fd` (this process's stdin or stdout) as one the daemon may
/// make non-blocking without touching anyone else's: a socket as it is (a
/// duplicate), a pipe opened again through `/proc/self/fd` (a description
/// of its own, `O_NONBLOCK` from the start, so the agent's and any other
/// holder's flags stay as they are); `None` for anything else.
fn own_description(fd: i32, write: bool) -> Option<std::os::fd::OwnedFd> {
    use rustix::fs::{FileType, Mode, OFlags};
    // SAFETY: stdin and stdout stay open for this process's life.
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    let st = rustix::fs::fstat(borrowed).ok()?;
    match FileType::from_raw_mode(st.st_mode) {
        FileType::Socket => rustix::io::fcntl_dupfd_cloexec(borrowed, 3).ok(),
        FileType::Fifo => {
            let access = if write {
                OFlags::WRONLY
            } else {
                OFlags::RDONLY
            };
            rustix::fs::open(
                format!("/proc/self/fd/{fd}"),
                access | OFlags::NONBLOCK | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .ok()
        }
        _ => None,
    }
}

/// Sends `hello` with the agent's pipes (`input`, `output`: this process's
/// stdin and stdout, see [`own_description`]; `SCM_RIGHTS`): the
/// daemon then reads the agent's requests and writes its answers itself,
/// with no hop through this process, which only waits for the daemon to
/// close the connection (the end of the agent's session, or the daemon's
/// shutdown). Status 0 then; 3 when the hand-over fails.
fn hand_over(
    stream: &UnixStream,
    hello: &serde_json::Value,
    socket: &Path,
    input: &std::os::fd::OwnedFd,
    output: &std::os::fd::OwnedFd,
) -> Status {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    use std::io::IoSlice;
    use std::mem::MaybeUninit;
    use std::os::fd::AsFd;
    let line = format!("{hello}\n");
    let fds = [input.as_fd(), output.as_fd()];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    control.push(SendAncillaryMessage::ScmRights(&fds));
    match rustix::net::sendmsg(
        stream,
        &[IoSlice::new(line.as_bytes())],
        &mut control,
        SendFlags::NOSIGNAL,
    ) {
        Ok(n) if n == line.len() => {}
        Ok(_) | Err(_) => {
            eprintln!(
                "writegate: mcp --connect: cannot hand the agent's stdin and stdout to the daemon at {}",
                socket.display()
            );
            return Status::Unreachable;
        }
    }
    // The daemon holds the agent's pipes now; this process waits for the
    // connection to end.
    let mut buf = [0u8; 64];
    let mut s = stream;
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Status::Ok,
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return Status::Ok,
        }
    }
}

/// `writegate mcp` inside `writegate run`: relays stdio to the run's own
/// writegate at `socket`, byte for byte (no hello: the run serves each
/// connection as a sandboxed client). Status 3 when it cannot be reached.
pub(crate) fn relay_to_run(socket: &Path) -> Status {
    match UnixStream::connect(socket) {
        Ok(stream) => pipe(stream, None, socket, "mcp", "the sandbox's writegate"),
        Err(e) => {
            eprintln!(
                "writegate: mcp: cannot reach the writegate serving this sandbox at {}: {e} (is its `writegate run` still running?)",
                socket.display()
            );
            Status::Unreachable
        }
    }
}

/// Sends `hello` (one line) if any, then relays stdin to `stream` and
/// `stream` to stdout until the far end closes.
fn pipe(
    stream: UnixStream,
    hello: Option<serde_json::Value>,
    socket: &Path,
    cmd: &str,
    far: &str,
) -> Status {
    let mut up = match stream.try_clone() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("writegate: {cmd}: {e}");
            return Status::Unreachable;
        }
    };
    if let Some(hello) = hello
        && let Err(e) = writeln!(up, "{hello}")
    {
        eprintln!(
            "writegate: {cmd}: {far} at {} closed the connection: {e}",
            socket.display()
        );
        return Status::Unreachable;
    }
    // Agent to far end on a thread of its own; at the end of stdin the far
    // end is told (half close) and still answers what was asked. Each
    // direction is a plain read and write of what arrived: no buffer
    // holds a message back.
    std::thread::spawn(move || {
        let _ = pump(&mut std::io::stdin().lock(), &mut up);
        let _ = up.shutdown(std::net::Shutdown::Write);
    });
    let mut down = stream;
    match pump(&mut down, &mut std::io::stdout().lock()) {
        Ok(()) => Status::Ok,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Status::Ok,
        Err(e) => {
            eprintln!("writegate: {cmd}: the connection to {far} broke: {e}");
            Status::Unreachable
        }
    }
}

/// Copies `from` to `to` until the end of `from`, each read written and
/// flushed at once.
fn pump(from: &mut impl Read, to: &mut impl Write) -> std::io::Result<()> {
    let mut buf = vec![0u8; 256 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
        to.flush()?;
    }
}
