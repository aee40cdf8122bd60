//! One case, in its scratch directory: the setup steps, the daemon and its requests, then every
//! `expect` check on the responses, the files and the audit log.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::os::unix::net::UnixListener;
use std::path::Path;

use serde_json::Value;

use super::R;
use super::daemon::{Daemon, initialize_request, request_for};
use super::json::{Json, dumps, parse_json};
use super::python::{
    b64, exc, generated, get, has, list, make_parent, no_get, octal, opt, os_error, path_str,
    prefix, py_bytes_repr, py_eq, py_repr, py_str, py_str_is_blank, py_str_repr, string, subst,
    truthy, universal_lines,
};

pub(super) fn check_case_in(
    c: &Value,
    ordered: &Json,
    binary: &Path,
    wp: &Path,
    adir: &Path,
    socks: &mut Vec<UnixListener>,
) -> R<Vec<String>> {
    let w = path_str(wp)?;
    let setup = list(get(c, "setup")?)?;

    // The workspace: W/root, or W/<name> of the last `root` step.
    let mut root_name = "root".to_owned();
    for step in setup {
        if has(step, "root") {
            string(get(step, "root")?)?.clone_into(&mut root_name);
        }
    }
    let root_path = wp.join(&root_name);
    let root = path_str(&root_path)?;
    if fs::symlink_metadata(&root_path).is_ok() {
        // os.makedirs(root) without exist_ok
        return Err(format!("FileExistsError: [Errno 17] File exists: '{root}'"));
    }
    fs::create_dir_all(&root_path).map_err(|e| exc(&e, &root_path))?;

    // Setup steps, in order. Only `file` steps map a leading `root/` to the workspace's name.
    for step in setup {
        if has(step, "file") {
            let rel = string(get(step, "file")?)?;
            let rel = match rel.strip_prefix("root/") {
                Some(rest) => format!("{root_name}/{rest}"),
                None => rel.to_owned(),
            };
            let p = wp.join(rel);
            make_parent(&p)?;
            let data = if has(step, "bytes_b64") {
                b64(get(step, "bytes_b64")?)?
            } else {
                generated(get(step, "bytes_gen")?)?.into_bytes()
            };
            fs::write(&p, data).map_err(|e| exc(&e, &p))?;
        } else if has(step, "dir") {
            let p = wp.join(string(get(step, "dir")?)?);
            fs::create_dir_all(&p).map_err(|e| exc(&e, &p))?;
        } else if has(step, "symlink") {
            let p = wp.join(string(get(step, "symlink")?)?);
            make_parent(&p)?;
            let target = subst(string(get(step, "target")?)?, &w, &root);
            symlink(&target, &p).map_err(|e| exc(&e, &p))?;
        } else if has(step, "mode") {
            let p = wp.join(string(get(step, "mode")?)?);
            let mode = octal(get(step, "octal")?)?;
            fs::set_permissions(&p, fs::Permissions::from_mode(mode)).map_err(|e| exc(&e, &p))?;
        } else if has(step, "unix_socket") {
            let p = wp.join(string(get(step, "unix_socket")?)?);
            // Kept (bound and open) until the case ends.
            socks.push(UnixListener::bind(&p).map_err(|e| exc(&e, &p))?);
        }
    }

    let before = snapshot(wp)?;
    let audit = adir.join("audit.jsonl");
    let errlog_path = adir.join("stderr.log");
    let errlog = fs::File::create(&errlog_path).map_err(|e| exc(&e, &errlog_path))?;
    let mut serve = Vec::new();
    if let Some(extra) = opt(c, "serve") {
        for flag in list(extra)? {
            serve.push(string(flag)?.to_owned());
        }
    }
    let mut daemon = Daemon::spawn(binary, &root, &audit, &serve, errlog, errlog_path)?;
    let talk = (|| -> R<Vec<i64>> {
        daemon.send(&initialize_request())?;
        daemon.wait_for(&[0])?;
        let concurrent = opt(c, "concurrent").is_some_and(truthy);
        let mut ids = Vec::new();
        list(get(c, "ops")?)?;
        let Some(Json::Arr(ops)) = ordered.field("ops") else {
            unreachable!("ops is a list")
        };
        for (i, op) in (1_i64..).zip(ops) {
            daemon.send(&request_for(op, &w, &root, i)?)?;
            ids.push(i);
            if !concurrent {
                daemon.wait_for(&[i])?;
            }
        }
        daemon.wait_for(&ids)?;
        Ok(ids)
    })();
    daemon.close();
    let ids = talk?;

    // Each response as a Value for the checks and as read (key order kept) for the messages.
    let (resp, resp_ordered): (Vec<&Value>, Vec<&Json>) = ids
        .iter()
        .map(|i| {
            daemon
                .response(&Value::from(*i))
                .expect("every id was answered")
        })
        .unzip();
    let first_resp = resp
        .first()
        .copied()
        .ok_or("IndexError: list index out of range");
    let first_error_ordered = resp_ordered.iter().find_map(|r| r.field("error"));
    let exp_ordered = ordered.field("expect").expect("expect was read");
    let exp = get(c, "expect")?;
    let mut problems = Vec::new();
    // Responses are JSON objects (wait_for refuses anything else); `error` may be any value.
    let errors: Vec<&Value> = resp.iter().filter_map(|r| r.get("error")).collect();

    if has(exp, "file_b64") || has(exp, "file_gen") {
        if let Some(e) = first_error_ordered {
            problems.push(format!(
                "expected success, got error {}",
                prefix(&dumps(e), 300)
            ));
        }
        let want = if has(exp, "file_b64") {
            b64(get(exp, "file_b64")?)?
        } else {
            generated(get(exp, "file_gen")?)?.into_bytes()
        };
        let ops = list(get(c, "ops")?)?;
        let op0 = ops.first().ok_or("IndexError: list index out of range")?;
        let target = subst(string(get(op0, "path")?)?, &w, &root);
        match fs::read(&target) {
            Ok(got) => {
                if got != want {
                    problems.push(format!(
                        "bytes {} != expected {}",
                        py_bytes_repr(&got[..got.len().min(120)]),
                        py_bytes_repr(&want[..want.len().min(120)])
                    ));
                }
            }
            Err(e) => problems.push(format!("cannot read target: {}", os_error(&e, &target))),
        }
    }

    if has(exp, "error") {
        let want = get(exp, "error")?;
        let mut kinds = Vec::new();
        for e in &errors {
            let e = e.as_object().ok_or_else(|| no_get(e))?;
            kinds.push(match e.get("data") {
                Some(Value::Object(data)) => data.get("errorKind").cloned().unwrap_or(Value::Null),
                _ => Value::Null,
            });
        }
        if !kinds.iter().any(|k| py_eq(want, k)) {
            let got = if let Some(e) = first_error_ordered {
                prefix(&dumps(e), 300)
            } else {
                first_resp?;
                prefix(
                    &dumps(resp_ordered[0].field("result").unwrap_or(&Json::Null)),
                    300,
                )
            };
            problems.push(format!("expected errorKind {}, got {got}", py_str(want)));
        }
    }

    if opt(exp, "error_any").is_some_and(truthy) && errors.is_empty() {
        problems.push("expected an error, got success".to_owned());
    }

    if has(exp, "error_code") {
        let want = get(exp, "error_code")?;
        let mut codes = Vec::new();
        for e in &errors {
            let e = e.as_object().ok_or_else(|| no_get(e))?;
            codes.push(e.get("code").cloned().unwrap_or(Value::Null));
        }
        if !codes.iter().any(|code| py_eq(want, code)) {
            let got = if codes.is_empty() {
                "success".to_owned()
            } else {
                py_repr(&Value::Array(codes))
            };
            problems.push(format!("expected error code {}, got {got}", py_str(want)));
        }
    }

    if opt(exp, "unchanged").is_some_and(truthy) {
        let after = snapshot(wp)?;
        if after != before {
            // The names present on one side only, then the names whose entry changed.
            let mut changed: Vec<&Vec<u8>> = after
                .keys()
                .filter(|k| !before.contains_key(*k))
                .chain(before.keys().filter(|k| !after.contains_key(*k)))
                .collect();
            changed.sort();
            changed.extend(
                after
                    .iter()
                    .filter(|(k, v)| before.get(*k).is_some_and(|b| b != *v))
                    .map(|(k, _)| k),
            );
            let names: Vec<String> = changed
                .iter()
                .take(6)
                .map(|k| py_str_repr(&String::from_utf8_lossy(k)))
                .collect();
            problems.push(format!("tree changed: [{}]", names.join(", ")));
        }
    }

    let no_checks = Value::Array(Vec::new());
    for chk in list(opt(exp, "checks").unwrap_or(&no_checks))? {
        if has(chk, "dir_only") {
            let dir_only = string(get(chk, "dir_only")?)?;
            let dir = wp.join(dir_only.replacen("root", &root_name, 1));
            let mut names = Vec::new();
            for entry in fs::read_dir(&dir).map_err(|e| exc(&e, &dir))? {
                let entry = entry.map_err(|e| exc(&e, &dir))?;
                names.push(String::from_utf8_lossy(entry.file_name().as_bytes()).into_owned());
            }
            names.sort();
            let mut want = Vec::new();
            for name in list(get(chk, "names")?)? {
                want.push(string(name)?.to_owned());
            }
            want.sort();
            if names != want {
                let shown: Vec<String> = names.iter().map(|n| py_str_repr(n)).collect();
                problems.push(format!("{dir_only} holds [{}]", shown.join(", ")));
            }
            continue;
        }
        let rel = string(get(chk, "path")?)?;
        let p = wp.join(rel);
        let lstat = fs::symlink_metadata(&p).ok();
        if opt(chk, "absent").is_some_and(truthy) {
            if lstat.is_some() {
                problems.push(format!("{rel} exists"));
            }
            continue;
        }
        let Some(lstat) = lstat else {
            problems.push(format!("{rel} missing"));
            continue;
        };
        let is_link = lstat.file_type().is_symlink();
        if opt(chk, "is_symlink").is_some_and(truthy) && !is_link {
            problems.push(format!("{rel} is no longer a symlink"));
        }
        if has(chk, "target") && is_link {
            let link = fs::read_link(&p).map_err(|e| exc(&e, &p))?;
            let link = String::from_utf8_lossy(link.as_os_str().as_bytes()).into_owned();
            if !py_eq(&Value::String(link.clone()), get(chk, "target")?) {
                problems.push(format!("{rel} points to {link}"));
            }
        }
        if has(chk, "mode") {
            let m = fs::metadata(&p)
                .map_err(|e| exc(&e, &p))?
                .permissions()
                .mode()
                & 0o7777;
            let want = get(chk, "mode")?;
            if m != octal(want)? {
                problems.push(format!("{rel} mode {:#o} != {}", m, py_str(want)));
            }
        }
        if has(chk, "bytes_b64") {
            let got = fs::read(&p).map_err(|e| exc(&e, &p))?;
            if got != b64(get(chk, "bytes_b64")?)? {
                problems.push(format!(
                    "{rel} bytes {}",
                    py_bytes_repr(&got[..got.len().min(80)])
                ));
            }
        }
    }

    if has(exp, "result") {
        let empty = Value::Object(serde_json::Map::new());
        let res = first_resp?.get("result").unwrap_or(&Value::Null);
        // `resp[0].get("result") or {}`
        let res = if truthy(res) { res } else { &empty };
        let res = res.as_object().ok_or_else(|| no_get(res))?;
        let want = get(exp, "result")?;
        let want = want.as_object().ok_or_else(|| no_get(want))?;
        // The same values as read, for the message.
        let res_ordered = match resp_ordered[0].field("result") {
            Some(r) if !res.is_empty() => r,
            _ => &Json::Null,
        };
        let want_ordered = exp_ordered.field("result").expect("result was read");
        for (k, v) in want {
            let got = res.get(k).unwrap_or(&Value::Null);
            if !py_eq(got, v) {
                problems.push(format!(
                    "result.{k} = {} != {}",
                    dumps(res_ordered.field(k).unwrap_or(&Json::Null)),
                    dumps(want_ordered.field(k).expect("a key of result"))
                ));
            }
        }
    }

    if has(exp, "audit") {
        let want = get(exp, "audit")?;
        let mut lines = Vec::new();
        if fs::metadata(&audit).is_ok() {
            let text = fs::read(&audit).map_err(|e| exc(&e, &audit))?;
            let text = String::from_utf8(text)
                .map_err(|e| format!("UnicodeDecodeError: audit log is not UTF-8: {e}"))?;
            for line in universal_lines(&text) {
                if !py_str_is_blank(&line) {
                    lines.push(parse_json(&line)?);
                }
            }
        }
        let count = get(want, "count")?;
        if !py_eq(&Value::from(lines.len()), count) {
            problems.push(format!(
                "{} audit events, expected {}",
                lines.len(),
                py_str(count)
            ));
        }
        if let Some(t) = opt(want, "type").filter(|t| truthy(t)) {
            let mut differs = false;
            for e in &lines {
                let e = e.as_object().ok_or_else(|| no_get(e))?;
                if !py_eq(e.get("type").unwrap_or(&Value::Null), t) {
                    differs = true;
                    break;
                }
            }
            if differs {
                let mut types = Vec::new();
                for e in &lines {
                    let e = e.as_object().ok_or_else(|| no_get(e))?;
                    types.push(e.get("type").cloned().unwrap_or(Value::Null));
                }
                problems.push(format!(
                    "audit types {} != {}",
                    py_repr(&Value::Array(types)),
                    py_str(t)
                ));
            }
        }
    }

    Ok(problems)
}

