//! The daemon of one case, driven over its stdin and stdout, and the request lines sent to it.

use std::collections::BTreeSet;
use std::fs;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc::RecvTimeoutError;
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;
use writegate_testkit::{Daemon as Process, LineClient};

use super::json::{Json, dumps, object, parse_ordered, quote};
use super::python::{
    exc, generated, io_error_name, no_get, os_error_no_path, py_bytes_strip, py_eq, py_type, subst,
};
use super::{CLOSE_TIMEOUT, R, TIMEOUT};

/// The daemon, driven over its stdin and stdout.
pub(super) struct Daemon {
    /// The process, killed when dropped.
    process: Process,
    /// Its stdin and stdout (the Python runner's writes, and its select +
    /// os.read split into lines).
    lines: LineClient,
    /// Stdin was closed (`close`).
    stdin_closed: bool,
    eof: bool,
    /// Responses by id, as a Python dict keyed by the JSON id (`None` for a missing id); each
    /// response as a Value and as read.
    responses: Vec<(Value, Value, Json)>,
}

impl Daemon {
    pub(super) fn spawn(
        binary: &Path,
        root: &str,
        audit: &Path,
        extra: &[String],
        errlog: fs::File,
        errlog_path: PathBuf,
    ) -> R<Daemon> {
        let child = Command::new(binary)
            .args(["serve", "--stdio", "--workspace", root, "--audit-log"])
            .arg(audit)
            .args(extra)
            // The cases expect the non-root default of external tool writes
            // (on); as root the daemon's own default is off, so
            // say it explicitly (run_cases.py needs the same variable as root).
            .env("WRITEGATE_EXTERNAL_TOOL_WRITES", "true")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(errlog)
            .spawn()
            .map_err(|e| exc(&e, binary))?;
        let mut process = Process::adopt(child, errlog_path);
        let lines = process.stdio_lines();
        Ok(Daemon {
            process,
            lines,
            stdin_closed: false,
            eof: false,
            responses: Vec::new(),
        })
    }

    /// Writes one request line and flushes it.
    pub(super) fn send(&mut self, line: &str) -> R<()> {
        if self.stdin_closed {
            return Err("ValueError: write to closed file".into());
        }
        self.lines
            .try_send(format!("{line}\n").as_bytes())
            .map_err(|e| format!("{}: {}", io_error_name(&e), os_error_no_path(&e)))
    }

    /// Reads responses until every id of `ids` has one; at most [`TIMEOUT`].
    pub(super) fn wait_for(&mut self, ids: &[i64]) -> R<()> {
        let deadline = Instant::now() + TIMEOUT;
        loop {
            let missing = self.missing(ids);
            if missing.is_empty() {
                return Ok(());
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                let shown: Vec<String> = missing.iter().map(i64::to_string).collect();
                return Err(format!(
                    "TimeoutError: no response for ids [{}]",
                    shown.join(", ")
                ));
            }
            // One line (waiting), then every line already read: what one
            // os.read after select gives the Python runner.
            let mut chunk = Vec::new();
            if !self.eof {
                match self.lines.recv_timeout(left) {
                    Ok(line) => chunk.push(line),
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => {}
                }
                while let Ok(line) = self.lines.recv_timeout(Duration::ZERO) {
                    chunk.push(line);
                }
            }
            if chunk.is_empty() {
                self.eof = true;
                // The status only makes the message clearer: give the exit a moment to land.
                let grace = Instant::now() + Duration::from_millis(200);
                while matches!(self.process.child.try_wait(), Ok(None)) && Instant::now() < grace {
                    thread::sleep(Duration::from_millis(5));
                }
                return Err(format!(
                    "EOFError: daemon closed stdout (exit {})",
                    self.poll()
                ));
            }
            for line in chunk {
                // A last line without `\n` is never a whole response.
                let Some(line) = line.strip_suffix(b"\n") else {
                    continue;
                };
                if py_bytes_strip(line).is_empty() {
                    continue;
                }
                let text = std::str::from_utf8(line)
                    .map_err(|e| format!("UnicodeDecodeError: response line is not UTF-8: {e}"))?;
                let ordered = parse_ordered(text)?;
                let msg = ordered.to_value()?;
                let obj = msg.as_object().ok_or_else(|| no_get(&msg))?;
                let rid = obj.get("id").cloned().unwrap_or(Value::Null);
                if matches!(rid, Value::Array(_) | Value::Object(_)) {
                    return Err(format!("TypeError: unhashable type: '{}'", py_type(&rid)));
                }
                if rid.is_null() && obj.contains_key("error") {
                    // A line the daemon could not parse: give it to the oldest unanswered id.
                    if let Some(&oldest) = self.missing(ids).first() {
                        self.insert(Value::from(oldest), msg, ordered);
                    }
                    continue;
                }
                self.insert(rid, msg, ordered);
            }
        }
    }

