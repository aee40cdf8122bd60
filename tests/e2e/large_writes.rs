//! Whole-file writes over files of a MiB and more, through the real
//! daemon: the old file's format is learned a piece at a time without
//! holding it (a skim), and its `hashBefore` comes from the read hash
//! cache when its bytes are still the ones writegate last wrote. Files the
//! skim cannot tell (CRLF, Latin-1, a BOM) take the whole-file way and keep
//! their format; a file changed in place gets the hash of its new bytes.

use crate::common::{BIN, Clients, Tree, TreeAudit, tagged};
use serde_json::{Value, json};
use std::fs;
use std::path::Path;

/// About 2 MiB of lines of 64 bytes, the first one naming `version`.
fn lines(version: &str) -> String {
    let mut s = format!("{version:<63}\n");
    s.push_str(
        &"the quick brown fox jumps over the lazy dog, a line of text ...\n".repeat(32 * 1024),
    );
    s
}

/// The events of the tree's writes, in order.
fn writes(t: &Tree) -> Vec<Value> {
    t.audit_events()
        .into_iter()
        .filter(|e| e["intent"] == "write")
        .collect()
}

/// Overwrites the file at `path` with `text` of its own size, in place (the
/// same inode), as a shared mapping or another program might, and sets its
/// modification time back to what it was.
fn change_in_place(path: &Path, text: &str) {
    use std::io::{Seek, Write};
    use std::os::unix::fs::MetadataExt;
    let before = fs::metadata(path).unwrap();
    assert_eq!(before.len(), text.len() as u64, "the same size");
    let mut f = fs::OpenOptions::new().write(true).open(path).unwrap();
    f.seek(std::io::SeekFrom::Start(0)).unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f.set_times(fs::FileTimes::new().set_modified(before.modified().unwrap()))
        .unwrap();
    assert_eq!(fs::metadata(path).unwrap().ino(), before.ino(), "in place");
}

fn write(c: &mut crate::common::Client, path: &Path, content: &str) {
    let r = c.call(
        "fs/write_text_file",
        json!({"sessionId": "s", "path": path, "content": content}),
    );
    assert_eq!(r["result"], json!({}), "{r}");
}

/// Before, a write's `hashBefore` of a large file came from the read hash
/// cache only if its bytes still matched; a cache trusting the inode, the
/// size or the time alone would record the hash of bytes the file no
/// longer held. Here the file is changed in place (same inode, same size,
/// time set back) after writegate wrote it: the next write records the
/// hash of the changed bytes, and undo puts exactly those back.
#[test]
fn a_file_changed_in_place_since_writegate_wrote_it_is_recorded_with_its_new_hash() {
    let t = Tree::new(BIN);
    let d = t.socket_daemon(&["--allow-read"]);
    let mut c = d.connect();
    let p = t.ws.join("same-inode.txt");
    let (one, two) = (lines("one"), lines("two"));
    write(&mut c, &p, &one);
    write(&mut c, &p, &two);
    // Changed in place, as a shared mapping or another program might.
    let three = two.replacen("two", "3!!", 1);
    assert_eq!(three.len(), two.len());
    change_in_place(&p, &three);
    let four = lines("four");
    write(&mut c, &p, &four);
    assert_eq!(fs::read_to_string(&p).unwrap(), four);
    let changed = three.clone();
    let events = writes(&t);
    let hashes: Vec<Value> = events
        .iter()
        .map(|e| json!([e["hashBefore"], e["hashAfter"]]))
        .collect();
    let [one, two, three, four] = [&one, &two, &three, &four].map(|v| tagged(v.as_bytes()));
    assert_eq!(
        hashes,
        [json!([null, one]), json!([one, two]), json!([three, four]),],
        "the changed file's own hash before the last write"
    );
    // The before-image kept is the changed file, and undo restores it.
    let op = events[2]["opId"].as_str().unwrap();
    let r = c.call("_writegate/undo", json!({"opId": op}));
    assert_eq!(r["result"]["action"], "restored", "{r}");
    assert_eq!(fs::read_to_string(&p).unwrap(), changed);
}

