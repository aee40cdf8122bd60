//! Edits of an agent's configuration text that keep everything else: JSON
//! and JSON with comments (JSONC: Zed, Gemini CLI and qwen-code settings)
//! through `jsonc-parser`'s concrete syntax tree, TOML (Codex) through
//! `toml_edit`. Each edit either adds writegate's entries or takes them out
//! again; an entry that is already as wanted is left alone, so a second run
//! gives back the same text. Text that does not parse, or has another
//! shape where writegate's entries go, is refused with the reason and the
//! line, and nothing is changed.

use jsonc_parser::ParseOptions;
use jsonc_parser::cst::{CstInputValue, CstObject, CstRootNode};
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

/// `serde_json` value to the tree's input value.
fn input(v: &Value) -> CstInputValue {
    match v {
        Value::Null => CstInputValue::Null,
        Value::Bool(b) => CstInputValue::Bool(*b),
        Value::Number(n) => CstInputValue::Number(n.to_string()),
        Value::String(s) => CstInputValue::String(s.clone()),
        Value::Array(a) => CstInputValue::Array(a.iter().map(input).collect()),
        Value::Object(o) => {
            CstInputValue::Object(o.iter().map(|(k, v)| (k.clone(), input(v))).collect())
        }
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
/// said so in [`Edited::left`].
pub(crate) fn edit_json(text: &str, edits: &[JsonEdit], remove: bool) -> Result<Edited, String> {
    if text.trim().is_empty() && remove {
        return Ok(Edited {
            text: text.to_string(),
            left: Vec::new(),
        });
    }
    let source = if text.trim().is_empty() { "{}\n" } else { text };
    let root = CstRootNode::parse(source, &parse_options())
        .map_err(|e| format!("it is not valid JSON ({e}); fix or move it, then run this again"))?;
    let Some(top) = root.object_value() else {
        return Err("its top level is not a JSON object".to_string());
    };
    no_duplicate_keys(source)?;
    let mut left = Vec::new();
    for edit in edits {
        match edit {
            JsonEdit::Set(path, value) => set(&top, path, value, remove, &mut left)?,
            JsonEdit::Contains(path, items) => contains(&top, path, items, remove)?,
        }
    }
    let mut out = root.to_string();
    if text.trim().is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    Ok(Edited { text: out, left })
}

/// Refuses JSON `text` in which one object has the same key twice. The
/// agents read settings with `JSON.parse` or the like, where the last
/// one wins, while an edit finds the first: writegate's entries would go
/// where the agent never looks, and the agent would keep its own write
/// tools. Keys are compared as the agents read them (escapes decoded).
fn no_duplicate_keys(text: &str) -> Result<(), String> {
    use jsonc_parser::ast::Value as Ast;
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

/// The object at `path` below `top` (creating it unless `remove`); an
/// existing member of another type is an error naming it.
fn object_at(top: &CstObject, path: &[&str], create: bool) -> Result<Option<CstObject>, String> {
    let mut cur = top.clone();
    for (i, key) in path.iter().enumerate() {
        let next = match cur.get(key) {
            Some(prop) => match prop.value().and_then(|v| v.as_object()) {
                Some(o) => o,
                None => {
                    return Err(format!(
                        "`{}` is not a JSON object; writegate's entry goes inside it",
                        path[..=i].join(".")
                    ));
                }
            },
            None if create => cur.object_value_or_set(key),
            None => return Ok(None),
        };
        cur = next;
    }
    Ok(Some(cur))
}

/// Removes the objects along `path` below `top` that are empty, innermost
/// first.
fn prune(top: &CstObject, path: &[&str]) {
    for depth in (1..=path.len()).rev() {
        let Ok(Some(obj)) = object_at(top, &path[..depth], false) else {
            continue;
        };
        if obj.properties().is_empty()
            && let Ok(Some(parent)) = object_at(top, &path[..depth - 1], false)
            && let Some(prop) = parent.get(path[depth - 1])
        {
            prop.remove();
        }
    }
}

fn set(
    top: &CstObject,
    path: &[&str],
    value: &Value,
    remove: bool,
    left: &mut Vec<String>,
) -> Result<(), String> {
    let (key, parents) = path.split_last().expect("a path has a key");
    let Some(obj) = object_at(top, parents, !remove)? else {
        return Ok(());
    };
    match obj.get(key) {
        Some(prop) if remove && prop.to_serde_value().as_ref() == Some(value) => {
            prop.remove();
            prune(top, parents);
        }
        Some(_) if remove => left.push(format!(
            "`{}` is not the entry writegate setup writes (it was changed, or written by another writegate), so it stays; take it out yourself if it should go",
            path.join(".")
        )),
        None if remove => {}
        Some(prop) if prop.to_serde_value().as_ref() == Some(value) => {}
        Some(prop) => prop.set_value(input(value)),
        None => {
            obj.append(key, input(value));
        }
    }
    Ok(())
}

fn contains(top: &CstObject, path: &[&str], items: &[&str], remove: bool) -> Result<(), String> {
    let (key, parents) = path.split_last().expect("a path has a key");
    let Some(obj) = object_at(top, parents, !remove)? else {
        return Ok(());
    };
    let array = match obj.get(key) {
        Some(prop) => match prop.value().and_then(|v| v.as_array()) {
            Some(a) => a,
            None => {
                return Err(format!(
                    "`{}` is not a JSON array; writegate adds {} to it",
                    path.join("."),
                    items.join(", ")
                ));
            }
        },
        None if remove => return Ok(()),
        None => obj.array_value_or_set(key),
    };
    let has = |s: &str| {
        array
            .elements()
            .into_iter()
            .find(|e| e.to_serde_value().as_ref().and_then(Value::as_str) == Some(s))
    };
    for item in items {
        match (has(item), remove) {
            (Some(e), true) => e.remove(),
            (None, false) => {
                array.append(CstInputValue::String((*item).to_string()));
            }
            _ => {}
        }
    }
    if remove && array.elements().is_empty() {
        if let Some(prop) = obj.get(key) {
            prop.remove();
        }
        prune(top, parents);
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
        let v: Value = serde_json::from_str(
            &CstRootNode::parse(&added, &parse_options())
                .unwrap()
                .to_serde_value()
                .unwrap()
                .to_string(),
        )
        .unwrap();
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
        assert_eq!(edit_json(&added, &edits(), true).unwrap().text.trim(), "{}");
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
