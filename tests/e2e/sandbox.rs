//! `writegate run -- AGENT`: a scripted agent (a shell script) inside the
//! Landlock sandbox, with real processes. Each test skips, saying so, on a
//! kernel without Landlock.

use crate::common::BIN;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;
use writegate_testkit::Tree;

/// `writegate run ARGS -- sh -c SCRIPT` in the tree, with the binary on the PATH.
fn run_cmd(tree: &Tree, args: &[&str], script: &str) -> Command {
    let mut c = tree.command();
    let dir = Path::new(BIN).parent().unwrap();
    c.env(
        "PATH",
        format!("{}:/usr/local/bin:/usr/bin:/bin", dir.display()),
    )
    .current_dir(&tree.ws)
    .arg("run")
    .args(args)
    .args(["--", "sh", "-c", script]);
    c
}

fn run(tree: &Tree, args: &[&str], script: &str) -> Output {
    run_cmd(tree, args, script)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Whether this kernel can sandbox; prints why a test is skipped when not.
pub(crate) fn landlock(tree: &Tree, test: &str) -> bool {
    let o = run(tree, &[], "true");
    if o.status.code() == Some(2) && String::from_utf8_lossy(&o.stderr).contains("Landlock") {
        eprintln!(
            "skipping {test}: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        );
        return false;
    }
    assert!(o.status.success(), "{o:?}");
    true
}

fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn direct_writes_in_the_workspace_fail_and_the_agents_own_places_stay_writable() {
    let tree = Tree::new(BIN);
    if !landlock(&tree, "direct_writes_in_the_workspace_fail") {
        return;
    }
    std::fs::write(tree.ws.join("a.txt"), "keep\n").unwrap();
    let allowed = tree.base.join("out/gen");
    std::fs::create_dir(&allowed).unwrap();
    let home = tree.base.join("home");
    std::fs::write(home.join(".bashrc"), "# rc\n").unwrap();
    let config_dir = tree.base.join("config/writegate");
    std::fs::create_dir_all(&config_dir).unwrap();
    std::fs::write(config_dir.join("config.toml"), "").unwrap();
    std::fs::create_dir(tree.ws.join("target")).unwrap();
    // Each line prints `name rc`: 0 when the write went through.
    let script = format!(
        r#"
        printf x > a.txt; echo "overwrite $?"
        printf x > new.txt; echo "create $?"
        mv a.txt b.txt; echo "rename $?"
        rm a.txt; echo "unlink $?"
        sh -c 'echo > a.txt'; echo "shell $?"
        truncate -s 0 a.txt; echo "truncate $?"
        mkdir sub; echo "mkdir $?"
        printf t > "$TMPDIR/t"; echo "tmpdir $?"
        printf t > {allowed}/t; echo "allow_write $?"
        printf t > target/out.o; echo "target $?"
        printf x >> {bashrc}; echo "bashrc $?"
        printf x > {config}; echo "config $?"
        printf x > {home}/new; echo "home $?"
        printf x > /dev/null; echo "devnull $?"
        exit 7
        "#,
        allowed = allowed.display(),
        bashrc = home.join(".bashrc").display(),
        config = config_dir.join("config.toml").display(),
        home = home.display(),
    );
    let o = run(
        &tree,
        &["--allow-write", allowed.to_str().unwrap()],
        &script,
    );
    let out = text(&o);
    assert_eq!(o.status.code(), Some(7), "{out}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    for (name, ok) in [
        ("overwrite", false),
        ("create", false),
        ("rename", false),
        ("unlink", false),
        ("shell", false),
        ("truncate", false),
        ("mkdir", false),
        ("tmpdir", true),
        ("allow_write", true),
        ("target", true),
        ("bashrc", false),
        ("config", false),
        ("home", false),
        ("devnull", true),
    ] {
        let line = stdout
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} line\n{out}"));
        let rc = line.split_whitespace().nth(1).unwrap();
        assert_eq!(rc == "0", ok, "{name}: {line}\n{out}");
    }
    assert_eq!(
        std::fs::read_to_string(tree.ws.join("a.txt")).unwrap(),
        "keep\n"
    );
    assert!(!tree.ws.join("new.txt").exists());
    assert_eq!(std::fs::read_to_string(allowed.join("t")).unwrap(), "t");
    assert_eq!(
        std::fs::read_to_string(home.join(".bashrc")).unwrap(),
        "# rc\n"
    );
    assert_eq!(
        std::fs::read_to_string(config_dir.join("config.toml")).unwrap(),
        ""
    );
}

#[test]
fn a_child_that_calls_setsid_is_still_confined() {
    let tree = Tree::new(BIN);
    if !landlock(&tree, "a_child_that_calls_setsid_is_still_confined") {
        return;
    }
    let o = run(
        &tree,
        &[],
        "setsid -w sh -c 'printf x > escaped.txt; echo \"setsid $?\"'",
    );
    let out = text(&o);
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("setsid 2")
            || !String::from_utf8_lossy(&o.stdout).contains("setsid 0"),
        "{out}"
    );
    assert!(!tree.ws.join("escaped.txt").exists(), "{out}");
}

