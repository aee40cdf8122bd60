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
            } else if m.file_type().is_symlink() {
                // A link as where it points, not as what it points at.
                let to = std::fs::read_link(&p).unwrap();
                out.insert(p, (to.into_os_string().into_encoded_bytes(), 0));
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

        // --remove gives back the original settings, byte for byte.
        let o = run(home.path(), &["setup", agent, "--remove"]);
        assert!(o.status.success(), "{agent}: {o:?}");
        let removed = std::fs::read_to_string(&path).unwrap();
        assert_eq!(removed, before, "{agent}: remove");
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
        serde_json::json!(["mcp", "--client-roots", "trusted", "--cwd-workspace"])
    );
    assert_eq!(
        qwen["tools"]["disabled"],
        serde_json::json!(["write_file", "edit", "notebook_edit"])
    );
    let policy =
        std::fs::read_to_string(home.path().join(".gemini/policies/writegate.toml")).unwrap();
    gemini_policy_denies_its_own_writes_and_not_writegates(&policy, &json(".gemini/settings.json"));
    assert_eq!(
        json(".claude/settings.json")["permissions"]["deny"],
        serde_json::json!(["Write", "Edit", "NotebookEdit"])
    );
    // writegate's gate asks; Claude's own prompt would ask twice, and
    // refuse every call under `claude -p`.
    assert_eq!(
        json(".claude/settings.json")["permissions"]["allow"],
        serde_json::json!(["mcp__writegate__*"])
    );
    assert_eq!(
        json(".claude.json")["mcpServers"]["writegate"]["args"],
        serde_json::json!(["mcp", "--client-roots", "trusted", "--cwd-workspace"])
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

/// Gemini CLI hides a tool when a name it goes by is denied, and an MCP
/// tool goes by its bare name too: a deny of `write_file` (or, under
/// `gemini -p`, no rule for it) also hides `mcp_writegate_write_file`. So
/// writegate's server is allowed first, Gemini's own two are asked about,
/// not denied, and they are off by class name in `tools.exclude`.
fn gemini_policy_denies_its_own_writes_and_not_writegates(
    policy: &str,
    settings: &serde_json::Value,
) {
    let doc: toml_edit::DocumentMut = policy.parse().unwrap();
    let rules = doc["rule"].as_array_of_tables().unwrap();
    let field = |r: &toml_edit::Table, k: &str| r.get(k).map(|v| v.to_string().trim().to_string());
    let priority = |r: &toml_edit::Table| r["priority"].as_integer().unwrap();
    let ours = rules
        .iter()
        .find(|r| field(r, "mcpName").as_deref() == Some("\"writegate\""))
        .expect("a rule for writegate's server");
    assert_eq!(field(ours, "decision").as_deref(), Some("\"allow\""));
    assert_eq!(field(ours, "toolName").as_deref(), Some("\"*\""));
    assert!(
        rules
            .iter()
            .all(|r| field(r, "decision").as_deref() != Some("\"deny\"")),
        "a deny by name hides writegate's tool of that name"
    );
    let builtins = rules
        .iter()
        .find(|r| field(r, "toolName").as_deref() == Some("[\"write_file\", \"replace\"]"))
        .unwrap();
    assert!(
        priority(ours) > priority(builtins),
        "writegate's rule first"
    );
    assert_eq!(
        settings["tools"]["exclude"],
        serde_json::json!(["WriteFileTool", "EditTool"])
    );
}

#[test]
fn regression_gemini_policy_hid_writegates_own_write_file() {
    let home = tempfile::tempdir().unwrap();
    assert!(run(home.path(), &["setup", "gemini-cli"]).status.success());
    let policy =
        std::fs::read_to_string(home.path().join(".gemini/policies/writegate.toml")).unwrap();
    let settings: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(home.path().join(".gemini/settings.json")).unwrap(),
    )
    .unwrap();
    gemini_policy_denies_its_own_writes_and_not_writegates(&policy, &settings);
}

