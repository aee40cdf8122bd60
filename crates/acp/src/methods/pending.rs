//! `_writegate/pending {}` and `_writegate/answer {id, answer}`: the
//! questions of held calls waiting for the person in the daemon's approval
//! queue (an MCP agent connected to the daemon that cannot ask the person
//! itself), and the person's answer to one. Like `_writegate/approve`,
//! these are the person's powers: served only where approvals may be
//! granted ([`crate::transport::Transport::grants_approvals`]), never on
//! the MCP socket an agent's tools use.

use super::{Call, Method, MethodError};
use crate::state::ConnState;
use serde::{Deserialize, Serialize};
use writegate_core::error::{ErrorKind, Refusal};
use writegate_core::{ApprovalAnswer, Failure};

/// `_writegate/pending`.
pub(crate) struct Pending;

/// `_writegate/pending`'s params: none.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NoParams {}

/// One waiting question.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Waiting {
    id: String,
    agent: Option<String>,
    session: Option<String>,
    command: String,
    reason: String,
    /// Whole seconds it has waited.
    age_secs: u64,
}

impl From<writegate_core::queue::Waiting> for Waiting {
    fn from(w: writegate_core::queue::Waiting) -> Waiting {
        Waiting {
            id: w.id,
            agent: w.agent,
            session: w.session,
            command: w.command,
            reason: w.reason,
            age_secs: w.age.as_secs(),
        }
    }
}

/// `{pending: [...]}`, oldest first.
#[derive(Serialize)]
pub(crate) struct Listed {
    pending: Vec<Waiting>,
}

impl Method for Pending {
    const NAME: &'static str = "_writegate/pending";
    const INLINE: bool = true;
    type Params = NoParams;
    type Result = Listed;

    fn enabled(conn: &ConnState) -> bool {
        conn.transport.grants_approvals()
    }

    fn handle(call: &Call<'_>, _p: NoParams) -> Result<Listed, MethodError> {
        let list = call.conn.service.approval_queue().list();
        Ok(Listed {
            pending: list.into_iter().map(Waiting::from).collect(),
        })
    }
}

/// `_writegate/answer`.
pub(crate) struct Answer;

/// The person's answer.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum Choice {
    /// This call only.
    Allow,
    /// This call and every same command of its session.
    AllowSession,
    /// Refuse it.
    Deny,
}

/// Params.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AnswerParams {
    id: String,
    answer: Choice,
}

impl Method for Answer {
    const NAME: &'static str = "_writegate/answer";
    const INLINE: bool = true;
    type Params = AnswerParams;
    type Result = Waiting;

    fn enabled(conn: &ConnState) -> bool {
        conn.transport.grants_approvals()
    }

    fn handle(call: &Call<'_>, p: AnswerParams) -> Result<Waiting, MethodError> {
        let answer = match p.answer {
            Choice::Allow => ApprovalAnswer::AllowOnce,
            Choice::AllowSession => ApprovalAnswer::AllowAlways,
            Choice::Deny => ApprovalAnswer::Deny,
        };
        match call.conn.service.approval_queue().answer(&p.id, answer) {
            Ok(w) => Ok(w.into()),
            Err(e) => Err(MethodError::Failed(Failure::Refused(Refusal::new(
                ErrorKind::NotPending,
                format!(
                    "{e}: it was answered, timed out or cancelled; list the waiting ones with `writegate pending`"
                ),
            )))),
        }
    }
}
