//! The CLI's connection to the running daemon: one Unix-socket connection,
//! `initialize` (optionally naming a workspace in
//! `_meta["writegate/workspace"]`), then requests answered one at a time.
//!
//! It also picks the workspace for a path: the daemon lists every registered
//! workspace in `initialize`'s `_meta.writegate.workspaces`, and the CLI
//! opens its connection on the one whose root contains the path.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// A JSON-RPC error answer: its `message` and `data` (a refusal carries
/// `errorKind` and `hint` there; invalid params carry a string). The CLI's
/// output does not depend on the numeric code.
#[derive(Debug, Clone)]
pub(crate) struct RpcError {
    /// The JSON-RPC message (`invalid params`, or the errorKind).
    pub(crate) message: String,
    /// `error.data`, `Null` when absent.
    pub(crate) data: Value,
}

impl RpcError {
    /// `data.errorKind`, or the message when there is none (invalid params).
    pub(crate) fn kind(&self) -> &str {
        self.data
            .get("errorKind")
            .and_then(Value::as_str)
            .unwrap_or(&self.message)
    }

    /// What to do about it: `data.hint`, or `data` itself when it is a string.
    pub(crate) fn hint(&self) -> String {
        self.data
            .get("hint")
            .and_then(Value::as_str)
            .or_else(|| self.data.as_str())
            .unwrap_or_default()
            .to_string()
    }
}

/// Why a call failed.
#[derive(Debug)]
pub(crate) enum CallError {
    /// The socket could not be reached or the connection broke (exit 3).
    Io(std::io::Error),
    /// The daemon answered with an error (exit 1).
    Rpc(RpcError),
}

/// A workspace as `initialize` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Workspace {
    /// Runtime id (12 hex digits).
    pub(crate) id: String,
    /// Canonical root.
    pub(crate) root: PathBuf,
    /// Whether writes are allowed.
    pub(crate) trusted: bool,
}

impl Workspace {
    fn from_json(v: &Value) -> Option<Workspace> {
        Some(Workspace {
            id: v.get("id")?.as_str()?.to_string(),
            root: PathBuf::from(v.get("root")?.as_str()?),
            trusted: v.get("trusted")?.as_bool()?,
        })
    }
}

/// One connection to a running daemon, after `initialize`.
pub(crate) struct Conn {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next_id: i64,
    init: Value,
}

impl Conn {
    /// Connects to `socket` and sends `initialize`; with `workspace` (an
    /// absolute root or a runtime id) the connection works in that workspace.
    pub(crate) fn open(socket: &Path, workspace: Option<&str>) -> Result<Conn, CallError> {
        let stream = UnixStream::connect(socket).map_err(CallError::Io)?;
        let writer = stream.try_clone().map_err(CallError::Io)?;
        let mut c = Conn {
            reader: BufReader::new(stream),
            writer,
            next_id: 0,
            init: Value::Null,
        };
        let mut params = json!({
            "protocolVersion": 1,
            "clientCapabilities": {},
            "clientInfo": {"name": "writegate-cli", "version": env!("CARGO_PKG_VERSION")},
        });
        if let Some(w) = workspace {
            params["_meta"] = json!({ "writegate/workspace": w });
        }
        c.init = c.call("initialize", &params)?;
        Ok(c)
    }

    /// The workspace this connection works in.
    pub(crate) fn workspace(&self) -> Option<Workspace> {
        Workspace::from_json(&self.init["_meta"]["writegate"]["workspace"])
    }

    /// Whether the daemon serves reads on this connection
    /// (`fs.readTextFile`; `writegate read` needs them).
    pub(crate) fn reads(&self) -> bool {
        self.init["_meta"]["writegate"]["fs"]["readTextFile"] == Value::Bool(true)
    }

    /// Every workspace the daemon serves, primary first (just this
    /// connection's when the daemon does not list them).
    pub(crate) fn workspaces(&self) -> Vec<Workspace> {
        match self.init["_meta"]["writegate"]["workspaces"].as_array() {
            Some(list) => list.iter().filter_map(Workspace::from_json).collect(),
            None => self.workspace().into_iter().collect(),
        }
    }

    /// Sends one request and waits for its response (lines with other ids,
    /// notifications, are skipped).
    pub(crate) fn call(&mut self, method: &str, params: &Value) -> Result<Value, CallError> {
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
                    "the daemon closed the connection without answering",
                )));
            }
            let msg: Value = serde_json::from_str(&buf).map_err(|e| {
                CallError::Io(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("the daemon's answer is not JSON: {e}"),
                ))
            })?;
            if msg.get("id") != Some(&json!(id)) {
                continue;
            }
            if let Some(err) = msg.get("error") {
                return Err(CallError::Rpc(RpcError {
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

/// The workspace among `list` whose root contains `canonical` (by whole
/// components; registered roots never nest, so there is at most one).
pub(crate) fn containing<'a>(list: &'a [Workspace], canonical: &Path) -> Option<&'a Workspace> {
    writegate_core::runtime::containing(list, |w| &w.root, canonical)
}

/// `/a (trusted), /b (untrusted)`: the workspaces for a message.
pub(crate) fn describe(list: &[Workspace]) -> String {
    if list.is_empty() {
        return "none".to_string();
    }
    list.iter()
        .map(|w| {
            format!(
                "{} ({})",
                w.root.display(),
                if w.trusted { "trusted" } else { "untrusted" }
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}
