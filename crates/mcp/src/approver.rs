//! Asking the person about a held write with MCP elicitation
//! (`elicitation/create`): allow once, allow for this session, or deny.
//! Core calls [`Approver::ask`] from the operation's blocking thread; the
//! request goes out on the runtime and the answer comes back over a
//! oneshot channel.

use rmcp::model::{ElicitRequestParams, ElicitationAction, ElicitationSchema, ProtocolVersion};
use rmcp::service::{ElicitationMode, Peer, RoleServer, ServiceError};
use serde_json::{Value, json};
use std::time::Duration;
use tokio::runtime::Handle;
use tokio_util::sync::CancellationToken;
use writegate_core::{ApprovalAnswer, ApprovalQuestion, Approver, EditMode, OpMode};

/// The answer values of the form's one field, `decision`.
const ALLOW_ONCE: &str = "allow_once";
const ALLOW_ALWAYS: &str = "allow_always";
const DENY: &str = "deny";

/// Asks through the connection's peer; one per tool call.
pub(crate) struct ElicitApprover {
    pub(crate) peer: Peer<RoleServer>,
    pub(crate) handle: Handle,
    /// Cancelled when the tool call is (the question is dropped then).
    pub(crate) cancel: CancellationToken,
    /// Cancelled when the client's input ends (stdin closed): no answer
    /// can come any more, so the question is dropped and the call answered
    /// as cancelled at once.
    pub(crate) input_ended: CancellationToken,
    /// How long the question waits for an answer (`approval_timeout_ms`):
    /// then it is withdrawn (`notifications/cancelled` to the client) and
    /// nobody approved.
    pub(crate) timeout: Duration,
}

/// Whether the client can be asked: it declared form elicitation.
pub(crate) fn can_ask(peer: &Peer<RoleServer>) -> bool {
    peer.supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
}

/// The form: one required single choice. Clients on 2025-11-25 get titled
/// options (`oneOf` of `const`/`title`); older ones the plain `enum` with
/// `enumNames`.
pub(crate) fn form(version: Option<&ProtocolVersion>) -> ElicitationSchema {
    let titled = version.is_some_and(|v| v.as_str() >= ProtocolVersion::V_2025_11_25.as_str());
    let choice = if titled {
        json!({
            "type": "string",
            "title": "Decision",
            "oneOf": [
                {"const": ALLOW_ONCE, "title": "Allow once"},
                {"const": ALLOW_ALWAYS, "title": "Allow for this session"},
                {"const": DENY, "title": "Deny"},
            ],
        })
    } else {
        json!({
            "type": "string",
            "title": "Decision",
            "enum": [ALLOW_ONCE, ALLOW_ALWAYS, DENY],
            "enumNames": ["Allow once", "Allow for this session", "Deny"],
        })
    };
    let schema = json!({
        "type": "object",
        "properties": {"decision": choice},
        "required": ["decision"],
    });
    let Value::Object(obj) = schema else {
        unreachable!("a JSON object literal")
    };
    ElicitationSchema::from_json_schema(obj)
        .expect("the approval form is a valid elicitation schema")
}

/// The question in words.
pub(crate) fn message(q: &ApprovalQuestion) -> String {
    let what = match q.mode {
        OpMode::Edit(EditMode::Write) | OpMode::Read | OpMode::Undo => q.mode.to_string(),
        OpMode::Edit(m) => format!("edit ({m})"),
    };
    format!(
        "An agent asks writegate to {what} {}. This path is held for your approval: {} (rated {}). Allow it?",
        q.path.display(),
        q.reason,
        q.level
    )
}

/// The person's answer from the client's result.
pub(crate) fn answer(action: &ElicitationAction, content: Option<&Value>) -> ApprovalAnswer {
    match action {
        ElicitationAction::Accept => {
            match content
                .and_then(|c| c.get("decision"))
                .and_then(Value::as_str)
            {
                Some(ALLOW_ONCE) => ApprovalAnswer::AllowOnce,
                Some(ALLOW_ALWAYS) => ApprovalAnswer::AllowAlways,
                Some(DENY) => ApprovalAnswer::Deny,
                // Accepted without a valid choice: not an approval.
                _ => ApprovalAnswer::Unavailable,
            }
        }
        ElicitationAction::Decline => ApprovalAnswer::Deny,
        ElicitationAction::Cancel => ApprovalAnswer::Cancelled,
        // An action this version does not know: nobody approved.
        _ => ApprovalAnswer::Unavailable,
    }
}

