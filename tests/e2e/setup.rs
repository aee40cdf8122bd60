//! `writegate setup AGENT` against a scratch `HOME` per agent: it merges
//! into existing settings (other keys and comments kept), backs them up,
//! changes nothing on a second run, writes nothing on `--dry-run`, takes
//! its entries out with `--remove`, and refuses a malformed file without
//! touching anything.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_writegate"))
        .args(args)
        .env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap()
}

/// Every file under `dir` with its bytes and mode.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, (Vec<u8>, u32)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                stack.push(p);
            } else {
                out.insert(
                    p.clone(),
                    (std::fs::read(&p).unwrap(), m.permissions().mode() & 0o777),
                );
            }
        }
    }
    out
}

/// Each agent, a settings file it has before set-up, and text in it that
/// must survive (a comment where the format has them).
fn existing() -> Vec<(&'static str, &'static str, &'static str, &'static str)> {
    vec![
        (
            "qwen-code",
            ".qwen/settings.json",
            "{\n  // my model\n  \"model\": {\"name\": \"qwen3\"},\n  \"tools\": {\"disabled\": [\"web_fetch\"]}\n}\n",
            "// my model",
        ),
        (
            "gemini-cli",
            ".gemini/settings.json",
            "{\n  // theme\n  \"ui\": {\"theme\": \"Dracula\"},\n  \"mcpServers\": {\"other\": {\"command\": \"x\"}}\n}\n",
            "\"other\": {\"command\": \"x\"}",
        ),
        (
            "claude-code",
            ".claude/settings.json",
            "{\n  \"permissions\": {\"allow\": [\"Bash(git status)\"], \"deny\": [\"WebFetch\"]}\n}\n",
            "\"Bash(git status)\"",
        ),
        (
            "codex",
            ".codex/config.toml",
            "# my codex\nmodel = \"o3\"\n\n[mcp_servers.other]\ncommand = \"x\" # keep me\n",
            "command = \"x\" # keep me",
        ),
        (
            "zed",
            ".config/zed/settings.json",
            "// Zed settings\n{\n  \"theme\": \"One Dark\", // mine\n  \"agent_servers\": {\"Mine\": {\"type\": \"custom\", \"command\": \"a\"}},\n}\n",
            "\"theme\": \"One Dark\", // mine",
        ),
    ]
}

