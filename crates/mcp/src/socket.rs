//! The daemon's MCP socket (`writegate serve`): every accepted connection
//! of a same-UID peer is one MCP connection with its own handler
//! (`McpServer`: its session, its client's roots) and its own writer
//! (`out::Out` with its `Pending` table), over the one `Service` of the
//! daemon: one audit log, one history, one lock table and one approval
//! queue for every agent. `writegate mcp --connect` relays an agent's
//! stdio here.
//!
//! The first line may be the relay's hello, `{"writegate/relay":
//! {"cwdWorkspace": true}}`: `--cwd-workspace` through the relay. The
//! hello claims no directory: the directory is the peer process's own
//! working directory, read by the daemon from `/proc/<pid>/cwd` (the pid
//! of `SO_PEERCRED`), and it passes the checks of standalone
//! `--cwd-workspace` (it must exist; not `/`, the home directory or
//! above it). Any other first line is the connection's first MCP message.

use crate::server::{McpOptions, McpServer, cwd_workspace};
use crate::transport::{Reader, Stdio, Transport};
use rmcp::ServiceExt;
use serde::Deserialize;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use writegate_core::Service;
use writegate_stdio::lines::{Frame, LineReader};
use writegate_stdio::{NonBlockingFd, ReadEnd, WriteEnd};

/// The hello's one key: a line that is no JSON-RPC message.
pub const HELLO_KEY: &str = "writegate/relay";

/// What the daemon's MCP socket needs besides the service.
#[derive(Debug, Clone, Default)]
pub struct SocketOptions {
    /// The daemon's config file, named in how-to-approve messages.
    pub config_file: Option<PathBuf>,
}

/// The relay's hello.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Hello {
    /// `--cwd-workspace`: the peer's working directory may become the
    /// connection's workspace.
    #[serde(default)]
    cwd_workspace: bool,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct HelloLine {
    #[serde(rename = "writegate/relay")]
    relay: Hello,
}

/// The hello in `line`, or `None` when it is another line.
fn hello(line: &[u8]) -> Option<Hello> {
    serde_json::from_slice::<HelloLine>(line)
        .ok()
        .map(|h| h.relay)
}

/// Serves MCP on `listener` until `stop` is cancelled; returns when every
/// connection has ended (the caller bounds the wait with
/// `shutdown_grace_ms`). Peers with another UID are refused at accept.
pub async fn serve_socket(
    service: Arc<Service>,
    listener: UnixListener,
    stop: CancellationToken,
    opts: SocketOptions,
) {
    let me = rustix::process::geteuid().as_raw();
    let conns = TaskTracker::new();
    loop {
        let accepted = tokio::select! {
            () = stop.cancelled() => break,
            a = listener.accept() => a,
        };
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(e) => {
                tracing::warn!(error = %e, "MCP socket: accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let pid = match stream.peer_cred() {
            Ok(c) if c.uid() == me => c.pid(),
            Ok(c) => {
                tracing::warn!(
                    peer_uid = c.uid(),
                    daemon_uid = me,
                    "refused MCP socket peer with another UID"
                );
                continue;
            }
            Err(e) => {
                tracing::warn!(error = %e, "refused MCP socket peer: cannot read its credentials");
                continue;
            }
        };
        let service = service.clone();
        let stop = stop.clone();
        let opts = opts.clone();
        conns.spawn(async move {
            if let Err(e) = connection(service, stream, pid, stop, opts).await {
                tracing::warn!(error = %e, "MCP socket connection failed");
            }
        });
    }
    conns.close();
    conns.wait().await;
}

/// What a peer's first line handed over.
enum Handed {
    /// No hello: nothing was read from the socket (its first bytes were
    /// only peeked).
    Nothing,
    /// A hello alone (read): the peer speaks MCP on the socket.
    Hello(Hello),
    /// A hello with the agent's stdin and stdout (`SCM_RIGHTS`).
    Ends(Hello, OwnedFd, OwnedFd),
}

/// The peer's hello, and the agent's stdin and stdout when the hello
/// carries them (see [`Handed`]).
async fn handed_ends(stream: &UnixStream) -> std::io::Result<Handed> {
    use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
    use std::io::IoSliceMut;
    use std::mem::MaybeUninit;
    let prefix = format!("{{\"{HELLO_KEY}\"");
    let mut peek = vec![0u8; 4096];
    let line_len = loop {
        stream.readable().await?;
        let n = match rustix::net::recv(stream, &mut peek, RecvFlags::PEEK | RecvFlags::DONTWAIT) {
            Ok((n, _)) => n,
            Err(rustix::io::Errno::AGAIN) => continue,
            Err(e) => return Err(e.into()),
        };
        let seen = &peek[..n];
        let could_be = seen.len().min(prefix.len());
        if n == 0 || seen[..could_be] != prefix.as_bytes()[..could_be] {
            return Ok(Handed::Nothing);
        }
        if let Some(nl) = memchr_newline(seen) {
            break nl + 1;
        }
        if n == peek.len() {
            return Ok(Handed::Nothing);
        }
    };
    let mut line = vec![0u8; line_len];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(2))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = rustix::net::recvmsg(
        stream,
        &mut [IoSliceMut::new(&mut line)],
        &mut control,
        RecvFlags::DONTWAIT | RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut fds: Vec<OwnedFd> = Vec::new();
    for msg in control.drain() {
        if let RecvAncillaryMessage::ScmRights(rights) = msg {
            fds.extend(rights);
        }
    }
    let Some(h) = (got.bytes == line_len).then(|| hello(&line)).flatten() else {
        return Err(std::io::Error::other("a relay's hello that is no hello"));
    };
    match (fds.pop(), fds.pop(), fds.is_empty()) {
        (Some(fd_out), Some(fd_in), true) => Ok(Handed::Ends(h, fd_in, fd_out)),
        (None, None, true) => Ok(Handed::Hello(h)),
        _ => Err(std::io::Error::other(
            "a relay's hello with descriptors other than the agent's stdin and stdout",
        )),
    }
}

/// Where the first line of `bytes` ends.
fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|b| *b == b'\n')
}

