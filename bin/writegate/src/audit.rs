//! `writegate audit`: the audit log (SPEC 10, one JSON object per line) shown
//! one readable line per event, filtered by file, kind or session, or passed
//! through as JSON; `--follow` keeps printing new events (and survives the
//! log being rotated or truncated).
//!
//! The log is read directly, not through the daemon: it is the user's own
//! 0600 file, and reading it must work while the daemon is stopped.

use crate::{
    Status, absolutize, canonical_target, default_config_path, env_var, load_config_file, out,
};
use clap::{Args, builder::NonEmptyStringValueParser};
use serde_json::Value;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `writegate audit`.
// Its doc comments are the `--help` text (backticks would be shown as they
// are).
#[allow(clippy::doc_markdown)]
#[derive(Args)]
pub(crate) struct AuditArgs {
    /// The audit log [default: the config's audit.path, else $XDG_STATE_HOME/writegate/audit.jsonl].
    #[arg(long, value_name = "FILE")]
    pub(crate) audit_log: Option<PathBuf>,
    /// Config file to take audit.path from [default: $XDG_CONFIG_HOME/writegate/config.toml].
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,
    /// Keep running and print new events as they are written.
    #[arg(short, long)]
    pub(crate) follow: bool,
    /// Only events of this file (matched by pathHash: sha256 of its canonical path).
    #[arg(long, value_name = "FILE")]
    pub(crate) path: Option<PathBuf>,
    /// Only events of this type (fs.access, fs.denied, or access, denied), intent (write, edit,
    /// read, undo) or errorKind (e.g. approval_required).
    #[arg(long, value_name = "KIND", value_parser = NonEmptyStringValueParser::new())]
    pub(crate) kind: Option<String>,
    /// Only events of this session id.
    #[arg(long, value_name = "ID", value_parser = NonEmptyStringValueParser::new())]
    pub(crate) session: Option<String>,
    /// Print the matching events as they are in the log (one JSON object per line).
    #[arg(long)]
    pub(crate) json: bool,
}

/// How often `--follow` looks for new events.
const FOLLOW_POLL: Duration = Duration::from_millis(200);

/// Which events to show.
struct Filter {
    /// `pathHash` values that mean the asked file: of its canonical path,
    /// and of the path as given (made absolute), which is what an event
    /// refused before resolving carries.
    path_hashes: Vec<String>,
    kind: Option<String>,
    session: Option<String>,
}

impl Filter {
    fn new(a: &AuditArgs) -> Filter {
        let path_hashes = a.path.as_deref().map_or_else(Vec::new, |p| {
            let mut v = vec![writegate_core::path_hash(&canonical_target(p))];
            let raw = writegate_core::path_hash(&absolutize(p));
            if !v.contains(&raw) {
                v.push(raw);
            }
            v
        });
        Filter {
            path_hashes,
            kind: a.kind.clone(),
            session: a.session.clone(),
        }
    }

    fn matches(&self, e: &Value) -> bool {
        let field = |k: &str| e.get(k).and_then(Value::as_str);
        if !self.path_hashes.is_empty()
            && !field("pathHash").is_some_and(|h| self.path_hashes.iter().any(|p| p == h))
        {
            return false;
        }
        if let Some(kind) = &self.kind {
            let ty = field("type").unwrap_or("");
            let hit = ty == kind
                || ty.strip_prefix("fs.") == Some(kind.as_str())
                || field("intent") == Some(kind.as_str())
                || field("errorKind") == Some(kind.as_str());
            if !hit {
                return false;
            }
        }
        if let Some(s) = &self.session
            && field("sessionId") != Some(s.as_str())
        {
            return false;
        }
        true
    }
}