#[test]
fn every_command_line_agent_starts_writegate_with_its_directory_as_the_fallback_workspace() {
    let home = tempfile::tempdir().unwrap();
    for agent in ["qwen-code", "gemini-cli", "claude-code", "codex"] {
        assert!(run(home.path(), &["setup", agent]).status.success());
    }
    let codex = std::fs::read_to_string(home.path().join(".codex/config.toml")).unwrap();
    assert!(
        codex.contains(r#"args = ["mcp", "--client-roots", "trusted", "--cwd-workspace"]"#),
        "{codex}"
    );
    assert!(!codex.contains("--workspace"), "no fixed `.`: {codex}");
    for file in [
        ".qwen/settings.json",
        ".gemini/settings.json",
        ".claude.json",
    ] {
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(home.path().join(file)).unwrap())
                .unwrap();
        let args = &v["mcpServers"]["writegate"]["args"];
        assert!(
            args.as_array()
                .unwrap()
                .iter()
                .any(|a| a == "--cwd-workspace"),
            "{file}: {args}"
        );
    }
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

/// The policy file `writegate setup gemini-cli` writes, as a fresh set-up
/// in a scratch home writes it.
fn gemini_policy() -> Vec<u8> {
    let home = tempfile::tempdir().unwrap();
    assert!(run(home.path(), &["setup", "gemini-cli"]).status.success());
    std::fs::read(home.path().join(".gemini/policies/writegate.toml")).unwrap()
}

/// `--remove` deleted the file a symlinked `~/.gemini/policies/writegate.toml`
/// pointed to (the person's dotfiles), with no backup. A link there is
/// left as it is, and so is what it points to, even when that holds
/// exactly what setup writes; the settings entry still goes, and the
/// output names what stayed.
#[test]
fn remove_never_deletes_a_file_through_a_symlinked_policy_file() {
    let policy = gemini_policy();
    for (what, dotfile) in [
        (
            "the person's own policy",
            b"[[rule]]\ntoolName = \"x\"\n".to_vec(),
        ),
        ("a copy of setup's policy", policy.clone()),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path();
        assert!(run(home, &["setup", "gemini-cli"]).status.success());
        let link = home.join(".gemini/policies/writegate.toml");
        let target = home.join("dotfiles/gemini/writegate.toml");
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::write(&target, &dotfile).unwrap();
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();

        let o = run(home, &["setup", "gemini-cli", "--remove"]);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{what}: {o:?}");
        assert_eq!(std::fs::read(&target).unwrap(), dotfile, "{what}: target");
        assert_eq!(std::fs::read_link(&link).unwrap(), target, "{what}: link");
        assert!(
            text.contains(&format!("{}: left as it is", link.display()))
                && text.contains("symbolic link")
                && text.contains("delete it yourself"),
            "{what}: {text}"
        );
        assert!(
            text.contains("but for what is left as it is above"),
            "{what}: {text}"
        );
        assert!(!text.contains("the agent's own tools are back"), "{text}");
        let settings = std::fs::read_to_string(home.join(".gemini/settings.json")).unwrap();
        assert!(!settings.contains("writegate"), "{what}: {settings}");
        // Nothing beside the link either (no backup, no temp file).
        let names: Vec<_> = std::fs::read_dir(link.parent().unwrap())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["writegate.toml"], "{what}");
        // A set-up does not write through the link either.
        let start = snapshot(home);
        let o = run(home, &["setup", "gemini-cli"]);
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{what}: {o:?}");
        assert!(
            err.contains("symbolic link") && err.contains("nothing was changed"),
            "{what}: {err}"
        );
        assert_eq!(snapshot(home), start, "{what}");
    }
    // A dangling link is left too.
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let link = home.join(".gemini/policies/writegate.toml");
    std::fs::create_dir_all(link.parent().unwrap()).unwrap();
    std::os::unix::fs::symlink(home.join("nowhere"), &link).unwrap();
    let o = run(home, &["setup", "gemini-cli", "--remove"]);
    assert!(o.status.success(), "{o:?}");
    assert!(std::fs::symlink_metadata(&link).is_ok());
    assert!(String::from_utf8_lossy(&o.stdout).contains("symbolic link"));
}

