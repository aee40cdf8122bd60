//! Client roots as workspaces of `writegate mcp`, as the config and
//! `--client-roots` say; a root at a home directory that still cannot
//! read SSH keys; the client's roots before the directory writegate was
//! started in.

use super::{Caps, PLAIN, one_event, start, start_in, ws_arg};
use crate::common::{BIN, TIMEOUT, Tree, TreeAudit};
use rmcp::model::ProtocolVersion;
use serde_json::json;
use std::fs;

#[test]
fn client_roots_become_workspaces_as_the_config_says() {
    let t = Tree::new(BIN);
    let caps = Caps {
        roots: true,
        ..PLAIN
    };
    fs::write(t.wsb.join("b.txt"), "b\n").unwrap();

    // Default: untrusted. Readable; writes refused with how to trust them.
    let m = start(&t, &[], &caps, &[&t.wsb]);
    m.ok("read_file", json!({"path": t.wsb.join("b.txt")}));
    let txt = m.refused(
        "write_file",
        json!({"path": t.wsb.join("n.txt"), "content": "x"}),
        "untrusted_workspace",
    );
    assert!(
        txt.contains("client_roots") && txt.contains("--workspace"),
        "{txt}"
    );
    assert!(!t.wsb.join("n.txt").exists());
    m.close();

    // Trusted by the config; a nested root is logged and skipped; the
    // list changes: a new root is used, a dropped one is no longer routed to.
    let config = t.base.join("config/trusted.toml");
    fs::write(&config, "[mcp]\nclient_roots = \"trusted\"\n").unwrap();
    let nested = t.wsb.join("sub");
    fs::create_dir(&nested).unwrap();
    let m = start(
        &t,
        &["--config", &config.display().to_string()],
        &caps,
        &[&t.wsb, &nested],
    );
    m.ok(
        "write_file",
        json!({"path": t.wsb.join("n.txt"), "content": "x"}),
    );
    m.ok(
        "write_file",
        json!({"path": nested.join("in.txt"), "content": "y"}),
    );
    assert_eq!(fs::read(t.wsb.join("sub/in.txt")).unwrap(), b"y");
    assert!(
        m.stderr_text().contains("client root not registered"),
        "{}",
        m.stderr_text()
    );
    *m.roots.lock().unwrap() = vec![t.ws.clone()];
    m.rt.block_on(m.client().notify_roots_list_changed())
        .unwrap();
    // The change is applied when the notification is handled: wait for it
    // through the tools' descriptions, which name the workspaces.
    let deadline = std::time::Instant::now() + TIMEOUT;
    loop {
        let tools = m.rt.block_on(m.client().list_all_tools()).unwrap();
        if tools[0]
            .description
            .as_deref()
            .unwrap()
            .contains(&format!("The workspace is {};", t.ws.display()))
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "roots change not applied"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    m.ok("write_file", json!({"path": "new.txt", "content": "z"}));
    assert_eq!(fs::read(t.ws.join("new.txt")).unwrap(), b"z");
    let txt = m.refused(
        "write_file",
        json!({"path": t.wsb.join("n.txt"), "content": "x2"}),
        "path_outside_workspace",
    );
    assert!(txt.contains(&ws_arg(&t)), "{txt}");
    m.close();

    // "ignore": no workspace at all; a clear error, and the server answers on.
    let config = t.base.join("config/ignore.toml");
    fs::write(&config, "[mcp]\nclient_roots = \"ignore\"\n").unwrap();
    let m = start(
        &t,
        &["--config", &config.display().to_string()],
        &caps,
        &[&t.wsb],
    );
    for _ in 0..2 {
        let txt = m.refused(
            "read_file",
            json!({"path": t.wsb.join("b.txt")}),
            "no_workspace",
        );
        assert!(txt.contains("--workspace"), "{txt}");
    }
    m.close();

    // A --workspace root the client also lists keeps its trust; with the
    // default (untrusted) the other client root stays read-only.
    let m = start(&t, &["--workspace", &ws_arg(&t)], &caps, &[&t.ws, &t.wsb]);
    m.ok(
        "write_file",
        json!({"path": t.ws.join("w.txt"), "content": "w"}),
    );
    m.ok("read_file", json!({"path": t.wsb.join("b.txt")}));
    m.refused(
        "edit_file",
        json!({"path": t.wsb.join("b.txt"), "mode": "append", "content": "c"}),
        "untrusted_workspace",
    );
    m.close();
}

/// MCP client roots were readable whole: a client root of a home
/// directory let the model read `.ssh/id_rsa`. In a workspace that only
/// the client's roots named, a credential path is held like a write to it:
/// the person is asked (here the client cannot ask, so it is refused), and
/// ordinary files there still read freely.
#[test]
fn a_client_root_of_a_home_directory_cannot_read_ssh_keys() {
    let t = Tree::new(BIN);
    let caps = Caps {
        roots: true,
        ..PLAIN
    };
    let home = t.wsb.clone();
    fs::create_dir(home.join(".ssh")).unwrap();
    let key = home.join(".ssh/id_rsa");
    fs::write(&key, "SECRET KEY\n").unwrap();
    fs::write(home.join(".env"), "TOKEN=1\n").unwrap();
    fs::write(home.join("notes.txt"), "hello\n").unwrap();
    let mut audit = t.audit();
    let m = start(&t, &[], &caps, &[&home]);
    let (txt, _) = m.ok("read_file", json!({"path": home.join("notes.txt")}));
    assert!(txt.contains("hello"), "{txt}");
    one_event(&mut audit, "fs.access", "read_file");
    for secret in [key.clone(), home.join(".env")] {
        let txt = m.refused("read_file", json!({"path": secret}), "approval_required");
        assert!(!txt.contains("SECRET") && !txt.contains("TOKEN"), "{txt}");
        one_event(&mut audit, "fs.denied", "read_file");
    }
    m.close();
}

/// `--client-roots trusted` (what `writegate setup` writes): the session's
/// roots are writable workspaces with no `--workspace` and no config.
#[test]
fn client_roots_flag_trusts_the_sessions_roots() {
    let t = Tree::new(BIN);
    let caps = Caps {
        roots: true,
        ..PLAIN
    };
    let m = start(&t, &["--client-roots", "trusted"], &caps, &[&t.wsb]);
    m.ok(
        "write_file",
        json!({"path": t.wsb.join("n.txt"), "content": "x\n"}),
    );
    assert_eq!(fs::read(t.wsb.join("n.txt")).unwrap(), b"x\n");
    // Outside the roots is still refused.
    m.refused(
        "write_file",
        json!({"path": t.ws.join("o.txt"), "content": "x"}),
        "path_outside_workspace",
    );
    assert!(!t.ws.join("o.txt").exists());
    m.close();
}

#[test]
fn the_client_roots_come_before_the_directory_writegate_was_started_in() {
    let t = Tree::new(BIN);
    let caps = Caps {
        roots: true,
        elicitation: false,
        version: ProtocolVersion::V_2025_06_18,
    };
    let args = ["--client-roots", "trusted", "--cwd-workspace"];
    // The client shares a root: the started-in directory is no workspace.
    let m = start_in(&t, &t.ws, &args, &caps, &[&t.wsb]);
    m.ok(
        "write_file",
        json!({"path": t.wsb.join("r.txt"), "content": "r"}),
    );
    m.refused(
        "write_file",
        json!({"path": t.ws.join("c.txt"), "content": "c"}),
        "path_outside_workspace",
    );
    m.close();
    // It shares none: the started-in directory is the workspace.
    let m = start_in(&t, &t.ws, &args, &caps, &[]);
    m.ok("write_file", json!({"path": "c.txt", "content": "c"}));
    assert_eq!(fs::read(t.ws.join("c.txt")).unwrap(), b"c");
    m.close();
}
