//! Fuzz target `jsonscan`: the strict line scan of `writegate-jsonscan`
//! against `serde_json`, on arbitrary bytes.
//!
//! The scan reads every untrusted request line before (or instead of)
//! `serde_json`, and must never accept a line that `serde_json` refuses or
//! reads differently. Nothing may panic; beyond that, whenever
//! `object_members_at(line, ["params", "arguments"])` accepts a line:
//!
//! - `serde_json` parses the line to an object, and `object_members` gives
//!   the same members;
//! - the members' keys are exactly the object's keys, and each member's value
//!   text parses with `serde_json` (the last member of a repeated name to the
//!   object's value for it, as `serde_json` keeps the last);
//! - `find` says `Absent`, `One` or `Repeated` as the names are counted, for
//!   the names the front ends read (`jsonrpc`, `id`, `method`, `params`) and
//!   every key of the line;
//! - every string value decodes with `unescape`, `unescape_in_place` and
//!   `unescape_to_string` to `serde_json`'s string;
//! - the members found down the path are exactly what a scan of that member's
//!   own text gives: the first member of the name whose value is an object.
//!
//! `surrogate_escapes_replaced` must keep a line `serde_json` parses
//! parseable. For any line, `object_members_checked` with the strings
//! `StringsAhead` checked as the line arrived gives `object_members_at`'s
//! result (strings of `CHECKED_MIN` bytes and more are checked: give the
//! fuzzer `-max_len` past it).
#![no_main]

use std::ops::Range;

use libfuzzer_sys::fuzz_target;
use serde_json::{Map, Value};
use writegate_jsonscan::{
    Lookup, Member, StringsAhead, find, object_members, object_members_at, object_members_checked,
    surrogate_escapes_replaced, unescape, unescape_in_place, unescape_to_string,
};

/// The path the MCP front end scans a `tools/call` line with.
const PATH: [&str; 2] = ["params", "arguments"];

fuzz_target!(|line: &[u8]| {
    check_replaced(line);
    check_ahead(line);
    check_scan(line);
});

/// `surrogate_escapes_replaced` never panics, and a line `serde_json`
/// parses stays parseable once its surrogate escapes are replaced.
fn check_replaced(line: &[u8]) {
    let Some(replaced) = surrogate_escapes_replaced(line) else {
        return;
    };
    if serde_json::from_slice::<Value>(line).is_ok() {
        assert!(
            serde_json::from_str::<Value>(&replaced).is_ok(),
            "serde parses the line but not its replaced text: {replaced:?}"
        );
    }
}

/// The scan with the line's long strings checked as it arrived (in two
/// pieces, cut where its length says) is the scan alone.
fn check_ahead(line: &[u8]) {
    let mut ahead = StringsAhead::new();
    ahead.feed(&line[..line.len() / 3]);
    ahead.feed(line);
    let checked = ahead.finish();
    let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
    assert_eq!(
        object_members_checked(line, &PATH, &checked),
        object_members_at(line, &PATH),
        "the scan with {} strings checked ahead",
        checked.len()
    );
}

fn check_scan(line: &[u8]) {
    let Some((top, found)) = object_members_at(line, &PATH) else {
        return;
    };
    assert_eq!(found.len(), PATH.len());
    assert_eq!(
        object_members(line).as_ref(),
        Some(&top),
        "object_members and object_members_at disagree"
    );
    let value: Value = serde_json::from_slice(line).unwrap_or_else(|e| {
        panic!(
            "serde refuses a line the scan accepts ({e}): {:?}",
            String::from_utf8_lossy(line)
        )
    });
    let Value::Object(map) = value else {
        panic!("the scan accepts a line that is not an object: {value}");
    };
    check_members(line, &top, &map);

    // The path: each level is found inside the previous level's object.
    let mut parent: Option<(Vec<Member>, Map<String, Value>)> = Some((top, map));
    for (level, name) in PATH.iter().enumerate() {
        let expected = parent.as_ref().and_then(|(members, _)| {
            members
                .iter()
                .find(|m| &line[m.key.clone()] == name.as_bytes() && line[m.value.start] == b'{')
                .map(|m| m.value.clone())
        });
        match (&found[level], expected) {
            (None, None) => {
                parent = None;
            }
            (Some(members), Some(span)) => {
                let own = object_members(&line[span.clone()])
                    .expect("an object on the path of an accepted line is accepted alone");
                let shifted: Vec<Member> = own
                    .into_iter()
                    .map(|m| Member {
                        key: shift(&m.key, span.start),
                        value: shift(&m.value, span.start),
                    })
                    .collect();
                assert_eq!(members, &shifted, "path level {level} ({name})");
                let Ok(Value::Object(map)) = serde_json::from_slice(&line[span]) else {
                    panic!("path level {level} ({name}) is not an object for serde");
                };
                check_members(line, members, &map);
                parent = Some((members.clone(), map));
            }
            (got, want) => panic!(
                "path level {level} ({name}): found {}, expected {}",
                got.is_some(),
                want.is_some()
            ),
        }
    }
}

fn shift(r: &Range<usize>, by: usize) -> Range<usize> {
    r.start + by..r.end + by
}

/// The scanned members of one object against `serde_json`'s map of it.
fn check_members(line: &[u8], members: &[Member], map: &Map<String, Value>) {
    let key = |m: &Member| {
        std::str::from_utf8(&line[m.key.clone()])
            .expect("a scanned key is UTF-8")
            .to_owned()
    };
    for m in members {
        let k = key(m);
        assert!(!k.contains('\\'), "a scanned key holds an escape: {k:?}");
        let text = &line[m.value.clone()];
        let ours: Value = serde_json::from_slice(text).unwrap_or_else(|e| {
            panic!(
                "serde refuses the value of {k:?} ({e}): {:?}",
                String::from_utf8_lossy(text)
            )
        });
        let last = members
            .iter()
            .rfind(|o| line[o.key.clone()] == line[m.key.clone()]);
        if last == Some(m) {
            assert_eq!(map.get(&k), Some(&ours), "the value of {k:?}");
        }
        if let Value::String(s) = &ours {
            let raw = std::str::from_utf8(text).expect("a scanned string is UTF-8");
            assert_eq!(unescape(raw).as_ref(), Some(s), "unescape of {raw:?}");
            let mut v = line.to_vec();
            assert_eq!(
                unescape_in_place(&mut v, m.value.clone()),
                Some(()),
                "unescape_in_place of {raw:?}"
            );
            assert_eq!(v, s.as_bytes(), "unescape_in_place of {raw:?}");
            assert_eq!(
                unescape_to_string(line.to_vec(), m.value.clone()).as_ref(),
                Some(s),
                "unescape_to_string of {raw:?}"
            );
        }
    }
    assert_eq!(
        members
            .iter()
            .map(key)
            .collect::<std::collections::BTreeSet<_>>(),
        map.keys().cloned().collect(),
        "the keys"
    );
    let names = ["jsonrpc", "id", "method", "params"]
        .into_iter()
        .map(str::to_owned)
        .chain(map.keys().cloned());
    for name in names {
        let count = members.iter().filter(|m| key(m) == name).count();
        match (find(line, members, &name), count) {
            (Lookup::Absent, 0) | (Lookup::Repeated, 2..) => {}
            (Lookup::One(m), 1) => assert_eq!(key(m), name),
            (got, n) => panic!("find({name:?}) gives {got:?} for {n} members"),
        }
    }
}