/// `--remove` deleted a file of the person's own named
/// `~/.gemini/policies/writegate.toml`. It deletes only a regular file
/// that holds, byte for byte, what setup writes; one changed by a byte is
/// left with a message, and a set-up does not replace a file of that name
/// it did not write.
#[test]
fn remove_deletes_only_the_policy_file_setup_wrote_byte_for_byte() {
    let policy = gemini_policy();
    let mut changed = policy.clone();
    changed.extend_from_slice(b"# mine\n");
    let own = b"[[rule]]\ntoolName = \"run_shell_command\"\ndecision = \"deny\"\n".to_vec();
    for (what, bytes) in [
        ("one byte more", changed),
        ("the person's own", own.clone()),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path();
        let path = home.join(".gemini/policies/writegate.toml");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &bytes).unwrap();
        let o = run(home, &["setup", "gemini-cli", "--remove"]);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{what}: {o:?}");
        assert_eq!(std::fs::read(&path).unwrap(), bytes, "{what}");
        assert!(
            text.contains(&format!("{}: left as it is", path.display()))
                && text.contains("not the file writegate setup writes"),
            "{what}: {text}"
        );
        // --dry-run says the same and writes nothing.
        let start = snapshot(home);
        let o = run(home, &["setup", "gemini-cli", "--remove", "--dry-run"]);
        assert!(String::from_utf8_lossy(&o.stdout).contains("left as it is"));
        assert_eq!(snapshot(home), start, "{what}");
    }
    // A set-up does not replace the person's own file of that name.
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let path = home.join(".gemini/policies/writegate.toml");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, &own).unwrap();
    let start = snapshot(home);
    let o = run(home, &["setup", "gemini-cli"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert!(
        err.contains(&path.display().to_string())
            && err.contains("did not write")
            && err.contains("move it away")
            && err.contains("nothing was changed"),
        "{err}"
    );
    assert_eq!(snapshot(home), start);
    // The exact file setup wrote goes.
    assert!(
        run(home, &["setup", "gemini-cli", "--remove"])
            .status
            .success()
    );
    std::fs::write(&path, &policy).unwrap();
    let o = run(home, &["setup", "gemini-cli", "--remove"]);
    assert!(o.status.success(), "{o:?}");
    assert!(std::fs::symlink_metadata(&path).is_err());
}

/// Every settings file setup edits, as a symbolic link to a file elsewhere:
/// set-up, `--dry-run` and `--remove` are refused with the link named and
/// what to do, and nothing (link, target, anything else) changes.
#[test]
fn a_symlinked_settings_file_is_never_written_through_for_any_agent() {
    for (agent, file, _, _) in existing() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path();
        // Set up first, so --remove has something to take out.
        assert!(run(home, &["setup", agent]).status.success(), "{agent}");
        let path = home.join(file);
        let target = home.join("dotfiles").join(agent);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::rename(&path, &target).unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        let start = snapshot(home);
        for extra in [&[][..], &["--remove"][..], &["--dry-run"][..]] {
            let mut args = vec!["setup", agent];
            args.extend_from_slice(extra);
            let o = run(home, &args);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "{agent} {extra:?}: {o:?}");
            assert!(
                err.contains(&path.display().to_string())
                    && err.contains("symbolic link")
                    && err.contains(&target.display().to_string())
                    && err.contains("put the file itself in its place")
                    && err.contains("nothing was changed"),
                "{agent} {extra:?}: {err}"
            );
            assert_eq!(snapshot(home), start, "{agent} {extra:?}: changed files");
        }
    }
}

