//! The person's approval queue: held operations of agents that cannot ask
//! the person themselves (an MCP client without elicitation, connected to
//! the daemon) wait here until the person answers (`writegate answer`),
//! the call is cancelled, or `approval_timeout_ms` passes. One queue per
//! [`crate::Service`]: every connection of the daemon shares it.
//!
//! Front ends that serve agents only put questions in ([`ApprovalQueue::wait`]);
//! listing and answering ([`ApprovalQueue::list`], [`ApprovalQueue::answer`])
//! are the person's powers, served only where `_writegate/approve` is.

use crate::api::{ApprovalAnswer, ApprovalQuestion};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// How often a waiting call looks at its cancel check.
const CANCEL_POLL: Duration = Duration::from_millis(50);

/// One question waiting for the person, as listed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiting {
    /// Its id (8 hex digits), what `writegate answer` names.
    pub id: String,
    /// The agent that asked (its MCP `clientInfo.name`), when known.
    pub agent: Option<String>,
    /// The session of the held call.
    pub session: Option<String>,
    /// The synthetic command, `edit_file <mode> <path>`.
    pub command: String,
    /// Why it is held, in words.
    pub reason: String,
    /// How long it has waited.
    pub age: Duration,
}

/// Who asks: shown to the person beside the question.
#[derive(Debug, Clone, Default)]
pub struct Asker {
    /// The agent's name (MCP `clientInfo.name`).
    pub agent: Option<String>,
    /// The session of the call.
    pub session: Option<String>,
}

struct Entry {
    id: String,
    asker: Asker,
    command: String,
    reason: String,
    since: Instant,
    slot: Arc<Slot>,
}

#[derive(Default)]
struct Slot {
    answer: Mutex<Option<ApprovalAnswer>>,
    ready: Condvar,
}

/// Why [`ApprovalQueue::answer`] did not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    /// No question waits under this id (answered, timed out, cancelled, or never asked).
    #[error("no question waits under id {0}")]
    Unknown(String),
}

/// A callback told of each new question (a desktop notification).
pub type Notifier = Box<dyn Fn(&Waiting) + Send + Sync>;

/// The queue.
#[derive(Default)]
pub struct ApprovalQueue {
    entries: Mutex<Vec<Entry>>,
    notifier: Mutex<Option<Notifier>>,
}

impl ApprovalQueue {
    fn table(&self) -> std::sync::MutexGuard<'_, Vec<Entry>> {
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sets the callback told of each new question (the daemon's
    /// `notify-send`); it must not block for long.
    pub fn set_notifier(&self, notifier: Notifier) {
        *self
            .notifier
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(notifier);
    }

    /// Puts `q` to the person and blocks until they answer, `cancelled()`
    /// turns true (the call or its connection ended: [`ApprovalAnswer::Cancelled`]),
    /// or `timeout` passes ([`ApprovalAnswer::Unavailable`]: nobody
    /// approved). The question leaves the queue in every case.
    pub fn wait(
        &self,
        q: &ApprovalQuestion,
        asker: Asker,
        timeout: Duration,
        cancelled: &dyn Fn() -> bool,
    ) -> ApprovalAnswer {
        let slot = Arc::new(Slot::default());
        let id = self.insert(q, asker, slot.clone());
        let deadline = Instant::now() + timeout;
        let mut answer = slot
            .answer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let result = loop {
            if let Some(a) = *answer {
                break a;
            }
            if cancelled() {
                break ApprovalAnswer::Cancelled;
            }
            let now = Instant::now();
            if now >= deadline {
                tracing::warn!(id = %id, command = %q.command,
                    "nobody answered the approval question within approval_timeout_ms: nobody approved");
                break ApprovalAnswer::Unavailable;
            }
            answer = slot
                .ready
                .wait_timeout(answer, CANCEL_POLL.min(deadline - now))
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        };
        drop(answer);
        self.table().retain(|e| e.id != id);
        result
    }

    fn insert(&self, q: &ApprovalQuestion, asker: Asker, slot: Arc<Slot>) -> String {
        let mut table = self.table();
        let id = loop {
            let id = crate::unpredictable_hex()[..8].to_string();
            if !table.iter().any(|e| e.id == id) {
                break id;
            }
        };
        let entry = Entry {
            id: id.clone(),
            asker,
            command: q.command.clone(),
            reason: q.reason.clone(),
            since: Instant::now(),
            slot,
        };
        let shown = waiting(&entry);
        table.push(entry);
        drop(table);
        tracing::info!(id = %id, command = %q.command, "waiting for the person's answer: `writegate pending`, then `writegate answer {id} allow|allow-session|deny`");
        if let Some(n) = self
            .notifier
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
        {
            n(&shown);
        }
        id
    }

    /// The questions waiting, oldest first.
    pub fn list(&self) -> Vec<Waiting> {
        self.table().iter().map(waiting).collect()
    }

    /// Answers the question `id`: its call goes on with `answer`.
    pub fn answer(&self, id: &str, answer: ApprovalAnswer) -> Result<Waiting, AnswerError> {
        let table = self.table();
        let entry = table
            .iter()
            .find(|e| e.id == id)
            .ok_or_else(|| AnswerError::Unknown(id.to_string()))?;
        let mut slot = entry
            .slot
            .answer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if slot.is_some() {
            return Err(AnswerError::Unknown(id.to_string()));
        }
        *slot = Some(answer);
        entry.slot.ready.notify_all();
        Ok(waiting(entry))
    }
}

fn waiting(e: &Entry) -> Waiting {
    Waiting {
        id: e.id.clone(),
        agent: e.asker.agent.clone(),
        session: e.asker.session.clone(),
        command: e.command.clone(),
        reason: e.reason.clone(),
        age: e.since.elapsed(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::OpMode;
    use crate::config::Level;
    use writegate_text::EditMode;

    fn question() -> ApprovalQuestion {
        ApprovalQuestion {
            command: "edit_file write /w/.env".to_string(),
            path: "/w/.env".into(),
            mode: OpMode::Edit(EditMode::Write),
            level: Level::Dangerous,
            reason: "credential file .env".to_string(),
        }
    }

    #[test]
    fn an_answer_reaches_the_waiting_call_and_the_question_leaves() {
        let q = Arc::new(ApprovalQueue::default());
        let q2 = q.clone();
        let waiter = std::thread::spawn(move || {
            q2.wait(
                &question(),
                Asker::default(),
                Duration::from_secs(10),
                &|| false,
            )
        });
        let id = loop {
            if let Some(w) = q.list().first() {
                break w.id.clone();
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        assert_eq!(q.list()[0].command, "edit_file write /w/.env");
        q.answer(&id, ApprovalAnswer::Deny).unwrap();
        assert_eq!(waiter.join().unwrap(), ApprovalAnswer::Deny);
        assert!(q.list().is_empty());
        assert_eq!(
            q.answer(&id, ApprovalAnswer::AllowOnce),
            Err(AnswerError::Unknown(id))
        );
    }

    #[test]
    fn nobody_approves_when_the_time_limit_passes_or_the_call_is_cancelled() {
        let q = ApprovalQueue::default();
        let a = q.wait(
            &question(),
            Asker::default(),
            Duration::from_millis(60),
            &|| false,
        );
        assert_eq!(a, ApprovalAnswer::Unavailable);
        let a = q.wait(
            &question(),
            Asker::default(),
            Duration::from_secs(10),
            &|| true,
        );
        assert_eq!(a, ApprovalAnswer::Cancelled);
        assert!(q.list().is_empty());
    }
}
