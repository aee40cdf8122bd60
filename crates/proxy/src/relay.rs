//! The two connection handlers and what they share. Notifications are
//! forwarded as the raw line they came as. Requests relayed either way get
//! an id of the proxy's own (one id space per peer), and their answers go
//! back under the id the sender chose, with the ticket of the connection
//! the request came from (so each side's backpressure holds until its
//! request is answered). So no answer from one side can complete a
//! question the proxy asked the other side, or a question another party
//! asked: the agent never learns the ids the editor answers to, and an
//! answer whose id matches nothing pending is dropped, never forwarded.
//! The exceptions to forwarding:
//!
//! - the editor's `initialize` reaches the agent offering
//!   `clientCapabilities.fs.readTextFile` and `writeTextFile`;
//! - the editor's `session/new`, `session/load` and `session/resume` have
//!   their `cwd` registered as a workspace first (refused here, never
//!   forwarded, when it cannot be one), and the session is bound to it once
//!   the agent accepts;
//! - the agent's requests that writegate's method table serves (`fs/*`,
//!   `_writegate/*`) are answered here, in the session's workspace, on a
//!   blocking thread, and never reach the editor;
//! - the editor's `session/cancel` cancels that session's operations and
//!   open permission questions before it is forwarded; the agent's
//!   `$/cancel_request` for a request answered here is applied here, and a
//!   `$/cancel_request` for a relayed request is forwarded naming the
//!   proxy's id for it (dropped when it names nothing relayed).

use crate::approver::{EditorApprover, EditorPeer};
use crate::sessions::{Session, Sessions, lock};
use agent_client_protocol::v1::schema::{AGENT_METHOD_NAMES, RequestId};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use writegate_acp::conn::{Handler, Link, Ticket};
use writegate_acp::message::{
    self, ErrorObject, INTERNAL_ERROR, INVALID_PARAMS, Notification, RawNotification, Request,
    Response,
};
use writegate_acp::methods::{self, CANCEL_REQUEST, Call};
use writegate_core::{Runtime, Service};

/// What the two sides share.
pub(crate) struct Relay {
    /// Text added to every session-opening request for the agent's model
    /// (`--sandbox`: files change only through writegate), in its `_meta`.
    session_instructions: Option<String>,
    service: Arc<Service>,
    /// The editor's link (the proxy's stdout), and what the agent sent
    /// before it existed.
    editor: Mutex<Editor>,
    /// The agent's link (the agent's stdin); `None` once released.
    agent: Mutex<Option<Arc<Link>>>,
    agent_ready: Notify,
    /// The editor's input ended (its stdin closed).
    pub(crate) editor_eof: CancellationToken,
    /// The agent's output ended (its stdout closed).
    pub(crate) agent_eof: CancellationToken,
    editor_input_ended: AtomicBool,
    /// Editor requests forwarded to the agent, and whether the agent is gone.
    to_agent: Mutex<ToAgent>,
    /// Agent requests forwarded to the editor, by the proxy's id for them:
    /// the agent's own id and the agent side's ticket.
    to_editor: Mutex<HashMap<i64, Relayed>>,
    /// The next id of a relayed request (both directions; numbers, so they
    /// never meet the string ids of the proxy's own questions).
    next_id: AtomicI64,
    sessions: Sessions,
    /// Agent requests being answered here, by id: their session.
    answering: Mutex<HashMap<String, Arc<Session>>>,
}

/// The editor's side as the agent side sees it.
enum Editor {
    /// Not connected yet: the agent's notifications wait here, in order,
    /// and go out first once it is (the agent's connection starts reading
    /// a moment before the editor's link exists; nothing the agent says
    /// then may be lost).
    NotYet(Vec<Vec<u8>>),
    /// Connected.
    Up(Arc<Link>),
    /// Released at the end.
    Gone,
}

#[derive(Default)]
struct ToAgent {
    /// By the proxy's id for the request.
    pending: HashMap<i64, Pending>,
    /// Why the agent can answer nothing more, once it cannot.
    gone: Option<String>,
}

/// An editor request waiting for the agent's answer.
struct Pending {
    /// The editor's id for it.
    id: RequestId,
    ticket: Ticket,
    then: Then,
}

/// An agent request waiting for the editor's answer.
struct Relayed {
    /// The agent's id for it.
    id: RequestId,
    ticket: Ticket,
}

