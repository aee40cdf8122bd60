//! `writegate run [--workspace DIR]... [--allow-write PATH]... -- AGENT`:
//! the agent and everything it starts, under a Landlock ruleset that makes
//! the workspaces read-only to them (`sandbox.rs`), while this process,
//! outside the sandbox, serves writegate's MCP tools on a private socket
//! (`writegate mcp` started inside relays there, `relay.rs`).
//!
//! The run registers itself as a sandbox (`writegate_acp::sandboxed`) and
//! is the agent's child subreaper: a writegate daemon refuses the person's
//! powers to every process below it, and no process of the agent outlives
//! the run.

// The doc comments of the arguments are the `--help` text.
#![allow(clippy::doc_markdown)]

use crate::sandbox::{self, Protected, Writable};
use crate::{absolutize, default_config_path, env_var};
use clap::Args;
use std::ffi::OsString;
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};

/// The variable that tells `writegate mcp` inside the sandbox where to relay.
pub(crate) const RUN_SOCKET_VAR: &str = "WRITEGATE_RUN_SOCKET";

#[derive(Args)]
pub(crate) struct RunArgs {
    /// A workspace the agent works in, read-only to it (repeatable) [default: the current directory].
    #[arg(long = "workspace", value_name = "DIR")]
    workspaces: Vec<PathBuf>,
    /// A path the agent may write directly (repeatable); it must exist.
    #[arg(long = "allow-write", value_name = "PATH")]
    allow_write: Vec<PathBuf>,
    /// Config file [default: $XDG_CONFIG_HOME/writegate/config.toml]; see its `[sandbox]` section.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Audit log of the writes the agent makes through writegate [default: $XDG_STATE_HOME/writegate/audit.jsonl].
    #[arg(long, value_name = "FILE")]
    audit_log: Option<PathBuf>,
    /// Without Landlock (or one too old to stop truncation), run the agent unsandboxed with a warning
    /// instead of refusing.
    #[arg(long)]
    best_effort: bool,
    /// The agent's command and its arguments, after `--`.
    #[arg(last = true, required = true, value_name = "AGENT")]
    command: Vec<OsString>,
}

/// The agent's pid, for the signal handler.
static AGENT: AtomicI32 = AtomicI32::new(0);

/// A signal that came before the agent's pid was known (between its start
/// and [`AGENT`] being set): passed on as soon as it is.
static EARLY: AtomicI32 = AtomicI32::new(0);

fn fail(msg: &str) -> ExitCode {
    eprintln!("writegate run: {msg}");
    ExitCode::from(2)
}

