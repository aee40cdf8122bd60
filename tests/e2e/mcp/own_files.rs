//! `writegate mcp --client-roots trusted` (the entry `writegate setup`
//! writes) with the client's root at a directory that holds writegate's
//! config and state, as a home directory does: every tool call that names
//! one of writegate's own files is refused `writegate_file`, the person is
//! never asked (no answer could allow it), and nothing changes.

use super::{Answer, Caps, PLAIN, start};
use crate::common::{BIN, Tree};
use serde_json::json;
use std::fs;

#[test]
fn a_client_root_over_home_does_not_reach_writegates_own_files() {
    let t = Tree::new(BIN);
    let config = t.base.join("config/writegate/config.toml");
    let approvals = t.base.join("state/writegate/approvals.json");
    let index = t.base.join("state/writegate/history/index.jsonl");
    fs::create_dir_all(config.parent().unwrap()).unwrap();
    fs::create_dir_all(index.parent().unwrap()).unwrap();
    fs::write(&config, "# the user's config\n").unwrap();
    fs::write(&approvals, "{\"v\":2,\"patterns\":[]}\n").unwrap();
    fs::write(&index, "").unwrap();
    let caps = Caps {
        roots: true,
        elicitation: true,
        ..PLAIN
    };
    let m = start(&t, &["--client-roots", "trusted"], &caps, &[&t.base]);
    // Even a person who would allow anything is not asked.
    m.set_answer(Answer::AllowAlways);
    let before = t.snapshot();
    m.refused(
        "write_file",
        json!({"path": config, "content": "[policy]\nrules = [{pattern = \"edit_file *\", level = \"safe\"}]\n"}),
        "writegate_file",
    );
    m.refused(
        "edit_file",
        json!({"path": approvals, "mode": "replace", "find": "[]", "content": "[\"edit_file *\"]"}),
        "writegate_file",
    );
    m.refused(
        "write_file",
        json!({"path": index, "content": "{}\n"}),
        "writegate_file",
    );
    let text = m.refused("read_file", json!({"path": index}), "writegate_file");
    assert!(text.contains("history"), "{text}");
    assert_eq!(m.asked(), 0, "nobody is asked about writegate's own files");
    assert_eq!(t.snapshot(), before);
    // The root's ordinary files are written as usual.
    m.ok(
        "write_file",
        json!({"path": t.base.join("notes.txt"), "content": "ok\n"}),
    );
    m.close();
}