/// What to do when the agent answers.
enum Then {
    /// Forward the answer.
    Forward,
    /// On success, bind the session (named by the request, or the result's
    /// `sessionId`) to `runtime`; then forward the answer.
    Bind {
        runtime: Arc<Runtime>,
        session_id: Option<String>,
    },
}

impl Relay {
    pub(crate) fn new(service: Arc<Service>, session_instructions: Option<String>) -> Relay {
        Relay {
            service,
            session_instructions,
            editor: Mutex::new(Editor::NotYet(Vec::new())),
            agent: Mutex::new(None),
            agent_ready: Notify::new(),
            editor_eof: CancellationToken::new(),
            agent_eof: CancellationToken::new(),
            editor_input_ended: AtomicBool::new(false),
            to_agent: Mutex::new(ToAgent::default()),
            to_editor: Mutex::new(HashMap::new()),
            next_id: AtomicI64::new(1),
            sessions: Sessions::default(),
            answering: Mutex::new(HashMap::new()),
        }
    }

    /// Waits until the agent's connection has its link.
    pub(crate) async fn agent_started(&self) {
        loop {
            let notified = self.agent_ready.notified();
            if lock(&self.agent).is_some() {
                return;
            }
            notified.await;
        }
    }

    pub(crate) fn editor(&self) -> Option<Arc<Link>> {
        match &*lock(&self.editor) {
            Editor::Up(link) => Some(link.clone()),
            Editor::NotYet(_) | Editor::Gone => None,
        }
    }

    /// The editor's link exists: what the agent sent before goes out
    /// first, under the same lock the agent side forwards under, so nothing
    /// can overtake it.
    fn editor_started(&self, link: &Arc<Link>) {
        let mut editor = lock(&self.editor);
        if let Editor::NotYet(early) = std::mem::replace(&mut *editor, Editor::Up(link.clone())) {
            for line in early {
                link.send(line);
            }
        }
    }

    /// Forwards a line of the agent's to the editor (`held`: it may wait
    /// for the rest of its batch, see `Link::send_held`); kept in order
    /// until the editor is connected; dropped once it is gone.
    fn forward_to_editor(&self, line: Vec<u8>, held: bool) {
        match &mut *lock(&self.editor) {
            Editor::NotYet(early) => early.push(line),
            Editor::Up(link) if held => link.send_held(line),
            Editor::Up(link) => link.send(line),
            Editor::Gone => {}
        }
    }

    fn agent(&self) -> Option<Arc<Link>> {
        lock(&self.agent).clone()
    }

    pub(crate) fn editor_input_ended(&self) -> bool {
        self.editor_input_ended.load(Ordering::SeqCst)
    }

    /// The editor closed its input: the agent's requests it was asked can
    /// get no answer, and the agent's stdin is closed (after what was already
    /// forwarded to it).
    pub(crate) fn editor_closed(&self) {
        let waiting: Vec<Relayed> = lock(&self.to_editor).drain().map(|(_, r)| r).collect();
        if let Some(agent) = self.agent() {
            for r in waiting {
                agent.answer(message::error_line(&r.id, &editor_gone()), r.ticket);
            }
            agent.close();
        }
    }

    /// The agent has exited: every editor request it did not answer is
    /// answered with an error saying so, and later ones at once.
    pub(crate) fn agent_exited(&self, how: &str) {
        let why = format!(
            "the agent exited ({how}) before answering; start a new session (the editor restarts the agent)"
        );
        let mut to_agent = lock(&self.to_agent);
        to_agent.gone = Some(why.clone());
        let waiting: Vec<Pending> = to_agent.pending.drain().map(|(_, p)| p).collect();
        drop(to_agent);
        if let Some(editor) = self.editor() {
            for p in waiting {
                editor.answer(message::error_line(&p.id, &agent_gone(&why)), p.ticket);
            }
        }
    }

    /// Cancels every session's operations and questions.
    pub(crate) fn cancel_sessions(&self) {
        self.sessions.cancel_all();
    }

    /// Drops the links, so both connections can end once their loops have.
    pub(crate) fn release(&self) {
        *lock(&self.editor) = Editor::Gone;
        lock(&self.agent).take();
    }

