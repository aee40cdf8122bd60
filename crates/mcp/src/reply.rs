//! Failed tool calls: every failure as a result with `isError: true` and
//! one or two sentences the model can act on, its facts under `_meta`.
//! The only place a core [`Failure`] becomes MCP. (A success is its
//! tool's: `tools::success`, or `read_file`'s written text.)

use rmcp::model::{CallToolResult, ContentBlock, MetaObject};
use serde_json::{Map, Value, json};
use std::fmt::Write as _;
use std::path::Path;
use writegate_core::{Detail, ErrorKind, Failure, RefusalFacts};

/// `_meta` key of an error result's facts: `{errorKind, status, ...}`.
pub(crate) const ERROR_META_KEY: &str = "writegate/error";

/// What the failure text may mention besides the refusal itself.
pub(crate) struct Situation<'a> {
    /// Every workspace root the connection routes to, the primary first.
    pub(crate) roots: &'a [String],
    /// The workspace the request ran in came from the client's roots.
    pub(crate) client_root: bool,
    /// The level a config rule must give a held path (`policy.auto_approve`).
    pub(crate) auto_approve: &'static str,
    /// The config file the person would edit, if known.
    pub(crate) config_file: Option<&'a Path>,
    /// The person could be asked (the client offers elicitation).
    pub(crate) asked: bool,
}

/// An error result: `text` for the model, `facts` under `_meta`.
pub(crate) fn error(text: String, facts: Map<String, Value>) -> CallToolResult {
    let r = CallToolResult::error(vec![ContentBlock::text(text)]);
    let mut meta = MetaObject::new();
    meta.0
        .insert(ERROR_META_KEY.to_string(), Value::Object(facts));
    r.with_meta(Some(meta))
}

/// Arguments that do not fit the tool (wrong type, unknown name, bad
/// combination): an error result naming what to fix. Not audited (no
/// operation ran).
pub(crate) fn invalid_arguments(tool: &str, why: &str) -> CallToolResult {
    let mut facts = Map::new();
    facts.insert("errorKind".into(), "invalid_arguments".into());
    error(
        format!(
            "invalid_arguments: {tool}: {why}. Nothing was done; fix the arguments (see the tool's input schema) and call it again."
        ),
        facts,
    )
}

