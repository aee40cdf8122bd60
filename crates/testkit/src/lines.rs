//! A raw line client: bytes out, `\n`-terminated lines in, over a child's
//! stdin and stdout or a Unix socket. It parses nothing.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, ChildStdin};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

use crate::TIMEOUT;

enum Writer {
    Pipe(Option<ChildStdin>),
    Sock(UnixStream),
}

/// Writes raw bytes; a thread reads the other side's lines, so every read
/// can time out (after [`TIMEOUT`] unless told otherwise).
pub struct LineClient {
    w: Writer,
    rx: Receiver<Vec<u8>>,
}

impl LineClient {
    /// A client over `child`'s stdin and stdout (taken from it: both must
    /// be pipes).
    pub fn stdio(child: &mut Child) -> LineClient {
        let stdin = child.stdin.take().expect("a child with piped stdin");
        let stdout = child.stdout.take().expect("a child with piped stdout");
        LineClient::new(Writer::Pipe(Some(stdin)), stdout)
    }

    /// A client connected to the Unix socket `sock`.
    pub fn connect(sock: &Path) -> LineClient {
        let s =
            UnixStream::connect(sock).unwrap_or_else(|e| panic!("connect {}: {e}", sock.display()));
        let r = s.try_clone().unwrap();
        LineClient::new(Writer::Sock(s), r)
    }

    fn new(w: Writer, r: impl Read + Send + 'static) -> LineClient {
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(r);
            loop {
                let mut line = Vec::new();
                match r.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        LineClient { w, rx }
    }

    /// Writes `bytes` (and flushes a pipe).
    pub fn try_send(&mut self, bytes: &[u8]) -> io::Result<()> {
        match &mut self.w {
            Writer::Pipe(Some(p)) => p.write_all(bytes).and_then(|()| p.flush()),
            Writer::Pipe(None) => Err(io::Error::other("stdin already closed")),
            Writer::Sock(s) => s.write_all(bytes),
        }
    }

    /// Writes `bytes`; panics if the other side is gone.
    pub fn send(&mut self, bytes: &[u8]) {
        self.try_send(bytes).expect("send to the daemon");
    }

    /// Ends our side of the stream (stdin EOF / socket shutdown).
    pub fn close_write(&mut self) {
        match &mut self.w {
            Writer::Pipe(p) => drop(p.take()),
            Writer::Sock(s) => s.shutdown(std::net::Shutdown::Write).unwrap(),
        }
    }

    /// The next line with its `\n` (a last line without one as it came),
    /// within `timeout`; `Disconnected` once the other side closed its end
    /// and every line was taken.
    pub fn recv_timeout(&mut self, timeout: Duration) -> Result<Vec<u8>, RecvTimeoutError> {
        self.rx.recv_timeout(timeout)
    }

    /// The next line, or `None` at the end of the stream; panics after
    /// [`TIMEOUT`].
    pub fn next_line(&mut self) -> Option<Vec<u8>> {
        match self.rx.recv_timeout(TIMEOUT) {
            Ok(line) => Some(line),
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => panic!("no line within {TIMEOUT:?}"),
        }
    }

    /// Every line until the other side closes the stream; panics if it
    /// does not within [`TIMEOUT`] of the last line.
    pub fn lines_until_eof(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        loop {
            match self.rx.recv_timeout(TIMEOUT) {
                Ok(line) => out.push(line),
                Err(RecvTimeoutError::Disconnected) => return out,
                Err(RecvTimeoutError::Timeout) => panic!("the stream was never closed"),
            }
        }
    }
}
