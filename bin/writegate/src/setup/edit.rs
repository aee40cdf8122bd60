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

/// Applies `edits` (or, with `remove`, takes them out) to JSON `text`; an
/// empty text is an empty object. Returns the new text, or why the text
/// cannot be edited.
pub(crate) fn edit_json(text: &str, edits: &[JsonEdit], remove: bool) -> Result<String, String> {
    if text.trim().is_empty() && remove {
        return Ok(text.to_string());
    }
    let source = if text.trim().is_empty() { "{}\n" } else { text };
    let root = CstRootNode::parse(source, &parse_options())
        .map_err(|e| format!("it is not valid JSON ({e}); fix or move it, then run this again"))?;
    let Some(top) = root.object_value() else {
        return Err("its top level is not a JSON object".to_string());
    };
    for edit in edits {
        match edit {
            JsonEdit::Set(path, value) => set(&top, path, value, remove)?,
            JsonEdit::Contains(path, items) => contains(&top, path, items, remove)?,
        }
    }
    let mut out = root.to_string();
    if text.trim().is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    Ok(out)
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

fn set(top: &CstObject, path: &[&str], value: &Value, remove: bool) -> Result<(), String> {
    let (key, parents) = path.split_last().expect("a path has a key");
    let Some(obj) = object_at(top, parents, !remove)? else {
        return Ok(());
    };
    match obj.get(key) {
        Some(prop) if remove => {
            prop.remove();
            prune(top, parents);
        }
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
/// `command` and `args` in Codex's TOML `text`; its other keys are kept on
/// a set, and the table goes on a remove.
pub(crate) fn edit_codex_toml(
    text: &str,
    name: &str,
    command: &str,
    args: &[&str],
    remove: bool,
) -> Result<String, String> {
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
    if remove {
        if let Some(servers) = servers {
            servers.remove(name);
            if servers.is_empty() {
                doc.remove("mcp_servers");
            }
        }
        return Ok(doc.to_string());
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
    Ok(doc.to_string())
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
        let added = edit_json(text, &edits(), false).unwrap();
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
            edit_json(&added, &edits(), false).unwrap(),
            added,
            "idempotent"
        );
        let removed = edit_json(&added, &edits(), true).unwrap();
        assert!(
            removed.contains("\"x\"") && !removed.contains("writegate"),
            "{removed}"
        );
        assert!(!removed.contains("mcpServers"), "{removed}");
    }

    #[test]
    fn an_empty_file_becomes_an_object() {
        let added = edit_json("", &edits(), false).unwrap();
        let v: Value = serde_json::from_str(&added).unwrap();
        assert_eq!(v["tools"]["disabled"], json!(["write_file", "edit"]));
        assert_eq!(edit_json(&added, &edits(), true).unwrap().trim(), "{}");
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
        let added = edit_codex_toml(text, "writegate", "wg", &["mcp"], false).unwrap();
        assert!(added.starts_with("# mine\nmodel = \"o3\""), "{added}");
        assert!(added.contains("command = \"x\" # keep"), "{added}");
        assert!(
            added.contains("[mcp_servers.writegate]\ncommand = \"wg\"\nargs = [\"mcp\"]"),
            "{added}"
        );
        assert_eq!(
            edit_codex_toml(&added, "writegate", "wg", &["mcp"], false).unwrap(),
            added
        );
        assert_eq!(
            edit_codex_toml(&added, "writegate", "wg", &["mcp"], true).unwrap(),
            text
        );
        assert!(
            edit_codex_toml("a = ", "writegate", "wg", &[], false)
                .unwrap_err()
                .contains("not valid TOML")
        );
        assert!(edit_codex_toml("mcp_servers = 1", "w", "wg", &[], false).is_err());
    }
}