#[test]
fn merges_is_idempotent_dry_runs_and_removes_for_every_agent() {
    for (agent, file, before, kept) in existing() {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, before).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let start = snapshot(home.path());

        // --dry-run: a diff, nothing written.
        let o = run(home.path(), &["setup", agent, "--dry-run"]);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{agent}: {o:?}");
        assert!(
            text.contains("+++ ") && text.contains("writegate"),
            "{agent}: {text}"
        );
        assert!(text.contains("nothing was written"), "{agent}: {text}");
        assert_eq!(snapshot(home.path()), start, "{agent}: dry run wrote");

        // Set up: merged, backed up, mode kept.
        let o = run(home.path(), &["setup", agent]);
        assert!(o.status.success(), "{agent}: {o:?}");
        let after = std::fs::read_to_string(&path).unwrap();
        assert!(after.contains(kept), "{agent}: lost {kept:?}:\n{after}");
        assert!(
            after.contains("writegate") || after.contains("\"NotebookEdit\""),
            "{agent}: {after}"
        );
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o640,
            "{agent}: mode not kept"
        );
        let backups: Vec<_> = std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains(".writegate-backup-"))
            .collect();
        assert_eq!(backups.len(), 1, "{agent}: {backups:?}");
        let backup = path.parent().unwrap().join(&backups[0]);
        assert_eq!(std::fs::read_to_string(backup).unwrap(), before, "{agent}");
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("next:"), "{agent}: no next step:\n{out}");

        // A second run changes nothing.
        let set_up = snapshot(home.path());
        let o = run(home.path(), &["setup", agent]);
        assert!(o.status.success(), "{agent}: {o:?}");
        assert!(String::from_utf8_lossy(&o.stdout).contains("already set up"));
        assert_eq!(
            snapshot(home.path()),
            set_up,
            "{agent}: second run changed files"
        );
        let o = run(home.path(), &["setup", agent, "--dry-run"]);
        assert!(
            String::from_utf8_lossy(&o.stdout).contains("no change"),
            "{o:?}"
        );

        // --list says it is set up.
        let o = run(home.path(), &["setup", "--list"]);
        let list = String::from_utf8_lossy(&o.stdout);
        let line = list
            .lines()
            .find(|l| l.trim_start().starts_with(agent))
            .unwrap();
        assert!(line.contains(" set up"), "{agent}: {list}");

        // --remove gives back the original settings. The text too, except
        // that an object writegate added a member to stays spread over
        // lines (the one-line `mcpServers` and `agent_servers` here).
        let o = run(home.path(), &["setup", agent, "--remove"]);
        assert!(o.status.success(), "{agent}: {o:?}");
        let removed = std::fs::read_to_string(&path).unwrap();
        if agent == "gemini-cli" || agent == "zed" {
            let squeeze = |s: &str| s.split_whitespace().collect::<String>();
            assert_eq!(squeeze(&removed), squeeze(before), "{agent}: remove");
            assert!(removed.contains(kept) || agent == "gemini-cli", "{removed}");
            assert!(removed.contains("//"), "{removed}");
        } else {
            assert_eq!(removed, before, "{agent}: remove");
        }
        for (p, _) in snapshot(home.path()) {
            let name = p.to_string_lossy().into_owned();
            if !name.contains(".writegate-backup-") && p != path {
                // Only Claude's ~/.claude.json may stay (an empty object).
                let text = std::fs::read_to_string(&p).unwrap();
                assert!(
                    !text.contains("writegate"),
                    "{agent}: {name} still has writegate:\n{text}"
                );
            }
        }
    }
}

#[test]
fn a_fresh_home_gets_new_files_that_the_agents_can_read() {
    let home = tempfile::tempdir().unwrap();
    for agent in ["qwen-code", "gemini-cli", "claude-code", "zed"] {
        let o = run(home.path(), &["setup", agent]);
        assert!(o.status.success(), "{agent}: {o:?}");
    }
    let exe = std::fs::canonicalize(env!("CARGO_BIN_EXE_writegate")).unwrap();
    let exe = exe.to_str().unwrap();
    let json = |f: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(home.path().join(f)).unwrap()).unwrap()
    };
    let qwen = json(".qwen/settings.json");
    assert_eq!(qwen["mcpServers"]["writegate"]["command"], exe);
    assert_eq!(
        qwen["mcpServers"]["writegate"]["args"],
        serde_json::json!(["mcp", "--client-roots", "trusted"])
    );
    assert_eq!(
        qwen["tools"]["disabled"],
        serde_json::json!(["write_file", "edit", "notebook_edit"])
    );
    let policy =
        std::fs::read_to_string(home.path().join(".gemini/policies/writegate.toml")).unwrap();
    assert!(
        policy.contains("toolName = [\"write_file\", \"replace\"]")
            && policy.contains("decision = \"deny\"")
    );
    assert!(
        json(".gemini/settings.json").get("tools").is_none(),
        "no deprecated tools.exclude"
    );
    assert_eq!(
        json(".claude/settings.json")["permissions"]["deny"],
        serde_json::json!(["Write", "Edit", "MultiEdit", "NotebookEdit"])
    );
    assert_eq!(
        json(".claude.json")["mcpServers"]["writegate"]["type"],
        "stdio"
    );
    let zed = json(".config/zed/settings.json");
    assert_eq!(zed["context_servers"]["writegate"]["command"], exe);
    let qwen_agent = &zed["agent_servers"]["qwen-code (writegate)"]["args"];
    assert_eq!(qwen_agent[0], "proxy");
    assert!(qwen_agent.as_array().unwrap().iter().any(|a| a == "--acp"));
    assert!(!zed.to_string().contains("experimental-acp"));
    // New files are private to the person.
    let mode = std::fs::metadata(home.path().join(".claude.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    // The policy file goes with --remove.
    assert!(
        run(home.path(), &["setup", "gemini-cli", "--remove"])
            .status
            .success()
    );
    assert!(!home.path().join(".gemini/policies/writegate.toml").exists());
}

#[test]
fn a_malformed_file_is_refused_and_left_as_it_is() {
    for (agent, file, bad) in [
        ("qwen-code", ".qwen/settings.json", "{\"model\": }\n"),
        (
            "gemini-cli",
            ".gemini/settings.json",
            "{\"mcpServers\": [1]}\n",
        ),
        ("claude-code", ".claude.json", "not json"),
        ("codex", ".codex/config.toml", "model = \n"),
        ("zed", ".config/zed/settings.json", "[1, 2]\n"),
    ] {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, bad).unwrap();
        let start = snapshot(home.path());
        for extra in [&[][..], &["--remove"][..], &["--dry-run"][..]] {
            let mut args = vec!["setup", agent];
            args.extend_from_slice(extra);
            let o = run(home.path(), &args);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "{agent} {extra:?}: {o:?}");
            assert!(err.contains(&path.display().to_string()), "{agent}: {err}");
            assert!(err.contains("nothing was changed"), "{agent}: {err}");
            assert_eq!(
                snapshot(home.path()),
                start,
                "{agent} {extra:?}: changed files"
            );
        }
    }
}

