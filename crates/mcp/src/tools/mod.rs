//! The tool table: one module per tool, each a [`Tool`] impl (name,
//! arguments with their JSON schema as `inputSchema`, its typed outcome
//! ([`ToolOutput`]: with its schema as `outputSchema` when it is sent as
//! `structuredContent`) and the text a model reads of it,
//! description and annotations, the core operation it runs), and one
//! [`TOOLS`] table from which `tools/list` and the dispatch of
//! `tools/call` are both derived. A success becomes its tool result here,
//! in [`success`] (`read_file`'s is written as JSON text in its own
//! module); a failure in `reply`.
//!
//! Adding a tool: a new module with a `Tool` impl, and one line in
//! [`TOOLS`] (`tests/architecture.rs` checks every module has its row). A
//! tool the config leaves out ([`Tool::enabled`]) is neither listed nor
//! called: a call to it is answered as a call to an unknown tool.

mod edit_file;
mod read_file;
mod undo;
mod write_file;

use crate::out::{Answer, Writer};
use crate::reply;
use rmcp::model::{CallToolResult, ContentBlock, JsonObject};
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use std::path::Path;
use writegate_core::config::McpConfig;
use writegate_core::{Failure, OpCtx, Service};

/// One tool: its name, arguments, result and operation.
pub(crate) trait Tool {
    /// The tool's name in `tools/list` and `tools/call`.
    const NAME: &'static str;
    /// The audit event's `route`.
    const ROUTE: &'static str;
    /// The arguments (their schema is the tool's `inputSchema`); a call
    /// whose arguments do not parse is the tool error `invalid_arguments`.
    type Args: DeserializeOwned + JsonSchema + Send + 'static;
    /// What a successful call returns ([`ToolOutput`]: whether it is
    /// also sent as `structuredContent`).
    type Out: ToolOutput;
    /// The tool as `tools/list` shows it, without its schemas: name,
    /// description (with the limits and roots of `facts`), title and
    /// annotations.
    fn describe(facts: &Facts<'_>) -> rmcp::model::Tool;
    /// Whether `[mcp]` offers the tool (listed and callable). Default yes.
    fn enabled(_cfg: &McpConfig) -> bool {
        true
    }
    /// The path the call names, as given; `None` for a tool that names no
    /// path (it runs in the primary workspace, and its operation finds its
    /// file itself).
    fn path(args: &Self::Args) -> Option<&str>;
    /// Checks that need no IO (bad combinations): `Err` is the reason of an
    /// `invalid_arguments` error, and nothing is audited.
    fn check(_args: &Self::Args) -> Result<(), String> {
        Ok(())
    }
    /// Bytes of file content the call carries (which thread runs it).
    fn content_len(_args: &Self::Args) -> usize {
        0
    }
    /// Runs the core operation on `path` (the call's path made absolute;
    /// the primary workspace root for a tool that names no path) and
    /// returns its outcome as the tool's.
    fn run(
        service: &Service,
        ctx: &OpCtx,
        path: &Path,
        args: Self::Args,
    ) -> Result<Self::Out, Failure>;
    /// The text block of a successful result: what the model reads.
    fn text(out: &Self::Out) -> String;
    /// A successful call's result, for a connection whose results
    /// `writer` writes: by default [`success`], the text and any
    /// `structuredContent`. `read_file` writes its own as JSON text for
    /// the connection's own writer.
    fn answer(out: Self::Out, _writer: Writer) -> Answer {
        Answer::Typed(success::<Self>(&out))
    }
}

/// The result of a successful call of `T`: [`Tool::text`] as its one text
/// block, and the outcome's `structuredContent`, if it has one.
pub(crate) fn success<T: Tool + ?Sized>(out: &T::Out) -> CallToolResult {
    let mut r = CallToolResult::success(vec![ContentBlock::text(T::text(out))]);
    r.structured_content = out.structured();
    r
}

/// A tool's successful outcome beside its text block: sent as
/// `structuredContent`, its schema the tool's `outputSchema`, or not sent
/// at all. Several agents show their model a result's
/// `structuredContent` instead of its text when there is one (Claude Code
/// and Codex CLI do), so an outcome sent both ways must say the same
/// thing in each; `read_file`'s lines are sent once, as text
/// (docs/decisions/0034-reads-ahead-of-the-peers.md).
pub(crate) trait ToolOutput: 'static {
    /// `tool` with its `outputSchema`, if results carry `structuredContent`.
    fn with_schema(tool: rmcp::model::Tool) -> rmcp::model::Tool;
    /// The `structuredContent` of a result.
    fn structured(&self) -> Option<serde_json::Value>;
}