/// A TOML string holding `s` (literal when it can be).
fn toml_string(s: &str) -> String {
    if !s.contains(['\'', '\n', '\r']) {
        return format!("'{s}'");
    }
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04X}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A core failure as an error result. The text is `<errorKind>: <what
/// happened and what to do>`; `_meta["writegate/error"]` holds the kind,
/// the status and the refusal's structured facts.
pub(crate) fn failure(f: &Failure, s: &Situation<'_>) -> CallToolResult {
    let mut facts = Map::new();
    let text = match f {
        Failure::InvalidParams(why) => {
            facts.insert("errorKind".into(), "invalid_arguments".into());
            format!(
                "invalid_arguments: {why}. Nothing was done; fix the arguments and call the tool again."
            )
        }
        Failure::Cancelled => {
            facts.insert("errorKind".into(), "cancelled".into());
            "cancelled: the call was cancelled, or the user dismissed the approval question; nothing was written.".to_string()
        }
        Failure::Refused(r) => {
            // The members ACP's `data` shows too.
            if let Ok(Value::Object(m)) = serde_json::to_value(RefusalFacts::of(r)) {
                facts = m;
            }
            let mut hint = r.hint.clone();
            if let Some(Detail::Approval {
                command,
                level,
                reason,
                ..
            }) = &r.detail
            {
                hint = if hint.starts_with("the user declined") {
                    format!(
                        "the user declined `{command}` ({reason}); nothing was written. Do not retry it unless the user asks for it."
                    )
                } else {
                    let file = s.config_file.map_or_else(
                        || "the writegate config".to_string(),
                        |p| p.display().to_string(),
                    );
                    let why = if s.asked {
                        "the question to the user got no answer"
                    } else {
                        "this MCP client cannot ask them (it does not offer elicitation)"
                    };
                    format!(
                        "`{command}` needs the user's approval ({reason}, rated {level}) and {why}. Nothing was written. Tell the user; they can allow it with a rule in {file}: [policy] rules = [{{ pattern = {}, level = \"{}\" }}], then restart the MCP server; do not retry before they do.",
                        toml_string(&writegate_core::policy::escape_glob(command)),
                        s.auto_approve
                    )
                };
            }
            match r.kind {
                ErrorKind::PathOutsideWorkspace if s.roots.len() > 1 => {
                    let _ = write!(hint, " (the workspaces are {})", s.roots.join(", "));
                }
                ErrorKind::PathOutsideWorkspace => {
                    if let Some(root) = s.roots.first().filter(|r| !hint.contains(r.as_str())) {
                        let _ = write!(hint, " (the workspace is {root})");
                    }
                }
                ErrorKind::UntrustedWorkspace if s.client_root => {
                    hint = "this workspace came from the MCP client's roots, which are registered read-only ([mcp] client_roots = \"untrusted\"); nothing was written. Tell the user: they can start writegate mcp with --workspace on this directory, or set [mcp] client_roots = \"trusted\" in the writegate config.".to_string();
                }
                _ => {}
            }
            facts.insert("hint".into(), json!(hint));
            format!("{}: {hint}", r.kind.as_str())
        }
    };
    error(text, facts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use writegate_core::Refusal;

    fn situation() -> Situation<'static> {
        Situation {
            roots: &[],
            client_root: false,
            auto_approve: "moderate",
            config_file: None,
            asked: false,
        }
    }

    fn text(r: &CallToolResult) -> String {
        match &r.content[0] {
            ContentBlock::Text(t) => t.text.clone(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_ambiguous_find_names_the_count_and_lines() {
        let f = Failure::Refused(
            Refusal::new(
                ErrorKind::AmbiguousTextMatch,
                "find occurs 2 times (starting on lines 3 and 9); include more surrounding text",
            )
            .with_detail(Detail::Ambiguous {
                count: 2,
                lines: vec![3, 9],
            }),
        );
        let r = failure(&f, &situation());
        assert_eq!(r.is_error, Some(true));
        let t = text(&r);
        assert!(
            t.starts_with("ambiguous_text_match: find occurs 2 times (starting on lines 3 and 9)"),
            "{t}"
        );
        let meta = r.meta.unwrap();
        assert_eq!(meta.0[ERROR_META_KEY]["lines"], json!([3, 9]));
        assert_eq!(meta.0[ERROR_META_KEY]["count"], 2);
    }

    #[test]
    fn a_held_write_without_elicitation_says_how_to_allow_it() {
        let f = Failure::Refused(
            Refusal::new(ErrorKind::ApprovalRequired, "call _writegate/approve").with_detail(
                Detail::Approval {
                    command: "edit_file write /w/a*b/.env".into(),
                    level: writegate_core::config::Level::Dangerous,
                    reason: "credential file .env".into(),
                    session: Some("s".into()),
                    asked: false,
                },
            ),
        );
        let t = text(&failure(&f, &situation()));
        assert!(!t.contains("_writegate/approve"), "{t}");
        assert!(
            t.contains(r#"pattern = 'edit_file write /w/a\*b/.env', level = "moderate""#),
            "{t}"
        );
        assert!(t.contains("cannot ask"), "{t}");
    }

    #[test]
    fn toml_strings_quote_what_a_literal_cannot_hold() {
        assert_eq!(toml_string("a\\b"), "'a\\b'");
        assert_eq!(toml_string("it's"), "\"it's\"");
        assert_eq!(toml_string("a\"'\\"), "\"a\\\"'\\\\\"");
    }
}