#[test]
fn a_writable_path_that_contains_the_workspace_is_refused() {
    let tree = Tree::new(BIN);
    let o = run(
        &tree,
        &["--allow-write", tree.base.to_str().unwrap()],
        "true",
    );
    let out = text(&o);
    assert_eq!(o.status.code(), Some(2), "{out}");
    assert!(out.contains("contains the workspace"), "{out}");
    let o = run(&tree, &["--allow-write", "/no/such/dir"], "true");
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("must exist"), "{}", text(&o));
}

#[test]
fn a_signal_to_the_run_reaches_the_agent_and_its_status_comes_back() {
    let tree = Tree::new(BIN);
    if !landlock(&tree, "a_signal_to_the_run_reaches_the_agent") {
        return;
    }
    let mut child = run_cmd(
        &tree,
        &[],
        "trap 'exit 42' TERM; echo ready; while :; do sleep 0.05; done",
    )
    .stdin(Stdio::null())
    .stdout(Stdio::piped())
    .spawn()
    .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "ready");
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&child),
        rustix::process::Signal::TERM,
    )
    .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            assert_eq!(st.code(), Some(42));
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the run did not end");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The MCP lines of a scripted client: initialize (declaring elicitation,
/// which a sandboxed client is never asked through), then `calls`.
fn mcp_script(calls: &[String]) -> String {
    let mut lines = vec![
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"elicitation":{}},"clientInfo":{"name":"scripted","version":"1"}}}"#.to_string(),
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_string(),
    ];
    lines.extend(calls.iter().cloned());
    let quoted: Vec<String> = lines.iter().map(|l| format!("'{l}'")).collect();
    format!(
        "( printf '%s\\n' {}; sleep 2 ) | writegate mcp --workspace .",
        quoted.join(" ")
    )
}

fn audit_events(path: &PathBuf) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

#[test]
fn writes_through_writegate_land_from_inside_with_crlf_kept_and_an_audit_event() {
    let tree = Tree::new(BIN);
    if !landlock(&tree, "writes_through_writegate_land_from_inside") {
        return;
    }
    std::fs::write(tree.ws.join("crlf.txt"), "one\r\ntwo\r\n").unwrap();
    let script = mcp_script(&[
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#.to_string(),
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"edit_file","arguments":{"path":"crlf.txt","mode":"replace","find":"two","content":"TWO"}}}"#.to_string(),
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"write_file","arguments":{"path":"made.txt","content":"new\n"}}}"#.to_string(),
    ]);
    let audit = tree.base.join("state/audit.jsonl");
    let o = run(&tree, &["--audit-log", audit.to_str().unwrap()], &script);
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    assert_eq!(
        std::fs::read(tree.ws.join("crlf.txt")).unwrap(),
        b"one\r\nTWO\r\n",
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(tree.ws.join("made.txt")).unwrap(),
        "new\n"
    );
    // The model is told why its shell cannot write.
    assert!(out.contains("writegate sandbox"), "{out}");
    let events = audit_events(&audit);
    let ok: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "fs.access")
        .map(|e| e["intent"].as_str().unwrap_or_default().to_string())
        .collect();
    assert!(
        ok.contains(&"edit".to_string()) && ok.contains(&"write".to_string()),
        "{events:?}"
    );
}

