//! The person behind the editor as core's [`Approver`]: a write the gate
//! holds becomes an ACP `session/request_permission` to the editor (a tool
//! call naming the path; options allow once, allow always, reject once),
//! sent with an id of the proxy's own, and its outcome becomes the answer.
//! A question nobody answers within `approval_timeout_ms` is withdrawn
//! (`$/cancel_request` to the editor) and answered `unanswered`.

use crate::sessions::Session;
use agent_client_protocol::v1::schema::{
    CLIENT_METHOD_NAMES, PermissionOption, PermissionOptionKind, RequestPermissionOutcome,
    RequestPermissionRequest, RequestPermissionResponse, ToolCallLocation, ToolCallStatus,
    ToolCallUpdate, ToolCallUpdateFields, ToolKind,
};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::runtime::Handle;
use tokio::sync::oneshot::error::RecvError;
use writegate_acp::conn::Link;
use writegate_acp::message::{self, ErrorObject};
use writegate_acp::methods::CANCEL_REQUEST;
use writegate_core::{ApprovalAnswer, ApprovalQuestion, Approver, EditMode, OpMode};

/// `optionId` of "allow once".
pub(crate) const ALLOW_ONCE: &str = "allow_once";
/// `optionId` of "allow always" (for the rest of the session).
pub(crate) const ALLOW_ALWAYS: &str = "allow_always";
/// `optionId` of "reject once".
pub(crate) const REJECT_ONCE: &str = "reject_once";

/// What the approver needs of the proxy's relay (`relay::Relay`): the
/// editor's link, once it is up, and whether the editor's input ended.
pub(crate) trait EditorPeer: Send + Sync {
    /// The editor's link, once it is up.
    fn editor_link(&self) -> Option<Arc<Link>>;
    /// Whether the editor closed its input (no answer can come).
    fn input_ended(&self) -> bool;
}

/// Asks the editor about one operation of one session.
pub(crate) struct EditorApprover {
    pub(crate) relay: Arc<dyn EditorPeer>,
    pub(crate) session: Arc<Session>,
    /// The request's cancel flag: a request already cancelled asks nobody.
    pub(crate) cancel: Arc<AtomicBool>,
    /// The runtime to wait on from the operation's blocking thread.
    pub(crate) handle: Handle,
    /// How long the question waits for the editor's answer
    /// (`approval_timeout_ms`): then it is withdrawn and nobody approved.
    pub(crate) timeout: Duration,
}

/// How waiting for the editor's answer ended.
enum Waited {
    /// The editor answered (or its connection ended: the channel closed).
    Answer(Result<Result<Value, ErrorObject>, RecvError>),
    /// The question was cancelled (`session/cancel`, or the editor's input
    /// ended).
    Cancelled,
    /// No answer within `approval_timeout_ms`.
    TimedOut,
}

impl Approver for EditorApprover {
    fn ask(&self, q: &ApprovalQuestion) -> ApprovalAnswer {
        let Some(editor) = self
            .relay
            .editor_link()
            .filter(|_| !self.relay.input_ended())
        else {
            return ApprovalAnswer::Unavailable;
        };
        // Open the question before looking at the flag: a session/cancel
        // either sets the flag before this look, or finds the question open.
        let (n, token) = self.session.open_question();
        if self.cancel.load(Ordering::SeqCst) {
            self.session.close_question(n);
            return ApprovalAnswer::Cancelled;
        }
        let params = permission_request(&self.session.id, n, q);
        let (id, answer) = editor.request(CLIENT_METHOD_NAMES.session_request_permission, &params);
        drop(editor);
        // Registered before this look: if the editor's input has ended, its
        // connection clears the question's channel (or has already).
        let got = if self.relay.input_ended() {
            Waited::Cancelled
        } else {
            self.handle.block_on(async {
                tokio::select! {
                    r = answer => Waited::Answer(r),
                    () = token.cancelled() => Waited::Cancelled,
                    () = tokio::time::sleep(self.timeout) => Waited::TimedOut,
                }
            })
        };
        self.session.close_question(n);
        let answer = match got {
            Waited::Cancelled if token.is_cancelled() => ApprovalAnswer::Cancelled,
            Waited::TimedOut => {
                // Withdrawn: the editor may close its dialog; an answer
                // that still comes is no longer waited for (dropped).
                if let Some(editor) = self.relay.editor_link() {
                    editor.forget(&id);
                    editor.send(message::notification_line(
                        CANCEL_REQUEST,
                        &json!({"requestId": id}),
                    ));
                }
                tracing::warn!(
                    session = %self.session.id,
                    timeout_ms = self.timeout.as_millis(),
                    "the editor did not answer the permission request within approval_timeout_ms: nobody approved"
                );
                ApprovalAnswer::Unavailable
            }
            Waited::Cancelled | Waited::Answer(Err(_) | Ok(Err(_))) => ApprovalAnswer::Unavailable,
            Waited::Answer(Ok(Ok(result))) => outcome(result),
        };
        tracing::info!(session = %self.session.id, command = %q.command, answer = answer.as_str(), "permission asked");
        answer
    }
}

