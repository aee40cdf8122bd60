//! `writegate mcp` inside a sandbox: a thin relay of its stdio to a
//! writegate outside, byte for byte. No policy, no audit log of its own:
//! the writegate at the other end serves the MCP session. `writegate run`
//! names the socket in `WRITEGATE_RUN_SOCKET`; a relay to the per-user
//! daemon (`--connect`) is the same loop.

use crate::Status;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

/// Relays stdin to `socket` and `socket` to stdout until the far end
/// closes. Status 0 then; 3 when the socket cannot be reached.
pub(crate) fn relay(socket: &Path) -> Status {
    let stream = match UnixStream::connect(socket) {
        Ok(s) => s,
        Err(e) => {
            eprintln!(
                "writegate mcp: cannot reach the writegate serving this sandbox at {}: {e} (is its `writegate run` still running?)",
                socket.display()
            );
            return Status::Unreachable;
        }
    };
    let Ok(mut to_server) = stream.try_clone() else {
        eprintln!("writegate mcp: cannot use the socket {}", socket.display());
        return Status::Unreachable;
    };
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let _ = std::io::copy(&mut stdin, &mut to_server);
        // The client closed stdin: the server sees the end of its input.
        let _ = to_server.shutdown(std::net::Shutdown::Write);
    });
    let mut from_server = stream;
    let mut stdout = std::io::stdout().lock();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from_server.read(&mut buf) {
            Ok(0) => return Status::Ok,
            Ok(n) => {
                if stdout
                    .write_all(&buf[..n])
                    .and_then(|()| stdout.flush())
                    .is_err()
                {
                    return Status::Ok;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                eprintln!("writegate mcp: the connection to the sandbox's writegate broke: {e}");
                return Status::Unreachable;
            }
        }
    }
}
