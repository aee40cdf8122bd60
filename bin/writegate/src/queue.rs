//! `writegate pending` and `writegate answer`: the person's side of the
//! daemon's approval queue, over the daemon's ACP socket (where
//! `_writegate/approve` is served too; never the MCP socket agents use).

use crate::client::{CallError, Conn};
use crate::{Status, absolutize, env_var, out};
use clap::{Args, ValueEnum};
use serde_json::{Value, json};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// `writegate pending`.
// Its doc comments are the `--help` text (backticks would be shown as they
// are).
#[allow(clippy::doc_markdown)]
#[derive(Args)]
pub(crate) struct PendingArgs {
    /// Print a JSON array instead of lines.
    #[arg(long)]
    pub(crate) json: bool,
    /// The daemon's socket [default: $XDG_RUNTIME_DIR/writegate/writegate.sock].
    #[arg(long, value_name = "PATH")]
    pub(crate) socket: Option<PathBuf>,
}

/// `writegate answer`.
// Its doc comments are the `--help` text (backticks would be shown as they
// are).
#[allow(clippy::doc_markdown)]
#[derive(Args)]
pub(crate) struct AnswerArgs {
    /// The question's id, as `writegate pending` lists it.
    #[arg(value_name = "ID")]
    pub(crate) id: String,
    /// The answer.
    #[arg(value_enum, value_name = "ANSWER")]
    pub(crate) answer: AnswerChoice,
    /// The daemon's socket [default: $XDG_RUNTIME_DIR/writegate/writegate.sock].
    #[arg(long, value_name = "PATH")]
    pub(crate) socket: Option<PathBuf>,
}

/// `writegate answer`'s answers.
#[derive(Clone, Copy, ValueEnum)]
pub(crate) enum AnswerChoice {
    /// This call only.
    Allow,
    /// This call and the same command for the rest of the session.
    AllowSession,
    /// Refuse it.
    Deny,
}

impl AnswerChoice {
    /// The wire name.
    pub(crate) fn name(self) -> &'static str {
        match self {
            AnswerChoice::Allow => "allow",
            AnswerChoice::AllowSession => "allow-session",
            AnswerChoice::Deny => "deny",
        }
    }
}

fn socket_of(given: Option<&Path>) -> PathBuf {
    given.map_or_else(|| writegate_acp::default_socket_path(&env_var), absolutize)
}

/// One call on a fresh connection; a failure printed, as its status.
fn call(socket: &Path, method: &str, params: &Value) -> Result<Value, Status> {
    let result = Conn::open(socket, None).and_then(|mut c| c.call(method, params));
    result.map_err(|e| match e {
        CallError::Io(e) => {
            eprintln!(
                "writegate: cannot reach the daemon at {}: {e} (start it with `writegate serve --workspace DIR`, or pass the --socket it listens on)",
                socket.display()
            );
            Status::Unreachable
        }
        CallError::Rpc(r) => {
            eprintln!("writegate: refused: {}: {}", r.kind(), r.hint());
            Status::Refused
        }
    })
}

/// `writegate pending [--json]`.
pub(crate) fn pending(a: &PendingArgs) -> Status {
    let socket = socket_of(a.socket.as_deref());
    let listed = match call(&socket, "_writegate/pending", &json!({})) {
        Ok(v) => v,
        Err(s) => return s,
    };
    let list = listed["pending"].as_array().cloned().unwrap_or_default();
    if a.json {
        let text = serde_json::to_string_pretty(&Value::Array(list)).unwrap_or_default();
        out(&format!("{text}\n"));
        return Status::Ok;
    }
    if list.is_empty() {
        out("no questions are waiting\n");
        return Status::Ok;
    }
    let text = |v: &Value, k: &str| v[k].as_str().unwrap_or("-").to_string();
    let mut lines = String::new();
    for w in &list {
        let _ = writeln!(
            lines,
            "{}  {}s  {} ({})  {}: {}",
            text(w, "id"),
            w["ageSecs"].as_u64().unwrap_or(0),
            text(w, "agent"),
            text(w, "session"),
            text(w, "command"),
            text(w, "reason"),
        );
    }
    lines.push_str("answer with: writegate answer ID allow|allow-session|deny\n");
    out(&lines);
    Status::Ok
}

/// `writegate answer ID allow|allow-session|deny`.
pub(crate) fn answer(a: &AnswerArgs) -> Status {
    let socket = socket_of(a.socket.as_deref());
    let params = json!({"id": a.id, "answer": a.answer.name()});
    match call(&socket, "_writegate/answer", &params) {
        Ok(w) => {
            out(&format!(
                "{}: {} ({})\n",
                a.answer.name(),
                w["command"].as_str().unwrap_or("-"),
                w["session"].as_str().unwrap_or("-")
            ));
            Status::Ok
        }
        Err(s) => s,
    }
}
