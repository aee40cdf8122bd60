//! Why the audit log or the intent journal could not take a line: the
//! error of the sink's internal steps, which its callers log, keep as the
//! log's failure, or turn into an `io_error` refusal.

use writegate_fs::FsError;

/// Why an audit line or intent could not be written (or the log repaired).
#[derive(Debug, thiserror::Error)]
pub(crate) enum AuditError {
    /// The log could not be opened at start (its error was logged then).
    #[error("the audit log is not open")]
    LogNotOpen,
    /// The intent journal could not be created at start: its error, when
    /// known.
    #[error("{}", .0.as_deref().unwrap_or("no intent journal"))]
    NoJournal(Option<String>),
    /// The journal is over its limit and the log, which retires intents,
    /// is failing.
    #[error("the intent journal is full while the audit log is failing")]
    JournalFullWhileFailing,
    /// The journal stayed over its limit for every wait.
    #[error("the intent journal is full: {pending} operations have not recorded their events")]
    JournalFull {
        /// Intents whose events are not written yet.
        pending: usize,
    },
    /// A disk operation failed (shown with its causes).
    #[error("{}", crate::error::with_causes(.0))]
    Fs(#[from] FsError),
    /// A dead process's journal could not be removed after recovery.
    #[error("{}: {}", .path.display(), crate::error::with_causes(.source))]
    RemoveJournal {
        /// The journal.
        path: std::path::PathBuf,
        /// Why.
        source: FsError,
    },
}