/// Asks the person through the daemon's approval queue
/// (`writegate pending`, `writegate answer`): for a client connected to
/// the daemon that cannot ask itself. One per tool call.
pub(crate) struct QueueApprover {
    pub(crate) service: std::sync::Arc<writegate_core::Service>,
    /// Who asks, as `writegate pending` shows it.
    pub(crate) asker: writegate_core::queue::Asker,
    /// Cancelled when the tool call is.
    pub(crate) cancel: CancellationToken,
    /// Cancelled when the connection's input ends.
    pub(crate) input_ended: CancellationToken,
    /// How long the question waits (`approval_timeout_ms`).
    pub(crate) timeout: Duration,
}

impl Approver for QueueApprover {
    fn ask(&self, q: &ApprovalQuestion) -> ApprovalAnswer {
        let wait = || {
            self.service
                .approval_queue()
                .wait(q, self.asker.clone(), self.timeout, &|| {
                    self.cancel.is_cancelled() || self.input_ended.is_cancelled()
                })
        };
        // On a runtime worker (a small call runs there), the worker's other
        // tasks move to another thread while this one waits.
        if Handle::try_current().is_ok() {
            tokio::task::block_in_place(wait)
        } else {
            wait()
        }
    }
}

impl Approver for ElicitApprover {
    fn ask(&self, q: &ApprovalQuestion) -> ApprovalAnswer {
        let peer = self.peer.clone();
        let cancel = self.cancel.clone();
        let ended = self.input_ended.clone();
        let timeout = self.timeout;
        let version = peer.peer_info().map(|i| i.protocol_version.clone());
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: message(q),
            requested_schema: form(version.as_ref()),
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.handle.spawn(async move {
            let answer = tokio::select! {
                () = cancel.cancelled() => ApprovalAnswer::Cancelled,
                () = ended.cancelled() => {
                    tracing::info!("the client's input ended while the approval question was open: the call is cancelled");
                    ApprovalAnswer::Cancelled
                }
                // On timeout rmcp withdraws the request itself
                // (`notifications/cancelled`, reason "request timeout").
                r = peer.create_elicitation_with_timeout(params, Some(timeout)) => match r {
                    Ok(r) => answer(&r.action, r.content.as_ref()),
                    Err(ServiceError::Timeout { .. }) => {
                        tracing::warn!(
                            timeout_ms = timeout.as_millis(),
                            "the client did not answer the approval question within approval_timeout_ms: nobody approved"
                        );
                        ApprovalAnswer::Unavailable
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "the client did not answer the approval question");
                        ApprovalAnswer::Unavailable
                    }
                },
            };
            let _ = tx.send(answer);
        });
        // On a runtime worker (a small call runs there), the worker's other
        // tasks move to another thread while this one waits: the answer
        // arrives through them. On a blocking thread this just waits.
        tokio::task::block_in_place(|| rx.blocking_recv()).unwrap_or(ApprovalAnswer::Unavailable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_forms_are_valid_elicitation_schemas() {
        for v in [
            None,
            Some(ProtocolVersion::V_2025_06_18),
            Some(ProtocolVersion::V_2025_11_25),
        ] {
            let s = serde_json::to_value(form(v.as_ref())).unwrap();
            assert_eq!(s["required"], json!(["decision"]), "{s}");
        }
    }

    #[test]
    fn answers() {
        let d = |v: &str| json!({"decision": v});
        let a = ElicitationAction::Accept;
        assert_eq!(answer(&a, Some(&d(ALLOW_ONCE))), ApprovalAnswer::AllowOnce);
        assert_eq!(
            answer(&a, Some(&d(ALLOW_ALWAYS))),
            ApprovalAnswer::AllowAlways
        );
        assert_eq!(answer(&a, Some(&d(DENY))), ApprovalAnswer::Deny);
        assert_eq!(answer(&a, Some(&d("yes"))), ApprovalAnswer::Unavailable);
        assert_eq!(answer(&a, None), ApprovalAnswer::Unavailable);
        assert_eq!(
            answer(&ElicitationAction::Decline, None),
            ApprovalAnswer::Deny
        );
        assert_eq!(
            answer(&ElicitationAction::Cancel, None),
            ApprovalAnswer::Cancelled
        );
    }
}