/// Outcomes sent whole as `structuredContent`, their serde schema the
/// tool's `outputSchema`.
macro_rules! structured_outcomes {
    ($($t:ty),* $(,)?) => {$(
        impl ToolOutput for $t {
            fn with_schema(tool: rmcp::model::Tool) -> rmcp::model::Tool {
                tool.with_output_schema::<$t>()
            }
            fn structured(&self) -> Option<serde_json::Value> {
                serde_json::to_value(self).ok()
            }
        }
    )*};
}

structured_outcomes!(
    write_file::WriteOut,
    edit_file::EditOut,
    writegate_core::history::UndoOutcome,
);

/// The operation of one parsed call: runs on whichever thread the server
/// picks, and answers for a connection whose results the [`Writer`]
/// writes.
pub(crate) type Operation =
    Box<dyn FnOnce(&Service, &OpCtx, &Path, Writer) -> Result<Answer, Failure> + Send>;

/// One parsed call, ready to run.
pub(crate) struct Parsed {
    /// The path as the call gave it (`None`: the tool names no path).
    pub(crate) path: Option<String>,
    /// Bytes of file content it carries.
    pub(crate) content_len: usize,
    /// The operation.
    pub(crate) op: Operation,
}

/// One row of the table.
pub(crate) struct Entry {
    /// The tool's name.
    pub(crate) name: &'static str,
    /// The audit event's `route`.
    pub(crate) route: &'static str,
    enabled: fn(&McpConfig) -> bool,
    describe: fn(&Facts<'_>) -> rmcp::model::Tool,
    parse: fn(JsonObject) -> Result<Parsed, Box<CallToolResult>>,
}

impl Entry {
    /// The tool as `tools/list` shows it, schemas included.
    pub(crate) fn describe(&self, facts: &Facts<'_>) -> rmcp::model::Tool {
        (self.describe)(facts)
    }

    /// The call's arguments parsed and checked, or the error result that
    /// says what is wrong (not audited: no operation ran).
    pub(crate) fn parse(&self, args: JsonObject) -> Result<Parsed, Box<CallToolResult>> {
        (self.parse)(args)
    }
}

const fn entry<T: Tool>() -> Entry {
    Entry {
        name: T::NAME,
        route: T::ROUTE,
        enabled: T::enabled,
        describe: describe_with::<T>,
        parse: parse_with::<T>,
    }
}

fn describe_with<T: Tool>(facts: &Facts<'_>) -> rmcp::model::Tool {
    portable(T::Out::with_schema(
        T::describe(facts).with_input_schema::<T::Args>(),
    ))
}

fn parse_with<T: Tool>(args: JsonObject) -> Result<Parsed, Box<CallToolResult>> {
    let args: T::Args =
        serde_path_to_error::deserialize(serde_json::Value::Object(args)).map_err(|e| {
            let at = e.path().to_string();
            let why = e.into_inner();
            let why = if at == "." {
                why.to_string()
            } else {
                format!("{at}: {why}")
            };
            Box::new(reply::invalid_arguments(T::NAME, &why))
        })?;
    T::check(&args).map_err(|why| Box::new(reply::invalid_arguments(T::NAME, &why)))?;
    Ok(Parsed {
        path: T::path(&args).map(str::to_string),
        content_len: T::content_len(&args),
        op: Box::new(
            move |service: &Service, ctx: &OpCtx, path: &Path, writer: Writer| {
                T::run(service, ctx, path, args).map(|out| T::answer(out, writer))
            },
        ),
    })
}

/// Every tool, in the order `tools/list` lists them.
pub(crate) static TOOLS: [Entry; 4] = [
    entry::<read_file::ReadFile>(),
    entry::<write_file::WriteFile>(),
    entry::<edit_file::EditFile>(),
    entry::<undo::Undo>(),
];

/// The tools `cfg` offers.
fn served(cfg: &McpConfig) -> impl Iterator<Item = &'static Entry> + '_ {
    TOOLS.iter().filter(|e| (e.enabled)(cfg))
}

/// The row for `name`, if `cfg` offers that tool.
pub(crate) fn find(name: &str, cfg: &McpConfig) -> Option<&'static Entry> {
    served(cfg).find(|e| e.name == name)
}

/// The tools `cfg` offers, as `tools/list` answers.
pub(crate) fn list(facts: &Facts<'_>, cfg: &McpConfig) -> Vec<rmcp::model::Tool> {
    served(cfg).map(|e| e.describe(facts)).collect()
}

