//! Checks behind the "Architecture Invariant" lines of docs/ARCHITECTURE.md.
//! Each test names the invariant it backs. They read the source tree, so a
//! change that breaks a boundary fails here with the file and line.

use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out
}

/// Lines of non-test code: everything before a `#[cfg(test)]` module.
fn code_lines(file: &Path) -> Vec<(usize, String)> {
    let text = std::fs::read_to_string(file).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        // The test module ends the code; a `#[cfg(test)]` on one item (a
        // test-only function before more code) does not: stopping there
        // left the rest of the file unchecked.
        if line.trim_start().starts_with("#[cfg(test)]") {
            let next = lines.get(i + 1).map_or("", |l| l.trim_start());
            if next.starts_with("mod ") || next.starts_with("pub mod ") {
                break;
            }
            continue;
        }
        let t = line.trim_start();
        if t.starts_with("//") {
            continue;
        }
        out.push((i + 1, line.to_string()));
    }
    out
}

fn find(crates: &[&str], needles: &[&str]) -> Vec<String> {
    let mut hits = Vec::new();
    for c in crates {
        let dir = repo().join(c).join("src");
        for f in rust_files(&dir) {
            for (n, line) in code_lines(&f) {
                for needle in needles {
                    if line.contains(needle) {
                        hits.push(format!("{}:{n}: {}", f.display(), line.trim()));
                    }
                }
            }
        }
    }
    hits
}

/// Every crate: each directory under `crates/`, and the binary. A check
/// runs over all of them but the ones it exempts by name, so a new crate
/// is checked from its first line.
fn every_crate() -> Vec<String> {
    let mut crates: Vec<String> = std::fs::read_dir(repo().join("crates"))
        .unwrap()
        .map(|e| format!("crates/{}", e.unwrap().file_name().to_string_lossy()))
        .collect();
    crates.push("bin/writegate".to_string());
    crates.sort();
    assert!(crates.len() >= 10, "{crates:?}");
    crates
}

/// [`every_crate`] but `exempt` (each of which must exist: a renamed crate
/// cannot stay exempt by accident).
fn every_crate_but(exempt: &[&str]) -> Vec<String> {
    let all = every_crate();
    for e in exempt {
        assert!(
            all.iter().any(|c| c == e),
            "the exemption {e} names no crate"
        );
    }
    all.into_iter()
        .filter(|c| !exempt.contains(&c.as_str()))
        .collect()
}

fn refs(crates: &[String]) -> Vec<&str> {
    crates.iter().map(String::as_str).collect()
}

const WRITE_APIS: &[&str] = &[
    "fs::write(",
    "File::create",
    "OpenOptions",
    "fs::rename",
    "fs::remove_file",
    "fs::remove_dir",
    "fs::create_dir",
    "set_permissions",
    "renameat",
    "unlinkat",
    "openat(",
    "fchmod",
    "fchown",
    "mkdirat",
];

/// Architecture Invariant: only `crates/fs` writes to the disk.
#[test]
fn only_the_fs_crate_writes_to_disk() {
    // crates/fs writes; the testkit is test-only (temp trees, tmpfs).
    let crates = every_crate_but(&["crates/fs", "crates/testkit"]);
    let hits = find(&refs(&crates), WRITE_APIS);
    assert!(
        hits.is_empty(),
        "disk writes outside crates/fs:\n{}",
        hits.join("\n")
    );
}

/// Architecture Invariant: the text and JSON-scan crates are pure: no
/// filesystem, no IO.
#[test]
fn the_text_crate_does_no_io() {
    let hits = find(
        &["crates/text", "crates/jsonscan"],
        &["std::fs", "std::io", "std::net", "std::process", "tokio"],
    );
    assert!(hits.is_empty(), "IO in a pure crate:\n{}", hits.join("\n"));
}

/// Architecture Invariant: the paths crate never opens a file (it may only
/// lstat, readlink and realpath).
#[test]
fn the_paths_crate_opens_nothing() {
    let hits = find(
        &["crates/paths"],
        &[
            "File::open",
            "OpenOptions",
            "fs::read(",
            "read_to_string",
            "openat",
        ],
    );
    assert!(
        hits.is_empty(),
        "file opens in crates/paths:\n{}",
        hits.join("\n")
    );
}