/// A settings file with a key twice (`{"tools":{...},"tools":{...}}`) was
/// edited at the first while the agent, reading the last, kept its own
/// write tools, and setup said it was set up. A key twice in one object,
/// at any depth, spelled with escapes or not, is refused for every JSON
/// agent and in every mode, the file unchanged; Codex's TOML cannot hold a
/// key twice and is refused as invalid.
#[test]
fn a_settings_file_with_a_key_twice_is_refused_and_left_as_it_is() {
    for (agent, file, text, key) in [
        (
            "qwen-code",
            ".qwen/settings.json",
            "{\"tools\": {\"disabled\": [\"x\"]},\n \"tools\": {\"core\": []}}\n",
            "`tools`",
        ),
        (
            "qwen-code",
            ".qwen/settings.json",
            "{\"tools\": {}, \"\\u0074ools\": {}}\n",
            "`tools`",
        ),
        (
            "gemini-cli",
            ".gemini/settings.json",
            "{\"mcpServers\": {\"a\": {\"command\": \"x\", \"command\": \"y\"}}}\n",
            "`mcpServers.a.command`",
        ),
        (
            "claude-code",
            ".claude/settings.json",
            "{\"permissions\": {\"deny\": []},\n\"permissions\": {\"allow\": [\"Write\"]}}\n",
            "`permissions`",
        ),
        (
            "claude-code",
            ".claude.json",
            "{\"mcpServers\": {}, \"mcpServers\": {}}",
            "`mcpServers`",
        ),
        (
            "zed",
            ".config/zed/settings.json",
            "// mine\n{\"agent_servers\": {}, \"theme\": \"x\",\n\n \"agent_servers\": {},}\n",
            "`agent_servers`",
        ),
        (
            "codex",
            ".codex/config.toml",
            "[mcp_servers.writegate]\ncommand = \"a\"\n[mcp_servers.writegate]\ncommand = \"b\"\n",
            "duplicate key",
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path();
        let path = home.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        let start = snapshot(home);
        for extra in [&[][..], &["--remove"][..], &["--dry-run"][..]] {
            let mut args = vec!["setup", agent];
            args.extend_from_slice(extra);
            let o = run(home, &args);
            let err = String::from_utf8_lossy(&o.stderr);
            assert_eq!(o.status.code(), Some(1), "{agent} {extra:?}: {o:?}");
            assert!(
                err.contains(&path.display().to_string())
                    && err.contains(key)
                    && err.contains("nothing was changed"),
                "{agent} {extra:?}: {err}"
            );
            if agent != "codex" {
                assert!(
                    err.contains("twice") && err.contains("merge the two into one"),
                    "{agent}: {err}"
                );
            }
            assert_eq!(snapshot(home), start, "{agent} {extra:?}: changed files");
        }
    }
    // Lines are named where the key is on several.
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let path = home.join(".qwen/settings.json");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, "{\n\"tools\": {},\n\"a\": 1,\n\"tools\": {}\n}\n").unwrap();
    let err = String::from_utf8_lossy(&run(home, &["setup", "qwen-code"]).stderr).into_owned();
    assert!(err.contains("lines 2 and 4"), "{err}");
}

