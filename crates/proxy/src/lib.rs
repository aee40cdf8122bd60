//! `writegate proxy -- AGENT`: writegate between an ACP editor and an ACP
//! agent. The editor launches the proxy as if it were the agent; the proxy
//! spawns the agent and forwards notifications both ways as the raw line,
//! and requests under ids of its own (their answers go back under the
//! sender's id: one id space per peer), except: the editor's `initialize`
//! reaches the agent offering
//! `fs.readTextFile` and `fs.writeTextFile`; the agent's `fs/*` and
//! `_writegate/*` requests are answered by writegate's own method table
//! (through the same `writegate_core::Service` as `serve`) in the workspace
//! of the request's session, the `cwd` its `session/new`, `session/load`
//! or `session/resume` named; and a write the approval gate holds is put to
//! the person as an ACP `session/request_permission` to the editor.
//!
//! It owns only its wire handling (which messages to look into, the
//! permission question, the agent process): it must never decide a rule of
//! its own (paths, encodings, approvals and audit are core's; which
//! capabilities the agent side has is `writegate_acp::transport`'s), never
//! let an `fs/*` request reach the editor, never change a forwarded line
//! other than `initialize`, the `_meta` of a session-opening request when
//! there are instructions to add (`--sandbox`) and the ids of relayed
//! requests and answers,
//! never let an answer from one side complete a question asked of the
//! other, and never write anything to stdout but protocol lines for the
//! editor.

mod agent;
mod approver;
mod relay;
mod sessions;

use crate::relay::{AgentSide, EditorSide, Relay};
use std::ffi::OsString;
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use writegate_acp::budget::Budget;
use writegate_acp::conn::{Shared, run_connection};
use writegate_core::Service;
use writegate_stdio::StdioEnds;
use writegate_stdio::run::Signals;

/// What `writegate proxy --sandbox` tells the agent's model in every
/// session: its file tools (the editor's `fs/*`, which writegate answers)
/// write, its shell's direct writes to the workspace fail.
pub const SANDBOX_INSTRUCTIONS: &str = "You run in a writegate sandbox: files in the workspace change only through your file-writing and editing tools (the editor's file writes, which writegate answers) and writegate's own tools. A direct write (a shell redirection, sed -i, mv, rm, a script that writes) fails with \"Permission denied\"; do not retry it, make the change with your file-editing tools instead.";

/// What to run as the agent.
#[derive(Debug, Clone)]
pub struct ProxyOptions {
    /// The agent's program (looked up in `PATH` when it has no `/`).
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Text for the agent's model added to every `session/new`,
    /// `session/load` and `session/resume` (in `_meta`: `systemPrompt.append`
    /// and `writegate/instructions`); `None`: those go through unchanged.
    pub session_instructions: Option<String>,
}