/// Architecture Invariant: async code only at the edge: no crate but the
/// front ends (`writegate-acp`, `writegate-proxy`, `writegate-mcp`), their
/// stdio ends (`writegate-stdio`) and the binary depends on tokio.
#[test]
fn only_the_edge_depends_on_tokio() {
    let edge = [
        "crates/acp",
        "crates/proxy",
        "crates/mcp",
        "crates/stdio",
        "crates/testkit",
        "bin/writegate",
    ];
    for c in every_crate_but(&edge) {
        let toml = std::fs::read_to_string(repo().join(&c).join("Cargo.toml")).unwrap();
        let deps = toml.split("[dev-dependencies]").next().unwrap();
        for banned in ["tokio", "futures", "async-"] {
            assert!(!deps.contains(banned), "{c} depends on {banned}");
        }
    }
}

/// Architecture Invariant: nothing but protocol lines on stdout: library
/// crates never print.
#[test]
fn library_crates_never_print_to_stdout() {
    // The binary prints its CLI output; the testkit is test-only.
    let crates = every_crate_but(&["bin/writegate", "crates/testkit"]);
    let hits = find(
        &refs(&crates),
        &["println!", "print!(", "std::io::stdout", "dbg!("],
    );
    // The stdout handles are the stdio ends (`writegate-stdio`: `serve
    // --stdio`, the proxy's editor side and `writegate mcp`), which write
    // protocol lines only.
    let hits: Vec<_> = hits
        .into_iter()
        .filter(|h| !(h.contains("crates/stdio/src/lib.rs") && h.contains("io::stdout()")))
        .collect();
    assert!(
        hits.is_empty(),
        "prints in library crates:\n{}",
        hits.join("\n")
    );
}

/// Architecture Invariant: each crate states its job and what it must never
/// do in a `//!` paragraph.
#[test]
fn every_crate_states_its_job() {
    // Every crate under crates/, so a new one cannot be forgotten here.
    let mut crates: Vec<String> = std::fs::read_dir(repo().join("crates"))
        .unwrap()
        .map(|e| format!("crates/{}", e.unwrap().file_name().to_string_lossy()))
        .collect();
    crates.sort();
    assert!(crates.len() >= 9, "{crates:?}");
    for c in &crates {
        let lib = std::fs::read_to_string(repo().join(c).join("src/lib.rs")).unwrap();
        assert!(
            lib.starts_with("//!"),
            "{c}/src/lib.rs does not start with a //! paragraph"
        );
        let head: String = lib
            .lines()
            .take_while(|l| l.starts_with("//!"))
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            head.contains("never"),
            "{c}: the //! paragraph must say what the crate must never do"
        );
    }
}

/// Architecture Invariant: the project does not depend on anything outside
/// the repository to pass (`../shared` above all): no source names it, and
/// no test reads a path outside the repository.
#[test]
fn tests_read_only_the_repository() {
    let hits = find(
        &[
            "crates/text",
            "crates/jsonscan",
            "crates/stdio",
            "crates/paths",
            "crates/fs",
            "crates/core",
            "crates/acp",
            "crates/proxy",
            "crates/mcp",
            "bin/writegate",
        ],
        &["../shared", "shared/cases"],
    );
    assert!(hits.is_empty(), "{}", hits.join("\n"));
    for f in rust_files(&repo().join("tests")) {
        if f.ends_with("architecture.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.contains("include_str!(\"../")
                || line.contains("\"../shared")
                || line.contains("/work/shared")
            {
                panic!("{}:{}: reads outside the repository", f.display(), n + 1);
            }
        }
    }
}

/// Architecture Invariant: core speaks no wire: it may write its own
/// outcomes' serde shape as bytes (`read_answer`, the audit line), but
/// knows no envelope: no JSON values, no `_meta` keys, no JSON-RPC message
/// or code, no MCP content blocks in `writegate-core`.
#[test]
fn core_speaks_no_wire() {
    let hits = find(
        &["crates/core"],
        &[
            "serde_json::Value",
            "serde_json::Map",
            "json!(",
            "\"_meta\"",
            "-32",
            "qwen-code/",
            "jsonrpc",
            "structuredContent",
            "\"content\":[",
            "content\\\":[",
        ],
    );
    assert!(
        hits.is_empty(),
        "wire types in crates/core:\n{}",
        hits.join("\n")
    );
}