    /// The ids of `ids` without a response, sorted as strings (`sorted(..., key=str)`).
    fn missing(&self, ids: &[i64]) -> Vec<i64> {
        let mut missing: Vec<i64> = ids
            .iter()
            .copied()
            .filter(|i| self.response(&Value::from(*i)).is_none())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        missing.sort_by_key(ToString::to_string);
        missing
    }

    pub(super) fn response(&self, id: &Value) -> Option<(&Value, &Json)> {
        self.responses
            .iter()
            .find(|(k, _, _)| py_eq(k, id))
            .map(|(_, v, j)| (v, j))
    }

    fn insert(&mut self, id: Value, msg: Value, ordered: Json) {
        match self.responses.iter_mut().find(|(k, _, _)| py_eq(k, &id)) {
            Some(slot) => (slot.1, slot.2) = (msg, ordered),
            None => self.responses.push((id, msg, ordered)),
        }
    }

    /// The exit status as `Popen.poll()` gives it: `None` while running, `-N` after signal N.
    fn poll(&mut self) -> String {
        match self.process.child.try_wait() {
            Ok(Some(status)) => match (status.code(), status.signal()) {
                (Some(code), _) => code.to_string(),
                (None, Some(sig)) => format!("-{sig}"),
                (None, None) => "None".to_owned(),
            },
            _ => "None".to_owned(),
        }
    }

    /// Closes stdin and waits for the exit; kills the daemon after [`CLOSE_TIMEOUT`].
    pub(super) fn close(&mut self) {
        self.lines.close_write();
        self.stdin_closed = true;
        let child = &mut self.process.child;
        let deadline = Instant::now() + CLOSE_TIMEOUT;
        loop {
            match child.try_wait() {
                Ok(Some(_)) => return,
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(10)),
                _ => break,
            }
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// The `initialize` request (id 0).
pub(super) fn initialize_request() -> String {
    let info = object(&[("name", quote("cases")), ("version", quote("1"))]);
    let params = object(&[
        ("protocolVersion", "1".to_owned()),
        ("clientCapabilities", "{}".to_owned()),
        ("clientInfo", info),
    ]);
    object(&[
        ("jsonrpc", quote("2.0")),
        ("id", "0".to_owned()),
        ("method", quote("initialize")),
        ("params", params),
    ])
}

/// The request line of one op, with the keys in the Python runner's order (and `_meta`'s keys in
/// the fixture's order).
pub(super) fn request_for(op: &Json, w: &str, root: &str, rid: i64) -> R<String> {
    let field = |key: &str| op.field(key).ok_or_else(|| format!("KeyError: '{key}'"));
    let text = |v: &Json| match v {
        Json::Str(s) => Ok(s.clone()),
        other => Err(format!(
            "TypeError: expected str, got {}",
            py_type(&other.to_value()?)
        )),
    };
    let kind = text(field("kind")?)?;
    let kind = kind.as_str();
    let path = Json::Str(subst(&text(field("path")?)?, w, root));
    // `None` (no content, or JSON null) is Json::Null.
    let content = if op.field("content_gen").is_some() {
        Json::Str(generated(&field("content_gen")?.to_value()?)?)
    } else {
        op.field("content").cloned().unwrap_or(Json::Null)
    };
    let mut params: Vec<(&str, Json)> =
        vec![("sessionId", Json::Str("cases".into())), ("path", path)];
    let method = if kind == "write" {
        params.push(("content", content));
        "fs/write_text_file"
    } else {
        params.push(("mode", Json::Str(kind.into())));
        if !matches!(content, Json::Null) && kind != "delete" {
            params.push(("content", content));
        }
        for key in ["find", "line", "endLine", "expectedHash", "dryRun"] {
            if let Some(v) = op.field(key) {
                params.push((key, v.clone()));
            }
        }
        "_writegate/edit_text_file"
    };
    if let Some(meta) = op.field("meta") {
        params.push(("_meta", meta.clone()));
    }
    let params: Vec<(&str, String)> = params.iter().map(|(k, v)| (*k, dumps(v))).collect();
    Ok(object(&[
        ("jsonrpc", quote("2.0")),
        ("id", rid.to_string()),
        ("method", quote(method)),
        ("params", object(&params)),
    ]))
}