    /// A fresh id for a relayed request.
    fn relay_id(&self) -> i64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Forwards an editor request to the agent under an id of the proxy's
    /// own, remembering the editor's id and ticket.
    fn to_agent(
        &self,
        editor: &Arc<Link>,
        id: RequestId,
        (method, params): (&str, &Value),
        ticket: Ticket,
        then: Then,
    ) {
        let mut to_agent = lock(&self.to_agent);
        let agent = self.agent();
        match (&to_agent.gone, agent) {
            (None, Some(agent)) => {
                let n = self.relay_id();
                to_agent.pending.insert(n, Pending { id, ticket, then });
                agent.send(relayed_request(n, method, params));
            }
            (gone, _) => {
                let why = gone
                    .clone()
                    .unwrap_or_else(|| "the agent is not running; start a new session".into());
                drop(to_agent);
                editor.answer(message::error_line(&id, &agent_gone(&why)), ticket);
            }
        }
    }

    /// Forwards an agent request to the editor under an id of the proxy's
    /// own, remembering the agent's id and ticket.
    fn to_editor(&self, agent: &Arc<Link>, req: Request, ticket: Ticket) {
        let mut to_editor = lock(&self.to_editor);
        let mut editor = lock(&self.editor);
        let n = self.relay_id();
        let open = match &mut *editor {
            // Sent in order once the editor is connected.
            Editor::NotYet(early) => {
                early.push(relayed_request(n, &req.method, &req.params));
                true
            }
            Editor::Up(link) if !self.editor_input_ended() => {
                link.send(relayed_request(n, &req.method, &req.params));
                true
            }
            Editor::Up(_) | Editor::Gone => false,
        };
        if open {
            to_editor.insert(n, Relayed { id: req.id, ticket });
        } else {
            drop(editor);
            drop(to_editor);
            agent.answer(message::error_line(&req.id, &editor_gone()), ticket);
        }
    }

    /// A `$/cancel_request` naming a relayed request, rewritten to name the
    /// proxy's id for it; `None` when it names no request relayed that way.
    fn relayed_cancel(&self, n: &Notification, towards_agent: bool) -> Option<Vec<u8>> {
        let id = n
            .params
            .get("requestId")
            .and_then(|v| serde_json::from_value::<RequestId>(v.clone()).ok())?;
        let ours = if towards_agent {
            lock(&self.to_agent)
                .pending
                .iter()
                .find_map(|(k, p)| (p.id == id).then_some(*k))
        } else {
            lock(&self.to_editor)
                .iter()
                .find_map(|(k, r)| (r.id == id).then_some(*k))
        }?;
        let mut params = n.params.clone();
        params["requestId"] = json!(ours);
        Some(message::notification_line(&n.method, &params))
    }

    /// Answers an agent request through writegate's method table, in the
    /// workspace of its session, on a blocking thread.
    fn answer_here(self: &Arc<Self>, agent: &Arc<Link>, req: Request, mut ticket: Ticket) {
        let sid = req.params.get("sessionId").and_then(Value::as_str);
        let Some(session) = sid.and_then(|s| self.sessions.get(s)) else {
            let line = message::error_line(&req.id, &unknown_session(sid));
            agent.answer(line, ticket);
            return;
        };
        let (flag, _) = session.state.begin(&req.id, false);
        lock(&self.answering).insert(key(&req.id), session.clone());
        let relay = self.clone();
        let out = agent.clone();
        let handle = tokio::runtime::Handle::current();
        agent.tasks().spawn_blocking(move || {
            let Request { id, method, params } = req;
            let approver = EditorApprover {
                timeout: relay.service.config().approval_timeout(),
                relay: relay.clone(),
                session: session.clone(),
                cancel: flag.clone(),
                handle,
            };
            let call = Call {
                conn: &session.state,
                cancel: flag,
                first: false,
                approver: Some(Arc::new(approver)),
            };
            let line = methods::answer_guarded(&id, &method, || {
                methods::answer(&call, &id, &method, methods::Params::Value(params))
            });
            ticket.built();
            session.state.end(&id);
            lock(&relay.answering).remove(&key(&id));
            out.answer(line, ticket);
        });
    }