/// Runs the proxy on this process's stdin/stdout (the editor) until the
/// agent has exited, and returns the agent's exit status as this process
/// should report it: its code, or 128 + the signal that ended it.
///
/// The agent's stderr is this process's stderr. End of the editor's input
/// closes the agent's stdin (what the editor still gets from the agent is
/// forwarded until the agent exits); SIGTERM, SIGINT and SIGHUP are passed
/// on to the agent as SIGTERM. Either way the agent gets
/// `[proxy] agent_exit_grace_ms` to exit and is then killed. If this
/// process dies first, the kernel sends the agent SIGTERM (Linux
/// `PR_SET_PDEATHSIG`), so call this from the thread that lives as long as
/// the process (`Runtime::block_on` on the main thread).
///
/// Errors: the agent cannot be started, or signal handlers cannot be
/// installed.
pub async fn run(service: Arc<Service>, opts: ProxyOptions) -> io::Result<u8> {
    let grace = Duration::from_millis(service.config().proxy.agent_exit_grace_ms);
    let mut signals = Signals::watch()?;
    let agent = agent::spawn(&opts.program, &opts.args).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "cannot start the agent {}: {e}",
                opts.program.to_string_lossy()
            ),
        )
    })?;
    let agent::Spawned {
        mut child,
        stdin,
        stdout,
        direct,
    } = agent;
    let agent_pid = child.id();
    tracing::info!(pid = agent_pid, "agent started");
    let relay = Arc::new(Relay::new(
        service.clone(),
        opts.session_instructions.clone(),
    ));
    let agent_shared = shared(&service);
    let editor_shared = shared(&service);
    let agent_conn = tokio::spawn(run_connection(
        agent_shared.clone(),
        Arc::new(AgentSide::new(relay.clone())),
        stdout,
        stdin,
        direct,
    ));
    // The editor's messages are forwarded to the agent's link: start reading
    // them only once it exists.
    relay.agent_started().await;
    // Answers and forwarded lines go to the editor with direct writes when
    // the pipe has room (no hop through the writer task).
    let editor = StdioEnds::open();
    let restore = editor.restore;
    let editor_conn = tokio::spawn(run_connection(
        editor_shared.clone(),
        Arc::new(EditorSide::new(relay.clone())),
        editor.reader,
        editor.writer,
        editor.direct,
    ));

    let mut deadline: Option<Instant> = None;
    let mut editor_eof = false;
    let mut agent_eof = false;
    let status = loop {
        let kill_at = deadline.unwrap_or_else(Instant::now);
        tokio::select! {
            st = child.wait() => break st?,
            () = relay.editor_eof.cancelled(), if !editor_eof => {
                editor_eof = true;
                tracing::debug!("editor closed its input: closing the agent's stdin");
                relay.editor_closed();
                deadline.get_or_insert(Instant::now() + grace);
            }
            () = relay.agent_eof.cancelled(), if !agent_eof => {
                agent_eof = true;
                tracing::debug!("the agent closed its stdout");
                deadline.get_or_insert(Instant::now() + grace);
            }
            s = signals.next() => pass_on(&child, &mut deadline, grace, s.name()),
            () = tokio::time::sleep_until(kill_at), if deadline.is_some() => {
                tracing::warn!(grace_ms = grace.as_millis(), "the agent did not exit within the grace period: killing it");
                let _ = child.start_kill();
                deadline = None;
            }
        }
    };
    let code = agent::exit_code(status);
    tracing::info!(%status, "agent exited");
    // Nobody will read answers to what the agent still asked.
    relay.cancel_sessions();
    // The agent's children (Claude's ACP adapter leaves its CLI running)
    // end with it: SIGTERM now, SIGKILL after the grace period.
    let group = tokio::spawn(agent::end_group(agent_pid, grace));
    // Whatever the agent wrote before it exited is already in the pipe and
    // still forwarded; the editor's pending requests are answered once that
    // is read, or after a moment when a descendant keeps the pipe open (it
    // is the process's exit that counts, not the end of its output).
    if !agent_eof
        && tokio::time::timeout(AGENT_OUTPUT_DRAIN, relay.agent_eof.cancelled())
            .await
            .is_err()
    {
        tracing::debug!("the agent's stdout is still open after it exited (a child holds it)");
    }
    relay.agent_exited(&agent::describe(status));
    if !agent_eof
        && tokio::time::timeout(grace, relay.agent_eof.cancelled())
            .await
            .is_err()
    {
        agent_shared.shutdown.cancel();
    }
    let _ = group.await;
    if !editor_eof {
        editor_shared.shutdown.cancel();
    }
    relay.release();
    let _ = agent_conn.await;
    let _ = editor_conn.await;
    restore.put_back();
    Ok(code)
}

/// How long the editor's pending requests wait, once the agent has exited,
/// for the end of its output before they are answered: what it wrote is
/// already in the pipe, so this only bounds the wait when its children
/// hold the pipe open.
const AGENT_OUTPUT_DRAIN: Duration = Duration::from_millis(50);

/// Passes a signal the proxy got on to the agent as SIGTERM and starts the
/// grace period.
fn pass_on(
    child: &tokio::process::Child,
    deadline: &mut Option<Instant>,
    grace: Duration,
    what: &str,
) {
    tracing::info!("{what}: passing SIGTERM on to the agent");
    agent::terminate(child);
    deadline.get_or_insert(Instant::now() + grace);
}

/// State one side's connection loop needs: the service, its own shutdown
/// token and byte budget, and no worker slots (the proxy runs writegate's
/// operations on blocking threads only). No limit on a stalled long line:
/// the budget is this side's alone, so a peer that stops in the middle of
/// a line holds up only itself.
fn shared(service: &Arc<Service>) -> Arc<Shared> {
    Arc::new(Shared {
        service: service.clone(),
        shutdown: CancellationToken::new(),
        budget: Budget::new(service.config().max_inflight_bytes),
        line_stall: None,
        line_min_rate: None,
        worker_slots: Arc::new(Semaphore::new(0)),
    })
}
