//! `$/cancel_request`: harmless for unknown or answered ids, never
//! answered, and every request still answered exactly once.

use crate::common::{
    BIN, Clients, Tree, TreeAudit, by_id, req, small_content, temps, write_params,
};
use serde_json::json;
use std::fs;

#[test]
fn cancel_of_unknown_or_answered_ids_is_harmless_and_unanswered() {
    let s = Tree::new(BIN);
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    let r = c.call_id(
        1,
        "fs/write_text_file",
        write_params(&s.ws.join("a.txt"), "a"),
    );
    assert_eq!(r["result"], json!({}));
    for params in [
        json!({"requestId": 1}),       // already answered
        json!({"requestId": 999}),     // never sent
        json!({"requestId": "ghost"}), // never sent
        json!({"requestId": null}),
        json!({}), // malformed
    ] {
        c.send(&json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": params}));
    }
    c.send(&json!({"jsonrpc": "2.0", "method": "$/cancel_request"}));
    let r = c.call_id(
        2,
        "fs/write_text_file",
        write_params(&s.ws.join("b.txt"), "b"),
    );
    assert_eq!(r["result"], json!({}), "{r}");
    assert!(
        c.sync().is_empty(),
        "cancel notifications are never answered"
    );
    assert_eq!(fs::read(s.ws.join("a.txt")).unwrap(), b"a");
    assert_eq!(fs::read(s.ws.join("b.txt")).unwrap(), b"b");
}

#[test]
fn cancel_interleaved_with_thirty_writes_every_request_answered_once() {
    let s = Tree::new(BIN);
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    let mut all = Vec::new();
    for i in 0..30 {
        let p = s.ws.join(format!("w{i}.txt"));
        all.extend_from_slice(
            req(
                i,
                "fs/write_text_file",
                write_params(&p, &small_content(1, i)),
            )
            .to_string()
            .as_bytes(),
        );
        all.push(b'\n');
        // Cancel every other request right after it, and some earlier ones late.
        if i % 2 == 0 {
            let cancel =
                json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": i}});
            all.extend_from_slice(cancel.to_string().as_bytes());
            all.push(b'\n');
        }
        if i % 5 == 4 {
            let cancel = json!({"jsonrpc": "2.0", "method": "$/cancel_request", "params": {"requestId": i - 3}});
            all.extend_from_slice(cancel.to_string().as_bytes());
            all.push(b'\n');
        }
    }
    c.send_raw(&all);
    let got = by_id((0..30).map(|_| c.recv()).collect());
    assert_eq!(got.len(), 30, "every id answered exactly once");
    let mut ok = 0;
    for i in 0..30 {
        let r = &got.get(i);
        let p = s.ws.join(format!("w{i}.txt"));
        if r["result"] == json!({}) {
            ok += 1;
            assert_eq!(fs::read_to_string(&p).unwrap(), small_content(1, i));
        } else {
            assert_eq!(r["error"]["code"], -32800, "success or cancelled only: {r}");
            assert!(!p.exists(), "a cancelled write wrote nothing: {p:?}");
            let named = i % 2 == 0 || (i + 3) % 5 == 4;
            assert!(named, "request {i} was never cancelled but answered -32800");
        }
    }
    assert!(c.sync().is_empty(), "no extra responses");
    let accesses = s
        .audit_events()
        .iter()
        .filter(|e| e["type"] == "fs.access")
        .count();
    assert_eq!(accesses, ok, "one fs.access per successful write");
    assert!(temps(&s.ws).is_empty());
    eprintln!(
        "cancel test: {ok} of 30 writes completed, {} cancelled",
        30 - ok
    );
}
