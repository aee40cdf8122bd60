//! Edits of an agent's configuration text that keep everything else: JSON
//! and JSON with comments (JSONC: Zed, Gemini CLI and qwen-code settings)
//! by splicing writegate's entries into the text at byte offsets found
//! with `jsonc-parser`, TOML (Codex) through `toml_edit`. Each edit either
//! adds writegate's entries or takes them out again; an entry that is
//! already as wanted is left alone, so a second run gives back the same
//! text, and a removal takes out the bytes the set-up put in, so set-up
//! then removal gives back the person's bytes. Text that does not parse,
//! or has another shape where writegate's entries go, is refused with the
//! reason and the line, and nothing is changed.

use jsonc_parser::ParseOptions;
use jsonc_parser::ast::Value as Ast;
use serde_json::Value;

/// One change to a JSON settings file.
pub(crate) enum JsonEdit {
    /// The member at this path (object keys) is this value. Removing takes
    /// the member out, and the objects above it that became empty.
    Set(Vec<&'static str>, Value),
    /// The array at this path holds these strings (others are kept).
    /// Removing takes these strings out, the array when it became empty,
    /// and the objects above it that became empty.
    Contains(Vec<&'static str>, Vec<&'static str>),
}

/// How strict the JSON reader is: comments and trailing commas (JSONC, as
/// the agents' own readers take them), nothing looser.
fn parse_options() -> ParseOptions {
    ParseOptions {
        allow_comments: true,
        allow_trailing_commas: true,
        allow_loose_object_property_names: false,
        allow_missing_commas: false,
        allow_single_quoted_strings: false,
        allow_hexadecimal_numbers: false,
        allow_unary_plus_numbers: false,
        ..ParseOptions::default()
    }
}

/// An edit's result: the new text, and what a removal left in place
/// because writegate did not write it as it is now (each in words, naming
/// the entry).
#[derive(Debug)]
pub(crate) struct Edited {
    pub(crate) text: String,
    pub(crate) left: Vec<String>,
}

/// Applies `edits` (or, with `remove`, takes them out) to JSON `text`; an
/// empty text is an empty object. Returns the new text, or why the text
/// cannot be edited. A removal takes out only entries that are exactly what
/// the set-up writes; another value under writegate's name is left, and
/// said so in [`Edited::left`]. Only writegate's entries' bytes change: an
/// entry goes in after the last member of its object (or element of its
/// array), laid out as its neighbours are (one line, or a line of its own
/// at their indentation), and a removal takes out the entry and the comma
/// and line break that came with it.
pub(crate) fn edit_json(text: &str, edits: &[JsonEdit], remove: bool) -> Result<Edited, String> {
    if text.trim().is_empty() && remove {
        return Ok(Edited {
            text: text.to_string(),
            left: Vec::new(),
        });
    }
    let mut out = if text.trim().is_empty() {
        "{\n}\n".to_string()
    } else {
        text.to_string()
    };
    object_at(&out, &[])?;
    no_duplicate_keys(&out)?;
    let mut left = Vec::new();
    for edit in edits {
        match edit {
            JsonEdit::Set(path, value) => set(&mut out, path, value, remove, &mut left)?,
            JsonEdit::Contains(path, items) => contains(&mut out, path, items, remove)?,
        }
    }
    Ok(Edited { text: out, left })
}

fn not_valid(e: impl std::fmt::Display) -> String {
    format!("it is not valid JSON ({e}); fix or move it, then run this again")
}

/// The top-level value of `text`.
fn ast(text: &str) -> Result<Ast<'_>, String> {
    use jsonc_parser::{CollectOptions, CommentCollectionStrategy};
    jsonc_parser::parse_to_ast(
        text,
        &CollectOptions {
            comments: CommentCollectionStrategy::Off,
            tokens: false,
        },
        &parse_options(),
    )
    .map_err(not_valid)?
    .value
    .ok_or_else(|| "its top level is not a JSON object".to_string())
}

/// An object or array of the text by byte offsets: its brackets and its
/// members (an object's `"key": value`, an array's elements).
struct Node {
    open: usize,
    close: usize,
    members: Vec<Member>,
}

