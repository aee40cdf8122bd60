//! Asking the person in the 2026-07-28 era of MCP, where a server sends no
//! requests of its own: a held call is answered `resultType:
//! "input_required"` with the approval form as an `elicitation/create`
//! input request and a `requestState`; the client shows the form and calls
//! the tool again with the answer (`inputResponses`) and the state. The
//! state is a handle to what this process asked (`Issued`): 128 random
//! bits, good once, for [`STATE_TTL`], for the tool it was issued for, and
//! only for the command the person was asked about. A handle that is
//! unknown (tampered, from another process), used or expired approves
//! nothing, and neither does a valid one sent back with a call about
//! another command (another path): the call runs as a first call, is held
//! again and asks again.
//!
//! Nothing waits here: the held call is answered at once, and the person's
//! answer comes in a call of its own. So `approval_timeout_ms` has nothing
//! to limit in this era; the handle's own lifetime is [`STATE_TTL`].

use crate::approver;
use rmcp::model::{
    ElicitRequest, ElicitRequestParams, ElicitationAction, InputRequest, InputRequests,
    InputRequiredResult, InputResponses, ProtocolVersion,
};
use serde_json::Value;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use writegate_core::{
    ApprovalAnswer, ApprovalQuestion, Approver, Detail, ErrorKind, Failure, OpMode,
};

/// The key of the approval form in `inputRequests` and `inputResponses`.
pub(crate) const APPROVAL_KEY: &str = "approval";

/// How long a question stays answerable.
pub(crate) const STATE_TTL: Duration = Duration::from_secs(15 * 60);

/// Most questions outstanding at once; the oldest goes first.
const MAX_OUTSTANDING: usize = 256;

/// What one `requestState` handle stands for.
struct Issued {
    tool: &'static str,
    command: String,
    at: Instant,
}

/// The questions this process asked and nobody answered yet, by handle.
#[derive(Default)]
pub(crate) struct Questions {
    issued: Mutex<HashMap<String, Issued>>,
}

/// A retried call's answer: the person's choice about `command`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Answered {
    command: String,
    answer: ApprovalAnswer,
}

impl Approver for Answered {
    /// The person's answer, for the command they were asked about; any
    /// other command was not asked about: nobody approved it.
    fn ask(&self, q: &ApprovalQuestion) -> ApprovalAnswer {
        if self.asks_about(q) {
            self.answer
        } else {
            ApprovalAnswer::Unavailable
        }
    }

    /// Only the command the person was asked about: a call that comes back
    /// with the state of another (another path, another edit mode) runs as
    /// a first call, held and asked about again (`input_required`).
    fn asks_about(&self, q: &ApprovalQuestion) -> bool {
        q.command == self.command
    }
}

impl Questions {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Issued>> {
        self.issued
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The `input_required` result asking about `q` for a call of `tool`,
    /// with a new handle as its `requestState`.
    pub(crate) fn ask(&self, tool: &'static str, q: &ApprovalQuestion) -> InputRequiredResult {
        let handle = writegate_core::unpredictable_hex();
        {
            let mut issued = self.lock();
            issued.retain(|_, i| i.at.elapsed() < STATE_TTL);
            if issued.len() >= MAX_OUTSTANDING
                && let Some(oldest) = issued
                    .iter()
                    .min_by_key(|(_, i)| i.at)
                    .map(|(h, _)| h.clone())
            {
                issued.remove(&oldest);
            }
            issued.insert(
                handle.clone(),
                Issued {
                    tool,
                    command: q.command.clone(),
                    at: Instant::now(),
                },
            );
        }
        let form = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: approver::message(q),
            requested_schema: approver::form(Some(&ProtocolVersion::V_2026_07_28)),
        };
        let mut requests = InputRequests::new();
        requests.insert(
            APPROVAL_KEY.to_string(),
            InputRequest::Elicitation(ElicitRequest::new(form)),
        );
        InputRequiredResult::new(Some(requests), Some(handle))
    }

    /// The answer a retried call of `tool` carries: `state` is a handle
    /// this process issued for `tool`, not used before (it is used now) and
    /// not expired, and `responses` holds the form's answer. `None`
    /// otherwise: nothing is approved.
    pub(crate) fn redeem(
        &self,
        tool: &str,
        state: Option<&str>,
        responses: Option<&InputResponses>,
    ) -> Option<Answered> {
        let state = state?;
        let Some(issued) = self.lock().remove(state) else {
            tracing::warn!(
                tool,
                "a requestState this process did not issue, or already used: nothing approved"
            );
            return None;
        };
        if issued.tool != tool || issued.at.elapsed() >= STATE_TTL {
            tracing::warn!(
                tool,
                "a requestState for another tool, or expired: nothing approved"
            );
            return None;
        }
        let answer = answer_of(responses?.get(APPROVAL_KEY)?)?;
        Some(Answered {
            command: issued.command,
            answer,
        })
    }

    /// Questions outstanding (tests).
    #[cfg(test)]
    fn outstanding(&self) -> usize {
        self.lock().len()
    }
}

/// The person's answer in an `ElicitResult` (`{action, content}`);
/// `None` when it is not one.
fn answer_of(response: &Value) -> Option<ApprovalAnswer> {
    let action: ElicitationAction = serde_json::from_value(response.get("action")?.clone()).ok()?;
    Some(approver::answer(&action, response.get("content")))
}