/// Large files whose format a skim cannot tell are read whole and keep
/// their format: CRLF endings, Latin-1, a UTF-8 BOM. A large UTF-8 file
/// with a character cut between the skim's pieces is told, and its
/// `hashBefore` (not on record: written outside writegate) is its own.
#[test]
fn large_files_keep_their_format_through_a_whole_file_write() {
    let t = Tree::new(BIN);
    let d = t.socket_daemon(&[]);
    let mut c = d.connect();
    let body = lines("old");
    let new = lines("new").replacen("new", "née", 1);
    let crlf = (
        t.ws.join("crlf.txt"),
        body.replace('\n', "\r\n").into_bytes(),
    );
    let latin1 = (
        t.ws.join("latin1.txt"),
        body.replacen("old", "caf\u{e9}", 1)
            .chars()
            .map(|ch| u8::try_from(u32::from(ch)).unwrap())
            .collect::<Vec<u8>>(),
    );
    let bom = (
        t.ws.join("bom.txt"),
        [&[0xEF, 0xBB, 0xBF][..], body.as_bytes()].concat(),
    );
    // "é" across the first 256 KiB boundary.
    let mut cut = "x".repeat(256 * 1024 - 1);
    cut.push('é');
    cut.push_str(&body);
    let utf8 = (t.ws.join("utf8.txt"), cut.into_bytes());
    for (path, old) in [&crlf, &latin1, &bom, &utf8] {
        fs::write(path, old).unwrap();
        write(&mut c, path, &new);
    }
    assert_eq!(
        fs::read(&crlf.0).unwrap(),
        new.replace('\n', "\r\n").into_bytes()
    );
    let mut want = new.clone().into_bytes();
    let at = want.windows(2).position(|w| w == "é".as_bytes()).unwrap();
    want.splice(at..at + 2, [0xE9]);
    assert_eq!(fs::read(&latin1.0).unwrap(), want, "Latin-1 kept");
    assert_eq!(
        fs::read(&bom.0).unwrap(),
        [&[0xEF, 0xBB, 0xBF][..], new.as_bytes()].concat()
    );
    assert_eq!(fs::read(&utf8.0).unwrap(), new.as_bytes());
    let events = writes(&t);
    assert_eq!(events.len(), 4, "{events:?}");
    for ((path, old), e) in [&crlf, &latin1, &bom, &utf8].into_iter().zip(&events) {
        assert_eq!(e["hashBefore"], tagged(old), "{path:?}");
        assert_eq!(e["bytesBefore"], old.len(), "{path:?}");
    }
}

/// The format of a file writegate wrote last is taken from the read hash
/// cache, without a look at the file before the commit; its bytes are
/// checked during the fsync, before the rename. Here the file is changed
/// in place after writegate wrote it, from LF to CRLF at the same size and
/// with its time set back: a write trusting the recorded format would
/// flatten the file's CRLF; this one writes nothing the first time, learns
/// the format from the bytes and keeps CRLF, with one event and no temp
/// file left.
#[test]
fn a_file_changed_in_place_to_crlf_since_writegate_wrote_it_keeps_crlf() {
    let t = Tree::new(BIN);
    let d = t.socket_daemon(&[]);
    let mut c = d.connect();
    let p = t.ws.join("turned-crlf.txt");
    let lf = lines("lf");
    write(&mut c, &p, &lf);
    // Each line loses its last character to a `\r`: the same size.
    let mut crlf = String::with_capacity(lf.len());
    for l in lf.split_inclusive('\n') {
        crlf.push_str(&l[..l.len() - 2]);
        crlf.push_str("\r\n");
    }
    assert_eq!(crlf.len(), lf.len());
    change_in_place(&p, &crlf);
    let new = lines("new");
    write(&mut c, &p, &new);
    let now = fs::read_to_string(&p).unwrap();
    assert!(
        now == new.replace('\n', "\r\n"),
        "CRLF kept: {} bytes, {} of them `\\r`",
        now.len(),
        now.matches('\r').count()
    );
    let events = writes(&t);
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[1]["hashBefore"], tagged(crlf.as_bytes()));
    assert_eq!(
        events[1]["hashAfter"],
        tagged(new.replace('\n', "\r\n").as_bytes())
    );
    let names: Vec<_> = fs::read_dir(&t.ws)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["turned-crlf.txt"], "no temp file left");
    // The file as now written is on record: the next write keeps CRLF
    // without a second attempt.
    write(&mut c, &p, &lf);
    assert!(fs::read_to_string(&p).unwrap() == lf.replace('\n', "\r\n"));
}
