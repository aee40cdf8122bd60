//! `$/cancel_request {requestId}` (SPEC 1), a notification: flags that
//! request of this connection as cancelled. A request that has not begun
//! to commit is then answered `-32800`.

use crate::state::ConnState;
use agent_client_protocol::v1::schema::CancelRequestNotification;
use serde_json::Value;

/// The notification's method name.
pub const CANCEL_REQUEST: &str = "$/cancel_request";

/// Handles the notification; malformed params are ignored (never answered).
pub(crate) fn handle(conn: &ConnState, params: Value) {
    match serde_json::from_value::<CancelRequestNotification>(params) {
        Ok(n) => conn.cancel(&n.request_id),
        Err(e) => tracing::debug!(error = %e, "ignoring malformed $/cancel_request"),
    }
}