/// Runs the agent sandboxed; its exit status is the run's.
pub(crate) fn run(a: &RunArgs) -> ExitCode {
    crate::serve::init_logs_or(0, 0, "warn");
    let (config_path, required) = match &a.config {
        Some(p) => (Some(absolutize(p)), true),
        None => (default_config_path(), false),
    };
    let mut cfg = match crate::load_config_file(config_path.as_deref(), required) {
        Ok(c) => c,
        Err(e) => return fail(&e.to_string()),
    };
    if let Some(p) = &a.audit_log {
        cfg.audit.path = absolutize(p).display().to_string();
    }
    let home = env_var("HOME")
        .filter(|h| h.starts_with('/'))
        .map(PathBuf::from);
    // The workspaces, canonical.
    let given = if a.workspaces.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        a.workspaces.clone()
    };
    let mut workspaces = Vec::new();
    for w in &given {
        match std::fs::canonicalize(w) {
            Ok(c) if c.is_dir() => workspaces.push(c),
            Ok(c) => return fail(&format!("--workspace {}: not a directory", c.display())),
            Err(e) => return fail(&format!("--workspace {}: {e}", w.display())),
        }
    }
    let protected = protected_paths(&workspaces, home.as_deref(), config_path.as_deref(), &cfg);
    let explicit: Vec<(PathBuf, &'static str)> = a
        .allow_write
        .iter()
        .map(|p| (absolutize(p), "--allow-write"))
        .chain(cfg.sandbox.writable.iter().map(|p| {
            (
                sandbox::expand_home(p, home.as_deref()),
                "[sandbox] writable",
            )
        }))
        .collect();
    let (mut writable, skipped) =
        match sandbox::writable_set(&explicit, &workspaces, home.as_deref(), &protected) {
            Ok(w) => w,
            Err(e) => return fail(&e),
        };
    for s in skipped {
        eprintln!("writegate run: {s}");
    }
    // The private directory: the socket (read-only to the agent) and its TMPDIR.
    let private = match tempfile::Builder::new().prefix("writegate-run-").tempdir() {
        Ok(d) => d,
        Err(e) => return fail(&format!("cannot create the private temp directory: {e}")),
    };
    let tmp = private.path().join("tmp");
    if let Err(e) = writegate_fs::create_private_subdir(&tmp) {
        return fail(&format!("cannot create {}: {e}", tmp.display()));
    }
    writable.push(Writable {
        path: tmp.clone(),
        from: "TMPDIR",
    });
    let abi = sandbox::landlock_abi();
    let prepared = if abi >= 3 {
        match sandbox::prepare(&writable, abi) {
            Ok(p) => Some(p),
            Err(e) => return fail(&e),
        }
    } else if a.best_effort {
        eprintln!(
            "writegate run: WARNING: {}; --best-effort: the agent runs UNSANDBOXED and can write the workspace directly",
            no_landlock_reason(abi)
        );
        None
    } else {
        return fail(&format!(
            "{}; the agent is not started. Use a kernel with Landlock (5.19 or later, `lsm=landlock,...`), or pass --best-effort to run it unsandboxed",
            no_landlock_reason(abi)
        ));
    };
    if prepared.is_some() && abi < 6 {
        eprintln!(
            "writegate run: warning: Landlock ABI {abi} cannot scope signals and abstract sockets (ABI 6, Linux 6.12): the agent can signal processes outside the sandbox"
        );
    }
    let socket = private.path().join("mcp.sock");
    let listener = match UnixListener::bind(&socket) {
        Ok(l) => l,
        Err(e) => return fail(&format!("cannot listen on {}: {e}", socket.display())),
    };
    // Registered before the agent starts; removed when the run ends.
    let registration = match Registration::new() {
        Ok(r) => r,
        Err(e) => return fail(&e),
    };
    // SAFETY: prctl on integers.
    unsafe {
        libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    }
    let given_config = a.config.as_deref().map(absolutize);
    serve_mcp(
        listener,
        &workspaces,
        given_config.as_deref(),
        a.audit_log.as_deref(),
    );

    let mut command = a.command.iter();
    let program = command.next().cloned().unwrap_or_default();
    let mut cmd = Command::new(&program);
    cmd.args(command)
        .env("TMPDIR", &tmp)
        .env("TMP", &tmp)
        .env("TEMP", &tmp)
        .env(RUN_SOCKET_VAR, &socket);
    if let Some(p) = &prepared {
        let restrict = p.restrict_fn();
        // SAFETY: the closure makes two system calls and allocates nothing.
        unsafe {
            cmd.pre_exec(restrict);
        }
    }
    install_forwarding();
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "writegate run: cannot start `{}`: {e}",
                Path::new(&program).display()
            );
            return ExitCode::from(match e.kind() {
                std::io::ErrorKind::NotFound => 127,
                std::io::ErrorKind::PermissionDenied => 126,
                _ => 2,
            });
        }
    };
    let pid = i32::try_from(child.id()).unwrap_or(0);
    AGENT.store(pid, Ordering::SeqCst);
    let early = EARLY.swap(0, Ordering::SeqCst);
    if early != 0 {
        // SAFETY: kill on the agent's pid, which this process has not reaped.
        unsafe {
            libc::kill(pid, early);
        }
    }
    let status = wait_for(pid);
    AGENT.store(0, Ordering::SeqCst);
    end_descendants();
    drop(registration);
    drop(private);
    ExitCode::from(status)
}

