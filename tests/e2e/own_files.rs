//! writegate's own files (its config, approvals, state directory with the
//! audit log, intent journals and history store, runtime directory) are
//! out of every agent's reach through `writegate serve`: a marked write
//! outside the workspace, a write inside a workspace that holds them, and
//! a read are all refused `writegate_file`, with nothing changed and no
//! approval able to let them through. (The proxy and MCP routes have their
//! own tests in `proxy.rs` and `mcp/own_files.rs`.)

use crate::common::{
    BIN, Clients, Tree, TreeAudit, assert_refused, marked_write, marker, refused_unchanged,
    stdio_session, write_params,
};
use serde_json::json;
use std::fs;
use std::path::{Path, PathBuf};

/// The files an agent turned the gate off with: the config (a rule that
/// rates every edit `safe`), the approvals file (a standing pattern), and
/// the history index (a planted undo record). Created with content a test
/// can check is kept.
fn plant_own_files(t: &Tree) -> Vec<(PathBuf, &'static str)> {
    let config = t.base.join("config/writegate/config.toml");
    let approvals = t.base.join("state/writegate/approvals.json");
    let index = t.base.join("state/writegate/history/index.jsonl");
    for p in [&config, &approvals, &index] {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
    }
    fs::write(&config, "# the user's config\n").unwrap();
    fs::write(&approvals, "{\"v\":2,\"patterns\":[]}\n").unwrap();
    vec![
        (
            config,
            "[policy]\nrules = [{pattern = \"edit_file *\", level = \"safe\"}]\n",
        ),
        (approvals, "{\"v\":2,\"patterns\":[\"edit_file *\"]}\n"),
        (index, "{\"opId\":\"planted\"}\n"),
    ]
}

fn bytes(p: &Path) -> Option<Vec<u8>> {
    fs::read(p).ok()
}

#[test]
fn a_marked_write_to_writegates_config_approvals_or_history_is_refused_approval_or_not() {
    let t = Tree::new(BIN);
    let targets = plant_own_files(&t);
    let (_d, mut c, mut audit) = stdio_session(&t, &["--allow-read"]);
    for (path, content) in &targets {
        let before = bytes(path);
        let ev = refused_unchanged(
            &t,
            &mut c,
            &mut audit,
            "fs/write_text_file",
            marked_write(path, content, marker("write_file")),
            "writegate_file",
        );
        assert_eq!(ev["writer"], "external", "{ev}");
        assert_eq!(bytes(path), before, "{}", path.display());
        // A read of it is refused too.
        refused_unchanged(
            &t,
            &mut c,
            &mut audit,
            "fs/read_text_file",
            json!({"sessionId": "s", "path": path}),
            "writegate_file",
        );
    }
    // A before-image of a held `.env` is not served where `.env` itself
    // would be held: the store is never read for an agent.
    let image = t.base.join("state/writegate/history/images/w-1");
    fs::create_dir_all(image.parent().unwrap()).unwrap();
    fs::write(&image, "SECRET=1\n").unwrap();
    let ev = refused_unchanged(
        &t,
        &mut c,
        &mut audit,
        "fs/read_text_file",
        json!({"sessionId": "s", "path": image}),
        "writegate_file",
    );
    assert_eq!(ev["writer"], "external", "{ev}");
    // An approval of the exact command changes nothing: the refusal comes
    // before the gate.
    let (config, content) = &targets[0];
    let command = format!("edit_file write {}", config.display());
    let r = c.call(
        "_writegate/approve",
        json!({"sessionId": "s", "command": command, "scope": "workspace"}),
    );
    assert!(r["result"].is_object(), "{r}");
    audit.new_events();
    let mut params = marked_write(config, content, marker("write_file"));
    params["sessionId"] = json!("s");
    let r = c.call("fs/write_text_file", params);
    assert_refused(&r, "writegate_file");
    let message = r["error"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("writegate_file: ") && message.contains("writegate's config"),
        "{message}"
    );
    assert_eq!(fs::read(config).unwrap(), b"# the user's config\n");
}

#[test]
fn a_workspace_that_holds_writegates_state_cannot_reach_it() {
    let t = Tree::new(BIN);
    let targets = plant_own_files(&t);
    // The whole tree is the workspace: config/ and state/ are inside it.
    let mut cmd = t.command();
    cmd.args(["serve", "--stdio", "--allow-read", "--workspace"])
        .arg(&t.base)
        .arg("--audit-log")
        .arg(&t.audit_log);
    let mut d = t.spawn(cmd, true, None);
    let mut c = d.stdio_client();
    let mut audit = t.audit();
    for (path, content) in &targets {
        refused_unchanged(
            &t,
            &mut c,
            &mut audit,
            "fs/write_text_file",
            write_params(path, content),
            "writegate_file",
        );
        refused_unchanged(
            &t,
            &mut c,
            &mut audit,
            "_writegate/edit_text_file",
            json!({"sessionId": "s", "path": path, "mode": "append", "content": "x\n"}),
            "writegate_file",
        );
    }
    // The audit log and a before-image (a new file under the history
    // store's images) are as unreachable, and so is a file that does not
    // exist yet in the config directory.
    for path in [
        t.audit_log.clone(),
        t.base.join("state/writegate/history/images/x"),
        t.base.join("config/writegate/other.toml"),
    ] {
        refused_unchanged(
            &t,
            &mut c,
            &mut audit,
            "fs/write_text_file",
            write_params(&path, "x\n"),
            "writegate_file",
        );
    }
    refused_unchanged(
        &t,
        &mut c,
        &mut audit,
        "_writegate/read_lines",
        json!({"sessionId": "s", "path": t.audit_log}),
        "writegate_file",
    );
    // An ordinary file beside them is written as usual.
    let r = c.call(
        "fs/write_text_file",
        write_params(&t.base.join("config/notes.txt"), "ok\n"),
    );
    assert_eq!(r["result"], json!({}), "{r}");
}

#[test]
fn the_config_file_named_with_dash_dash_config_is_refused_and_so_is_one_reached_through_a_symlink()
{
    let t = Tree::new(BIN);
    let config = t.out.join("my-writegate.toml");
    fs::write(&config, "# mine\n").unwrap();
    // The agent names the config through a symlink of its own making
    // elsewhere: the canonical path is what counts.
    let link_dir = t.out.join("via");
    std::os::unix::fs::symlink(t.base.join("config"), &link_dir).unwrap();
    fs::create_dir_all(t.base.join("config/writegate")).unwrap();
    let (_d, mut c, mut audit) =
        stdio_session(&t, &["--config", config.to_str().unwrap(), "--allow-read"]);
    for path in [config.clone(), link_dir.join("writegate/config.toml")] {
        refused_unchanged(
            &t,
            &mut c,
            &mut audit,
            "fs/write_text_file",
            marked_write(&path, "x = 1\n", marker("edit")),
            "writegate_file",
        );
    }
    assert_eq!(fs::read(&config).unwrap(), b"# mine\n");
    assert!(!t.base.join("config/writegate/config.toml").exists());
}