struct Member {
    start: usize,
    end: usize,
    key: Option<String>,
    value: (usize, usize),
}

impl Node {
    fn object(o: &jsonc_parser::ast::Object<'_>) -> Node {
        use jsonc_parser::common::Ranged;
        Node {
            open: o.range.start,
            close: o.range.end - 1,
            members: o
                .properties
                .iter()
                .map(|p| Member {
                    start: p.range.start,
                    end: p.range.end,
                    key: Some(p.name.as_str().to_string()),
                    value: (p.value.range().start, p.value.range().end),
                })
                .collect(),
        }
    }

    fn array(a: &jsonc_parser::ast::Array<'_>) -> Node {
        use jsonc_parser::common::Ranged;
        Node {
            open: a.range.start,
            close: a.range.end - 1,
            members: a
                .elements
                .iter()
                .map(|e| Member {
                    start: e.range().start,
                    end: e.range().end,
                    key: None,
                    value: (e.range().start, e.range().end),
                })
                .collect(),
        }
    }

    fn find(&self, key: &str) -> Option<usize> {
        self.members
            .iter()
            .position(|m| m.key.as_deref() == Some(key))
    }
}

/// Where a path of object keys leads: to an object, or to the deepest
/// object on it and the index of the first key it lacks.
enum At {
    Found(Node),
    Missing(Node, usize),
}

/// The object at `path` below the top of `text`; an existing member of
/// another type is an error naming it.
fn object_at(text: &str, path: &[&str]) -> Result<At, String> {
    let top = ast(text)?;
    let Ast::Object(cur) = &top else {
        return Err("its top level is not a JSON object".to_string());
    };
    let mut cur: &jsonc_parser::ast::Object<'_> = cur;
    for (i, key) in path.iter().enumerate() {
        match cur.properties.iter().find(|p| p.name.as_str() == *key) {
            None => return Ok(At::Missing(Node::object(cur), i)),
            Some(p) => match &p.value {
                Ast::Object(o) => cur = o,
                _ => {
                    return Err(format!(
                        "`{}` is not a JSON object; writegate's entry goes inside it",
                        path[..=i].join(".")
                    ));
                }
            },
        }
    }
    Ok(At::Found(Node::object(cur)))
}

/// The array at `path` (`None` when it or an object above it is not
/// there); another type is an error naming it and `items`.
fn array_at(text: &str, path: &[&str], items: &[&str]) -> Result<Option<Node>, String> {
    let top = ast(text)?;
    let mut cur = &top;
    for key in path {
        let Ast::Object(o) = cur else {
            return Ok(None);
        };
        match o.properties.iter().find(|p| p.name.as_str() == *key) {
            Some(p) => cur = &p.value,
            None => return Ok(None),
        }
    }
    match cur {
        Ast::Array(a) => Ok(Some(Node::array(a))),
        _ => Err(format!(
            "`{}` is not a JSON array; writegate adds {} to it",
            path.join("."),
            items.join(", ")
        )),
    }
}

/// The JSON value of the bytes `range` of `text`.
fn value_of(text: &str, range: (usize, usize)) -> Option<Value> {
    ast(&text[range.0..range.1]).ok().map(Value::from)
}

/// The whitespace before `at` on its line, when only whitespace is there.
fn line_indent(text: &str, at: usize) -> Option<&str> {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    let before = &text[line_start..at];
    before
        .chars()
        .all(|c| c == ' ' || c == '\t')
        .then_some(before)
}

/// The end of the whitespace, comments (`/* */` on one line, `//`) and
/// at most one comma after `at` on its line, and where the comma was.
fn after_on_line(text: &str, at: usize) -> (usize, Option<usize>) {
    let b = text.as_bytes();
    let (mut i, mut comma) = (at, None);
    loop {
        match b.get(i) {
            Some(b' ' | b'\t') => i += 1,
            Some(b',') if comma.is_none() => {
                comma = Some(i);
                i += 1;
            }
            Some(b'/') if b.get(i + 1) == Some(&b'/') => {
                return (text[i..].find('\n').map_or(text.len(), |n| i + n), comma);
            }
            Some(b'/') if b.get(i + 1) == Some(&b'*') => match text[i + 2..].find("*/") {
                Some(n) if !text[i..i + 2 + n].contains('\n') => i += n + 4,
                _ => return (i, comma),
            },
            _ => return (i, comma),
        }
    }
}

