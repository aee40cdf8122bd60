//! A small synchronous client for the daemon's socket, used by the CLI's
//! `write`, `edit` and `read` subcommands: one request, one response line.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;

/// A JSON-RPC error answer: `code`, `message`, and `data` (where a refusal
/// carries `errorKind` and `hint`).
#[derive(Debug, Clone)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Value,
}

impl RpcError {
    /// `data.errorKind`, if the error carries one.
    pub fn error_kind(&self) -> Option<&str> {
        self.data.get("errorKind").and_then(Value::as_str)
    }
}

/// Why a call failed.
#[derive(Debug)]
pub enum CallError {
    /// The socket could not be reached or the connection broke.
    Io(std::io::Error),
    /// The daemon answered with an error.
    Rpc(RpcError),
}

/// One connection to a running daemon.
pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next_id: i64,
}

impl Client {
    /// Connects and sends `initialize`.
    pub fn connect(socket: &Path) -> Result<Client, CallError> {
        let stream = UnixStream::connect(socket).map_err(CallError::Io)?;
        let writer = stream.try_clone().map_err(CallError::Io)?;
        let mut c = Client {
            reader: BufReader::new(stream),
            writer,
            next_id: 0,
        };
        c.call(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {},
                   "clientInfo": {"name": "writegate-cli", "version": env!("CARGO_PKG_VERSION")}}),
        )?;
        Ok(c)
    }

    /// Sends one request and waits for its response.
    pub fn call(&mut self, method: &str, params: Value) -> Result<Value, CallError> {
        self.next_id += 1;
        let id = self.next_id;
        let mut line = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .map_err(|e| CallError::Io(std::io::Error::other(e)))?;
        line.push(b'\n');
        self.writer.write_all(&line).map_err(CallError::Io)?;
        loop {
            let mut buf = String::new();
            let n = self.reader.read_line(&mut buf).map_err(CallError::Io)?;
            if n == 0 {
                return Err(CallError::Io(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    "the daemon closed the connection",
                )));
            }
            let msg: Value =
                serde_json::from_str(&buf).map_err(|e| CallError::Io(std::io::Error::other(e)))?;
            if msg.get("id") != Some(&json!(id)) {
                continue;
            }
            if let Some(err) = msg.get("error") {
                return Err(CallError::Rpc(RpcError {
                    code: err.get("code").and_then(Value::as_i64).unwrap_or(0),
                    message: err
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    data: err.get("data").cloned().unwrap_or(Value::Null),
                }));
            }
            return Ok(msg.get("result").cloned().unwrap_or(Value::Null));
        }
    }
}