fn no_landlock_reason(abi: i32) -> String {
    if abi == 0 {
        "this kernel has no Landlock (or it is not enabled)".to_string()
    } else {
        format!("this kernel's Landlock (ABI {abi}) cannot stop truncation (ABI 3, Linux 6.2)")
    }
}

/// What no writable path may contain or be inside.
fn protected_paths(
    workspaces: &[PathBuf],
    home: Option<&Path>,
    config_file: Option<&Path>,
    cfg: &writegate_core::Config,
) -> Vec<Protected> {
    let mut v: Vec<(PathBuf, String)> = workspaces
        .iter()
        .map(|w| (w.clone(), "the workspace".to_string()))
        .collect();
    if let Some(dir) = default_config_path().as_deref().and_then(Path::parent) {
        v.push((dir.to_path_buf(), "writegate's config directory".into()));
    }
    if let Some(f) = config_file {
        v.push((f.to_path_buf(), "writegate's config file".into()));
    }
    v.push((
        writegate_core::config::state_dir(&env_var),
        "writegate's state directory".into(),
    ));
    let audit = cfg.audit_path(&env_var);
    v.push((absolutize(&audit), "writegate's audit log".into()));
    v.push((
        cfg.history_path(&env_var),
        "writegate's history store".into(),
    ));
    if let Some(rt) = writegate_acp::default_socket_path(&env_var).parent() {
        v.push((rt.to_path_buf(), "writegate's runtime directory".into()));
    }
    if let Some(h) = home {
        v.push((h.to_path_buf(), "the home directory".into()));
    }
    v.into_iter()
        .map(|(p, what)| Protected {
            path: crate::canonical_target(&p),
            what,
        })
        .collect()
}

/// This run's entry in the sandbox registry (`writegate_acp::sandboxed`).
struct Registration {
    file: PathBuf,
}

impl Registration {
    fn new() -> Result<Registration, String> {
        let dir = writegate_acp::sandboxed::registry_dir(&env_var);
        writegate_fs::prepare_private_dir(&dir)
            .map_err(|e| format!("cannot use the sandbox registry {}: {e}", dir.display()))?;
        let me = std::process::id();
        let (start, _) = writegate_acp::sandboxed::stat_of(me)
            .ok_or_else(|| "cannot read this process's start time in /proc".to_string())?;
        let file = writegate_fs::write_registry_entry(&dir, &me.to_string(), &format!("{start}\n"))
            .map_err(|e| format!("cannot register the sandbox in {}: {e}", dir.display()))?;
        Ok(Registration { file })
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        writegate_fs::remove_registry_entry(&self.file);
    }
}

/// Serves each connection on `listener` with a `writegate mcp` of its own,
/// started here (outside the sandbox) with the connection as its stdio.
fn serve_mcp(
    listener: UnixListener,
    workspaces: &[PathBuf],
    config: Option<&Path>,
    audit_log: Option<&Path>,
) {
    let exe = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("writegate"));
    let mut args: Vec<OsString> = vec!["mcp".into(), "--sandboxed-client".into()];
    for w in workspaces {
        args.push("--workspace".into());
        args.push(w.into());
    }
    if let Some(c) = config {
        args.push("--config".into());
        args.push(c.into());
    }
    if let Some(l) = audit_log {
        args.push("--audit-log".into());
        args.push(absolutize(l).into());
    }
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(stream) = conn else { continue };
            let Ok(input) = stream.try_clone() else {
                continue;
            };
            // Reaped by wait_for or end_descendants (this process is their parent).
            if let Err(e) = Command::new(&exe)
                .args(&args)
                .env_remove(RUN_SOCKET_VAR)
                .stdin(Stdio::from(OwnedFdStream(input).into_fd()))
                .stdout(Stdio::from(OwnedFdStream(stream).into_fd()))
                .spawn()
            {
                eprintln!("writegate run: cannot start writegate mcp for the agent: {e}");
            }
        }
    });
}