/// Architecture Invariant: method names live in the method table: outside
/// `crates/acp/src/methods/` no ACP source names a method (the proxy takes
/// ACP's own names from the SDK's schema and asks the table which ones
/// writegate answers).
#[test]
fn method_names_live_in_the_table() {
    let hits: Vec<_> = find(
        &["crates/acp", "crates/proxy"],
        &["\"fs/", "\"_writegate/", "\"initialize\""],
    )
    .into_iter()
    .filter(|h| !h.contains("crates/acp/src/methods/"))
    .collect();
    assert!(
        hits.is_empty(),
        "method names outside the table:\n{}",
        hits.join("\n")
    );
}

/// Architecture Invariant: every method module is one row of the table
/// (adding a method is one module plus one line).
#[test]
fn every_method_module_is_in_the_table() {
    let dir = repo().join("crates/acp/src/methods");
    let table = std::fs::read_to_string(dir.join("mod.rs")).unwrap();
    for f in rust_files(&dir) {
        let name = f.file_stem().unwrap().to_string_lossy().into_owned();
        if name == "mod" || name == "cancel_request" {
            continue;
        }
        assert!(
            table.contains(&format!("entry::<{name}::")),
            "methods/{name}.rs has no row in TABLE"
        );
    }
}

/// Architecture Invariant: every MCP tool module is a row of `TOOLS`
/// (`tools/list` and `tools/call` are both derived from it).
#[test]
fn every_tool_module_is_in_the_table() {
    let dir = repo().join("crates/mcp/src/tools");
    let table = std::fs::read_to_string(dir.join("mod.rs")).unwrap();
    let mut modules = 0;
    for f in rust_files(&dir) {
        let name = f.file_stem().unwrap().to_string_lossy().into_owned();
        if name == "mod" {
            continue;
        }
        modules += 1;
        assert!(
            table.contains(&format!("entry::<{name}::")),
            "tools/{name}.rs has no row in TOOLS"
        );
    }
    assert!(modules >= 3, "the tool modules were not found");
}

/// Architecture Invariant: what a transport allows is decided in one
/// place per front end, its `crates/*/src/transport.rs`; nothing else
/// grants a capability (any field of `Allowances`), and core's default
/// allows nothing (checked in `writegate-core`'s `api` tests).
#[test]
fn only_the_transport_table_grants_capabilities() {
    let crates = every_crate();
    let hits: Vec<_> = find(
        &refs(&crates),
        &[
            "external_writer: true",
            "choose_workspace: true",
            "reads: true",
        ],
    )
    .into_iter()
    .filter(|h| {
        let file = h.split(':').next().unwrap_or_default();
        let p = Path::new(file);
        let in_transport_rs = p.ends_with("src/transport.rs")
            && p.parent()
                .and_then(Path::parent)
                .and_then(Path::parent)
                .is_some_and(|crates| crates.ends_with("crates"));
        !in_transport_rs
    })
    .collect();
    assert!(
        hits.is_empty(),
        "capabilities granted outside transport.rs:\n{}",
        hits.join("\n")
    );
}

/// Architecture Invariant: log lines never carry a `Debug` dump (a dump can
/// carry a path or file text the audit would hash):
/// no `field = ?value`, `?value` shorthand, `{x:?}` or `{:#?}` inside a
/// tracing macro, in any crate's non-test code. Values are logged with `%` (Display) or as plain
/// numbers and strings.
#[test]
fn logs_never_dump_debug() {
    let dirs: Vec<PathBuf> = every_crate()
        .iter()
        .map(|c| repo().join(c).join("src"))
        .collect();
    let macros = [
        "trace!(", "debug!(", "info!(", "warn!(", "error!(", "event!(", "span!(",
    ];
    let mut hits = Vec::new();
    for dir in dirs.iter().filter(|d| d.is_dir()) {
        for f in rust_files(dir) {
            let lines = code_lines(&f);
            let text: String = lines.iter().flat_map(|(_, l)| [l.as_str(), "\n"]).collect();
            for m in macros {
                let mut from = 0;
                while let Some(at) = text[from..].find(m) {
                    let start = from + at + m.len();
                    let mut depth = 1;
                    let mut end = start;
                    for (i, c) in text[start..].char_indices() {
                        match c {
                            '(' => depth += 1,
                            ')' => depth -= 1,
                            _ => {}
                        }
                        if depth == 0 {
                            end = start + i;
                            break;
                        }
                    }
                    let body = &text[start..end.max(start)];
                    let squeezed: String = body.split_whitespace().collect();
                    // `?ident` shorthand: a `?` right after the macro's `(`
                    // or after a `,` between its arguments.
                    let shorthand = squeezed.starts_with('?') || squeezed.contains(",?");
                    if squeezed.contains("=?")
                        || shorthand
                        || body.contains(":?}")
                        || body.contains(":#?}")
                    {
                        let line = lines[text[..start].matches('\n').count()].0;
                        hits.push(format!("{}:{line}: {m}{}", f.display(), body.trim()));
                    }
                    from = end.max(start);
                }
            }
        }
    }
    assert!(
        hits.is_empty(),
        "Debug dumps in log lines:\n{}",
        hits.join("\n")
    );
}