    /// The runtime for the `cwd` of a session-opening request: `Ok(None)`
    /// when it names none (the agent judges such a request itself).
    fn session_workspace(&self, params: &Value) -> Result<Option<Arc<Runtime>>, ErrorObject> {
        let Some(cwd) = params.get("cwd").and_then(Value::as_str) else {
            return Ok(None);
        };
        self.service
            .register_session_workspace(std::path::Path::new(cwd))
            .map(Some)
            .map_err(|e| {
                tracing::warn!(cwd, error = %e, "session refused");
                ErrorObject::new(INVALID_PARAMS, e.to_string(), Some(json!({"cwd": cwd})))
            })
    }
}

/// The editor side: the proxy's stdin/stdout.
pub(crate) struct EditorSide {
    relay: Arc<Relay>,
}

impl EditorSide {
    pub(crate) fn new(relay: Arc<Relay>) -> EditorSide {
        EditorSide { relay }
    }
}

impl Handler for EditorSide {
    fn started(&self, link: &Arc<Link>) {
        self.relay.editor_started(link);
    }

    fn input_ended(&self, _link: &Arc<Link>) {
        self.relay.editor_input_ended.store(true, Ordering::SeqCst);
        self.relay.editor_eof.cancel();
    }

    fn request(&self, link: &Arc<Link>, req: Request, _raw: &[u8], mut ticket: Ticket) {
        let method = req.method.as_str();
        let mut initialize_params = None;
        let mut then = Then::Forward;
        let mut opening = false;
        if method == AGENT_METHOD_NAMES.initialize {
            let mut params = req.params.clone();
            offer_fs(&mut params);
            initialize_params = Some(params);
        } else if method == AGENT_METHOD_NAMES.session_new
            || method == AGENT_METHOD_NAMES.session_load
            || method == AGENT_METHOD_NAMES.session_resume
        {
            opening = true;
            match self.relay.session_workspace(&req.params) {
                Ok(Some(runtime)) => {
                    then = Then::Bind {
                        runtime,
                        session_id: req
                            .params
                            .get("sessionId")
                            .and_then(Value::as_str)
                            .map(str::to_string),
                    };
                }
                Ok(None) => {}
                Err(e) => {
                    link.answer(message::error_line(&req.id, &e), ticket);
                    return;
                }
            }
        }
        ticket.built();
        let Request {
            id,
            method,
            mut params,
        } = req;
        if let (true, Some(text)) = (opening, &self.relay.session_instructions) {
            add_instructions(&mut params, text);
        }
        let params = initialize_params.unwrap_or(params);
        self.relay
            .to_agent(link, id, (&method, &params), ticket, then);
    }

    fn notification(&self, _link: &Arc<Link>, n: Notification, raw: &[u8]) {
        if n.method == AGENT_METHOD_NAMES.session_cancel
            && let Some(sid) = n.params.get("sessionId").and_then(Value::as_str)
        {
            self.relay.sessions.cancel(sid);
        }
        let line = if n.method == CANCEL_REQUEST {
            let Some(line) = self.relay.relayed_cancel(&n, true) else {
                tracing::debug!("the editor cancelled a request it has not sent the agent");
                return;
            };
            line
        } else {
            with_newline(raw)
        };
        if let Some(agent) = self.relay.agent() {
            agent.send(line);
        }
    }

    fn response(&self, _link: &Arc<Link>, r: Response, _raw: &[u8]) {
        // An answer to an agent request forwarded to the editor, under the
        // proxy's id for it: it goes back under the agent's id.
        let relayed = match r.id {
            RequestId::Number(n) => lock(&self.relay.to_editor).remove(&n),
            _ => None,
        };
        let Some(Relayed { id, ticket }) = relayed else {
            tracing::warn!(id = %key(&r.id), "the editor answered a request nobody asked it: dropped");
            return;
        };
        if let Some(agent) = self.relay.agent() {
            agent.answer(message::response_line(&id, &r.result), ticket);
        }
    }
}

/// The agent side: the agent's stdout/stdin.
pub(crate) struct AgentSide {
    relay: Arc<Relay>,
}

impl AgentSide {
    pub(crate) fn new(relay: Arc<Relay>) -> AgentSide {
        AgentSide { relay }
    }
}

impl Handler for AgentSide {
    fn started(&self, link: &Arc<Link>) {
        *lock(&self.relay.agent) = Some(link.clone());
        self.relay.agent_ready.notify_waiters();
    }

    fn input_ended(&self, _link: &Arc<Link>) {
        self.relay.agent_eof.cancel();
    }

