//! Paged reads of a file over `max_edit_bytes`: the lines asked for,
//! numbered as in the whole file, with the whole file's line count, format
//! and hash, read through the real daemon without holding the file.

use crate::common::{BIN, Clients, Tree, TreeAudit, run_with_stdin, tagged};
use serde_json::json;
use std::fs;
use std::path::Path;

/// A CRLF file of `lines` lines of 64 bytes each, the last one `last`.
fn crlf_file(path: &Path, lines: usize) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(lines * 64);
    for n in 1..=lines {
        bytes.extend_from_slice(
            format!("{n:>8} the quick brown fox jumps over the lazy dog .........\r\n").as_bytes(),
        );
    }
    assert_eq!(bytes.len(), lines * 64);
    fs::write(path, &bytes).unwrap();
    bytes
}

/// Before, `writegate read --limit 2` of a 6 MiB file was refused
/// `file_too_large`: a paged read reads what it shows.
#[test]
fn a_paged_read_of_a_file_over_max_edit_bytes_shows_its_lines_and_whole_file_facts() {
    let t = Tree::new(BIN);
    let _d = t.socket_daemon(&["--allow-read"]);
    let p = t.ws.join("big.log");
    let bytes = crlf_file(&p, 6 * 1024 * 1024 / 64);
    let read = |args: &[&str]| {
        let mut cmd = t.command();
        cmd.arg("read")
            .arg(&p)
            .args(args)
            .arg("--socket")
            .arg(&t.sock);
        run_with_stdin(cmd, b"")
    };
    let o = read(&["--limit", "2"]);
    assert_eq!(o.code, Some(0), "{o}");
    assert!(
        o.stdout.starts_with(
            "     1\t       1 the quick brown fox jumps over the lazy dog .........\n     2\t       2 the"
        ),
        "{o}"
    );
    assert!(!o.stdout.contains("       3 the"), "{o}");
    assert!(o.stdout.contains("98304 lines"), "{o}");
    assert!(o.stdout.contains(&tagged(&bytes)), "{o}");
    assert!(o.stdout.contains("crlf"), "{o}");
    // From the middle: numbered as in the whole file.
    let o = read(&["--line", "50000", "--limit", "1"]);
    assert_eq!(o.code, Some(0), "{o}");
    assert!(o.stdout.starts_with(" 50000\t   50000 the quick"), "{o}");
    // The whole file at once is still too much to show, and the refusal
    // says how to page, in flags.
    let o = read(&[]);
    assert_eq!(o.code, Some(1), "{o}");
    assert!(o.stderr.contains("refused: file_too_large"), "{o}");
    assert!(o.stderr.contains("--line and --limit"), "{o}");
    assert_eq!(fs::read(&p).unwrap(), bytes);
}