/// Architecture Invariant: the test kit is test-only: no crate has
/// `writegate-testkit` among its `[dependencies]` (only among its
/// `[dev-dependencies]`), and the kit depends on no writegate crate, so it
/// compiles fast and drives the code under test only through the binary a
/// test names.
#[test]
fn the_testkit_is_only_a_dev_dependency() {
    let mut manifests: Vec<PathBuf> = std::fs::read_dir(repo().join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path().join("Cargo.toml"))
        .collect();
    manifests.push(repo().join("bin/writegate/Cargo.toml"));
    for m in &manifests {
        let toml = std::fs::read_to_string(m).unwrap();
        // Every table but the dev-dependencies one.
        for table in toml
            .split("\n[")
            .filter(|t| !t.starts_with("dev-dependencies]"))
        {
            if m.ends_with("testkit/Cargo.toml") {
                assert!(
                    !table.starts_with("dependencies]") || !table.contains("writegate-"),
                    "{}: the testkit depends on a writegate crate",
                    m.display()
                );
            } else {
                assert!(
                    !table.contains("writegate-testkit"),
                    "{}: writegate-testkit outside [dev-dependencies]",
                    m.display()
                );
            }
        }
    }
    let toml = std::fs::read_to_string(repo().join("crates/testkit/Cargo.toml")).unwrap();
    assert!(
        toml.contains("publish = false"),
        "the testkit is never published"
    );
}

/// The repository's tracked files (`git ls-files`), or, where git or the
/// history is not there (an unpacked archive), every file under the root
/// but `.git` and `target`. Fuzz inputs are data, not prose: skipped.
fn tracked_files() -> Vec<PathBuf> {
    let root = repo();
    let listed = std::process::Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(&root)
        .output()
        .ok()
        .filter(|o| o.status.success() && !o.stdout.is_empty());
    let rel: Vec<PathBuf> = if let Some(o) = listed {
        o.stdout
            .split(|&b| b == 0)
            .filter(|s| !s.is_empty())
            .map(|s| PathBuf::from(String::from_utf8_lossy(s).into_owned()))
            .collect()
    } else {
        let mut out = Vec::new();
        let mut stack = vec![PathBuf::new()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(root.join(&d)).unwrap() {
                let e = e.unwrap();
                let p = d.join(e.file_name());
                if e.file_type().unwrap().is_dir() {
                    if p != Path::new(".git") && p != Path::new("target") {
                        stack.push(p);
                    }
                } else {
                    out.push(p);
                }
            }
        }
        out
    };
    rel.into_iter()
        .filter(|p| {
            let fuzz_input = p.starts_with("fuzz/seeds")
                || p.starts_with("fuzz/corpus")
                || (p.starts_with("fuzz/regressions") && !p.ends_with("README.md"));
            !fuzz_input && !p.starts_with("target")
        })
        .map(|p| root.join(p))
        .collect()
}