    fn request(&self, link: &Arc<Link>, req: Request, _raw: &[u8], mut ticket: Ticket) {
        if answered_here(&req.method) {
            self.relay.answer_here(link, req, ticket);
            return;
        }
        ticket.built();
        self.relay.to_editor(link, req, ticket);
    }

    fn notification(&self, _link: &Arc<Link>, n: Notification, raw: &[u8]) {
        if n.method != CANCEL_REQUEST {
            self.relay.forward_to_editor(with_newline(raw), false);
            return;
        }
        if let Some(id) = n
            .params
            .get("requestId")
            .and_then(|v| serde_json::from_value::<RequestId>(v.clone()).ok())
            && let Some(session) = lock(&self.relay.answering).get(&key(&id)).cloned()
        {
            session.state.cancel(&id);
            return;
        }
        if let Some(line) = self.relay.relayed_cancel(&n, false) {
            self.relay.forward_to_editor(line, false);
        } else {
            tracing::debug!("the agent cancelled a request it has not sent the editor");
        }
    }

    fn raw_notification(&self, link: &Arc<Link>, n: RawNotification) {
        // Everything but a cancel is forwarded as read, nothing built: a
        // prompt's `session/update` stream is most of what an agent sends.
        if n.method == CANCEL_REQUEST {
            let line = n.params.line_bytes();
            if let Some(n) = n.into_notification() {
                self.notification(link, n, &line);
            }
        } else {
            // Held back until this batch of the agent's lines is handed
            // over: one write to the editor for many notifications.
            self.relay
                .forward_to_editor(with_newline(n.params.line()), true);
        }
    }

    fn batch_end(&self, _link: &Arc<Link>) {
        if let Some(editor) = self.relay.editor() {
            editor.flush();
        }
    }

    fn response(&self, _link: &Arc<Link>, r: Response, _raw: &[u8]) {
        // An answer to an editor request forwarded to the agent, under the
        // proxy's id for it: it goes back under the editor's id.
        let pending = match r.id {
            RequestId::Number(n) => lock(&self.relay.to_agent).pending.remove(&n),
            _ => None,
        };
        let Some(Pending { id, ticket, then }) = pending else {
            tracing::warn!(id = %key(&r.id), "the agent answered a request nobody asked it: dropped");
            return;
        };
        let Some(editor) = self.relay.editor() else {
            return;
        };
        if let (
            Then::Bind {
                runtime,
                session_id,
            },
            Ok(result),
        ) = (then, &r.result)
        {
            let sid = session_id.or_else(|| {
                result
                    .get("sessionId")
                    .and_then(Value::as_str)
                    .map(str::to_string)
            });
            if let Some(sid) = sid {
                self.relay.sessions.bind(&sid, runtime, &self.relay.service);
            }
        }
        editor.answer(message::response_line(&id, &r.result), ticket);
    }

    fn shutdown(&self) {
        self.relay.cancel_sessions();
    }
}

/// Whether writegate answers an agent request of `method` itself: every
/// method of its table but `initialize` (which an agent never sends to its
/// client; forwarded like anything else).
fn answered_here(method: &str) -> bool {
    method != AGENT_METHOD_NAMES.initialize && methods::serves(method)
}

/// Sets `clientCapabilities.fs.readTextFile` and `writeTextFile` to `true`
/// in `initialize` params, keeping everything else.
fn offer_fs(params: &mut Value) {
    let Value::Object(p) = params else {
        return;
    };
    let caps = p.entry("clientCapabilities").or_insert_with(|| json!({}));
    if !caps.is_object() {
        *caps = json!({});
    }
    let fs = caps
        .as_object_mut()
        .map(|c| c.entry("fs").or_insert_with(|| json!({})));
    if let Some(fs) = fs {
        if !fs.is_object() {
            *fs = json!({});
        }
        fs["readTextFile"] = Value::Bool(true);
        fs["writeTextFile"] = Value::Bool(true);
    }
}