#[test]
fn an_agent_inside_cannot_approve_its_own_held_env_write() {
    let tree = Tree::new(BIN);
    if !landlock(
        &tree,
        "an_agent_inside_cannot_approve_its_own_held_env_write",
    ) {
        return;
    }
    // The person's daemon on the same workspace, on the default socket.
    let _daemon = tree.daemon(writegate_testkit::Opts {
        socket: true,
        ..Default::default()
    });
    let env = tree.ws.join(".env");
    let command = format!("edit_file write {}", env.display());
    let sock = tree.sock.display().to_string();
    // Every approval the agent can try, then every write path.
    let mut script = String::new();
    for scope in ["once", "session", "workspace", "persistent"] {
        for socket in [String::new(), format!("--socket {sock}")] {
            writeln!(
                script,
                "writegate approve {socket} --scope {scope} '{command}'; echo \"approve {scope} $?\""
            )
            .unwrap();
        }
    }
    writeln!(
        script,
        "printf 'K=v\\n' | writegate write --socket {sock} {env}; echo \"cli-write $?\"",
        env = env.display()
    )
    .unwrap();
    // The person's queue: listing and answering are refused too.
    for socket in [String::new(), format!("--socket {sock}")] {
        writeln!(
            script,
            "writegate pending {socket}; echo \"queue pending $?\"; writegate answer {socket} q-1 allow; echo \"queue answer $?\""
        )
        .unwrap();
    }
    script.push_str(&mcp_script(&[
        r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"write_file","arguments":{"path":".env","content":"K=v\n"}}}"#.to_string(),
    ]));
    let o = run(&tree, &[], &script);
    let out = text(&o);
    assert!(!env.exists(), "the held .env write went through:\n{out}");
    assert!(out.contains("approval_required"), "{out}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    // The daemon was reached and refused (1), not unreachable (3).
    assert!(stdout.contains("approve once 1"), "{out}");
    assert!(stdout.contains("queue answer "), "{out}");
    for l in stdout
        .lines()
        .filter(|l| l.starts_with("approve ") || l.starts_with("queue "))
    {
        assert!(
            !l.ends_with(" 0"),
            "a power of the person's was granted from inside: {l}\n{out}"
        );
    }
    // The same approval from outside, by the person, is granted: the
    // refusals above are the sandbox's, not a broken command.
    let o = tree
        .command()
        .args([
            "approve",
            "--socket",
            &sock,
            "--scope",
            "workspace",
            &command,
        ])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
}

/// The agents' state directories in HOME (`~/.qwen`) were refused as
/// "inside the home directory" and left read-only, so qwen-code could not
/// start inside; they are writable, while HOME itself and its start-up
/// files stay read-only.
#[test]
fn regression_an_agents_state_directory_in_home_was_left_read_only() {
    let tree = Tree::new(BIN);
    if !landlock(&tree, "regression_an_agents_state_directory_in_home") {
        return;
    }
    let home = tree.base.join("home-agent");
    std::fs::create_dir_all(home.join(".qwen")).unwrap();
    let o = run_cmd(
        &tree,
        &[],
        "mkdir \"$HOME/.qwen/extensions\" && echo ok > \"$HOME/.qwen/extensions/x\" && echo state-ok; \
         echo x >> \"$HOME/.bashrc\" || echo bashrc-refused",
    )
    .env("HOME", &home)
    .stdin(Stdio::null())
    .output()
    .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("state-ok") && t.contains("bashrc-refused"),
        "{t}"
    );
    assert!(!t.contains("left read-only"), "{t}");
    assert!(home.join(".qwen/extensions/x").exists());
    assert!(!home.join(".bashrc").exists());
}
