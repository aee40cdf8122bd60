//! Running commands and looking at processes.

use std::ffi::OsString;
use std::fmt;
use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};

/// A command that ran to its end: its status and what it printed.
pub struct Finished {
    /// How it ended.
    pub status: ExitStatus,
    /// Its exit code (`None` after a signal).
    pub code: Option<i32>,
    /// Its stdout, lossily decoded.
    pub stdout: String,
    /// Its stderr, lossily decoded.
    pub stderr: String,
}

impl fmt::Display for Finished {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "exit {:?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }
}

/// Runs `cmd` with `input` on stdin (fed from a thread, so a command that
/// does not read it cannot block) and waits for it.
pub fn run_with_stdin(mut cmd: Command, input: &[u8]) -> Finished {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn");
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let feeder = std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    let out = child.wait_with_output().unwrap();
    feeder.join().unwrap();
    Finished {
        status: out.status,
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The program `name` on `PATH` or in the usual system directories.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/bin:/bin"));
    std::env::split_paths(&path)
        .chain([
            "/usr/bin".into(),
            "/bin".into(),
            "/usr/sbin".into(),
            "/sbin".into(),
        ])
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// Whether the tests run as root (mounts, acting as `nobody`).
pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// A `/proc/<pid>/status` field in KiB (`VmHWM`, `VmRSS`, `RssAnon`), or
/// `None` if the process or the field is gone.
pub fn proc_status_kib(pid: u32, key: &str) -> Option<u64> {
    let s = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}