/// Adds `text` to a session-opening request's `_meta` for the agent's
/// model, keeping what the editor put there: appended to
/// `_meta.systemPrompt.append` (the convention of Claude Code's ACP
/// adapter; a `systemPrompt` string, which replaces the agent's prompt,
/// gets it appended), and under `_meta["writegate/instructions"]` for any
/// agent that looks for writegate's own key.
fn add_instructions(params: &mut Value, text: &str) {
    let Value::Object(p) = params else {
        return;
    };
    let meta = p.entry("_meta").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    let Some(meta) = meta.as_object_mut() else {
        return;
    };
    meta.insert("writegate/instructions".into(), Value::String(text.into()));
    let joined = |old: &str| {
        if old.is_empty() {
            text.to_string()
        } else {
            format!("{old}\n\n{text}")
        }
    };
    match meta.get_mut("systemPrompt") {
        Some(Value::String(s)) => *s = joined(s),
        Some(Value::Object(o)) => {
            let old = o.get("append").and_then(Value::as_str).unwrap_or("");
            let new = joined(old);
            o.insert("append".into(), Value::String(new));
        }
        _ => {
            meta.insert("systemPrompt".into(), json!({ "append": text }));
        }
    }
}

/// The map key of a request id: its JSON text (`1` and `"1"` differ).
fn key(id: &RequestId) -> String {
    serde_json::to_string(id).unwrap_or_default()
}

/// A relayed request's line under the proxy's id `n` (`params` left out
/// when the sender sent none).
fn relayed_request(n: i64, method: &str, params: &Value) -> Vec<u8> {
    let id = RequestId::Number(n);
    if params.is_null() {
        let mut line = serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": id, "method": method}))
            .unwrap_or_default();
        line.push(b'\n');
        line
    } else {
        message::request_line(&id, method, params)
    }
}

fn with_newline(raw: &[u8]) -> Vec<u8> {
    let mut line = Vec::with_capacity(raw.len() + 1);
    line.extend_from_slice(raw);
    line.push(b'\n');
    line
}

fn unknown_session(sid: Option<&str>) -> ErrorObject {
    let message = match sid {
        Some(s) => format!(
            "unknown session {s}: writegate answers fs requests only for sessions the editor opened through this proxy (session/new, session/load, session/resume); use the sessionId of one of them"
        ),
        None => "sessionId is missing: writegate answers fs requests in the workspace of the request's session; send the sessionId the editor's session/new returned".to_string(),
    };
    ErrorObject::new(INVALID_PARAMS, message, Some(json!({"sessionId": sid})))
}

fn agent_gone(why: &str) -> ErrorObject {
    ErrorObject::new(INTERNAL_ERROR, why, None)
}

fn editor_gone() -> ErrorObject {
    ErrorObject::new(
        INTERNAL_ERROR,
        "the editor closed its connection, so this request cannot be answered; finish the turn",
        None,
    )
}

impl EditorPeer for Relay {
    fn editor_link(&self) -> Option<Arc<Link>> {
        self.editor()
    }

    fn input_ended(&self) -> bool {
        self.editor_input_ended()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initialize_offers_fs_and_keeps_the_rest() {
        let mut p = json!({
            "protocolVersion": 1,
            "clientCapabilities": {"fs": {"readTextFile": false}, "terminal": true, "_meta": {"x": 1}},
            "clientInfo": {"name": "zed"}
        });
        offer_fs(&mut p);
        assert_eq!(
            p,
            json!({
                "protocolVersion": 1,
                "clientCapabilities": {
                    "fs": {"readTextFile": true, "writeTextFile": true},
                    "terminal": true,
                    "_meta": {"x": 1}
                },
                "clientInfo": {"name": "zed"}
            })
        );
        for mut p in [
            json!({"protocolVersion": 1}),
            json!({"clientCapabilities": null}),
        ] {
            offer_fs(&mut p);
            assert_eq!(p["clientCapabilities"]["fs"]["readTextFile"], true, "{p}");
            assert_eq!(p["clientCapabilities"]["fs"]["writeTextFile"], true, "{p}");
        }
    }

    #[test]
    fn writegate_answers_its_table_but_not_initialize() {
        assert!(answered_here("fs/read_text_file"));
        assert!(answered_here("fs/write_text_file"));
        assert!(answered_here("_writegate/edit_text_file"));
        assert!(!answered_here("initialize"));
        assert!(!answered_here("session/request_permission"));
        assert!(!answered_here("terminal/create"));
    }

    #[test]
    fn ids_of_both_types_are_distinct_keys() {
        assert_ne!(key(&RequestId::Number(1)), key(&RequestId::Str("1".into())));
    }
}