/// The working directory of process `pid`, as `--cwd-workspace` takes it.
fn peer_cwd(pid: Option<i32>) -> Result<PathBuf, String> {
    let pid = pid.ok_or("the agent's process is unknown (no peer pid)")?;
    let dir = std::fs::read_link(format!("/proc/{pid}/cwd")).map_err(|e| {
        format!("the directory the agent was started in cannot be read (/proc/{pid}/cwd): {e}")
    })?;
    cwd_workspace(&dir)
}

/// One connection, until the peer goes away or `stop`.
async fn connection(
    service: Arc<Service>,
    stream: UnixStream,
    pid: Option<i32>,
    stop: CancellationToken,
    opts: SocketOptions,
) -> std::io::Result<()> {
    let cfg = service.config();
    let max_line = usize::try_from(cfg.max_frame_bytes).unwrap_or(usize::MAX);
    let grace = Duration::from_millis(cfg.shutdown_grace_ms);
    drop(cfg);
    // A relay that hands over the agent's stdin and stdout with its hello
    // (`writegate mcp --connect`): the daemon reads and writes the agent's
    // own pipes, with no relay hop in between, and the socket only stays
    // open for as long as the connection lasts (the relay exits when it
    // closes).
    let handed = tokio::select! {
        () = stop.cancelled() => return Ok(()),
        h = handed_ends(&stream) => h?,
    };
    let (fd_in, fd_out, _relay, handed_hello) = match handed {
        Handed::Ends(h, fd_in, fd_out) => (fd_in, fd_out, Some(stream), Some(h)),
        other => {
            let fd = OwnedFd::from(stream.into_std()?);
            let h = match other {
                Handed::Hello(h) => Some(h),
                _ => None,
            };
            (fd.try_clone()?, fd, None, h)
        }
    };
    // The ends as ACP's socket has them: a reader registered for reading
    // only, a writer registered while a write would block, and the
    // descriptor for direct writes.
    let out = NonBlockingFd::new(fd_out)?;
    let direct = Some(out.share());
    let reader: Reader = Box::new(ReadEnd::new(NonBlockingFd::new(fd_in)?)?);
    let writer = Box::new(WriteEnd::new(out));
    let mut lines = LineReader::new(reader, max_line);
    let (hello, first) = if let Some(h) = handed_hello {
        (h, None)
    } else {
        tokio::select! {
        () = stop.cancelled() => return Ok(()),
        first = lines.next_line() => match first? {
            None => return Ok(()),
            Some(Frame::TooLong) => {
                tracing::error!(max_line, "an incoming message is longer than max_frame_bytes; skipping it");
                (Hello::default(), None)
            }
            Some(Frame::Line(line)) => match hello(&line) {
                Some(h) => (h, None),
                None => (Hello::default(), Some(Vec::from(line))),
            },
        },
        }
    };
    let cwd = hello.cwd_workspace.then(|| peer_cwd(pid));
    let mcp_opts = McpOptions {
        session_id: format!(
            "mcp-{}-{}",
            pid.unwrap_or(0),
            &writegate_core::unpredictable_hex()[..8]
        ),
        config_file: opts.config_file,
        cwd_workspace: hello.cwd_workspace,
        // A peer inside a `writegate run` sandbox is the agent: never asked
        // about its own held call (ADR 0030).
        sandboxed: writegate_stdio::sandboxed::peer_in_sandbox(pid),
        approval_queue: true,
    };
    tracing::debug!(session = %mcp_opts.session_id, "MCP socket connection");
    let input_ended = CancellationToken::new();
    let transport = Stdio::socket(lines, first, writer, direct, grace, input_ended.clone());
    let pending = transport.pending();
    let server = McpServer::new(
        service,
        mcp_opts,
        Transport::Socket,
        input_ended,
        Some(pending),
        Arc::default(),
        cwd,
    );
    let running = match server.serve(transport).await {
        Ok(r) => r,
        Err(e) => {
            tracing::debug!(reason = %e, "MCP socket connection ended before initialize completed");
            return Ok(());
        }
    };
    let ct = running.cancellation_token();
    let watch = tokio::spawn(async move {
        stop.cancelled().await;
        ct.cancel();
    });
    let _ = running.waiting().await;
    watch.abort();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hello_is_one_exact_shape_and_anything_else_is_a_message() {
        assert!(
            hello(br#"{"writegate/relay":{"cwdWorkspace":true}}"#)
                .unwrap()
                .cwd_workspace
        );
        assert!(!hello(br#"{"writegate/relay":{}}"#).unwrap().cwd_workspace);
        for other in [
            &br#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#[..],
            br#"{"writegate/relay":{"cwd":"/"}}"#,
            br#"{"writegate/relay":{},"jsonrpc":"2.0"}"#,
            b"not json",
        ] {
            assert!(hello(other).is_none(), "{}", String::from_utf8_lossy(other));
        }
    }
}
