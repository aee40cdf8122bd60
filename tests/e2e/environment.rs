//! The environment and the logs: an unknown `WRITEGATE_*`
//! variable stops the daemon naming it, an invalid value is blamed on its
//! variable and not on the config file, and with debug logs on every request
//! leaves one line (method, id, pathHash, outcome, duration) and nothing
//! prints a `Debug` dump.

use crate::common::{BIN, Finished, Tree, TreeAudit, run_with_stdin, write_params};
use serde_json::json;
use std::fs;

/// `writegate serve --stdio --workspace <ws>` with `env`, stdin empty:
/// the exit status and stderr.
fn serve_with_env(t: &Tree, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut cmd = t.command();
    cmd.args(["serve", "--stdio", "--workspace"])
        .arg(&t.ws)
        .arg("--audit-log")
        .arg(&t.audit_log);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let Finished {
        status,
        stdout,
        stderr,
        ..
    } = run_with_stdin(cmd, b"");
    assert_eq!(stdout, "", "nothing but protocol lines on stdout");
    (status.code(), stderr)
}

#[test]
fn an_unknown_writegate_variable_stops_the_daemon_naming_it() {
    let t = Tree::new(BIN);
    let (code, stderr) = serve_with_env(&t, &[("WRITEGATE_MAX_WRITE_BYTE", "10")]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "unknown environment variable WRITEGATE_MAX_WRITE_BYTE: did you mean WRITEGATE_MAX_WRITE_BYTES?"
        ),
        "{stderr}"
    );
    // The known names are allowed: the log filter and every config key.
    let (code, stderr) = serve_with_env(
        &t,
        &[
            ("WRITEGATE_LOG", "warn"),
            ("WRITEGATE_MAX_WRITE_BYTES", "2048"),
            ("WRITEGATE_AUDIT_RAW_PATHS", "false"),
        ],
    );
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn an_invalid_value_is_blamed_on_its_variable_not_on_the_config_file() {
    let t = Tree::new(BIN);
    let config = t.base.join("config/writegate/config.toml");
    fs::create_dir_all(config.parent().unwrap()).unwrap();
    fs::write(&config, "max_write_bytes = 4096\n").unwrap();
    for (var, value) in [
        ("WRITEGATE_MAX_WRITE_BYTES", "big"),
        ("WRITEGATE_NEW_FILE_MODE", "everyone"),
    ] {
        let (code, stderr) = serve_with_env(&t, &[(var, value)]);
        assert_eq!(code, Some(2), "{stderr}");
        assert!(
            stderr.contains(&format!("invalid environment variable {var}=`{value}`: ")),
            "{stderr}"
        );
        assert!(!stderr.contains("config.toml"), "{stderr}");
    }
    // A bad file is still the file's fault.
    fs::write(&config, "max_write_bytes = \"big\"\n").unwrap();
    let (code, stderr) = serve_with_env(&t, &[]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("config.toml"), "{stderr}");
}

/// The `key=value` fields of a log line (values without spaces).
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

/// One debug line per request, with the method, the id, the
/// pathHash of the requested path (the audit event's, for a canonical
/// path), the outcome and the duration in milliseconds; none at the
/// default level; no `Debug` dump in any line.
#[test]
fn with_debug_logs_every_request_leaves_one_line() {
    let t = Tree::new(BIN);
    let inside = t.ws.join("a.txt");
    let outside = t.out.join("b.txt");
    let requests = [
        json!({"jsonrpc": "2.0", "id": 1, "method": "fs/write_text_file", "params": write_params(&inside, "a\n")}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "fs/write_text_file", "params": write_params(&outside, "b\n")}),
        json!({"jsonrpc": "2.0", "id": 3, "method": "_writegate/read_lines", "params": {"sessionId": "s"}}),
        json!({"jsonrpc": "2.0", "id": 4, "method": "fs/delete_file", "params": {}}),
        json!({"jsonrpc": "2.0", "id": "five", "method": "_writegate/receipt", "params": {"sessionId": "s"}}),
    ];
    let mut input = Vec::new();
    for r in &requests {
        input.extend_from_slice(r.to_string().as_bytes());
        input.push(b'\n');
    }
    let run = |verbose: bool| {
        let mut cmd = t.command();
        cmd.args(["serve", "--stdio", "--allow-read", "--workspace"])
            .arg(&t.ws)
            .arg("--audit-log")
            .arg(&t.audit_log);
        if verbose {
            cmd.arg("-v");
        }
        let Finished {
            status,
            stdout,
            stderr,
            ..
        } = run_with_stdin(cmd, &input);
        assert!(status.success(), "{stderr}");
        assert_eq!(stdout.lines().count(), requests.len(), "{stdout}");
        stderr
    };

    let quiet = run(false);
    assert!(
        !quiet.lines().any(|l| l.contains(" request ")),
        "no request lines at info: {quiet}"
    );

    let stderr = run(true);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("DEBUG") && l.contains(" request "))
        .collect();
    assert_eq!(lines.len(), requests.len(), "{stderr}");
    let written = t
        .audit_events()
        .into_iter()
        .find(|e| e["type"] == "fs.access")
        .expect("the write's audit event");
    let want = [
        ("fs/write_text_file", "1", "ok"),
        ("fs/write_text_file", "2", "path_outside_workspace"),
        ("_writegate/read_lines", "3", "invalid_params"),
        ("fs/delete_file", "4", "method_not_found"),
        ("_writegate/receipt", "\"five\"", "ok"),
    ];
    for (method, id, outcome) in want {
        let line = lines
            .iter()
            .find(|l| field(l, "id") == Some(id))
            .unwrap_or_else(|| panic!("no line for id {id}: {stderr}"));
        assert_eq!(field(line, "method"), Some(method), "{line}");
        assert_eq!(field(line, "outcome"), Some(outcome), "{line}");
        let ms: f64 = field(line, "duration_ms")
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("duration_ms: {line}"));
        assert!(ms >= 0.0, "{line}");
        let path_hash = field(line, "path_hash").unwrap_or_default();
        if id == "1" {
            assert_eq!(path_hash, written["pathHash"], "{line}");
        } else if id == "2" {
            assert_eq!(path_hash.len(), 16, "{line}");
        } else {
            assert_eq!(path_hash, "-", "{line}");
        }
    }
    // No raw path and no Debug dump (`Some(`, `{ `, escaped quotes) in any line.
    for line in stderr.lines() {
        assert!(
            !(line.contains(" request ") && line.contains(&*t.base.to_string_lossy())),
            "a raw path in a request line: {line}"
        );
        assert!(
            !line.contains("Some(") && !line.contains(" { ") && !line.contains("\\\""),
            "a Debug dump in the log: {line}"
        );
    }
}
