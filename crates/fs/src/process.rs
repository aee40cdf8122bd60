//! What the daemon reads once about its own process: its pid, effective
//! uid and umask (it never forks, changes its credentials or its umask).

use std::sync::OnceLock;

use rustix::fs::Mode;

/// This process's id, read once (`getpid` is a system call each time and
/// the daemon never forks, so it cannot change under us).
pub(crate) fn own_pid() -> u32 {
    static PID: OnceLock<u32> = OnceLock::new();
    *PID.get_or_init(std::process::id)
}

/// Whether the effective UID is root, read once (the daemon never changes
/// its credentials).
pub(crate) fn running_as_root() -> bool {
    own_euid() == 0
}

/// The effective uid, read once: the daemon never changes it.
pub(crate) fn own_euid() -> u32 {
    static EUID: OnceLock<u32> = OnceLock::new();
    *EUID.get_or_init(|| rustix::process::geteuid().as_raw())
}

/// The process umask, read once: `/proc/self/status` (`Umask:` line, no
/// race), else by setting `0o077` and restoring the old value. That fallback
/// has a tiny window in which a file created by another thread gets the
/// stricter mask `0o077`, which only errs on the private side. The daemon
/// never changes its umask, so caching is exact.
pub(crate) fn process_umask() -> u32 {
    static UMASK: OnceLock<u32> = OnceLock::new();
    *UMASK.get_or_init(|| {
        read_proc_umask().unwrap_or_else(|| {
            let old = rustix::process::umask(Mode::from_raw_mode(0o077));
            rustix::process::umask(old);
            old.as_raw_mode()
        })
    })
}

/// The `Umask:` line of `/proc/self/status` (Linux 4.7+), as octal.
fn read_proc_umask() -> Option<u32> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("Umask:"))?;
    u32::from_str_radix(line["Umask:".len()..].trim(), 8)
        .ok()
        .map(|m| m & 0o777)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_umask_matches_syscall() {
        if let Some(m) = read_proc_umask() {
            assert_eq!(m, process_umask());
        }
    }
}
