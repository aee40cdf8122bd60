//! JSON text like Python's json module: the key order as read, numbers as Python writes them
//! back, and lone UTF-16 surrogates kept.

use std::fmt::{self, Write as _};

use serde_json::Value;

use super::R;

/// A JSON value as Python's json.loads keeps it: objects in text order (a later duplicate key
/// replaces the value in place, as in a dict), numbers as their text, and strings that may hold
/// lone UTF-16 surrogates (as placeholders, see [`parse_ordered`]). Requests are built from these,
/// so `_meta` goes over the wire in the fixture's key order, as from the Python runner; the checks
/// read the same data as a `serde_json::Value` ([`Json::to_value`]).
#[derive(Clone, Debug)]
pub(super) enum Json {
    Null,
    Bool(bool),
    Num(String),
    Str(String),
    Arr(Vec<Json>),
    Obj(Vec<(String, Json)>),
}

impl Json {
    /// `self[key]` of an object.
    pub(super) fn field(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Obj(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub(super) fn to_value(&self) -> R<Value> {
        Ok(match self {
            Json::Null => Value::Null,
            Json::Bool(b) => Value::Bool(*b),
            Json::Num(text) => serde_json::from_str(text)
                .map_err(|e| format!("ValueError: number {text} out of range: {e}"))?,
            Json::Str(s) => Value::String(s.clone()),
            Json::Arr(items) => Value::Array(items.iter().map(Json::to_value).collect::<R<_>>()?),
            Json::Obj(members) => {
                let mut map = serde_json::Map::new();
                for (k, v) in members {
                    map.insert(k.clone(), v.to_value()?);
                }
                Value::Object(map)
            }
        })
    }
}

/// `json.loads(raw)` as a `serde_json::Value` (responses, audit events, fixture lines).
pub(super) fn parse_json(raw: &str) -> R<Value> {
    parse_ordered(raw)?.to_value()
}

/// `json.loads(raw)`, strict JSON (`NaN` and `Infinity`, which Python also takes, are refused).
///
/// Lone UTF-16 surrogates: JSON allows escapes like `\ud800` that stand for no character. Python's
/// `json.loads` keeps them in its str and `json.dumps(ensure_ascii=True)` writes them back as the
/// same escape, but `serde_json` refuses them and a Rust `String` cannot hold them. So this reader
/// (used instead of `serde_json`'s for that reason, and for the key order) decodes a lone surrogate
/// escape `\uD800`..`\uDFFF` to a placeholder at the top of plane 16 (private use),
/// U+10F800 + (surrogate - 0xD800), and [`write_str`] writes each placeholder back as the
/// surrogate's escape: case B11's content `"x\ud800y\n"` goes over the wire as `"x\ud800y\n"`,
/// exactly as the Python runner sends it. A valid pair is one character as usual; a text that
/// already holds a placeholder code point is refused rather than misread.
pub(super) fn parse_ordered(raw: &str) -> R<Json> {
    if raw.chars().any(is_placeholder) {
        return Err(
            "ValueError: JSON text holds a code point reserved for lone surrogates".to_owned(),
        );
    }
    let mut p = JsonReader { s: raw, i: 0 };
    p.ws();
    let v = p.value()?;
    p.ws();
    if p.i != raw.len() {
        return Err(p.err("Extra data"));
    }
    Ok(v)
}

pub(super) const PLACEHOLDER_BASE: u32 = 0x0010_F800;

pub(super) fn is_placeholder(c: char) -> bool {
    (PLACEHOLDER_BASE..=PLACEHOLDER_BASE + 0x7FF).contains(&(c as u32))
}

struct JsonReader<'a> {
    s: &'a str,
    i: usize,
}

impl JsonReader<'_> {
    fn err(&self, what: &str) -> String {
        format!("JSONDecodeError: {what}: char {}", self.i)
    }

    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.i).copied()
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.i += 1;
        }
    }

    fn eat(&mut self, word: &str) -> bool {
        let found = self.s[self.i..].starts_with(word);
        if found {
            self.i += word.len();
        }
        found
    }

    fn value(&mut self) -> R<Json> {
        match self.peek() {
            Some(b'{') => self.object(),
            Some(b'[') => self.array(),
            Some(b'"') => Ok(Json::Str(self.string()?)),
            Some(b'-' | b'0'..=b'9') => self.number(),
            _ if self.eat("null") => Ok(Json::Null),
            _ if self.eat("true") => Ok(Json::Bool(true)),
            _ if self.eat("false") => Ok(Json::Bool(false)),
            _ => Err(self.err("Expecting value")),
        }
    }

    fn object(&mut self) -> R<Json> {
        self.i += 1;
        let mut members: Vec<(String, Json)> = Vec::new();
        self.ws();
        if self.eat("}") {
            return Ok(Json::Obj(members));
        }
        loop {
            self.ws();
            if self.peek() != Some(b'"') {
                return Err(self.err("Expecting property name enclosed in double quotes"));
            }
            let key = self.string()?;
            self.ws();
            if !self.eat(":") {
                return Err(self.err("Expecting ':' delimiter"));
            }
            self.ws();
            let v = self.value()?;
            match members.iter_mut().find(|(k, _)| *k == key) {
                Some(slot) => slot.1 = v,
                None => members.push((key, v)),
            }
            self.ws();
            if self.eat("}") {
                return Ok(Json::Obj(members));
            }
            if !self.eat(",") {
                return Err(self.err("Expecting ',' delimiter"));
            }
        }
    }

    fn array(&mut self) -> R<Json> {
        self.i += 1;
        let mut items = Vec::new();
        self.ws();
        if self.eat("]") {
            return Ok(Json::Arr(items));
        }
        loop {
            self.ws();
            items.push(self.value()?);
            self.ws();
            if self.eat("]") {
                return Ok(Json::Arr(items));
            }
            if !self.eat(",") {
                return Err(self.err("Expecting ',' delimiter"));
            }
        }
    }

    fn number(&mut self) -> R<Json> {
        let b = self.s.as_bytes();
        let start = self.i;
        let digits = |i: &mut usize| {
            let from = *i;
            while b.get(*i).is_some_and(u8::is_ascii_digit) {
                *i += 1;
            }
            *i > from
        };
        let mut i = self.i;
        if b[i] == b'-' {
            i += 1;
        }
        if b.get(i) == Some(&b'0') {
            i += 1;
        } else if !digits(&mut i) {
            return Err(self.err("Expecting value"));
        }
        // A fraction or exponent without digits is not part of the number (Python stops there too).
        if b.get(i) == Some(&b'.') {
            let mut j = i + 1;
            if digits(&mut j) {
                i = j;
            }
        }
        if matches!(b.get(i), Some(b'e' | b'E')) {
            let mut j = i + 1;
            if matches!(b.get(j), Some(b'+' | b'-')) {
                j += 1;
            }
            if digits(&mut j) {
                i = j;
            }
        }
        self.i = i;
        Ok(Json::Num(self.s[start..i].to_owned()))
    }

    fn hex4(&self, at: usize) -> Option<u32> {
        let digits = self.s.get(at..at + 4)?;
        if !digits.bytes().all(|c| c.is_ascii_hexdigit()) {
            return None;
        }
        u32::from_str_radix(digits, 16).ok()
    }

    fn string(&mut self) -> R<String> {
        self.i += 1;
        let mut out = String::new();
        loop {
            let rest = &self.s[self.i..];
            let Some(stop) = rest.find(|c: char| c == '"' || c == '\\' || c < ' ') else {
                return Err(self.err("Unterminated string starting at"));
            };
            out.push_str(&rest[..stop]);
            self.i += stop;
            match self.peek() {
                Some(b'"') => {
                    self.i += 1;
                    return Ok(out);
                }
                Some(b'\\') => {}
                _ => return Err(self.err("Invalid control character at")),
            }
            let escape = self.s.as_bytes().get(self.i + 1).copied();
            let simple = match escape {
                Some(b'"') => Some('"'),
                Some(b'\\') => Some('\\'),
                Some(b'/') => Some('/'),
                Some(b'b') => Some('\u{8}'),
                Some(b'f') => Some('\u{c}'),
                Some(b'n') => Some('\n'),
                Some(b'r') => Some('\r'),
                Some(b't') => Some('\t'),
                Some(b'u') => None,
                _ => return Err(self.err("Invalid \\escape")),
            };
            if let Some(c) = simple {
                out.push(c);
                self.i += 2;
                continue;
            }
            let Some(unit) = self.hex4(self.i + 2) else {
                return Err(self.err("Invalid \\uXXXX escape"));
            };
            self.i += 6;
            // A high surrogate right before a low one: the pair is one character.
            let low = if (0xD800..0xDC00).contains(&unit) && self.s[self.i..].starts_with("\\u") {
                self.hex4(self.i + 2)
                    .filter(|low| (0xDC00..0xE000).contains(low))
            } else {
                None
            };
            if let Some(low) = low {
                let c = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00);
                out.push(char::from_u32(c).expect("a surrogate pair is a character"));
                self.i += 6;
                continue;
            }
            out.push(match char::from_u32(unit) {
                Some(c) => c,
                // A lone surrogate: its placeholder.
                None => char::from_u32(PLACEHOLDER_BASE + unit - 0xD800).expect("plane 16"),
            });
        }
    }
}

