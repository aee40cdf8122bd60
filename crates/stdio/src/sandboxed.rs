//! Which socket peers run inside a `writegate run` sandbox.
//!
//! `writegate run` registers itself in [`registry_dir`] (a file named after
//! its pid, holding the process start time) while its agent runs, and makes
//! itself the agent's child subreaper, so that every process the agent
//! starts (after `setsid`, after a double fork) keeps the run as an
//! ancestor. A socket peer whose ancestors include a registered run is
//! inside a sandbox: it may use the tools, never the person's powers
//! (approvals, forced undo; docs/decisions/0030-the-persons-powers-stay-outside-the-sandbox.md).
//! The registry is in writegate's runtime directory, which the sandbox
//! cannot write, so an agent can neither remove its run's entry nor add one.

use std::path::{Path, PathBuf};

/// The directory of registered runs: `sandboxes/` in writegate's runtime
/// directory, beside the default sockets (`$XDG_RUNTIME_DIR/writegate/sandboxes`,
/// or `/tmp/writegate-<uid>/sandboxes` when that variable is unset).
pub fn registry_dir(env: &dyn Fn(&str) -> Option<String>) -> PathBuf {
    match env("XDG_RUNTIME_DIR").filter(|d| d.starts_with('/')) {
        Some(d) => PathBuf::from(d).join("writegate/sandboxes"),
        None => PathBuf::from(format!(
            "/tmp/writegate-{}/sandboxes",
            rustix::process::geteuid().as_raw()
        )),
    }
}

/// The start time of `pid` (field 22 of `/proc/PID/stat`, clock ticks since
/// boot) and its parent's pid. `None` when the process is gone.
pub fn stat_of(pid: u32) -> Option<(u64, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold anything: fields
    // are counted after the last `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); ppid is field 4, starttime field 22.
    let ppid = fields.get(1)?.parse().ok()?;
    let start = fields.get(19)?.parse().ok()?;
    Some((start, ppid))
}

/// Whether `pid` or one of its ancestors is a run registered in `dir`
/// (its entry names the same start time, so a reused pid does not count).
pub fn in_sandbox(dir: &Path, pid: u32) -> bool {
    let mut pid = pid;
    // A chain longer than this is a loop in a vanishing tree.
    for _ in 0..4096 {
        if pid <= 1 {
            return false;
        }
        let Some((start, ppid)) = stat_of(pid) else {
            return false;
        };
        if let Ok(text) = std::fs::read_to_string(dir.join(pid.to_string()))
            && text.trim() == start.to_string()
        {
            return true;
        }
        pid = ppid;
    }
    false
}

/// [`in_sandbox`] against the registry of this process's environment. A
/// peer whose pid is unknown counts as inside (the safe side).
pub fn peer_in_sandbox(pid: Option<i32>) -> bool {
    let env = |k: &str| std::env::var(k).ok();
    match pid.and_then(|p| u32::try_from(p).ok()) {
        Some(p) => in_sandbox(&registry_dir(&env), p),
        None => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_registered_ancestor_puts_a_process_inside() {
        let dir = tempfile::tempdir().unwrap();
        let me = std::process::id();
        assert!(!in_sandbox(dir.path(), me));
        let (_, parent) = stat_of(me).unwrap();
        let (start, _) = stat_of(parent).unwrap();
        // A stale entry (another start time) does not count.
        std::fs::write(dir.path().join(parent.to_string()), "1\n").unwrap();
        assert!(!in_sandbox(dir.path(), me));
        std::fs::write(dir.path().join(parent.to_string()), format!("{start}\n")).unwrap();
        assert!(in_sandbox(dir.path(), me));
    }
}
