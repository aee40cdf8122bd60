//! Concurrency: pipelined writes on one connection, many socket
//! connections at once, appends and whole-file writes racing on one file.

use crate::common::{
    BIN, Clients, Tree, TreeAudit, big_content, by_id, req, small_content, temps, truncate,
    write_params,
};
use serde_json::json;
use std::collections::BTreeSet;
use std::fs;

#[test]
fn concurrency_fifty_pipelined_writes_on_one_connection() {
    let s = Tree::new(BIN);
    let mut d = s.stdio_daemon(&[]);
    let mut c = d.stdio_client();
    let mut all = Vec::new();
    for i in 0..50 {
        let line = req(
            i,
            "fs/write_text_file",
            write_params(&s.ws.join(format!("f{i}.txt")), &small_content(0, i)),
        );
        all.extend_from_slice(line.to_string().as_bytes());
        all.push(b'\n');
    }
    c.send_raw(&all);
    let got = by_id((0..50).map(|_| c.recv()).collect());
    assert_eq!(got.len(), 50, "each id exactly once");
    for i in 0..50 {
        assert_eq!(got.get(i)["result"], json!({}), "{}", got.get(i));
        assert_eq!(
            fs::read_to_string(s.ws.join(format!("f{i}.txt"))).unwrap(),
            small_content(0, i)
        );
    }
    assert!(c.sync().is_empty());
    assert_eq!(s.audit_events().len(), 50);
    assert!(temps(&s.ws).is_empty());
}

#[test]
fn concurrency_eight_socket_connections_of_twenty_five_writes() {
    let s = Tree::new(BIN);
    let d = s.socket_daemon(&[]);
    let handles: Vec<_> = (0..8)
        .map(|conn| {
            let mut c = d.connect();
            let ws = s.ws.clone();
            std::thread::spawn(move || {
                for i in 0..25 {
                    let p = ws.join(format!("c{conn}-{i}.txt"));
                    c.send(&req(
                        i,
                        "fs/write_text_file",
                        write_params(&p, &small_content(conn, i)),
                    ));
                }
                by_id((0..25).map(|_| c.recv()).collect())
            })
        })
        .collect();
    for (conn, h) in (0_i64..).zip(handles) {
        let got = h.join().unwrap();
        assert_eq!(got.len(), 25);
        for i in 0..25 {
            assert_eq!(got.get(i)["result"], json!({}), "{}", got.get(i));
            let p = s.ws.join(format!("c{conn}-{i}.txt"));
            assert_eq!(fs::read_to_string(&p).unwrap(), small_content(conn, i));
        }
    }
    let a = s.audit_events();
    assert_eq!(a.len(), 200, "exactly one audit event per write");
    assert!(a.iter().all(|e| e["type"] == "fs.access"));
    let hashes: BTreeSet<_> = a
        .iter()
        .map(|e| e["pathHash"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(hashes.len(), 200, "200 distinct files");
    assert_eq!(
        fs::read_dir(&s.ws).unwrap().count(),
        200,
        "no temp files left"
    );
}

#[test]
fn concurrency_twenty_appends_to_one_file_from_four_connections_all_land() {
    let s = Tree::new(BIN);
    let d = s.socket_daemon(&[]);
    let p = s.ws.join("log.txt");
    let handles: Vec<_> = (0..4)
        .map(|conn| {
            let mut c = d.connect();
            let p = p.clone();
            std::thread::spawn(move || {
                for k in 0..5 {
                    let n = conn * 5 + k;
                    c.send(&req(
                        n,
                        "_writegate/edit_text_file",
                        json!({"sessionId": format!("s{conn}"), "path": p, "mode": "append", "content": format!("line {n}\n")}),
                    ));
                }
                (0..5).map(|_| c.recv()).collect::<Vec<_>>()
            })
        })
        .collect();
    for h in handles {
        for r in h.join().unwrap() {
            assert!(r["result"].is_object(), "every append succeeds: {r}");
        }
    }
    let text = fs::read_to_string(&p).unwrap();
    assert!(text.ends_with('\n'), "{text:?}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 20, "all 20 appends land: {text:?}");
    let got: BTreeSet<&str> = lines.iter().copied().collect();
    let want: Vec<String> = (0..20).map(|n| format!("line {n}")).collect();
    let want: BTreeSet<&str> = want.iter().map(String::as_str).collect();
    assert_eq!(got, want);
    // Appends from one connection were sent in order, but may run in any
    // order; what matters is that none was lost. Exactly one created it.
    let a = s.audit_events();
    assert_eq!(a.len(), 20);
    assert!(
        a.iter()
            .all(|e| e["type"] == "fs.access" && e["intent"] == "edit"),
        "{a:?}"
    );
    assert_eq!(
        a.iter().filter(|e| e["created"] == true).count(),
        1,
        "{a:?}"
    );
    assert!(temps(&s.ws).is_empty());
}

#[test]
fn concurrency_whole_file_writes_to_one_file_never_tear() {
    let s = Tree::new(BIN);
    let d = s.socket_daemon(&[]);
    let p = s.ws.join("contended.txt");
    let handles: Vec<_> = (0..4)
        .map(|conn| {
            let mut c = d.connect();
            let p = p.clone();
            std::thread::spawn(move || {
                for i in 0..10 {
                    c.send(&req(
                        i,
                        "fs/write_text_file",
                        write_params(&p, &big_content(conn, i)),
                    ));
                }
                (0..10).map(|_| c.recv()).collect::<Vec<_>>()
            })
        })
        .collect();
    for h in handles {
        for r in h.join().unwrap() {
            assert_eq!(r["result"], json!({}), "{}", truncate(&r.to_string()));
        }
    }
    let text = fs::read_to_string(&p).unwrap();
    let whole = (0..4).any(|conn| (0..10).any(|i| text == big_content(conn, i)));
    assert!(
        whole,
        "the file is exactly one of the writes: {}",
        truncate(&text)
    );
    assert_eq!(
        fs::read_dir(&s.ws).unwrap().count(),
        1,
        "no temp files left"
    );
    let a = s.audit_events();
    assert_eq!(a.len(), 40);
    assert_eq!(
        a.iter().filter(|e| e["created"] == true).count(),
        1,
        "created exactly once"
    );
}