/// One readable line for an event:
/// `<ts> <type> <intent[/mode]> <ok|errorKind> <pathHash> <sizes> session=<id>`.
fn human(e: &Value) -> String {
    let field = |k: &str| e.get(k).and_then(Value::as_str);
    let num = |k: &str| e.get(k).and_then(Value::as_u64);
    let intent = match (field("intent"), field("mode")) {
        (Some(i), Some(m)) if i != m => format!("{i}/{m}"),
        (Some(i), _) => i.to_string(),
        (None, Some(m)) => m.to_string(),
        (None, None) => "-".to_string(),
    };
    let outcome = field("errorKind").unwrap_or(match field("type") {
        Some("fs.denied") => "denied",
        _ => "ok",
    });
    let bytes = |n: u64| {
        if n == 1 {
            "1 byte".to_string()
        } else {
            format!("{n} bytes")
        }
    };
    let mut sizes = match (num("bytesBefore"), num("bytesAfter"), e.get("created")) {
        (_, Some(after), Some(Value::Bool(true))) => format!("new, {}", bytes(after)),
        (Some(before), Some(after), _) => format!("{before} -> {}", bytes(after)),
        (None, Some(after), _) => bytes(after),
        _ => num("sizeBytes").map_or_else(|| "-".to_string(), bytes),
    };
    if e.get("dryRun") == Some(&Value::Bool(true)) {
        sizes.push_str(" (dry run)");
    }
    let mut line = format!(
        "{}  {:<14} {:<14} {:<24} {:<16}  {}",
        field("ts").unwrap_or("-"),
        field("type").unwrap_or("-"),
        intent,
        outcome,
        field("pathHash").unwrap_or("-"),
        sizes,
    );
    if let Some(s) = field("sessionId") {
        let _ = write!(line, "  session={s}");
    }
    if field("writer") == Some("external") {
        line.push_str("  writer=external");
    }
    if let Some(p) = field("path") {
        let _ = write!(line, "  path={p}");
    }
    line.push('\n');
    line
}

/// The log's path: `--audit-log`, else the config's `audit.path` (file and
/// `WRITEGATE_*` variables, as the daemon loads them), else the default.
fn log_path(a: &AuditArgs) -> Result<PathBuf, String> {
    if let Some(p) = &a.audit_log {
        return Ok(absolutize(p));
    }
    let (path, required) = match &a.config {
        Some(p) => (Some(p.clone()), true),
        None => (default_config_path(), false),
    };
    let cfg = load_config_file(path.as_deref(), required).map_err(|e| e.to_string())?;
    Ok(cfg.audit_path(&env_var))
}

/// Reads complete lines from an open log, remembering a partial last line
/// (an event being appended) until its newline arrives.
struct Tail {
    reader: BufReader<File>,
    /// (device, inode) of the open file, to notice a rotation.
    id: (u64, u64),
    pos: u64,
    partial: Vec<u8>,
    line_no: u64,
}

impl Tail {
    fn open(path: &Path) -> std::io::Result<Tail> {
        let f = File::open(path)?;
        let m = f.metadata()?;
        Ok(Tail {
            reader: BufReader::new(f),
            id: (m.dev(), m.ino()),
            pos: 0,
            partial: Vec::new(),
            line_no: 0,
        })
    }

    /// Calls `each` with every complete line now in the file; with `flush`,
    /// also with a last line that has no newline. Stops early (returning
    /// false) when `each` does.
    fn drain(
        &mut self,
        flush: bool,
        each: &mut dyn FnMut(u64, &[u8]) -> bool,
    ) -> std::io::Result<bool> {
        loop {
            let n = self.reader.read_until(b'\n', &mut self.partial)?;
            self.pos += n as u64;
            if n == 0 || self.partial.last() != Some(&b'\n') {
                if flush && !self.partial.is_empty() {
                    self.line_no += 1;
                    let line = std::mem::take(&mut self.partial);
                    return Ok(each(self.line_no, &line));
                }
                return Ok(true);
            }
            self.line_no += 1;
            let line = std::mem::take(&mut self.partial);
            if !each(self.line_no, &line[..line.len() - 1]) {
                return Ok(false);
            }
        }
    }

    /// Whether `path` now names another file (rotated) or this one shrank
    /// below what was read (truncated).
    fn replaced(&self, path: &Path) -> bool {
        match std::fs::metadata(path) {
            Ok(m) => (m.dev(), m.ino()) != self.id || m.len() < self.pos,
            Err(_) => false,
        }
    }
}

/// `writegate audit`.
/// Every value `--kind` matches: the event types (`fs.access` also as
/// `access`), the intents and the errorKinds.
fn kinds() -> Vec<String> {
    let mut all: Vec<String> = [
        "fs.access",
        "fs.denied",
        "access",
        "denied",
        "approval.grant",
        "audit.gap",
        "write",
        "edit",
        "read",
        "undo",
    ]
    .iter()
    .map(ToString::to_string)
    .collect();
    all.extend(
        writegate_core::ErrorKind::ALL
            .iter()
            .map(|k| k.as_str().to_string()),
    );
    all
}

