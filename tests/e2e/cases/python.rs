//! Fixture values read the way the Python runner reads them, and small Python look-alikes for
//! text, bytes and messages (so that a problem reads exactly as the runner prints it).

use std::fs;
use std::io;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::Value;

use super::json::{PLACEHOLDER_BASE, is_placeholder, push_fmt};
use super::{R, STDERR_TAIL};

// ---- Fixture values, read the way the Python runner reads them. ----

pub(super) fn get<'a>(v: &'a Value, key: &str) -> R<&'a Value> {
    v.as_object()
        .ok_or_else(|| no_get(v))?
        .get(key)
        .ok_or_else(|| format!("KeyError: '{key}'"))
}

/// `key in v`.
pub(super) fn has(v: &Value, key: &str) -> bool {
    v.as_object().is_some_and(|m| m.contains_key(key))
}

/// `v.get(key)` (None for a missing key; a JSON null is `Some(Null)`).
pub(super) fn opt<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    v.as_object().and_then(|m| m.get(key))
}

pub(super) fn string(v: &Value) -> R<&str> {
    v.as_str()
        .ok_or_else(|| format!("TypeError: expected str, got {}", py_type(v)))
}

pub(super) fn list(v: &Value) -> R<&Vec<Value>> {
    v.as_array().ok_or_else(|| {
        format!(
            "TypeError: '{}' object is not iterable as a list",
            py_type(v)
        )
    })
}

pub(super) fn no_get(v: &Value) -> String {
    format!(
        "AttributeError: '{}' object has no attribute 'get'",
        py_type(v)
    )
}

pub(super) fn py_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// Python truthiness.
pub(super) fn truthy(v: &Value) -> bool {
    match v {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(m) => !m.is_empty(),
    }
}

/// Python `==` on decoded JSON: numbers by value (`1 == 1.0`, `True == 1`), containers deeply.
pub(super) fn py_eq(a: &Value, b: &Value) -> bool {
    fn num(v: &Value) -> Option<(Option<i128>, f64)> {
        match v {
            Value::Bool(b) => Some((Some(i128::from(*b)), f64::from(u8::from(*b)))),
            Value::Number(n) => {
                let int = n
                    .as_i64()
                    .map(i128::from)
                    .or_else(|| n.as_u64().map(i128::from));
                Some((int, n.as_f64().unwrap_or(f64::NAN)))
            }
            _ => None,
        }
    }
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| py_eq(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| py_eq(v, w)))
        }
        _ => match (num(a), num(b)) {
            (Some((Some(x), _)), Some((Some(y), _))) => x == y,
            (Some((_, x)), Some((_, y))) => x == y,
            _ => false,
        },
    }
}

/// `gen(spec)`: `prefix + unit * count`.
pub(super) fn generated(spec: &Value) -> R<String> {
    let prefix = match opt(spec, "prefix") {
        Some(p) => string(p)?,
        None => "",
    };
    let unit = string(get(spec, "unit")?)?;
    let count = get(spec, "count")?
        .as_i64()
        .ok_or("TypeError: can't multiply sequence by non-int")?;
    let count = usize::try_from(count.max(0))
        .map_err(|_| "OverflowError: cannot fit 'int' into an index-sized integer")?;
    Ok(format!("{prefix}{}", unit.repeat(count)))
}

/// `{ROOT}` and `{W}` replaced, in that order.
pub(super) fn subst(s: &str, w: &str, root: &str) -> String {
    s.replace("{ROOT}", root).replace("{W}", w)
}

pub(super) fn b64(v: &Value) -> R<Vec<u8>> {
    B64.decode(string(v)?)
        .map_err(|e| format!("binascii.Error: {e}"))
}

/// `int(s, 8)`.
pub(super) fn octal(v: &Value) -> R<u32> {
    let s = string(v)?;
    let t = s.trim();
    let t = t
        .strip_prefix("0o")
        .or_else(|| t.strip_prefix("0O"))
        .unwrap_or(t);
    u32::from_str_radix(&t.replace('_', ""), 8)
        .map_err(|_| format!("ValueError: invalid literal for int() with base 8: '{s}'"))
}

// ---- Small Python look-alikes for text, bytes and messages. ----