/// `fs/read_text_file` pages a file over `max_edit_bytes` (the lines with
/// their own endings), its numbered twin refuses a NUL byte, and a file
/// that is not UTF-8 is refused by size with the reason. The daemon never
/// holds the file: its peak memory grows by far less than the file.
#[test]
fn acp_reads_page_a_large_file_without_holding_it() {
    let t = Tree::new(BIN);
    let d = t.socket_daemon(&["--allow-read"]);
    let mut c = d.connect();
    let small = t.ws.join("small.txt");
    fs::write(&small, "warm\n").unwrap();
    let r = c.call_id(
        0,
        "fs/read_text_file",
        json!({"sessionId": "s", "path": small}),
    );
    assert_eq!(r["result"]["content"], "warm\n", "{r}");
    let before = d.status_kib("VmHWM");

    let p = t.ws.join("big.csv");
    let bytes = crlf_file(&p, 24 * 1024 * 1024 / 64);
    let r = c.call_id(
        1,
        "fs/read_text_file",
        json!({"sessionId": "s", "path": p, "line": 200_000, "limit": 2}),
    );
    assert_eq!(
        r["result"]["content"],
        "  200000 the quick brown fox jumps over the lazy dog .........\r\n  200001 the quick brown fox jumps over the lazy dog .........\r\n",
        "{r}"
    );
    let r = c.call_id(
        2,
        "_writegate/read_lines",
        json!({"sessionId": "s", "path": p, "line": 393_216, "limit": 5}),
    );
    assert_eq!(r["result"]["totalLines"], 393_216, "{r}");
    assert_eq!(r["result"]["lines"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["result"]["lineEnding"], "crlf", "{r}");
    assert_eq!(r["result"]["hash"], tagged(&bytes), "{r}");
    let grown = d.status_kib("VmHWM").saturating_sub(before);
    assert!(
        grown < 8 * 1024,
        "a paged read of a 24 MiB file grew the daemon's peak by {grown} KiB"
    );

    let mut binary = bytes[..6 * 1024 * 1024].to_vec();
    binary[5 * 1024 * 1024 + 10] = 0;
    let b = t.ws.join("blob.dat");
    fs::write(&b, &binary).unwrap();
    let r = c.call_id(
        3,
        "_writegate/read_lines",
        json!({"sessionId": "s", "path": b, "limit": 1}),
    );
    assert_eq!(r["error"]["data"]["errorKind"], "binary_file", "{r}");
    let r = c.call_id(
        4,
        "fs/read_text_file",
        json!({"sessionId": "s", "path": b, "limit": 1}),
    );
    assert_eq!(
        r["result"]["content"],
        "       1 the quick brown fox jumps over the lazy dog .........\r\n",
        "{r}"
    );

    let mut latin1 = bytes[..6 * 1024 * 1024].to_vec();
    latin1[100] = 0xE9;
    let l = t.ws.join("latin1.txt");
    fs::write(&l, &latin1).unwrap();
    let r = c.call_id(
        5,
        "fs/read_text_file",
        json!({"sessionId": "s", "path": l, "limit": 1}),
    );
    assert_eq!(r["error"]["data"]["errorKind"], "file_too_large", "{r}");
    let message = r["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
        + r["error"]["data"]["hint"].as_str().unwrap_or_default();
    assert!(message.contains("only when it is UTF-8"), "{r}");
    assert!(message.contains("max_edit_bytes"), "{r}");
    let events = t.audit_events();
    assert_eq!(events.len(), 6, "one audit event per read");
    assert_eq!(
        events[1]["bytesBefore"],
        24 * 1024 * 1024,
        "{:?}",
        events[1]
    );
}

/// A read's hash is taken once per version of a file (ADR 0034): a file
/// changed in place, same inode, same size, its modification time set
/// back, is answered with its new bytes' hash, not the one recorded for
/// the old bytes.
#[test]
fn a_file_changed_in_place_with_its_time_set_back_is_answered_with_its_new_hash() {
    let t = Tree::new(BIN);
    let d = t.socket_daemon(&["--allow-read"]);
    let mut c = d.connect();
    let p = t.ws.join("same-inode.txt");
    let one = "a line of the first version of the file .......\n".repeat(4096);
    fs::write(&p, &one).unwrap();
    let read = |c: &mut crate::common::Client, id: u64| {
        let r = c.call_id(
            id,
            "_writegate/read_lines",
            json!({"sessionId": "s", "path": p, "limit": 1}),
        );
        r["result"]["hash"].as_str().unwrap().to_string()
    };
    assert_eq!(read(&mut c, 1), tagged(one.as_bytes()));
    assert_eq!(read(&mut c, 2), tagged(one.as_bytes()), "the recorded hash");
    let before = fs::metadata(&p).unwrap();
    let two = one.replacen("first", "other", 1);
    assert_eq!(two.len(), one.len());
    {
        use std::io::{Seek, Write};
        let mut f = fs::OpenOptions::new().write(true).open(&p).unwrap();
        f.seek(std::io::SeekFrom::Start(0)).unwrap();
        f.write_all(two.as_bytes()).unwrap();
        f.set_times(fs::FileTimes::new().set_modified(before.modified().unwrap()))
            .unwrap();
    }
    let after = fs::metadata(&p).unwrap();
    assert_eq!(after.modified().unwrap(), before.modified().unwrap());
    assert_eq!(
        std::os::unix::fs::MetadataExt::ino(&after),
        std::os::unix::fs::MetadataExt::ino(&before)
    );
    assert_eq!(read(&mut c, 3), tagged(two.as_bytes()));
    let r = c.call_id(
        4,
        "fs/read_text_file",
        json!({"sessionId": "s", "path": p, "limit": 1}),
    );
    assert_eq!(r["result"]["_meta"]["hash"], tagged(two.as_bytes()), "{r}");
}