#[test]
fn usage_errors() {
    let home = tempfile::tempdir().unwrap();
    assert_eq!(run(home.path(), &["setup"]).status.code(), Some(2));
    assert_eq!(run(home.path(), &["setup", "vim"]).status.code(), Some(2));
    assert_eq!(
        run(home.path(), &["setup", "zed", "--list"]).status.code(),
        Some(2)
    );
    assert!(snapshot(home.path()).is_empty());
}

#[test]
fn regression_a_huge_settings_file_is_refused_without_being_loaded() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let settings = home.join(".claude/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    // 4 GiB that take no disk (sparse), under a 1 GiB address-space limit:
    // a setup that loads the file dies instead of eating the machine.
    let f = std::fs::File::create(&settings).unwrap();
    f.set_len(4 << 30).unwrap();
    drop(f);
    let out = Command::new("prlimit")
        .arg("--as=1073741824")
        .arg(env!("CARGO_BIN_EXE_writegate"))
        .args(["setup", "claude-code"])
        .env_clear()
        .env("HOME", home)
        .env("PATH", "/usr/bin:/bin")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot change") && err.contains("larger than 16 MiB"),
        "{err}"
    );
    assert_eq!(std::fs::metadata(&settings).unwrap().len(), 4 << 30);
    let names: Vec<_> = std::fs::read_dir(settings.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["settings.json"], "a backup or temp file was left");
}

#[test]
fn a_directory_or_fifo_in_place_of_a_settings_file_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let settings = home.join(".claude/settings.json");
    std::fs::create_dir_all(&settings).unwrap();
    let out = run(home, &["setup", "claude-code"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot change"), "{err}");
    assert!(settings.is_dir());
    std::fs::remove_dir(&settings).unwrap();
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &settings,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();
    let out = run(home, &["setup", "claude-code"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("cannot change") && err.contains("fifo"),
        "{err}"
    );
    // (`snapshot` would open the fifo.) Nothing beside it, and it is still one.
    use std::os::unix::fs::FileTypeExt;
    assert!(
        std::fs::symlink_metadata(&settings)
            .unwrap()
            .file_type()
            .is_fifo()
    );
    let names: Vec<_> = std::fs::read_dir(settings.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["settings.json"]);
}