/// The offset of the first comma outside comments in `s` (whitespace and
/// comments between two members).
fn first_comma(s: &str) -> Option<usize> {
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match (b[i], b.get(i + 1)) {
            (b',', _) => return Some(i),
            (b'/', Some(b'/')) => i = s[i..].find('\n').map_or(b.len(), |n| i + n),
            (b'/', Some(b'*')) => i = s[i + 2..].find("*/").map_or(b.len(), |n| i + n + 4),
            _ => i += 1,
        }
    }
    None
}

/// Whether a comma follows `at` (past whitespace and comments), and where.
fn comma_after(text: &str, at: usize) -> Option<usize> {
    let b = text.as_bytes();
    let mut i = at;
    while i < b.len() {
        match (b[i], b.get(i + 1)) {
            (b',', _) => return Some(i),
            (c, _) if c.is_ascii_whitespace() => i += 1,
            (b'/', Some(b'/')) => i = text[i..].find('\n').map_or(b.len(), |n| i + n),
            (b'/', Some(b'*')) => i = text[i + 2..].find("*/").map_or(b.len(), |n| i + n + 4),
            _ => return None,
        }
    }
    None
}

/// `v` on one line, with a space after each `:` and `,`.
fn compact(v: &Value) -> String {
    match v {
        Value::Array(a) => format!("[{}]", a.iter().map(compact).collect::<Vec<_>>().join(", ")),
        Value::Object(o) if o.is_empty() => "{}".to_string(),
        Value::Object(o) => format!(
            "{{{}}}",
            o.iter()
                .map(|(k, v)| format!("{}: {}", Value::from(k.as_str()), compact(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

/// `v` over lines, its members at `indent` and `unit` more; arrays of
/// plain values on one line.
fn pretty(v: &Value, indent: &str, unit: &str) -> String {
    let inner = format!("{indent}{unit}");
    match v {
        Value::Object(o) if !o.is_empty() => format!(
            "{{\n{}\n{indent}}}",
            o.iter()
                .map(|(k, v)| format!(
                    "{inner}{}: {}",
                    Value::from(k.as_str()),
                    pretty(v, &inner, unit)
                ))
                .collect::<Vec<_>>()
                .join(",\n")
        ),
        Value::Array(a) if a.iter().any(|e| e.is_object() || e.is_array()) => format!(
            "[\n{}\n{indent}]",
            a.iter()
                .map(|e| format!("{inner}{}", pretty(e, &inner, unit)))
                .collect::<Vec<_>>()
                .join(",\n")
        ),
        other => compact(other),
    }
}

/// How `node` lays out its members: over lines (with the indentation of
/// a member and one step of it) or on one line (`None`).
fn layout(text: &str, node: &Node) -> Option<(String, String)> {
    if !text[node.open..node.close].contains('\n') {
        return None;
    }
    // The indentation of the line the object or array opens on.
    let line_start = text[..node.open].rfind('\n').map_or(0, |i| i + 1);
    let own: String = text[line_start..]
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .collect();
    let member = node
        .members
        .last()
        .and_then(|m| line_indent(text, m.start))
        .filter(|m| m.len() > own.len() && m.starts_with(own.as_str()));
    if let Some(m) = member {
        return Some((m.to_string(), m[own.len()..].to_string()));
    }
    let unit = if own.starts_with('\t') { "\t" } else { "  " };
    Some((format!("{own}{unit}"), unit.to_string()))
}

/// The member (`key`'s, or an element) rendered for `node`.
fn render(text: &str, node: &Node, key: Option<&str>, value: &Value) -> (String, Option<String>) {
    let lines = layout(text, node);
    let v = match &lines {
        Some((indent, unit)) => pretty(value, indent, unit),
        None => compact(value),
    };
    let item = match key {
        Some(k) => format!("{}: {v}", Value::from(k)),
        None => v,
    };
    (item, lines.map(|(indent, _)| indent))
}

/// Adds a member (`key: value`, or an element) after the last of `node`.
fn append(text: &mut String, node: &Node, key: Option<&str>, value: &Value) {
    let (item, indent) = render(text, node, key, value);
    let Some(last) = node.members.last() else {
        let at = node.open + 1;
        match indent {
            Some(indent) => text.insert_str(at, &format!("\n{indent}{item}")),
            None => text.insert_str(at, &item),
        }
        return;
    };
    let (end, comma) = after_on_line(text, last.end);
    match (indent, comma) {
        (Some(indent), Some(_)) => text.insert_str(end, &format!("\n{indent}{item},")),
        (Some(indent), None) => {
            text.insert_str(end, &format!("\n{indent}{item}"));
            text.insert(last.end, ',');
        }
        (None, Some(c)) => text.insert_str(c + 1, &format!(" {item},")),
        (None, None) => text.insert_str(last.end, &format!(", {item}")),
    }
}

/// Takes member `i` out of `node`, with the comma and the line break that
/// came with it (what [`append`] added, for a member it added).
fn take_out(text: &mut String, node: &Node, i: usize) {
    let m = &node.members[i];
    if let Some(next) = node.members.get(i + 1) {
        text.replace_range(m.start..next.start, "");
        return;
    }
    let Some(prev) = i.checked_sub(1).map(|p| &node.members[p]) else {
        let start = node.open + 1 + text[node.open + 1..m.start].trim_end().len();
        let end = comma_after(text, m.end)
            .filter(|c| text[m.end..*c].trim().is_empty())
            .map_or(m.end, |c| c + 1);
        text.replace_range(start..end, "");
        return;
    };
    let gap = text[prev.end..m.start].trim_end();
    let kept = match comma_after(text, m.end) {
        // A trailing comma: the member's own goes, the one before stays.
        Some(c) => format!("{gap}{}", &text[m.end..c]),
        None => match first_comma(gap) {
            Some(c) => format!("{}{}", &gap[..c], &gap[c + 1..]),
            None => gap.to_string(),
        },
    };
    let end = comma_after(text, m.end).map_or(m.end, |c| c + 1);
    text.replace_range(prev.end..end, &kept);
}

/// Takes out the objects along `path` that are empty, innermost first.
fn prune(text: &mut String, path: &[&str]) -> Result<(), String> {
    for depth in (1..=path.len()).rev() {
        let At::Found(obj) = object_at(text, &path[..depth])? else {
            continue;
        };
        if obj.members.is_empty()
            && let At::Found(parent) = object_at(text, &path[..depth - 1])?
            && let Some(i) = parent.find(path[depth - 1])
        {
            take_out(text, &parent, i);
        }
    }
    Ok(())
}

/// `value` inside objects named `keys`, innermost last.
fn nested(keys: &[&str], value: Value) -> Value {
    keys.iter().rev().fold(value, |v, k| {
        let mut o = serde_json::Map::new();
        o.insert((*k).to_string(), v);
        Value::Object(o)
    })
}

fn set(
    text: &mut String,
    path: &[&str],
    value: &Value,
    remove: bool,
    left: &mut Vec<String>,
) -> Result<(), String> {
    let (key, parents) = path.split_last().expect("a path has a key");
    let obj = match object_at(text, parents)? {
        At::Found(obj) => obj,
        At::Missing(..) if remove => return Ok(()),
        At::Missing(obj, depth) => {
            let v = nested(&path[depth + 1..], value.clone());
            append(text, &obj, Some(path[depth]), &v);
            return Ok(());
        }
    };
    let Some(i) = obj.find(key) else {
        if !remove {
            append(text, &obj, Some(key), value);
        }
        return Ok(());
    };
    let same = value_of(text, obj.members[i].value).as_ref() == Some(value);
    match (remove, same) {
        (true, true) => {
            take_out(text, &obj, i);
            prune(text, parents)?;
        }
        (true, false) => left.push(format!(
            "`{}` is not the entry writegate setup writes (it was changed, or written by another writegate), so it stays; take it out yourself if it should go",
            path.join(".")
        )),
        (false, true) => {}
        (false, false) => {
            let (item, _) = render(text, &obj, None, value);
            let (start, end) = obj.members[i].value;
            text.replace_range(start..end, &item);
        }
    }
    Ok(())
}

fn contains(text: &mut String, path: &[&str], items: &[&str], remove: bool) -> Result<(), String> {
    let (key, parents) = path.split_last().expect("a path has a key");
    if array_at(text, path, items)?.is_none() {
        if remove {
            return Ok(());
        }
        let all = Value::from(items.to_vec());
        return match object_at(text, parents)? {
            At::Found(obj) => {
                append(text, &obj, Some(key), &all);
                Ok(())
            }
            At::Missing(obj, depth) => {
                append(
                    text,
                    &obj,
                    Some(path[depth]),
                    &nested(&path[depth + 1..], all),
                );
                Ok(())
            }
        };
    }
    for item in items {
        let array = array_at(text, path, items)?.expect("the array is there");
        let has = array
            .members
            .iter()
            .position(|e| value_of(text, e.value).as_ref().and_then(Value::as_str) == Some(item));
        match (has, remove) {
            (Some(i), true) => take_out(text, &array, i),
            (None, false) => append(text, &array, None, &Value::from(*item)),
            _ => {}
        }
    }
    if remove
        && array_at(text, path, items)?.is_some_and(|a| a.members.is_empty())
        && let At::Found(obj) = object_at(text, parents)?
        && let Some(i) = obj.find(key)
    {
        take_out(text, &obj, i);
        prune(text, parents)?;
    }
    Ok(())
}

/// Refuses JSON `text` in which one object has the same key twice. The
/// agents read settings with `JSON.parse` or the like, where the last
/// one wins, while an edit finds the first: writegate's entries would go
/// where the agent never looks, and the agent would keep its own write
/// tools. Keys are compared as the agents read them (escapes decoded).
fn no_duplicate_keys(text: &str) -> Result<(), String> {
    use jsonc_parser::{CollectOptions, CommentCollectionStrategy};
    let parsed = jsonc_parser::parse_to_ast(
        text,
        &CollectOptions {
            comments: CommentCollectionStrategy::Off,
            tokens: false,
        },
        &parse_options(),
    )
    .map_err(|e| format!("it is not valid JSON ({e}); fix or move it, then run this again"))?;
    let line = |at: usize| text[..at.min(text.len())].matches('\n').count() + 1;
    // Depth-first over every object, each with the keys that lead to it.
    let mut stack: Vec<(String, &Ast<'_>)> = parsed
        .value
        .as_ref()
        .map(|v| (String::new(), v))
        .into_iter()
        .collect();
    while let Some((at, value)) = stack.pop() {
        match value {
            Ast::Object(obj) => {
                let mut seen: std::collections::HashMap<&str, usize> =
                    std::collections::HashMap::new();
                for prop in &obj.properties {
                    let key = prop.name.as_str();
                    let here = line(prop.range.start);
                    let shown = if at.is_empty() {
                        key.to_string()
                    } else {
                        format!("{at}.{key}")
                    };
                    if let Some(first) = seen.insert(key, here) {
                        return Err(format!(
                            "the key `{shown}` is there twice (lines {first} and {here}); the agent reads only the last one, so writegate's entries would not count: merge the two into one, then run this again"
                        ));
                    }
                    stack.push((shown, &prop.value));
                }
            }
            Ast::Array(arr) => {
                for (i, e) in arr.elements.iter().enumerate() {
                    stack.push((format!("{at}[{i}]"), e));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// Sets (or, with `remove`, takes out) the table `[mcp_servers.<name>]`'s
/// `command`, `args` and the string keys `keys` in Codex's TOML `text`; its
/// other keys are kept on a set. A remove takes the table out only when it
/// is what the set-up writes (that `command`, those `args` and `keys`,
/// nothing else); another table of
/// that name is left, and said so. TOML has no duplicate keys: a text
/// with a key twice does not parse and is refused.
pub(crate) fn edit_codex_toml(
    text: &str,
    name: &str,
    command: &str,
    args: &[&str],
    keys: &[(&str, &str)],
    remove: bool,
) -> Result<Edited, String> {
    use toml_edit::{Array, DocumentMut, Item, Table, value};
    let mut doc: DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        format!(
            "it is not valid TOML ({}); fix or move it, then run this again",
            e.to_string().trim().replace('\n', " ")
        )
    })?;
    let servers = match doc.get_mut("mcp_servers") {
        Some(item) => match item.as_table_like_mut() {
            Some(t) => Some(t),
            None => return Err("`mcp_servers` is not a table".to_string()),
        },
        None => None,
    };
    let is_ours = |entry: &dyn toml_edit::TableLike| {
        entry.len() == 2 + keys.len()
            && keys
                .iter()
                .all(|(k, v)| entry.get(k).and_then(Item::as_str) == Some(*v))
            && entry.get("command").and_then(Item::as_str) == Some(command)
            && entry.get("args").and_then(Item::as_array).is_some_and(|a| {
                a.iter()
                    .map(|v| v.as_str())
                    .eq(args.iter().map(|s| Some(*s)))
            })
    };
    if remove {
        let mut left = Vec::new();
        if let Some(servers) = servers {
            match servers.get(name) {
                Some(entry) if entry.as_table_like().is_some_and(is_ours) => {
                    servers.remove(name);
                    if servers.is_empty() {
                        doc.remove("mcp_servers");
                    }
                }
                Some(_) => left.push(format!(
                    "`mcp_servers.{name}` is not the entry writegate setup writes (it was changed, or written by another writegate), so it stays; take it out yourself if it should go"
                )),
                None => {}
            }
        }
        return Ok(Edited {
            text: doc.to_string(),
            left,
        });
    }
    let servers = if let Some(s) = servers {
        s
    } else {
        let mut t = Table::new();
        t.set_implicit(true);
        doc.insert("mcp_servers", Item::Table(t));
        doc["mcp_servers"]
            .as_table_like_mut()
            .expect("just inserted a table")
    };
    if servers.get(name).is_none() {
        servers.insert(name, Item::Table(Table::new()));
    }
    let Some(entry) = servers.get_mut(name).and_then(Item::as_table_like_mut) else {
        return Err(format!("`mcp_servers.{name}` is not a table"));
    };
    if entry.get("command").and_then(Item::as_str) != Some(command) {
        entry.insert("command", value(command));
    }
    let same_args = entry.get("args").and_then(Item::as_array).is_some_and(|a| {
        a.iter()
            .map(|v| v.as_str())
            .eq(args.iter().map(|s| Some(*s)))
    });
    if !same_args {
        entry.insert("args", value(args.iter().copied().collect::<Array>()));
    }
    for (k, v) in keys {
        if entry.get(k).and_then(Item::as_str) != Some(*v) {
            entry.insert(k, value(*v));
        }
    }
    Ok(Edited {
        text: doc.to_string(),
        left: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn edits() -> Vec<JsonEdit> {
        vec![
            JsonEdit::Set(
                vec!["mcpServers", "writegate"],
                json!({"command": "wg", "args": ["mcp"]}),
            ),
            JsonEdit::Contains(vec!["tools", "disabled"], vec!["write_file", "edit"]),
        ]
    }

    #[test]
    fn json_with_comments_keeps_them_and_round_trips() {
        let text = "{\n  // my theme\n  \"theme\": \"dark\", /* keep */\n  \"tools\": { \"disabled\": [\"x\"] },\n}\n";
        let added = edit_json(text, &edits(), false).unwrap().text;
        assert!(
            added.contains("// my theme") && added.contains("/* keep */"),
            "{added}"
        );
        assert!(
            added.contains("\"write_file\"") && added.contains("\"x\""),
            "{added}"
        );
        let v: Value = Value::from(ast(&added).unwrap());
        assert_eq!(v["mcpServers"]["writegate"]["command"], "wg");
        assert_eq!(
            edit_json(&added, &edits(), false).unwrap().text,
            added,
            "idempotent"
        );
        let removed = edit_json(&added, &edits(), true).unwrap().text;
        assert!(
            removed.contains("\"x\"") && !removed.contains("writegate"),
            "{removed}"
        );
        assert!(!removed.contains("mcpServers"), "{removed}");
    }

    #[test]
    fn an_empty_file_becomes_an_object() {
        let added = edit_json("", &edits(), false).unwrap().text;
        let v: Value = serde_json::from_str(&added).unwrap();
        assert_eq!(v["tools"]["disabled"], json!(["write_file", "edit"]));
        let removed = edit_json(&added, &edits(), true).unwrap().text;
        assert_eq!(serde_json::from_str::<Value>(&removed).unwrap(), json!({}));
    }

    /// Set-up then removal reformatted the settings (an object writegate
    /// added a member to stayed spread over lines): each gives back the
    /// person's bytes now, whatever their layout, comments and commas.
    #[test]
    fn regression_remove_reformatted_the_settings() {
        let texts = [
            "{\n  // theme\n  \"ui\": {\"theme\": \"Dracula\"},\n  \"mcpServers\": {\"other\": {\"command\": \"x\"}}\n}\n",
            "{\"a\":1,\"mcpServers\":{\"o\":1},\"tools\":{\"disabled\":[\"x\"]}}",
            "{\n\t\"mcpServers\": {\n\t\t\"o\": 1, // mine\n\t},\n\t\"tools\": {\"disabled\": [\n\t\t\"x\",\n\t]} /* end */\n}",
            "  {   \"tools\" :{ \"disabled\":[ \"z\" ] } ,\"mcpServers\": {\n\"k\":null} }  \n\n",
            "{\n    \"x\": [1,2,3],    // odd\n    \"tools\": {\n        \"disabled\": [\"y\"] /* c, with a comma */\n    }\n}\r\n",
            "{}",
            "{\n  // nothing yet\n}\n",
        ];
        for text in texts {
            let added = edit_json(text, &edits(), false).unwrap().text;
            let v: Value = Value::from(ast(&added).unwrap());
            assert_eq!(v["mcpServers"]["writegate"]["command"], "wg", "{added}");
            let disabled = v["tools"]["disabled"].as_array().unwrap();
            assert!(disabled.contains(&json!("write_file")), "{added}");
            assert_eq!(edit_json(&added, &edits(), false).unwrap().text, added);
            let removed = edit_json(&added, &edits(), true).unwrap().text;
            assert_eq!(removed, text, "set up:\n{added}");
        }
    }

    #[test]
    fn malformed_or_misshapen_json_is_refused() {
        assert!(
            edit_json("{\"a\": }", &edits(), false)
                .unwrap_err()
                .contains("not valid JSON")
        );
        assert!(
            edit_json("[1]", &edits(), false)
                .unwrap_err()
                .contains("top level")
        );
        let e = edit_json("{\"tools\": {\"disabled\": \"x\"}}", &edits(), false).unwrap_err();
        assert!(e.contains("`tools.disabled` is not a JSON array"), "{e}");
        let e = edit_json("{\"mcpServers\": 3}", &edits(), false).unwrap_err();
        assert!(e.contains("`mcpServers` is not a JSON object"), "{e}");
    }

    #[test]
    fn toml_keeps_comments_and_other_servers() {
        let text = "# mine\nmodel = \"o3\"\n\n[mcp_servers.other]\ncommand = \"x\" # keep\n";
        let added = edit_codex_toml(text, "writegate", "wg", &["mcp"], &[], false)
            .unwrap()
            .text;
        assert!(added.starts_with("# mine\nmodel = \"o3\""), "{added}");
        assert!(added.contains("command = \"x\" # keep"), "{added}");
        assert!(
            added.contains("[mcp_servers.writegate]\ncommand = \"wg\"\nargs = [\"mcp\"]"),
            "{added}"
        );
        assert_eq!(
            edit_codex_toml(&added, "writegate", "wg", &["mcp"], &[], false)
                .unwrap()
                .text,
            added
        );
        assert_eq!(
            edit_codex_toml(&added, "writegate", "wg", &["mcp"], &[], true)
                .unwrap()
                .text,
            text
        );
        assert!(
            edit_codex_toml("a = ", "writegate", "wg", &[], &[], false)
                .unwrap_err()
                .contains("not valid TOML")
        );
        assert!(edit_codex_toml("mcp_servers = 1", "w", "wg", &[], &[], false).is_err());
    }
}
