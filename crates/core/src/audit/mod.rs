//! Audit events (SPEC 10): exactly one `fs.access` or `fs.denied` per
//! operation that reached routing, and one `approval.grant` per approval
//! granted, appended as one JSON line each.
//!
//! What the sink guarantees (docs/behaviour.md, "Audit"):
//!
//! - **Whole lines only.** Appends go through [`writegate_fs::AppendLog`]:
//!   a line is wholly in the file or not at all (a short write is rolled
//!   back; a torn tail left by a crash is cut before the next line).
//! - **Nothing commits unrecorded when `audit.required`.** Before a write
//!   or edit commits, [`AuditSink::prepare`] reserves disk space for its
//!   event and appends the operation's intent to this process's journal;
//!   if either fails the operation is refused and nothing is written.
//!   While the log is failing, writes, edits and approvals are refused.
//! - **Exactly one event after a crash.** Every event carries an `opId`.
//!   At start-up, the journals of dead processes are read: an intent
//!   whose `opId` is not in the log gets its event then, marked
//!   `recovered` (`committed` when the file holds what the operation
//!   wrote, `not_committed` when the file is still the one it replaced,
//!   `unconfirmed` when the file changed again since).
//! - **Durability** per `audit.flush` ([`FlushMode`](crate::config::FlushMode)).
//! - **Nothing dropped silently.** An event that cannot be appended waits
//!   in memory (at most [`MAX_BACKLOG`]) and is retried; events beyond
//!   that are counted and an `audit.gap` line says how many were lost.

mod error;
mod event;
mod flusher;
mod journal;
mod line;
mod recovery;
mod reserve;
mod sink;
mod time;

pub use event::{AuditEvent, EventKind, GrantEvent, Intent, Recovered, Writer};
pub use flusher::FLUSH_INTERVAL;
pub use journal::journal_dir;
pub use recovery::Recovery;
pub(crate) use recovery::unhex;
pub use reserve::{CommitFacts, CommitIntent, Reservation};
pub use sink::{AuditSink, MAX_BACKLOG};
pub use time::now_rfc3339;

use crate::sync::lock;
use error::AuditError;