/// The `session/request_permission` params for question `n`.
pub(crate) fn permission_request(
    session_id: &str,
    n: u64,
    q: &ApprovalQuestion,
) -> RequestPermissionRequest {
    let verb = match q.mode {
        OpMode::Edit(EditMode::Write) => "Write",
        OpMode::Read => "Read",
        OpMode::Edit(_) | OpMode::Undo => "Edit",
    };
    let fields = ToolCallUpdateFields::new()
        .title(format!("{verb} {} ({})", q.path.display(), q.reason))
        .kind(if q.mode == OpMode::Read {
            ToolKind::Read
        } else {
            ToolKind::Edit
        })
        .status(ToolCallStatus::Pending)
        .locations(vec![ToolCallLocation::new(q.path.clone())])
        .raw_input(json!({
            "command": q.command,
            "path": q.path,
            "mode": q.mode.as_str(),
            "level": q.level.as_str(),
            "reason": q.reason,
        }));
    RequestPermissionRequest::new(
        session_id.to_string(),
        ToolCallUpdate::new(crate::sessions::tool_call_id(n), fields),
        vec![
            PermissionOption::new(ALLOW_ONCE, "Allow once", PermissionOptionKind::AllowOnce),
            PermissionOption::new(
                ALLOW_ALWAYS,
                "Allow for this session",
                PermissionOptionKind::AllowAlways,
            ),
            PermissionOption::new(REJECT_ONCE, "Reject", PermissionOptionKind::RejectOnce),
        ],
    )
}

/// The answer in a `session/request_permission` result. An option the
/// proxy did not offer is a refusal (fail closed); a result that does not
/// parse means nobody answered.
pub(crate) fn outcome(result: Value) -> ApprovalAnswer {
    let Ok(r) = serde_json::from_value::<RequestPermissionResponse>(result) else {
        return ApprovalAnswer::Unavailable;
    };
    match r.outcome {
        RequestPermissionOutcome::Cancelled => ApprovalAnswer::Cancelled,
        RequestPermissionOutcome::Selected(s) => match &*s.option_id.0 {
            ALLOW_ONCE => ApprovalAnswer::AllowOnce,
            ALLOW_ALWAYS => ApprovalAnswer::AllowAlways,
            _ => ApprovalAnswer::Deny,
        },
        _ => ApprovalAnswer::Unavailable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn the_question_names_the_path_and_offers_three_options() {
        let q = ApprovalQuestion {
            command: "edit_file write /w/.env".into(),
            path: PathBuf::from("/w/.env"),
            mode: OpMode::Edit(EditMode::Write),
            level: writegate_core::config::Level::Dangerous,
            reason: "credential file .env".into(),
        };
        let v = serde_json::to_value(permission_request("s1", 7, &q)).unwrap();
        assert_eq!(v["sessionId"], "s1");
        let tool_call = v["toolCall"]["toolCallId"].as_str().unwrap();
        assert!(
            tool_call.starts_with("writegate-approval-") && tool_call.ends_with("-7"),
            "{tool_call}"
        );
        assert_ne!(tool_call, "writegate-approval-7", "not guessable");
        assert_eq!(v["toolCall"]["kind"], "edit");
        assert_eq!(v["toolCall"]["status"], "pending");
        assert_eq!(v["toolCall"]["locations"][0]["path"], "/w/.env");
        assert_eq!(
            v["toolCall"]["title"],
            "Write /w/.env (credential file .env)"
        );
        assert_eq!(
            v["toolCall"]["rawInput"]["command"],
            "edit_file write /w/.env"
        );
        let kinds: Vec<&str> = v["options"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["kind"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["allow_once", "allow_always", "reject_once"]);
    }

    #[test]
    fn outcomes_map_to_answers_failing_closed() {
        let sel = |id: &str| json!({"outcome": {"outcome": "selected", "optionId": id}});
        assert_eq!(outcome(sel("allow_once")), ApprovalAnswer::AllowOnce);
        assert_eq!(outcome(sel("allow_always")), ApprovalAnswer::AllowAlways);
        assert_eq!(outcome(sel("reject_once")), ApprovalAnswer::Deny);
        assert_eq!(outcome(sel("something-else")), ApprovalAnswer::Deny);
        assert_eq!(
            outcome(json!({"outcome": {"outcome": "cancelled"}})),
            ApprovalAnswer::Cancelled
        );
        assert_eq!(outcome(json!({"nope": 1})), ApprovalAnswer::Unavailable);
        assert_eq!(outcome(json!(null)), ApprovalAnswer::Unavailable);
    }
}
