//! Size caps: 5 MiB is written, one byte more is `file_too_large`; a whole
//! write over a huge file replaces it without loading it.

use crate::common::{BIN, Clients, Tree, TreeAudit, temps, truncate, write_params};
use serde_json::json;
use std::fs;

#[test]
fn size_five_mib_is_written_and_one_byte_more_is_file_too_large() {
    const MAX: usize = 5 * 1024 * 1024;
    let s = Tree::new(BIN);
    let d = s.socket_daemon(&[]);
    let mut c = d.connect();
    let p = s.ws.join("five.txt");
    let r = c.call_id(1, "fs/write_text_file", write_params(&p, &"a".repeat(MAX)));
    assert_eq!(r["result"], json!({}), "{}", truncate(&r.to_string()));
    assert_eq!(fs::metadata(&p).unwrap().len(), MAX as u64);
    assert!(fs::read(&p).unwrap().iter().all(|b| *b == b'a'));

    let q = s.ws.join("five-plus-one.txt");
    let r = c.call_id(
        2,
        "fs/write_text_file",
        write_params(&q, &"a".repeat(MAX + 1)),
    );
    assert_eq!(r["error"]["code"], -32040, "{r}");
    assert_eq!(r["error"]["data"]["errorKind"], "file_too_large", "{r}");
    assert_eq!(r["error"]["data"]["status"], 413, "{r}");
    assert!(!q.exists());
    // The cap is on UTF-8 bytes, not characters.
    let r = c.call_id(
        3,
        "fs/write_text_file",
        write_params(&q, &"\u{e9}".repeat(MAX / 2 + 1)),
    );
    assert_eq!(r["error"]["data"]["errorKind"], "file_too_large", "{r}");
    assert!(!q.exists());
    // Overwriting the big file with a too-large one leaves it as it was.
    let r = c.call_id(
        4,
        "fs/write_text_file",
        write_params(&p, &"b".repeat(MAX + 1)),
    );
    assert_eq!(r["error"]["data"]["errorKind"], "file_too_large", "{r}");
    assert_eq!(fs::metadata(&p).unwrap().len(), MAX as u64);
    assert!(temps(&s.ws).is_empty());
    let a = s.audit_events();
    assert_eq!(a.len(), 4, "{}", truncate(&format!("{a:?}")));
    assert_eq!(
        a.iter()
            .filter(|e| e["errorKind"] == "file_too_large")
            .count(),
        3
    );
}

/// A whole-file write over a huge (here sparse, 1 TiB)
/// file must not load it: the format is read from its beginning and the
/// file is replaced (SPEC 7.2 allows replacing a file over the cap).
#[test]
fn whole_write_over_a_huge_sparse_file_replaces_it_without_loading_it() {
    let t = Tree::new(BIN);
    let big = t.ws.join("big.txt");
    fs::File::create(&big).unwrap().set_len(1 << 40).unwrap();
    let mut d = t.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    let r = c.call("fs/write_text_file", write_params(&big, "hi\n"));
    assert_eq!(r["result"], json!({}), "{r}");
    assert_eq!(fs::read(&big).unwrap(), b"hi\n");
    // The daemon is still there.
    let r = c.call(
        "fs/write_text_file",
        write_params(&t.ws.join("after.txt"), "ok\n"),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    let events = t.audit_events();
    assert_eq!(events[0]["bytesBefore"], 1u64 << 40);
    assert!(
        events[0].get("hashBefore").is_none(),
        "no hash of a file that was not read"
    );
}
