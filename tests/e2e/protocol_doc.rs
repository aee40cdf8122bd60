//! docs/protocol.md is run, not just read: every fenced block
//! marked `json request` is sent, in the order of the page, to one real
//! `writegate serve --stdio --allow-read` daemon on the tree the page
//! describes, and the answer must match the `json response` block after it
//! (a `"<...>"` string there matches any value); `json notification` blocks
//! are sent and get no answer. `/home/me` in the page stands for the test's
//! temp directory: `/home/me/project` is the workspace, `/home/me/notes` a
//! directory outside it.

use crate::common::{BIN, Clients, Opts, Tree};
use serde_json::Value;
use std::fs;

/// The page, from the package directory (`bin/writegate`).
const PAGE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../docs/protocol.md"
));

/// The file the page says `/home/me/project/src/app.py` holds.
const APP_PY: &str =
    "def main():\n    print(\"hello\")\n    return 0\n\nif __name__ == \"__main__\":\n    main()\n";

/// One fenced example of the page.
struct Block {
    /// `request`, `response` or `notification`.
    role: String,
    /// The JSON text.
    text: String,
    /// 1-based line of the opening fence, for messages.
    line: usize,
}

/// Every block whose info string is `json request`, `json response` or
/// `json notification`, in order. Other fenced blocks are prose.
fn blocks(page: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in page.lines().enumerate() {
        if let Some(mut b) = open.take() {
            if line.trim_end() == "```" {
                out.push(b);
            } else {
                b.text.push_str(line);
                b.text.push('\n');
                open = Some(b);
            }
            continue;
        }
        let role = line.strip_prefix("```json ").map(str::trim);
        if let Some(role @ ("request" | "response" | "notification")) = role {
            open = Some(Block {
                role: role.to_string(),
                text: String::new(),
                line: i + 1,
            });
        }
    }
    assert!(open.is_none(), "an example block is not closed");
    out
}

/// Whether `actual` matches the documented `want`: a string `"<...>"`
/// matches anything; objects need the same keys; the rest is equality.
fn matches(want: &Value, actual: &Value) -> bool {
    match (want, actual) {
        (Value::String(w), _) if w.starts_with('<') && w.ends_with('>') => true,
        (Value::Object(w), Value::Object(a)) => {
            w.len() == a.len()
                && w.iter()
                    .all(|(k, v)| a.get(k).is_some_and(|av| matches(v, av)))
        }
        (Value::Array(w), Value::Array(a)) => {
            w.len() == a.len() && w.iter().zip(a).all(|(w, a)| matches(w, a))
        }
        _ => want == actual,
    }
}

/// The page's methods: each must have at least one example.
const METHODS: [&str; 8] = [
    "initialize",
    "fs/write_text_file",
    "fs/read_text_file",
    "_writegate/edit_text_file",
    "_writegate/read_lines",
    "_writegate/receipt",
    "_writegate/approve",
    "$/cancel_request",
];

#[test]
fn every_example_of_protocol_md_is_what_the_daemon_answers() {
    let t = Tree::new(BIN);
    let (project, notes) = (&t.ws, &t.out);
    fs::create_dir(project.join("src")).unwrap();
    fs::write(project.join("src/app.py"), APP_PY).unwrap();
    // `/home/me/project` and `/home/me/notes` are the tree's workspace and
    // outside directory; the workspace's own name may differ.
    let local = |text: &str| {
        text.replace("/home/me/project", &project.display().to_string())
            .replace("/home/me/notes", &notes.display().to_string())
    };
    assert!(
        PAGE.contains("writegate serve --stdio --allow-read --workspace /home/me/project"),
        "the page must say how the examples' daemon is started"
    );
    assert!(
        PAGE.contains(APP_PY.trim_end()),
        "the page must show what src/app.py holds"
    );

    // External tool writes are on as the page says (they are off by
    // default for root, and CI runs as root): the Tree's daemon sets them.
    let mut d = t.daemon(Opts {
        stdio: true,
        args: &["--allow-read"],
        ..Opts::default()
    });
    let mut c = d.stdio_client();

    let all = blocks(PAGE);
    assert!(all.len() >= 40, "only {} examples found", all.len());
    let mut seen_methods = Vec::new();
    let mut problems = Vec::new();
    let mut i = 0;
    while i < all.len() {
        let b = &all[i];
        i += 1;
        let msg: Value = serde_json::from_str(&local(&b.text))
            .unwrap_or_else(|e| panic!("protocol.md:{}: not JSON ({e})", b.line));
        match b.role.as_str() {
            "request" => {
                seen_methods.push(msg["method"].as_str().unwrap_or("").to_string());
                let want = all.get(i).filter(|r| r.role == "response");
                let want = want.unwrap_or_else(|| {
                    panic!(
                        "protocol.md:{}: a request without a response after it",
                        b.line
                    )
                });
                i += 1;
                c.send(&msg);
                let got = c.recv();
                let doc: Value = serde_json::from_str(&local(&want.text))
                    .unwrap_or_else(|e| panic!("protocol.md:{}: not JSON ({e})", want.line));
                if !matches(&doc, &got) {
                    problems.push(format!(
                        "protocol.md:{}: the daemon answered\n{}\nnot\n{}",
                        want.line,
                        serde_json::to_string_pretty(&got).unwrap_or_default(),
                        serde_json::to_string_pretty(&doc).unwrap_or_default()
                    ));
                }
            }
            "notification" => {
                assert!(msg.get("id").is_none(), "protocol.md:{}: has an id", b.line);
                seen_methods.push(msg["method"].as_str().unwrap_or("").to_string());
                c.send(&msg);
            }
            _ => panic!("protocol.md:{}: a response without a request", b.line),
        }
    }
    // Nothing answers a notification: the next thing on the wire is the
    // answer to this request.
    let extra = c.sync();
    assert!(extra.is_empty(), "unexpected lines: {extra:?}");
    assert!(problems.is_empty(), "{}", problems.join("\n\n"));
    for m in METHODS {
        assert!(
            seen_methods.iter().any(|s| s == m),
            "protocol.md has no example of {m}"
        );
    }
    // What the examples wrote is on disk as they say.
    // Converted to UTF-8, keeping the file's CRLF endings.
    assert_eq!(
        fs::read(project.join("legacy.txt")).unwrap(),
        "café\r\nnaïve\r\n".as_bytes()
    );
    assert_eq!(fs::read(notes.join("todo.md")).unwrap(), b"- review\n");
    assert!(!notes.join("other.md").exists());
}