/// What a line refers to that only a work log knows, if anything: an
/// issue number (the word, optionally plural, then a number after a space,
/// `#` or `_`), a numbered work session (the word, a space, a number: a
/// session id in code is `sessionId`, `"s1"`, `session_id`, never that),
/// or the person who assigned the work.
fn work_log_reference(line: &str) -> Option<&'static str> {
    let l = line.to_ascii_lowercase();
    let b = l.as_bytes();
    let word_start = |i: usize| i == 0 || !b[i - 1].is_ascii_alphanumeric();
    let digit_at = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
    for (i, _) in l.match_indices("issue") {
        if !word_start(i) {
            continue;
        }
        let mut j = i + "issue".len();
        if b.get(j) == Some(&b's') {
            j += 1;
        }
        if b.get(j) == Some(&b'_') && digit_at(j + 1) {
            return Some("an issue number");
        }
        while b.get(j) == Some(&b' ') {
            j += 1;
        }
        if b.get(j) == Some(&b'#') {
            j += 1;
        }
        if j > i + "issues".len() - 1 && digit_at(j) {
            return Some("an issue number");
        }
    }
    for (i, _) in l.match_indices("session ") {
        if word_start(i) && (i == 0 || b[i - 1] != b'_') && digit_at(i + "session ".len()) {
            return Some("a numbered work session");
        }
    }
    let lead = concat!("the ", "lead");
    for (i, _) in l.match_indices(lead) {
        let after = b.get(i + lead.len());
        if word_start(i) && !after.is_some_and(u8::is_ascii_alphanumeric) {
            return Some("who assigned the work");
        }
    }
    None
}

/// Architecture Invariant: the repository reads without its work log. No
/// tracked text file (code, comments, test names, docs, ADRs, CHANGELOG,
/// scripts, config) names an issue by its number (the word issue, then a
/// number after a space, `#` or `_`), a numbered work session, or who
/// assigned the work ("the" then "lead"). A number means nothing to a reader of the
/// repository: a comment states the rule that holds and why, with an ADR
/// (docs/decisions/) where a measurement or a decision is the reason, and a
/// regression test is named after the defect it pins. Who asked for a
/// change, and when, belongs in git history.
#[test]
fn no_work_log_references() {
    let files = tracked_files();
    assert!(files.len() > 100, "found only {} files", files.len());
    let mut hits = Vec::new();
    for f in files {
        // Not UTF-8 (a binary fixture) or not there (deleted, not staged).
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            if let Some(what) = work_log_reference(line) {
                let at = f.strip_prefix(repo()).unwrap_or(&f).display();
                hits.push(format!("{at}:{}: {what}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(hits.is_empty(), "work-log references:\n{}", hits.join("\n"));
}

/// The matcher of [`no_work_log_references`] on what it must and must not
/// flag (the strings are built, so this file does not flag itself).
#[test]
fn work_log_reference_flags_only_work_log_words() {
    let n = |w: &str, rest: &str| format!("{w}{rest}");
    for bad in [
        n("issue", " 12: two flock calls"),
        n("Issues", " 12 and 13"),
        n("see issue", " #7"),
        n("fn regression_issue", "_12_x()"),
        n("fn issue", "_25_a_read_only_file_is_held()"),
        n("Session", " 12 found it"),
        n("worth a decision by the", " lead."),
    ] {
        assert!(work_log_reference(&bad).is_some(), "{bad}");
    }
    for good in [
        "an issue with the lock".to_string(),
        n("the tiss", "ue 12"),
        "sessionId: \"s1\", session_id 3".to_string(),
        "a session's 2 prompts".to_string(),
        "session {}".to_string(),
        n("the lea", "ding zero"),
        "mislead 4".to_string(),
    ] {
        assert!(work_log_reference(&good).is_none(), "{good}");
    }
}

/// A line that is a merge's conflict marker: `<<<<<<< `, `=======` alone,
/// `>>>>>>> ` at the start of a line (built, so this file does not flag
/// itself).
fn conflict_marker(line: &str) -> bool {
    let open = "<".repeat(7) + " ";
    let close = ">".repeat(7) + " ";
    line.starts_with(&open) || line.starts_with(&close) || line == "=".repeat(7)
}

/// Every tracked file is free of merge conflict markers: a merge once left
/// both sides of two sections of docs/security.md and docs/protocol.md,
/// markers and all, in the committed docs.
#[test]
fn no_merge_conflict_markers() {
    let mut hits = Vec::new();
    for f in tracked_files() {
        let Ok(text) = std::fs::read_to_string(&f) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            if conflict_marker(line) {
                let at = f.strip_prefix(repo()).unwrap_or(&f).display();
                hits.push(format!("{at}:{}", n + 1));
            }
        }
    }
    assert!(
        hits.is_empty(),
        "merge conflict markers:\n{}",
        hits.join("\n")
    );
    assert!(conflict_marker(&("<".repeat(7) + " HEAD")));
    assert!(!conflict_marker("== a heading underline is longer"));
}