/// `not line.strip()` for a str (Python's whitespace includes U+001C..U+001F).
pub(super) fn py_str_is_blank(s: &str) -> bool {
    s.chars()
        .all(|c| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
}

/// `line.strip()` for bytes (ASCII whitespace, vertical tab included).
pub(super) fn py_bytes_strip(b: &[u8]) -> &[u8] {
    let ws = |c: &u8| b" \t\n\r\x0b\x0c".contains(c);
    let start = b.iter().position(|c| !ws(c)).unwrap_or(b.len());
    let end = b.iter().rposition(|c| !ws(c)).map_or(start, |i| i + 1);
    &b[start..end]
}

/// The lines of a text file opened in text mode (universal newlines: `\n`, `\r\n`, `\r`).
pub(super) fn universal_lines(s: &str) -> Vec<String> {
    s.replace("\r\n", "\n")
        .replace('\r', "\n")
        .split('\n')
        .map(str::to_owned)
        .collect()
}

/// `str(v)` of a decoded JSON value, as an f-string shows it.
pub(super) fn py_str(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => py_repr(other),
    }
}

/// `repr(v)` of a decoded JSON value.
pub(super) fn py_repr(v: &Value) -> String {
    match v {
        Value::Null => "None".to_owned(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => py_str_repr(s),
        Value::Array(items) => {
            format!(
                "[{}]",
                items.iter().map(py_repr).collect::<Vec<_>>().join(", ")
            )
        }
        Value::Object(map) => format!(
            "{{{}}}",
            map.iter()
                .map(|(k, v)| format!("{}: {}", py_str_repr(k), py_repr(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

pub(super) fn py_str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::from(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if is_placeholder(c) => {
                push_fmt(
                    &mut out,
                    format_args!("\\u{:04x}", c as u32 - PLACEHOLDER_BASE + 0xD800),
                );
            }
            c if (c as u32) < 0x20 || (0x7f..0xa0).contains(&(c as u32)) => {
                push_fmt(&mut out, format_args!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// `repr(b)` of bytes: `b'...'`.
pub(super) fn py_bytes_repr(b: &[u8]) -> String {
    let quote = if b.contains(&b'\'') && !b.contains(&b'"') {
        b'"'
    } else {
        b'\''
    };
    let mut out = String::from("b");
    out.push(quote as char);
    for &c in b {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c as char);
            }
            0x20..=0x7e => out.push(c as char),
            c => push_fmt(&mut out, format_args!("\\x{c:02x}")),
        }
    }
    out.push(quote as char);
    out
}

/// The first `n` characters of `s` (`s[:n]`).
pub(super) fn prefix(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// The exception an OS error raises in Python, `"FileNotFoundError: [Errno 2] ...: 'path'"`.
pub(super) fn exc(e: &io::Error, path: impl AsRef<Path>) -> String {
    format!("{}: {}", io_error_name(e), os_error(e, path))
}

/// `str(e)` of an `OSError` about `path`: `"[Errno 2] No such file or directory: 'path'"`.
pub(super) fn os_error(e: &io::Error, path: impl AsRef<Path>) -> String {
    format!("{}: '{}'", os_error_no_path(e), path.as_ref().display())
}

pub(super) fn os_error_no_path(e: &io::Error) -> String {
    let text = e.to_string();
    let text = text.split(" (os error").next().unwrap_or(&text);
    match e.raw_os_error() {
        Some(errno) => format!("[Errno {errno}] {text}"),
        None => text.to_owned(),
    }
}

pub(super) fn io_error_name(e: &io::Error) -> &'static str {
    match e.kind() {
        io::ErrorKind::NotFound => "FileNotFoundError",
        io::ErrorKind::AlreadyExists => "FileExistsError",
        io::ErrorKind::PermissionDenied => "PermissionError",
        io::ErrorKind::BrokenPipe => "BrokenPipeError",
        io::ErrorKind::IsADirectory => "IsADirectoryError",
        io::ErrorKind::NotADirectory => "NotADirectoryError",
        _ => "OSError",
    }
}

pub(super) fn path_str(p: &Path) -> R<String> {
    p.to_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("UnicodeError: path {} is not UTF-8", p.display()))
}

/// `os.makedirs(os.path.dirname(p), exist_ok=True)`.
pub(super) fn make_parent(p: &Path) -> R<()> {
    match p.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => {
            fs::create_dir_all(parent).map_err(|e| exc(&e, parent))
        }
        _ => Ok(()),
    }
}

/// The last [`STDERR_TAIL`] bytes of a file, as text.
pub(super) fn tail(path: &Path) -> String {
    let bytes = fs::read(path).unwrap_or_default();
    let start = bytes.len().saturating_sub(STDERR_TAIL);
    String::from_utf8_lossy(&bytes[start..]).into_owned()
}