/// `json.dumps(v, ensure_ascii=True)`: `", "` and `": "` separators, keys in the order read, strings
/// ASCII-escaped ([`write_str`]), numbers as Python writes back what it read.
pub(super) fn dumps(v: &Json) -> String {
    let mut out = String::new();
    write_ordered(&mut out, v);
    out
}

fn write_ordered(out: &mut String, v: &Json) {
    match v {
        Json::Null => out.push_str("null"),
        Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Json::Num(text) => out.push_str(&py_number(text)),
        Json::Str(s) => write_str(out, s),
        Json::Arr(items) => {
            out.push('[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push_str(", ");
                }
                write_ordered(out, item);
            }
            out.push(']');
        }
        Json::Obj(members) => {
            out.push('{');
            for (n, (k, item)) in members.iter().enumerate() {
                if n > 0 {
                    out.push_str(", ");
                }
                write_str(out, k);
                out.push_str(": ");
                write_ordered(out, item);
            }
            out.push('}');
        }
    }
}

/// A JSON number as Python writes back what json.loads made of it: an int keeps its digits (`-0`
/// is `0`), a float is `repr(float)` (`1.5`, `100.0`, `1e+16`, `1e-05`, `Infinity`).
fn py_number(text: &str) -> String {
    if !text.contains(['.', 'e', 'E']) {
        return if text.trim_start_matches('-').bytes().all(|c| c == b'0') {
            "0".to_owned()
        } else {
            text.to_owned()
        };
    }
    let x: f64 = text.parse().unwrap_or(f64::NAN);
    if x.is_infinite() {
        return if x > 0.0 { "Infinity" } else { "-Infinity" }.to_owned();
    }
    let sci = format!("{x:e}"); // shortest round-trip digits, e.g. "1.5e-5"
    let (mantissa, exp) = sci.split_once('e').expect("{:e} has an exponent");
    let exp: i32 = exp.parse().expect("an integer exponent");
    if (-4..16).contains(&exp) {
        let fixed = format!("{x}");
        if fixed.contains('.') {
            fixed
        } else {
            format!("{fixed}.0")
        }
    } else {
        format!(
            "{mantissa}e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        )
    }
}

/// Writes a JSON string as `json.dumps(s, ensure_ascii=True)` does: every character outside
/// printable ASCII escaped (`\n`-style where JSON has one, else `\u00xx`, astral characters as
/// surrogate pairs, placeholders as their lone surrogate).
fn write_str(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            ' '..='~' => out.push(c),
            c if is_placeholder(c) => {
                push_fmt(
                    out,
                    format_args!("\\u{:04x}", c as u32 - PLACEHOLDER_BASE + 0xD800),
                );
            }
            c => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    push_fmt(out, format_args!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
}

/// Appends formatted text to `out` (writing to a `String` cannot fail).
pub(super) fn push_fmt(out: &mut String, args: fmt::Arguments<'_>) {
    out.write_fmt(args)
        .expect("writing to a String cannot fail");
}

/// A JSON string.
pub(super) fn quote(s: &str) -> String {
    let mut out = String::new();
    write_str(&mut out, s);
    out
}

/// A JSON object from keys and already serialized values, keys in the given order.
pub(super) fn object(pairs: &[(&str, String)]) -> String {
    let mut out = String::from("{");
    for (n, (k, v)) in pairs.iter().enumerate() {
        if n > 0 {
            out.push_str(", ");
        }
        write_str(&mut out, k);
        out.push_str(": ");
        out.push_str(v);
    }
    out.push('}');
    out
}
