//! Audit events (SPEC 10): exactly one `fs.access` or `fs.denied` per
//! operation that reached routing, appended as one JSON line.

use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// One audit event, serialised as one JSON line with camelCase keys.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AuditEvent {
    /// Always 1.
    pub v: u32,
    /// RFC 3339 UTC time the outcome was known, millisecond precision.
    pub ts: String,
    /// `fs.access` or `fs.denied`.
    #[serde(rename = "type")]
    pub kind: EventKind,
    /// `write`, `edit` or `read`.
    pub intent: Intent,
    /// The front end's name for the method or tool: `ACP writeTextFile`,
    /// `edit`, `ACP readTextFile`, `read_lines`, ...
    pub route: &'static str,
    /// `workspace` or `external`.
    pub writer: Writer,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// The request's session.
    pub session_id: Option<String>,
    /// Runtime id of the connection's workspace.
    pub workspace: String,
    /// First 16 hex of sha256 of the canonical path (or of the raw input when
    /// refused before resolving).
    pub path_hash: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// UTF-8 bytes of the request's content.
    pub size_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// `write` or the edit mode.
    pub mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// The file did not exist before.
    pub created: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Size before, in bytes.
    pub bytes_before: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// Size after, in bytes.
    pub bytes_after: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// `sha256:<hex>` before (when read whole).
    pub hash_before: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// `sha256:<hex>` after.
    pub hash_after: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// The errorKind of a refusal.
    pub error_kind: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    /// The refusal's hint, only with `audit.raw_paths` (it may name paths).
    pub hint: Option<String>,
    /// Whole milliseconds from the start of the operation.
    pub duration_ms: u64,
    /// The marker's source on the external route.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<&'static str>,
    /// When the gate held the operation and a person was asked: the answer
    /// (`allowed_once`, `allowed_always`, `denied`, `cancelled`,
    /// `unanswered`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub approval: Option<&'static str>,
    /// The parent directories a workspace write created (issue 10), outermost
    /// first, each as the `pathHash` of its canonical path.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_dirs: Option<Vec<String>>,
    /// True for an edit's `dryRun` (nothing was written).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dry_run: Option<bool>,
    /// Raw path, only with `audit.raw_paths`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// An event's `type`.
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
pub enum EventKind {
    /// `fs.access`: the operation succeeded.
    #[serde(rename = "fs.access")]
    Access,
    /// `fs.denied`: it was refused or failed.
    #[serde(rename = "fs.denied")]
    Denied,
}

/// What an operation meant to do (`intent`).
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Intent {
    /// A whole-file write.
    Write,
    /// An edit (any mode of SPEC 8).
    Edit,
    /// A read.
    Read,
}

/// Which writer handled (or would have handled) an operation (`writer`).
#[derive(Debug, Clone, Copy, Serialize, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Writer {
    /// The workspace writer.
    Workspace,
    /// The external host writer.
    External,
}

/// Where events go: a 0600 JSON-lines file, one `write(2)` per event.
/// A failing sink is logged and counted; with `required` it makes
/// [`AuditSink::healthy`] false so the pipeline refuses writes.
pub struct AuditSink {
    path: PathBuf,
    log: Mutex<Option<writegate_fs::AppendLog>>,
    failures: AtomicU64,
    failing: std::sync::atomic::AtomicBool,
    required: bool,
    raw_paths: bool,
}

impl AuditSink {
    /// Opens (creating 0600, parents 0700) the log at `path`. An open failure
    /// is not fatal: it is logged and the sink reports itself failing.
    pub fn open(path: &Path, required: bool, raw_paths: bool) -> AuditSink {
        let log = match writegate_fs::AppendLog::open(path) {
            Ok(l) => Some(l),
            Err(e) => {
                tracing::error!(path = %path.display(), error = &e as &dyn std::error::Error, "cannot open audit log");
                None
            }
        };
        AuditSink {
            path: path.to_path_buf(),
            failing: std::sync::atomic::AtomicBool::new(log.is_none()),
            failures: AtomicU64::new(u64::from(log.is_none())),
            log: Mutex::new(log),
            required,
            raw_paths,
        }
    }

    /// The log file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether raw paths go into events.
    pub fn raw_paths(&self) -> bool {
        self.raw_paths
    }

    /// False when `audit.required` is on and the last append failed.
    pub fn healthy(&self) -> bool {
        !(self.required && self.failing.load(Ordering::SeqCst))
    }

    /// Number of failed appends since start.
    pub fn failures(&self) -> u64 {
        self.failures.load(Ordering::SeqCst)
    }

    /// Appends one event as one line. Failures are logged and counted.
    pub fn record(&self, event: &AuditEvent) {
        let mut line = match serde_json::to_vec(event) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!(error = %e, "cannot serialise audit event");
                return;
            }
        };
        line.push(b'\n');
        let mut guard = self.log.lock().unwrap();
        if guard.is_none() {
            *guard = writegate_fs::AppendLog::open(&self.path).ok();
        }
        let result = match guard.as_ref() {
            Some(log) => log.append(&line).map_err(|e| crate::error::with_causes(&e)),
            None => Err("audit log is not open".to_string()),
        };
        match result {
            Ok(()) => self.failing.store(false, Ordering::SeqCst),
            Err(e) => {
                self.failures.fetch_add(1, Ordering::SeqCst);
                self.failing.store(true, Ordering::SeqCst);
                tracing::error!(path = %self.path.display(), error = %e, "audit append failed");
            }
        }
    }
}

/// Current UTC time as RFC 3339 with milliseconds (`2026-11-30T01:02:03.456Z`).
pub fn now_rfc3339() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
    let ms = now.subsec_millis();
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    // Both are small positive numbers (1..=31, 1..=12) by construction.
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_422), (2025, 11, 30));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
    }

    #[test]
    fn timestamp_shape() {
        let ts = now_rfc3339();
        assert_eq!(ts.len(), 24, "{ts}");
        assert!(ts.ends_with('Z'));
    }
}