/// The question a held call's refusal stands for: the gate's
/// `edit_file <mode> <path>` with its rating and reason. `None` for any
/// other failure, and for a refusal after a person was asked (their
/// answer is final).
pub(crate) fn held_question(f: &Failure) -> Option<ApprovalQuestion> {
    let Failure::Refused(r) = f else { return None };
    let Some(Detail::Approval {
        command,
        level,
        reason,
        asked: false,
        ..
    }) = &r.detail
    else {
        return None;
    };
    if r.kind != ErrorKind::ApprovalRequired {
        return None;
    }
    let (mode, path) = command.strip_prefix("edit_file ")?.split_once(' ')?;
    let mode = match mode {
        "read" => OpMode::Read,
        "undo" => OpMode::Undo,
        m => OpMode::Edit(m.parse().ok()?),
    };
    Some(ApprovalQuestion {
        command: command.clone(),
        path: PathBuf::from(path),
        mode,
        level: *level,
        reason: reason.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn question() -> ApprovalQuestion {
        ApprovalQuestion {
            command: "edit_file write /w/.env".into(),
            path: "/w/.env".into(),
            mode: OpMode::Edit(writegate_core::EditMode::Write),
            level: writegate_core::config::Level::Dangerous,
            reason: "credential file .env".into(),
        }
    }

    fn responses(v: Value) -> InputResponses {
        InputResponses::from([(APPROVAL_KEY.to_string(), v)])
    }

    fn accept(decision: &str) -> InputResponses {
        responses(json!({"action": "accept", "content": {"decision": decision}}))
    }

    #[test]
    fn a_state_is_good_once_for_its_tool_and_command() {
        let qs = Questions::default();
        let r = qs.ask("write_file", &question());
        let state = r.request_state.clone().unwrap();
        assert_eq!(state.len(), 32);
        let wire = serde_json::to_value(&r).unwrap();
        assert_eq!(wire["resultType"], "input_required");
        assert_eq!(
            wire["inputRequests"][APPROVAL_KEY]["method"],
            "elicitation/create"
        );
        let yes = accept("allow_once");
        let a = qs
            .redeem("write_file", Some(&state), Some(&yes))
            .expect("answered");
        assert_eq!(a.ask(&question()), ApprovalAnswer::AllowOnce);
        let other = ApprovalQuestion {
            command: "edit_file write /w/.ssh/id".into(),
            ..question()
        };
        assert!(!a.asks_about(&other), "another command was not asked about");
        assert_eq!(a.ask(&other), ApprovalAnswer::Unavailable);
        // Replayed: used up.
        assert_eq!(qs.redeem("write_file", Some(&state), Some(&yes)), None);
        // Another tool's, tampered, or none at all.
        let state = qs.ask("write_file", &question()).request_state.unwrap();
        assert_eq!(qs.redeem("edit_file", Some(&state), Some(&yes)), None);
        let state = qs.ask("write_file", &question()).request_state.unwrap();
        let mut tampered = state.clone();
        tampered.replace_range(0..1, if state.starts_with('0') { "1" } else { "0" });
        assert_eq!(qs.redeem("write_file", Some(&tampered), Some(&yes)), None);
        assert_eq!(qs.redeem("write_file", None, Some(&yes)), None);
        // Without an answer to the form: nothing.
        assert_eq!(qs.redeem("write_file", Some(&state), None), None);
        assert_eq!(qs.outstanding(), 0);
    }

    #[test]
    fn an_expired_state_approves_nothing() {
        let qs = Questions::default();
        let state = qs.ask("write_file", &question()).request_state.unwrap();
        qs.lock().get_mut(&state).unwrap().at = Instant::now()
            .checked_sub(STATE_TTL + Duration::from_secs(1))
            .unwrap();
        assert_eq!(
            qs.redeem("write_file", Some(&state), Some(&accept("allow_once"))),
            None
        );
    }

    #[test]
    fn declined_and_dismissed_answers_approve_nothing() {
        let qs = Questions::default();
        for (response, want) in [
            (json!({"action": "decline"}), ApprovalAnswer::Deny),
            (json!({"action": "cancel"}), ApprovalAnswer::Cancelled),
            (
                json!({"action": "accept", "content": {"decision": "deny"}}),
                ApprovalAnswer::Deny,
            ),
            (
                json!({"action": "accept", "content": {"decision": "yes"}}),
                ApprovalAnswer::Unavailable,
            ),
            (
                json!({"action": "accept", "content": {"decision": "allow_always"}}),
                ApprovalAnswer::AllowAlways,
            ),
        ] {
            let state = qs.ask("write_file", &question()).request_state.unwrap();
            let a = qs
                .redeem("write_file", Some(&state), Some(&responses(response)))
                .unwrap();
            assert_eq!(a.ask(&question()), want);
        }
        let state = qs.ask("write_file", &question()).request_state.unwrap();
        assert_eq!(
            qs.redeem("write_file", Some(&state), Some(&responses(json!("yes")))),
            None
        );
    }

    #[test]
    fn outstanding_questions_are_bounded() {
        let qs = Questions::default();
        for _ in 0..MAX_OUTSTANDING + 10 {
            qs.ask("write_file", &question());
        }
        assert_eq!(qs.outstanding(), MAX_OUTSTANDING);
    }
}