/// The names of the tools `cfg` offers, for the error naming an unknown
/// one.
pub(crate) fn names(cfg: &McpConfig) -> String {
    let names: Vec<_> = served(cfg).map(|e| e.name).collect();
    match names.as_slice() {
        [init @ .., last] if !init.is_empty() => format!("{} and {last}", init.join(", ")),
        _ => names.join(""),
    }
}

/// Limits and roots the descriptions mention.
pub(crate) struct Facts<'a> {
    /// `max_edit_bytes`.
    pub(crate) max_edit_bytes: u64,
    /// `max_write_bytes`.
    pub(crate) max_write_bytes: u64,
    /// The workspace roots, first the one relative paths start from.
    pub(crate) roots: &'a [String],
}

/// A size in words (`5 MiB`).
pub(crate) fn size(bytes: u64) -> String {
    if bytes.is_multiple_of(1024 * 1024) {
        format!("{} MiB", bytes / (1024 * 1024))
    } else if bytes.is_multiple_of(1024) {
        format!("{} KiB", bytes / 1024)
    } else {
        format!("{bytes} bytes")
    }
}

/// The sentence naming the workspaces, for the descriptions.
pub(crate) fn roots_sentence(roots: &[String]) -> String {
    match roots {
        [] => "No workspace is registered yet.".to_string(),
        [one] => format!("The workspace is {one}; relative paths start there."),
        [first, ..] => format!(
            "The workspaces are {}; relative paths start at {first}.",
            roots.join(", ")
        ),
    }
}

/// `tool` with its schemas readable by every client's validator: the
/// `format` of an integer (`uint`, `uint64`: schemars names the Rust type)
/// is dropped. JSON Schema defines no such format, and Ajv, the validator
/// of the TypeScript SDK that Node.js clients use, prints a warning for
/// each one it meets ("unknown format \"uint64\" ignored"). The bounds stay:
/// schemars gives unsigned integers `minimum: 0`.
fn portable(mut tool: rmcp::model::Tool) -> rmcp::model::Tool {
    fn strip(o: &mut serde_json::Map<String, serde_json::Value>) {
        if is_integer(o) {
            o.remove("format");
        }
        for v in o.values_mut() {
            strip_value(v);
        }
    }
    fn strip_value(v: &mut serde_json::Value) {
        match v {
            serde_json::Value::Object(o) => strip(o),
            serde_json::Value::Array(a) => a.iter_mut().for_each(strip_value),
            _ => {}
        }
    }
    let mut input = (*tool.input_schema).clone();
    strip(&mut input);
    tool.input_schema = std::sync::Arc::new(input);
    tool.output_schema = tool.output_schema.as_deref().map(|o| {
        let mut o = o.clone();
        strip(&mut o);
        std::sync::Arc::new(o)
    });
    tool
}