pub(crate) fn run(a: &AuditArgs) -> Status {
    if let Some(kind) = &a.kind
        && !kinds().contains(kind)
    {
        return crate::usage_error(
            "audit",
            &format!(
                "no event is of kind `{kind}`; --kind takes one of: {}",
                kinds().join(", ")
            ),
        );
    }
    let path = match log_path(a) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("writegate: {e}");
            return Status::Usage;
        }
    };
    let filter = Filter::new(a);
    let json = a.json;
    let mut show = |line_no: u64, raw: &[u8]| -> bool {
        let text = String::from_utf8_lossy(raw);
        if text.trim().is_empty() {
            return true;
        }
        match serde_json::from_str::<Value>(&text) {
            Ok(e) if filter.matches(&e) => {
                if json {
                    out(&format!("{}\n", text.trim_end_matches('\r')))
                } else {
                    out(&human(&e))
                }
            }
            Ok(_) => true,
            Err(err) => {
                eprintln!(
                    "writegate: {}:{line_no}: skipping a line that is not JSON: {err}",
                    path.display()
                );
                true
            }
        }
    };
    let mut tail = match Tail::open(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && a.follow => {
            eprintln!(
                "writegate: waiting for the audit log {} to be created",
                path.display()
            );
            loop {
                std::thread::sleep(FOLLOW_POLL);
                if let Ok(t) = Tail::open(&path) {
                    break t;
                }
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            eprintln!(
                "writegate: no audit log at {}: nothing was recorded there yet, or the daemon uses another log (its --audit-log, or audit.path in its config)",
                path.display()
            );
            return Status::Refused;
        }
        Err(e) => {
            eprintln!(
                "writegate: cannot read the audit log {}: {e}",
                path.display()
            );
            return Status::Refused;
        }
    };
    match tail.drain(!a.follow, &mut show) {
        Ok(true) => {}
        Ok(false) => return Status::Ok,
        Err(e) => {
            eprintln!(
                "writegate: cannot read the audit log {}: {e}",
                path.display()
            );
            return Status::Refused;
        }
    }
    if !a.follow {
        return Status::Ok;
    }
    loop {
        std::thread::sleep(FOLLOW_POLL);
        if tail.replaced(&path) {
            // Finish the old file, then start the new one from its top.
            if let Ok(false) = tail.drain(true, &mut show) {
                return Status::Ok;
            }
            match Tail::open(&path) {
                Ok(t) => tail = t,
                Err(_) => continue,
            }
        }
        match tail.drain(false, &mut show) {
            Ok(true) => {}
            Ok(false) => return Status::Ok,
            Err(e) => {
                eprintln!(
                    "writegate: cannot read the audit log {}: {e}",
                    path.display()
                );
                return Status::Refused;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn readable_lines() {
        let e = json!({"v":1,"ts":"2026-11-30T00:47:30.519Z","type":"fs.access","intent":"write",
            "route":"ACP writeTextFile","writer":"workspace","sessionId":"cli","workspace":"0bd89f85c8c9",
            "pathHash":"d6d69c0cbbfff19d","sizeBytes":12,"mode":"write","created":false,
            "bytesBefore":20,"bytesAfter":14,"durationMs":47});
        assert_eq!(
            human(&e),
            "2026-11-30T00:47:30.519Z  fs.access      write          ok                       d6d69c0cbbfff19d  20 -> 14 bytes  session=cli\n"
        );
        let d = json!({"ts":"t","type":"fs.denied","intent":"edit","mode":"replace",
            "pathHash":"00","errorKind":"approval_required"});
        let line = human(&d);
        assert!(line.contains("edit/replace"), "{line}");
        assert!(line.contains("approval_required"), "{line}");
        assert!(line.trim_end().ends_with("  -"), "no sizes: {line}");
    }

    #[test]
    fn kind_matches_type_intent_and_error_kind() {
        let f = |kind: &str| Filter {
            path_hashes: vec![],
            kind: Some(kind.to_string()),
            session: None,
        };
        let e = json!({"type":"fs.denied","intent":"write","errorKind":"approval_required"});
        for k in ["fs.denied", "denied", "write", "approval_required"] {
            assert!(f(k).matches(&e), "{k}");
        }
        for k in ["fs.access", "access", "edit", "path_outside_workspace"] {
            assert!(!f(k).matches(&e), "{k}");
        }
    }
}
