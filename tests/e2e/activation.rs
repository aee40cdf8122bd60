//! The service conventions: socket activation the way systemd
//! does it (a listening socket as descriptor 3, `LISTEN_FDS=1`,
//! `LISTEN_PID` = the daemon's own pid), `sd_notify` readiness, a start-up
//! failure that names what to add and ends with the status the unit does not
//! restart on, and the unit files as `systemd-analyze verify` reads them.

use crate::common::{BIN, Clients, Daemon, Finished, TIMEOUT, Tree, find_program, run_with_stdin};
use serde_json::json;
use std::fs;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixDatagram, UnixListener};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

/// `writegate serve ARGS` started through `sh`, which sets `LISTEN_PID` to
/// its own pid and `exec`s the binary (same pid), with `fd` as descriptor 3
/// (moved there between fork and exec; with `None`, descriptor 3 is closed,
/// whatever the test process inherited) and `LISTEN_FDS=fds`: what systemd
/// does for a socket unit.
fn activated_command(t: &Tree, fd: Option<RawFd>, fds: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new("sh");
    t.set_env(&mut cmd);
    cmd.arg("-c")
        .arg("LISTEN_PID=$$ exec \"$0\" \"$@\"")
        .arg(BIN)
        .args(args)
        .env("LISTEN_FDS", fds);
    // SAFETY: between fork and exec the closure makes only raw system calls
    // (dup2, fcntl, close), which are async-signal-safe; descriptor 3 of the
    // child is replaced, kept (when it already is `raw`) or closed, and no
    // Rust owner of it is ever dropped here.
    unsafe {
        cmd.pre_exec(move || {
            match fd {
                Some(3) => {
                    rustix::io::fcntl_setfd(
                        BorrowedFd::borrow_raw(3),
                        rustix::io::FdFlags::empty(),
                    )?;
                }
                Some(raw) => {
                    let mut three = std::mem::ManuallyDrop::new(OwnedFd::from_raw_fd(3));
                    rustix::io::dup2(BorrowedFd::borrow_raw(raw), &mut three)?;
                }
                None => {
                    if rustix::io::fcntl_getfd(BorrowedFd::borrow_raw(3)).is_ok() {
                        rustix::io::close(3);
                    }
                }
            }
            Ok(())
        });
    }
    cmd
}

/// A datagram socket standing in for systemd's `NOTIFY_SOCKET`.
fn notify_socket(t: &Tree) -> (UnixDatagram, std::path::PathBuf) {
    let path = t.base.join("run/notify.sock");
    let sock = UnixDatagram::bind(&path).unwrap();
    sock.set_read_timeout(Some(TIMEOUT)).unwrap();
    (sock, path)
}