/// `--remove` took out `mcpServers.writegate` (and Codex's table) whatever
/// it held. An entry of that name that is not what setup writes (changed
/// since, or the person's own) stays, with a message; the rest of
/// writegate's entries go.
#[test]
fn remove_leaves_an_entry_that_is_not_what_setup_wrote() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    assert!(run(home, &["setup", "qwen-code"]).status.success());
    let path = home.join(".qwen/settings.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    v["mcpServers"]["writegate"]["args"] = serde_json::json!(["mcp", "--workspace", "/mine"]);
    std::fs::write(&path, v.to_string()).unwrap();
    let o = run(home, &["setup", "qwen-code", "--remove"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{o:?}");
    assert!(
        text.contains(
            "left as it is: `mcpServers.writegate` is not the entry writegate setup writes"
        ),
        "{text}"
    );
    let after: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(
        after["mcpServers"], v["mcpServers"],
        "the person's entry stays"
    );
    assert!(after.get("tools").is_none(), "{after}");

    let codex = home.join(".codex/config.toml");
    assert!(run(home, &["setup", "codex"]).status.success());
    let mut text = std::fs::read_to_string(&codex).unwrap();
    text.push_str("startup_timeout_sec = 30\n");
    std::fs::write(&codex, &text).unwrap();
    let o = run(home, &["setup", "codex", "--remove"]);
    assert!(o.status.success(), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("`mcp_servers.writegate` is not the entry"),
        "{o:?}"
    );
    assert_eq!(std::fs::read_to_string(&codex).unwrap(), text);
}

/// Before, `--remove --dry-run` ended with a hint to run `writegate setup
/// X`, which installs; backups piled up one per run; `--remove` left an
/// empty `~/.gemini/policies/`; and Gemini's folder trust was only "run
/// gemini once".
#[test]
fn remove_dry_run_hints_remove_backups_stay_bounded_and_remove_leaves_no_empty_policies_dir() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let settings = h.join(".gemini/settings.json");
    std::fs::create_dir_all(settings.parent().unwrap()).unwrap();
    std::fs::write(&settings, "{\"ui\": {\"theme\": \"Dracula\"}}\n").unwrap();
    let o = run(h, &["setup", "gemini-cli"]);
    assert!(o.status.success(), "{o:?}");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(text.contains("trustedFolders.json"), "{text}");
    assert!(text.contains("TRUST_FOLDER"), "{text}");

    let o = run(h, &["setup", "gemini-cli", "--remove", "--dry-run"]);
    assert!(o.status.success(), "{o:?}");
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(
        text.contains("`writegate setup gemini-cli --remove` without --dry-run"),
        "{text}"
    );

    // Set up and take out again and again: at most three backups.
    for _ in 0..4 {
        assert!(
            run(h, &["setup", "gemini-cli", "--remove"])
                .status
                .success()
        );
        assert!(run(h, &["setup", "gemini-cli"]).status.success());
    }
    let backups = std::fs::read_dir(h.join(".gemini"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with("settings.json.writegate-backup-")
        })
        .count();
    assert!((1..=3).contains(&backups), "{backups} backups");
    let o = run(h, &["setup", "gemini-cli", "--remove"]);
    assert!(o.status.success(), "{o:?}");
    assert!(
        !h.join(".gemini/policies").exists(),
        "no empty policies/ left"
    );
}

/// `--sandbox` for a command-line agent: a launcher of the agent's command
/// name in writegate's bin directory that starts the agent under `writegate
/// run` (its own direct write in the project fails, its arguments arrive,
/// and with the launcher's directory first on PATH it does not start
/// itself); a second run changes nothing, and a plain `--remove` takes the
/// launcher out with the settings.
#[test]
fn sandbox_setup_writes_a_launcher_that_starts_the_agent_under_writegate_run() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let bin = home.join(".local/share/writegate/bin");
    for (agent, cmd) in [
        ("qwen-code", "qwen"),
        ("gemini-cli", "gemini"),
        ("claude-code", "claude"),
        ("codex", "codex"),
    ] {
        let o = run(home, &["setup", agent, "--sandbox"]);
        assert!(o.status.success(), "{agent}: {o:?}");
        let text = String::from_utf8_lossy(&o.stdout);
        let launcher = bin.join(cmd);
        assert!(
            text.contains(&format!("{}: created", launcher.display())),
            "{text}"
        );
        assert!(text.contains("export PATH=\""), "{text}");
        let m = std::fs::metadata(&launcher).unwrap();
        assert_eq!(m.permissions().mode() & 0o777, 0o700, "{agent}");
        let script = std::fs::read_to_string(&launcher).unwrap();
        assert!(
            script.starts_with("#!/bin/sh\n# Written by `writegate setup "),
            "{script}"
        );
        assert!(script.contains(" run -- "), "{script}");
        let again = run(home, &["setup", agent, "--sandbox"]);
        assert!(
            String::from_utf8_lossy(&again.stdout)
                .contains(&format!("{}: already set up", launcher.display())),
            "{again:?}"
        );
    }

    // The launcher starts the agent inside the sandbox (skipped without Landlock).
    let project = home.join("project");
    let agents = home.join("agents");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(&agents).unwrap();
    let runtime = home.join("runtime");
    std::fs::create_dir_all(&runtime).unwrap();
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700)).unwrap();
    let fake = agents.join("qwen");
    std::fs::write(
        &fake,
        "#!/bin/sh\necho \"args: $*\"\nif echo direct > direct.txt; then echo wrote; else echo refused; fi\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = Command::new(bin.join("qwen"))
        .args(["-p", "it's"])
        .current_dir(&project)
        .env_clear()
        .env("HOME", home)
        .env("XDG_RUNTIME_DIR", &runtime)
        .env(
            "PATH",
            format!("{}:{}:/usr/bin:/bin", bin.display(), agents.display()),
        )
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    if o.status.code() == Some(2) && err.contains("Landlock") {
        eprintln!("skipping the launcher's run: {}", err.trim());
    } else {
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(o.status.success(), "{o:?}");
        assert!(out.contains("args: -p it's\n"), "{out}");
        assert!(out.contains("refused\n"), "{out}");
        assert!(!project.join("direct.txt").exists());
        assert!(err.contains("Permission denied"), "{err}");
    }

    // A plain --remove takes the launcher out with the settings.
    let o = run(home, &["setup", "qwen-code", "--remove"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{o:?}");
    assert!(
        text.contains(&format!("{}: removed", bin.join("qwen").display())),
        "{text}"
    );
    assert!(!bin.join("qwen").exists());
    assert!(bin.join("gemini").exists());
    let o = run(home, &["setup", "gemini-cli", "--sandbox", "--remove"]);
    assert!(o.status.success(), "{o:?}");
    assert!(!bin.join("gemini").exists());
    // Without --sandbox, a set-up writes no launcher.
    assert!(run(home, &["setup", "qwen-code"]).status.success());
    assert!(!bin.join("qwen").exists());
}

/// A launcher of writegate's name that the person wrote is not replaced.
#[test]
fn sandbox_setup_leaves_a_launcher_of_the_persons_own() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let launcher = home.join(".local/share/writegate/bin/qwen");
    std::fs::create_dir_all(launcher.parent().unwrap()).unwrap();
    std::fs::write(&launcher, "#!/bin/sh\nexec my-qwen \"$@\"\n").unwrap();
    let o = run(home, &["setup", "qwen-code", "--sandbox"]);
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert_eq!(
        std::fs::read_to_string(&launcher).unwrap(),
        "#!/bin/sh\nexec my-qwen \"$@\"\n"
    );
}

/// Zed with `--sandbox`: its agent servers run behind `writegate proxy
/// --sandbox` (the proxy outside, the agent inside); a plain `--remove`
/// takes them out as it does the unsandboxed ones.
#[test]
fn sandbox_setup_for_zed_runs_its_agent_servers_behind_proxy_sandbox() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path();
    let o = run(home, &["setup", "zed", "--sandbox"]);
    assert!(o.status.success(), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stdout).contains("writegate proxy --sandbox"),
        "{o:?}"
    );
    let path = home.join(".config/zed/settings.json");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for name in ["qwen-code (writegate)", "gemini-cli (writegate)"] {
        let args = &v["agent_servers"][name]["args"];
        assert_eq!(
            args.as_array().unwrap()[..3],
            [
                serde_json::json!("proxy"),
                serde_json::json!("--sandbox"),
                serde_json::json!("--")
            ],
            "{v}"
        );
    }
    assert!(!home.join(".local/share/writegate/bin").exists());
    let o = run(home, &["setup", "zed", "--remove"]);
    let text = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{o:?}");
    assert!(!text.contains("left as it is"), "{text}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert!(
        v.get("agent_servers").is_none() && v.get("context_servers").is_none(),
        "{v}"
    );
}