/// Whether a schema object describes an integer (`"type": "integer"`, or a
/// list of types holding it, as schemars writes an `Option<u64>`).
fn is_integer(o: &serde_json::Map<String, serde_json::Value>) -> bool {
    match o.get("type") {
        Some(serde_json::Value::String(t)) => t == "integer",
        Some(serde_json::Value::Array(ts)) => ts.iter().any(|t| t == "integer"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    const READ_FILE: &str = read_file::ReadFile::NAME;
    const WRITE_FILE: &str = write_file::WriteFile::NAME;
    const EDIT_FILE: &str = edit_file::EditFile::NAME;
    const UNDO: &str = undo::Undo::NAME;
    use edit_file::EditArgs;
    use read_file::ReadArgs;
    use undo::UndoArgs;
    use write_file::WriteArgs;

    fn undo_on() -> McpConfig {
        McpConfig {
            undo_tool: true,
            ..McpConfig::default()
        }
    }

    /// `undo` is neither listed nor found (a call to it is a call to an
    /// unknown tool) unless `[mcp] undo_tool` is on; the other tools are
    /// always there.
    #[test]
    fn the_config_leaves_undo_out_by_default() {
        let off = McpConfig::default();
        let listed = |cfg: &McpConfig| -> Vec<String> {
            list(&facts(), cfg)
                .iter()
                .map(|t| t.name.to_string())
                .collect()
        };
        assert_eq!(listed(&off), [READ_FILE, WRITE_FILE, EDIT_FILE]);
        assert!(find(UNDO, &off).is_none());
        assert_eq!(names(&off), "read_file, write_file and edit_file");
        assert_eq!(listed(&undo_on()), [READ_FILE, WRITE_FILE, EDIT_FILE, UNDO]);
        assert_eq!(find(UNDO, &undo_on()).map(|e| e.route), Some("mcp undo"));
        assert_eq!(
            names(&undo_on()),
            "read_file, write_file, edit_file and undo"
        );
    }

    fn facts() -> Facts<'static> {
        Facts {
            max_edit_bytes: 5 * 1024 * 1024,
            max_write_bytes: 5 * 1024 * 1024,
            roots: &[],
        }
    }

    /// No integer in any schema has a `format` (clients' validators know
    /// none of schemars' `uint*` names), and unsigned ones keep their
    /// minimum.
    #[test]
    fn integer_schemas_carry_no_format() {
        fn walk(v: &Value, path: &str, mins: &mut usize) {
            match v {
                Value::Object(o) => {
                    if is_integer(o) {
                        assert!(o.get("format").is_none(), "{path}: {v}");
                        *mins += usize::from(o.contains_key("minimum"));
                    }
                    for (k, x) in o {
                        walk(x, &format!("{path}/{k}"), mins);
                    }
                }
                Value::Array(a) => a.iter().for_each(|x| walk(x, path, mins)),
                _ => {}
            }
        }
        let mut mins = 0;
        for t in list(&facts(), &undo_on()) {
            walk(
                &Value::Object(t.input_schema.as_ref().clone()),
                &t.name,
                &mut mins,
            );
            if let Some(out) = t.output_schema {
                walk(&Value::Object(out.as_ref().clone()), &t.name, &mut mins);
            }
        }
        assert!(mins >= 4, "unsigned integers keep their minimum ({mins})");
    }

    /// Every property an input schema names is an argument the struct accepts, and the required ones are exactly the non-optional fields.
    #[test]
    fn input_schemas_match_the_argument_structs() {
        let tools = list(&facts(), &undo_on());
        let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
        assert_eq!(names, [READ_FILE, WRITE_FILE, EDIT_FILE, UNDO]);
        let schema = |name: &str| {
            let t = tools.iter().find(|t| t.name == name).unwrap();
            Value::Object(t.input_schema.as_ref().clone())
        };
        let props = |s: &Value| -> Vec<String> {
            let mut v: Vec<_> = s["properties"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect();
            v.sort();
            v
        };
        let read = schema(READ_FILE);
        assert_eq!(props(&read), ["limit", "line", "path"]);
        assert_eq!(read["required"], json!(["path"]));
        let write = schema(WRITE_FILE);
        assert_eq!(props(&write), ["content", "path"]);
        let edit = schema(EDIT_FILE);
        assert_eq!(
            props(&edit),
            [
                "content",
                "dryRun",
                "endLine",
                "expectedHash",
                "find",
                "line",
                "mode",
                "path"
            ]
        );
        assert_eq!(edit["required"], json!(["path"]));
        // Every property deserialises (no name drift between schema and struct).
        let full = json!({"path": "/a", "mode": "replace", "find": "x", "line": 1, "endLine": 2,
            "content": "y", "expectedHash": "sha256:00", "dryRun": true});
        serde_json::from_value::<EditArgs>(full).unwrap();
        serde_json::from_value::<ReadArgs>(json!({"path": "/a", "line": 1, "limit": 2})).unwrap();
        serde_json::from_value::<WriteArgs>(json!({"path": "/a", "content": ""})).unwrap();
        let undo = schema(UNDO);
        assert_eq!(props(&undo), ["dryRun", "opId"]);
        assert_eq!(undo["required"], json!(["opId"]));
        serde_json::from_value::<UndoArgs>(json!({"opId": "x", "dryRun": true})).unwrap();
        // No `force` over MCP (see tools/undo.rs).
        assert!(serde_json::from_value::<UndoArgs>(json!({"opId": "x", "force": true})).is_err());
        assert!(serde_json::from_value::<EditArgs>(json!({"path": "/a", "edits": []})).is_err());
    }

    #[test]
    fn every_tool_but_read_file_has_an_output_schema_and_descriptions_name_the_limits() {
        let roots = ["/w".to_string()];
        let tools = list(
            &Facts {
                roots: &roots,
                ..facts()
            },
            &undo_on(),
        );
        for t in &tools {
            // read_file answers text only (ADR 0034).
            assert_eq!(t.output_schema.is_some(), t.name != READ_FILE, "{}", t.name);
            if t.name == UNDO {
                continue; // names no path and carries no content
            }
            let d = t.description.as_deref().unwrap();
            assert!(d.contains("5 MiB"), "{d}");
            assert!(d.contains("The workspace is /w"), "{d}");
        }
    }
}