/// Every path under `w` (not following links) with its kind and contents: a link's target, a
/// file's bytes and permission bits, or just "dir" / "other" (os.walk + os.lstat).
#[derive(Debug, PartialEq)]
enum Entry {
    Link(Vec<u8>),
    File(Vec<u8>, u32),
    Dir,
    Other,
}

/// Relative path (bytes) -> entry.
type Snapshot = BTreeMap<Vec<u8>, Entry>;

fn snapshot(w: &Path) -> R<Snapshot> {
    let mut out = Snapshot::new();
    walk(w, w, &mut out)?;
    Ok(out)
}

fn walk(w: &Path, dir: &Path, out: &mut Snapshot) -> R<()> {
    // os.walk skips a directory it cannot list.
    let Ok(entries) = fs::read_dir(dir) else {
        return Ok(());
    };
    let mut subdirs = Vec::new();
    for entry in entries {
        let Ok(entry) = entry else { break };
        let p = entry.path();
        let rel = p
            .strip_prefix(w)
            .expect("under W")
            .as_os_str()
            .as_bytes()
            .to_vec();
        let meta = fs::symlink_metadata(&p).map_err(|e| exc(&e, &p))?;
        let ft = meta.file_type();
        let item = if ft.is_symlink() {
            let target = fs::read_link(&p).map_err(|e| exc(&e, &p))?;
            Entry::Link(target.as_os_str().as_bytes().to_vec())
        } else if ft.is_file() {
            Entry::File(
                fs::read(&p).map_err(|e| exc(&e, &p))?,
                meta.permissions().mode() & 0o7777,
            )
        } else if ft.is_dir() {
            subdirs.push(p.clone());
            Entry::Dir
        } else {
            Entry::Other
        };
        out.insert(rel, item);
    }
    for d in subdirs {
        walk(w, &d, out)?;
    }
    Ok(())
}