/// `setup gemini-cli --remove` reformatted `~/.gemini/settings.json`
/// (objects writegate had added a member to stayed spread over lines, and
/// the layout was the editor's). Set-up and removal now change only
/// writegate's entries: on files with the person's own layout, comments
/// and trailing commas, set-up keeps every other byte in place and removal
/// gives back the file byte for byte, for every agent's JSON settings.
#[test]
fn regression_remove_reformatted_gemini_settings() {
    let odd = [
        (
            "gemini-cli",
            ".gemini/settings.json",
            "{\n\t// theme\n\t\"ui\":{\"theme\":\"Dracula\"},   \"mcpServers\" : { \"other\": {\"command\": \"x\"}, }, /* tail, with a comma */\n\t\"tools\": {\"exclude\": [\n\t\t\"ShellTool\", // mine\n\t]}\n}",
        ),
        (
            "qwen-code",
            ".qwen/settings.json",
            "  {\"model\":{\"name\":\"qwen3\"},\"tools\":{\"disabled\":[\"web_fetch\"]}}  \r\n",
        ),
        (
            "claude-code",
            ".claude/settings.json",
            "{\n    \"permissions\": {\n        \"allow\": [\"Bash(git status)\"],\n        \"deny\": [\n            \"WebFetch\"\n        ]\n    }, // mine\n    \"theme\": \"dark\"\n}\n",
        ),
        (
            "claude-code",
            ".claude.json",
            "{\"numStartups\": 3, \"mcpServers\": {\n  \"x\": {\"command\": \"y\"}\n}}",
        ),
    ];
    for (agent, file, before) in odd {
        let home = tempfile::tempdir().unwrap();
        let path = home.path().join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, before).unwrap();
        let o = run(home.path(), &["setup", agent]);
        assert!(o.status.success(), "{agent}: {o:?}");
        let after = std::fs::read_to_string(&path).unwrap();
        assert!(after.contains("writegate"), "{agent}: {after}");
        // Every byte of the person's text is still there, in order.
        let mut rest = after.as_str();
        for c in before.chars() {
            let at = rest
                .find(c)
                .unwrap_or_else(|| panic!("{agent}: lost {c:?}:\n{after}"));
            rest = &rest[at + c.len_utf8()..];
        }
        let o = run(home.path(), &["setup", agent, "--remove"]);
        assert!(o.status.success(), "{agent}: {o:?}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            before,
            "{agent} {file}: set up as\n{after}"
        );
    }
}
