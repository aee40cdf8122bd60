//! `undo`: take back one of this session's writes or edits by its `opId`
//! (ADR 0020). Offered only with `[mcp] undo_tool = true`: an agent taking
//! back its own writes is the person's choice.
//!
//! What an agent may undo, and why:
//! - only an operation of its own session (the connection's session id):
//!   another session's `opId` is answered exactly as an unknown one, so
//!   the agent can neither put back a file the person changed elsewhere
//!   (an old secret, a vulnerable version) nor learn which operations
//!   exist;
//! - never with `force`: an undo over a file changed since that operation
//!   would drop the later change (often the person's, kept nowhere); the
//!   refusal `file_changed` tells the model to ask the person, who can
//!   force it with `writegate undo OPID --force`;
//! - through the same pipeline as a write: the resolver (an MCP connection
//!   has no external writer, so an operation outside the workspaces is
//!   refused), the approval gate (`edit_file undo <path>`, asked through
//!   elicitation like a held write), the path lock, one audit event with
//!   `intent: "undo"`.

use super::{Facts, Tool};
use rmcp::model::ToolAnnotations;
use schemars::JsonSchema;
use serde::Deserialize;
use std::fmt::Write as _;
use std::path::Path;
use writegate_core::config::McpConfig;
use writegate_core::history::{UndoAction, UndoOutcome, UndoParams};
use writegate_core::{ErrorKind, Failure, OpCtx, Service};

/// `undo` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub(crate) struct UndoArgs {
    /// The opId of the write or edit to take back, as its `write_file` or `edit_file` result gave it.
    pub(crate) op_id: String,
    /// Only check that it can be undone and say what would be done; nothing is written.
    #[serde(default)]
    pub(crate) dry_run: bool,
}

/// `undo`: put a file back as it was before one of this session's writes.
pub(crate) struct Undo;

impl Tool for Undo {
    const NAME: &'static str = "undo";
    const ROUTE: &'static str = "mcp undo";
    type Args = UndoArgs;
    type Out = UndoOutcome;

    fn describe(_f: &Facts<'_>) -> rmcp::model::Tool {
        let text = "Take back one write_file or edit_file call of this session: the file gets back \
             exactly the bytes and mode it had before that call (a file the call created is \
             removed, with the directories it created if they are empty). Use it only when the \
             user asks to take a change back; to fix a mistake of your own, edit the file \
             instead. Name the call by the opId its result gave. It is refused (file_changed, \
             nothing written) if the file changed since that call: undo the later call first, \
             or tell the user. Only this session's calls can be undone (not_undoable \
             otherwise). dryRun says what would be done without doing it. The undo is itself a \
             write with its own opId: undo that to redo.";
        rmcp::model::Tool::new(Self::NAME, text, serde_json::Map::new())
            .with_title("Undo a write (writegate)")
            .with_annotations(
                ToolAnnotations::with_title("Undo a write (writegate)")
                    .read_only(false)
                    .destructive(true)
                    .idempotent(false)
                    .open_world(false),
            )
    }

    fn enabled(cfg: &McpConfig) -> bool {
        cfg.undo_tool
    }

    fn path(_args: &UndoArgs) -> Option<&str> {
        None
    }

    fn check(args: &UndoArgs) -> Result<(), String> {
        if args.op_id.is_empty() {
            return Err("opId is empty; give the opId of a write_file or edit_file result".into());
        }
        Ok(())
    }

    fn run(
        service: &Service,
        ctx: &OpCtx,
        _path: &Path,
        args: UndoArgs,
    ) -> Result<UndoOutcome, Failure> {
        let params = UndoParams {
            op_id: args.op_id,
            force: false,
            dry_run: args.dry_run,
            // This connection's own operations only (see the module doc).
            session: Some(ctx.session_id.clone().unwrap_or_default()),
            own_workspace: false,
        };
        service
            .undo(ctx, &params)
            .map_err(|f| in_tool_words(f, &params.op_id))
    }

    /// What was put back, and the undo's own `opId`.
    fn text(o: &UndoOutcome) -> String {
        let verb = if o.dry_run { "would be" } else { "was" };
        let mut text = match o.action {
            UndoAction::Removed => format!(
                "{} {verb} removed (operation {} had created it)",
                o.path, o.undone
            ),
            UndoAction::Restored => format!(
                "{} {verb} restored to what it was before operation {} ({} bytes, hash {})",
                o.path,
                o.undone,
                o.bytes,
                o.hash.as_deref().unwrap_or("-")
            ),
        };
        if !o.removed_dirs.is_empty() {
            let _ = write!(
                text,
                ", with the empty directories {}",
                o.removed_dirs.join(", ")
            );
        }
        for d in &o.skipped_dirs {
            let _ = write!(text, "; directory {} left: {}", d.path, d.reason);
        }
        if o.dry_run {
            text.push_str(". Dry run: nothing was written.");
        } else {
            let _ = write!(text, ". opId {} (undo it to redo)", o.op_id);
        }
        text
    }
}

/// Core's undo refusals speak the CLI's words (`writegate history`,
/// `--force`): here they say what the model can do instead.
fn in_tool_words(f: Failure, op_id: &str) -> Failure {
    let Failure::Refused(mut r) = f else { return f };
    match r.kind {
        ErrorKind::NotUndoable => {
            r.hint = r.hint.replace(
                "`writegate history` lists the operations that can be undone",
                "only this session's write_file and edit_file calls can be undone, by the opId their result gave; nothing was changed",
            );
        }
        ErrorKind::FileChanged => {
            r.hint = r.hint.replace(
                ", or pass --force to put the before-image back anyway; nothing was changed",
                &format!(
                    "; nothing was changed. This tool never overwrites a later change: tell the user; they can put the old content back anyway with `writegate undo {op_id} --force`"
                ),
            );
        }
        _ => {}
    }
    Failure::Refused(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use writegate_core::Refusal;

    /// The sentences rewritten above are still core's: a change there
    /// would leave CLI words in a tool result.
    #[test]
    fn core_refusals_are_put_in_tool_words() {
        let unknown = Failure::Refused(Refusal::new(
            ErrorKind::NotUndoable,
            "no operation x-1 in the history; `writegate history` lists the operations that can be undone",
        ));
        let Failure::Refused(r) = in_tool_words(unknown, "x-1") else {
            panic!()
        };
        assert!(!r.hint.contains("writegate history"), "{}", r.hint);
        assert!(r.hint.contains("this session's"), "{}", r.hint);
        let changed = Failure::Refused(Refusal::new(
            ErrorKind::FileChanged,
            "/w/a is no longer what operation x-1 left (it holds sha256:1, the operation left sha256:2); it was changed outside writegate, or pass --force to put the before-image back anyway; nothing was changed",
        ));
        let Failure::Refused(r) = in_tool_words(changed, "x-1") else {
            panic!()
        };
        assert!(!r.hint.contains("pass --force"), "{}", r.hint);
        assert!(r.hint.contains("writegate undo x-1 --force"), "{}", r.hint);
        assert!(r.hint.contains("nothing was changed"), "{}", r.hint);
    }
}