fn next_notice(sock: &UnixDatagram, d: &Daemon) -> String {
    let mut buf = [0u8; 512];
    let n = sock
        .recv(&mut buf)
        .unwrap_or_else(|e| panic!("no sd_notify message ({e}):\n{}", d.stderr_text()));
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

#[test]
fn a_socket_passed_the_way_systemd_does_is_served_and_left_in_place() {
    let t = Tree::new(BIN);
    // The socket unit's work: the directory 0700, the socket bound and listening.
    let dir = t.sock.parent().unwrap();
    fs::create_dir_all(dir).unwrap();
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).unwrap();
    let listener = UnixListener::bind(&t.sock).unwrap();
    let (notify, notify_path) = notify_socket(&t);

    let ws = t.ws.display().to_string();
    let log = t.audit_log.display().to_string();
    let mut cmd = activated_command(
        &t,
        Some(listener.as_raw_fd()),
        "1",
        &["serve", "--workspace", &ws, "--audit-log", &log],
    );
    cmd.env("NOTIFY_SOCKET", &notify_path);
    let mut d = t.spawn(cmd, false, None);

    let ready = next_notice(&notify, &d);
    assert!(ready.starts_with("READY=1\n"), "{ready}");
    assert!(ready.contains("STATUS=serving 1 workspace"), "{ready}");

    let mut c = d.connect();
    let r = c.call("initialize", json!({"protocolVersion": 1}));
    assert_eq!(r["result"]["protocolVersion"], 1, "{r}");
    let file = t.ws.join("activated.txt");
    let r = c.call(
        "fs/write_text_file",
        json!({"sessionId": "s", "path": file, "content": "through fd 3\n"}),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    assert_eq!(fs::read(&file).unwrap(), b"through fd 3\n");
    drop(c);

    d.signal(rustix::process::Signal::TERM);
    let stopping = next_notice(&notify, &d);
    assert_eq!(stopping, "STOPPING=1");
    assert!(d.wait_exit().success(), "{}", d.stderr_text());
    let stderr = d.stderr_text();
    assert!(
        stderr.contains("listening on the socket the service manager passed (socket activation)"),
        "{stderr}"
    );
    // The socket belongs to the socket unit: still there, still listening
    // (the next client would start the service again).
    assert!(
        fs::symlink_metadata(&t.sock)
            .unwrap()
            .file_type()
            .is_socket(),
        "the passed socket must be left in place"
    );
    assert!(std::os::unix::net::UnixStream::connect(&t.sock).is_ok());
}

/// Variables inherited from a parent (`LISTEN_PID` another pid) are not
/// ours: the daemon binds its own socket as usual.
#[test]
fn listen_fds_meant_for_another_process_are_ignored() {
    let t = Tree::new(BIN);
    let mut d = t.daemon(crate::common::Opts {
        socket: true,
        env: &[("LISTEN_PID", "1"), ("LISTEN_FDS", "1")],
        ..crate::common::Opts::default()
    });
    let mut c = d.connect();
    let r = c.call("initialize", json!({"protocolVersion": 1}));
    assert_eq!(r["result"]["protocolVersion"], 1, "{r}");
    d.signal(rustix::process::Signal::TERM);
    assert!(d.wait_exit().success());
    assert!(
        !t.sock.exists(),
        "a socket it bound itself is removed at exit"
    );
    assert!(!d.stderr_text().contains("socket activation"));
}

/// A wrong hand-over is a start-up error (status 2, which the unit does
/// not restart on) that says what is wrong.
#[test]
fn a_wrong_activation_stops_the_daemon_saying_why() {
    let t = Tree::new(BIN);
    let ws = t.ws.display().to_string();
    let args = ["serve", "--workspace", ws.as_str()];
    let regular = fs::File::create(t.base.join("not-a-socket")).unwrap();
    let datagram = UnixDatagram::unbound().unwrap();
    let unlistened = std::os::unix::net::UnixStream::pair().unwrap().0;
    let cases: [(Option<RawFd>, &str, &str); 5] = [
        (None, "1", "descriptor 3 is not open"),
        (Some(regular.as_raw_fd()), "1", "is not a socket"),
        (
            Some(datagram.as_raw_fd()),
            "1",
            "is not a listening stream socket",
        ),
        (
            Some(unlistened.as_raw_fd()),
            "1",
            "is not a listening stream socket",
        ),
        (None, "2", "writegate serves exactly one socket"),
    ];
    for (fd, fds, want) in cases {
        let cmd = activated_command(&t, fd, fds, &args);
        let Finished {
            status,
            stdout,
            stderr,
            ..
        } = run_with_stdin(cmd, b"");
        assert_eq!(status.code(), Some(2), "{want}: {stderr}");
        assert_eq!(stdout, "");
        assert!(
            stderr.contains("writegate: socket activation: ") && stderr.contains(want),
            "{want}: {stderr}"
        );
    }
}

/// Without a workspace the daemon (as the unit starts it: no flags) fails
/// once with status 2 and the lines to add to the config file it read.
#[test]
fn no_workspace_fails_with_status_2_and_the_lines_to_add() {
    let t = Tree::new(BIN);
    let mut cmd = t.command();
    cmd.arg("serve");
    let Finished {
        status,
        stdout,
        stderr,
        ..
    } = run_with_stdin(cmd, b"");
    assert_eq!(status.code(), Some(2), "{stderr}");
    assert_eq!(stdout, "");
    let config = t.base.join("config/writegate/config.toml");
    let home = t.base.join("home");
    assert!(
        stderr.contains(&format!(
            "writegate: no workspace to serve: pass --workspace DIR, or add to {}:\n\n[[workspace]]\nroot = \"{}\"\ntrusted = true\n",
            config.display(),
            home.display()
        )),
        "{stderr}"
    );
    // Doing what it says makes it start.
    fs::create_dir_all(config.parent().unwrap()).unwrap();
    fs::write(
        &config,
        format!(
            "[[workspace]]\nroot = \"{}\"\ntrusted = true\n",
            home.display()
        ),
    )
    .unwrap();
    let mut cmd = t.command();
    cmd.args(["serve", "--stdio", "--audit-log"])
        .arg(&t.audit_log);
    let Finished { status, stderr, .. } = run_with_stdin(cmd, b"");
    assert_eq!(status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("serving workspace (trusted"), "{stderr}");
}

/// The unit files `writegate service install` writes: the service does
/// not restart on status 2, is `Type=notify`, runs this very binary (an
/// absolute `ExecStart`, not a hard-wired `~/.cargo/bin`), and the socket
/// unit listens where clients look by default, private. With
/// `systemd-analyze` installed, both files verify.
#[test]
fn the_unit_files_verify_and_do_not_restart_on_a_configuration_error() {
    let t = Tree::new(BIN);
    let home = t.base.join("home");
    let config_home = home.join(".config");
    fs::create_dir_all(&config_home).unwrap();
    let out = Command::new(BIN)
        .args(["service", "install", "--workspace"])
        .arg(&t.ws)
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", &config_home)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "service install: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let units = config_home.join("systemd/user");
    let service = fs::read_to_string(units.join("writegate.service")).unwrap();
    let socket = fs::read_to_string(units.join("writegate.socket")).unwrap();
    let has = |text: &str, line: &str| text.lines().any(|l| l.trim() == line);
    for line in [
        "Type=notify",
        "Restart=on-failure",
        "RestartPreventExitStatus=2",
    ] {
        assert!(has(&service, line), "writegate.service lacks `{line}`");
    }
    let exec = service
        .lines()
        .find_map(|l| l.trim().strip_prefix("ExecStart="))
        .expect("an ExecStart line");
    let program = exec.strip_suffix(" serve").expect("ExecStart runs `serve`");
    assert!(
        Path::new(program).is_absolute() && Path::new(program).exists(),
        "ExecStart names the installed binary by its absolute path: {exec}"
    );
    for line in [
        "ListenStream=%t/writegate/writegate.sock",
        "DirectoryMode=0700",
        "SocketMode=0600",
        "Accept=no",
    ] {
        assert!(has(&socket, line), "writegate.socket lacks `{line}`");
    }

    let Some(analyze) = find_program("systemd-analyze") else {
        eprintln!("SKIP: systemd-analyze is not installed");
        return;
    };
    let out = Command::new(analyze)
        .arg("verify")
        .arg(units.join("writegate.socket"))
        .arg(units.join("writegate.service"))
        .env("HOME", &home)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "systemd-analyze verify: {stderr}");
    assert!(
        !stderr.contains("writegate."),
        "systemd-analyze has remarks: {stderr}"
    );
}