/// A socket as an owned descriptor, for a child's stdio.
struct OwnedFdStream(std::os::unix::net::UnixStream);

impl OwnedFdStream {
    fn into_fd(self) -> std::os::fd::OwnedFd {
        self.0.into()
    }
}

/// Passes SIGTERM, SIGHUP, SIGINT, SIGQUIT, SIGUSR1 and SIGUSR2 sent to the
/// run (by `kill`, not by the terminal, which signals the agent itself) on
/// to the agent.
fn install_forwarding() {
    extern "C" fn forward(sig: libc::c_int, info: *mut libc::siginfo_t, _: *mut libc::c_void) {
        // SAFETY: the kernel passes a valid siginfo; kill is async-signal-safe.
        unsafe {
            let from_terminal = !info.is_null() && (*info).si_code == libc::SI_KERNEL;
            if from_terminal {
                return;
            }
            let pid = AGENT.load(Ordering::SeqCst);
            if pid > 0 {
                libc::kill(pid, sig);
            } else {
                // Not started yet: kept for the run to pass on once it is.
                EARLY.store(sig, Ordering::SeqCst);
                let pid = AGENT.load(Ordering::SeqCst);
                if pid > 0 && EARLY.swap(0, Ordering::SeqCst) != 0 {
                    libc::kill(pid, sig);
                }
            }
        }
    }
    for sig in [
        libc::SIGTERM,
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGUSR2,
    ] {
        // SAFETY: a handler that only reads an atomic and calls kill.
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = forward as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
            libc::sigemptyset(&raw mut sa.sa_mask);
            libc::sigaction(sig, &raw const sa, std::ptr::null_mut());
        }
    }
}

/// Reaps children (the agent, orphans handed to this subreaper, finished
/// `writegate mcp`s) until the agent ends; its status as a shell reports it.
fn wait_for(agent: i32) -> u8 {
    loop {
        let mut st = 0;
        // SAFETY: waitpid with a valid status pointer.
        let pid = unsafe { libc::waitpid(-1, &raw mut st, 0) };
        if pid == -1 {
            if std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return 2;
        }
        if pid != agent {
            continue;
        }
        if libc::WIFEXITED(st) {
            return u8::try_from(libc::WEXITSTATUS(st)).unwrap_or(255);
        }
        if libc::WIFSIGNALED(st) {
            return u8::try_from(128 + libc::WTERMSIG(st)).unwrap_or(255);
        }
    }
}

/// This process's children (its threads' children files).
fn children_of(pid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(t.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
    }
    out
}

/// Ends what the agent left running (a daemonised child, a `setsid`
/// grandchild handed to this subreaper) and the `writegate mcp`s: SIGTERM,
/// up to 2 s to exit, then SIGKILL. No process of the sandbox outlives the
/// run.
fn end_descendants() {
    let me = std::process::id();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let mut sig = libc::SIGTERM;
    loop {
        let kids = children_of(me);
        if kids.is_empty() {
            return;
        }
        for k in &kids {
            // SAFETY: kill on a pid.
            unsafe {
                libc::kill(i32::try_from(*k).unwrap_or(0), sig);
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
        loop {
            let mut st = 0;
            // SAFETY: waitpid with a valid status pointer.
            if unsafe { libc::waitpid(-1, &raw mut st, libc::WNOHANG) } <= 0 {
                break;
            }
        }
        let now = std::time::Instant::now();
        if now > deadline + std::time::Duration::from_secs(3) {
            return; // a process stuck in the kernel: nothing more to do
        }
        if now > deadline {
            sig = libc::SIGKILL;
        }
    }
}
