//! The agent process: spawned with piped stdin/stdout and inherited stderr,
//! tied to the proxy's life, signalled, and its exit status reported the
//! way a shell would.

use rustix::process::{Pid, Signal};
use std::ffi::{OsStr, OsString};
use std::io;
use std::process::{ExitStatus, Stdio};
use tokio::process::{Child, Command};
use writegate_stdio::{NonBlockingFd, ReadEnd, WriteEnd};

/// A started agent and its two pipes: its stdout registered for reading
/// only, its stdin written directly and registered for writing only while
/// a write blocks (so the agent reading its input never wakes the proxy).
pub(crate) struct Spawned {
    pub(crate) child: Child,
    pub(crate) stdin: WriteEnd,
    pub(crate) stdout: ReadEnd,
    /// A handle on the stdin pipe's (non-blocking) write end for direct
    /// line writes; `None` if it could not be made.
    pub(crate) direct: Option<NonBlockingFd>,
}

/// Starts `program args`: stdin and stdout are pipes to the proxy, stderr
/// is the proxy's own. The child leads a process group of its own, so the
/// proxy can end whatever it started ([`end_group`]), and gets SIGTERM from
/// the kernel if the thread that spawned it (the proxy's main thread) dies
/// first, so a proxy killed with SIGKILL leaves no agent behind.
pub(crate) fn spawn(program: &OsStr, args: &[OsString]) -> io::Result<Spawned> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0);
    // SAFETY: the closure runs in the forked child before `exec`; it only
    // makes the prctl(2) system call, which is async-signal-safe, and
    // allocates nothing.
    unsafe {
        cmd.pre_exec(|| {
            rustix::process::set_parent_process_death_signal(Some(Signal::TERM))
                .map_err(io::Error::from)
        });
    }
    let mut child = cmd.spawn()?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(io::Error::other("the agent's pipes were not set up"));
    };
    // Our ends of the two pipes are descriptions of ours alone (the agent
    // has the other ends): made non-blocking again (tokio hands them over
    // blocking).
    let stdin = NonBlockingFd::own(stdin.into_owned_fd()?)?;
    let stdout = ReadEnd::new(NonBlockingFd::own(stdout.into_owned_fd()?)?)?;
    let direct = Some(stdin.share());
    Ok(Spawned {
        child,
        stdin: WriteEnd::new(stdin),
        stdout,
        direct,
    })
}

/// Sends the agent SIGTERM (nothing if it has already been reaped).
pub(crate) fn terminate(child: &Child) {
    if let Some(pid) = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(Pid::from_raw)
    {
        let _ = rustix::process::kill_process(pid, Signal::TERM);
    }
}

/// Sends `signal` to every process left in the agent's process group (its
/// children; the agent itself has been reaped). `pid` is the agent's pid,
/// which is the group's id. Returns whether any process was left.
pub(crate) fn signal_group(pid: Option<u32>, signal: Signal) -> bool {
    let Some(pid) = pid
        .and_then(|id| i32::try_from(id).ok())
        .and_then(Pid::from_raw)
    else {
        return false;
    };
    rustix::process::kill_process_group(pid, signal).is_ok()
}

/// Ends what is left of the agent's process group: SIGTERM, then SIGKILL
/// to whatever is still there after `grace`.
pub(crate) async fn end_group(pid: Option<u32>, grace: std::time::Duration) {
    if !signal_group(pid, Signal::TERM) {
        return;
    }
    let deadline = tokio::time::Instant::now() + grace;
    while tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        if let Some(pid) = pid
            .and_then(|id| i32::try_from(id).ok())
            .and_then(Pid::from_raw)
            && rustix::process::test_kill_process_group(pid).is_err()
        {
            return;
        }
    }
    tracing::warn!("the agent's children did not exit within the grace period: killing them");
    signal_group(pid, Signal::KILL);
}

/// The proxy's own exit status for the agent's: its exit code, or 128 +
/// the number of the signal that ended it (as a shell reports it).
pub(crate) fn exit_code(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => u8::try_from(code & 0xff).unwrap_or(1),
        (None, Some(sig)) => u8::try_from((128 + sig) & 0xff).unwrap_or(1),
        (None, None) => 1,
    }
}

/// How the agent ended, in words ("exit status 3", "signal 9").
pub(crate) fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("signal {sig}"),
        (None, None) => "an unknown status".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;

    #[test]
    fn exit_status_as_a_shell_reports_it() {
        // Raw wait statuses: code << 8 for an exit, the signal number for a kill.
        assert_eq!(exit_code(ExitStatus::from_raw(0)), 0);
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)), 3);
        assert_eq!(exit_code(ExitStatus::from_raw(9)), 137);
        assert_eq!(exit_code(ExitStatus::from_raw(15)), 143);
        assert_eq!(describe(ExitStatus::from_raw(3 << 8)), "exit status 3");
        assert_eq!(describe(ExitStatus::from_raw(9)), "signal 9");
    }
}
