//! The typed surface of the core: what a front end passes in (an
//! operation context and parsed parameters) and what it gets back (typed
//! outcomes or a [`Failure`]). No wire types here: the outcomes serialise
//! themselves (serde), and each front end (ACP, MCP, the CLI) puts them on
//! its own wire.

use crate::config::Level;
use crate::error::Failure;
use crate::routing::MarkerSource;
use crate::runtime::Runtime;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use writegate_text::{EditMode, Ending, Format, WriteOptions};

/// What a connection's transport allows. Each front end declares this per
/// connection; the [`Default`] allows nothing, so a transport added later
/// gets no capability it did not ask for (SPEC 4: "never for any other
/// transport a later version adds").
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Allowances {
    /// Marked tool writes outside the workspace may take the external host
    /// writer (SPEC 4 condition 1). The config can still turn it off.
    pub external_writer: bool,
    /// The connection may pick its workspace (SPEC 2: the first request of
    /// a socket connection).
    pub choose_workspace: bool,
    /// Files may be read through this transport (`fs/read_text_file` also
    /// needs the config's `read_text_file`).
    pub reads: bool,
}

impl Allowances {
    /// Allows nothing (the same as [`Default`]).
    pub const NONE: Allowances = Allowances {
        external_writer: false,
        choose_workspace: false,
        reads: false,
    };
}

/// A person who can be asked about an operation the approval gate holds
/// (SPEC 12): an editor's permission dialog (ACP
/// `session/request_permission`), an MCP client's elicitation. Provided by
/// the front end; core asks at most once per operation, before the path
/// lock is taken, from the operation's (blocking) thread.
pub trait Approver: Send + Sync {
    /// Asks about `question` and blocks until the person answers, the
    /// request is cancelled, or the front end gives up (at the latest after
    /// `approval_timeout_ms`, answering [`ApprovalAnswer::Unavailable`]).
    fn ask(&self, question: &ApprovalQuestion) -> ApprovalAnswer;

    /// Whether this approver can answer `question` at all. `false` leaves
    /// the operation held as if there were no approver: refused
    /// `approval_required` with nobody asked (the audit event has no
    /// `approval`), so the front end can ask about it its own way. An MCP
    /// retry carries the person's answer about one command only; any other
    /// command was never put to them. Default: every question.
    fn asks_about(&self, _question: &ApprovalQuestion) -> bool {
        true
    }
}

/// What a held operation would do, for the person to decide on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalQuestion {
    /// The synthetic command, `edit_file <mode> <canonical path>`.
    pub command: String,
    /// The canonical path the operation would write.
    pub path: PathBuf,
    /// What the operation does: `write`, an edit mode, or `read`.
    pub mode: OpMode,
    /// The gate's rating: `moderate` or `dangerous`.
    pub level: Level,
    /// Why it is held, in words ("credential file .env").
    pub reason: String,
}

/// What an operation does to its file, as the gate's synthetic command
/// `edit_file <mode> <path>` names it: a write or an edit in one of the
/// edit modes (a whole-file write is [`EditMode::Write`]), or a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum OpMode {
    /// A whole-file write or an edit.
    Edit(EditMode),
    /// A read (held only outside the workspace, or in a client's root).
    Read,
    /// An undo: a before-image put back (`writegate undo`).
    Undo,
}

impl OpMode {
    /// Every mode the gate judges, so every mode a refusal's synthetic
    /// command can name (`writegate approve` accepts exactly these).
    pub const ALL: [OpMode; 7] = [
        OpMode::Edit(EditMode::Write),
        OpMode::Edit(EditMode::Append),
        OpMode::Edit(EditMode::Replace),
        OpMode::Edit(EditMode::Insert),
        OpMode::Edit(EditMode::Delete),
        OpMode::Read,
        OpMode::Undo,
    ];

    /// `write`, `append`, `replace`, `insert`, `delete`, `read` or `undo`.
    pub fn as_str(self) -> &'static str {
        match self {
            OpMode::Edit(m) => m.name(),
            OpMode::Read => "read",
            OpMode::Undo => "undo",
        }
    }
}

impl From<EditMode> for OpMode {
    fn from(m: EditMode) -> OpMode {
        OpMode::Edit(m)
    }
}

impl std::fmt::Display for OpMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The person's answer. Serialised as the audit event's `approval`
/// ([`ApprovalAnswer::as_str`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ApprovalAnswer {
    /// Go ahead with this operation only.
    #[serde(rename = "allowed_once")]
    AllowOnce,
    /// Go ahead, and remember it: the same command is approved for the rest
    /// of the session (or, without a session, the workspace's runtime).
    #[serde(rename = "allowed_always")]
    AllowAlways,
    /// Refuse (`approval_required`, saying the person declined).
    #[serde(rename = "denied")]
    Deny,
    /// The question was cancelled (the prompt was cancelled): the operation
    /// is cancelled (`-32800` on ACP).
    #[serde(rename = "cancelled")]
    Cancelled,
    /// Nobody could be asked (the client cannot show the question, or it
    /// failed): refused as if no one had been asked.
    #[serde(rename = "unanswered")]
    Unavailable,
}

impl ApprovalAnswer {
    /// Every answer.
    pub const ALL: [ApprovalAnswer; 5] = [
        Self::AllowOnce,
        Self::AllowAlways,
        Self::Deny,
        Self::Cancelled,
        Self::Unavailable,
    ];

    /// The audit event's `approval` value.
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalAnswer::AllowOnce => "allowed_once",
            ApprovalAnswer::AllowAlways => "allowed_always",
            ApprovalAnswer::Deny => "denied",
            ApprovalAnswer::Cancelled => "cancelled",
            ApprovalAnswer::Unavailable => "unanswered",
        }
    }
}

/// What one request runs under.
#[derive(Clone)]
pub struct OpCtx {
    /// The connection's runtime (its owning workspace, SPEC 2).
    pub runtime: Arc<Runtime>,
    /// The request's session, recorded in audit events and receipts.
    pub session_id: Option<String>,
    /// What the connection's transport allows.
    pub allows: Allowances,
    /// The audit event's `route`: which front-end method or tool asked
    /// (`"ACP writeTextFile"`, `"edit"`, ...). Chosen by the front end.
    pub route: &'static str,
    /// Set by `$/cancel_request` or shutdown: the operation stops before it
    /// begins to commit.
    pub cancel: Arc<AtomicBool>,
    /// Who to ask when the approval gate holds the operation; `None`: the
    /// refusal `approval_required` goes back to the client (SPEC 12).
    pub approver: Option<Arc<dyn Approver>>,
    /// The runtime's workspace was named only by the MCP client's roots,
    /// not by the user: credential paths in it are read only with a
    /// person's approval, as outside any workspace.
    pub client_root: bool,
}

impl OpCtx {
    /// Whether the request was cancelled.
    pub fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::SeqCst)
    }
}

/// A whole-file write (ACP `fs/write_text_file`, SPEC 3, 7).
#[derive(Debug, Clone)]
pub struct WriteParams {
    /// Absolute path as the request named it.
    pub path: PathBuf,
    /// The new text.
    pub content: String,
    /// The format hints that may reach the encoder (SPEC 4: `bom`,
    /// `encoding`, `lineEnding`), already parsed by the front end.
    pub options: WriteOptions,
    /// The tool-write-origin marker's source, when the request carried a
    /// valid marker (SPEC 4); `None` otherwise.
    pub marker: Option<MarkerSource>,
    /// The request explicitly asks to convert an existing file to
    /// `options.encoding` / `options.bom`. Without it an existing file keeps
    /// its own encoding and BOM whatever `options` say (SPEC 9: an echoed
    /// `_meta.encoding` must never convert a file).
    pub convert_encoding: bool,
}

/// An edit (SPEC 8).
#[derive(Debug, Clone)]
pub struct EditParams {
    /// Absolute path as the request named it.
    pub path: PathBuf,
    /// The edit mode.
    pub mode: EditMode,
    /// New text; required by every mode but `delete`, which ignores it
    /// ([`EditParams::validate`]).
    pub content: Option<String>,
    /// Text to find (`replace`).
    pub find: Option<String>,
    /// 1-based line (`replace`, `insert`, `delete`).
    pub line: Option<u64>,
    /// 1-based last line of a range (`replace`, `delete`).
    pub end_line: Option<u64>,
    /// `sha256:<hex>` the file must still have.
    pub expected_hash: Option<String>,
    /// Compute and report, write nothing.
    pub dry_run: bool,
    /// Format hints, as for [`WriteParams::options`].
    pub options: WriteOptions,
    /// Marker source, as for [`WriteParams::marker`].
    pub marker: Option<MarkerSource>,
    /// As for [`WriteParams::convert_encoding`] (mode `write`).
    pub convert_encoding: bool,
}

impl EditParams {
    /// An edit of `path` in `mode` with `content` and everything else at
    /// its default: no `find`, no lines, no expected hash, no dry run, no
    /// format hints, no marker, no conversion. Set the rest by field.
    pub fn new(path: impl Into<PathBuf>, mode: EditMode, content: impl Into<String>) -> Self {
        EditParams {
            path: path.into(),
            mode,
            content: Some(content.into()),
            find: None,
            line: None,
            end_line: None,
            expected_hash: None,
            dry_run: false,
            options: WriteOptions::default(),
            marker: None,
            convert_encoding: false,
        }
    }

    /// The rules of an edit's parameters that need no file (SPEC 8.3):
    /// content is required except for `delete`, and the parameters fit the
    /// mode ([`writegate_text::validate`]). Every front end runs this before
    /// routing: a bad combination is [`Failure::InvalidParams`], never an
    /// audited refusal.
    pub fn validate(&self) -> Result<(), Failure> {
        validate_edit(
            self.mode,
            self.content.as_deref(),
            self.find.as_deref(),
            self.line,
            self.end_line,
        )
    }

    /// The text the edit writes (empty for a `delete` without content).
    pub fn text(&self) -> &str {
        self.content.as_deref().unwrap_or_default()
    }
}

/// [`EditParams::validate`] on the parameters themselves, for a front end
/// that checks them before it builds the [`EditParams`].
pub fn validate_edit(
    mode: EditMode,
    content: Option<&str>,
    find: Option<&str>,
    line: Option<u64>,
    end_line: Option<u64>,
) -> Result<(), Failure> {
    let content = match (mode, content) {
        (EditMode::Delete, c) => c.unwrap_or_default(),
        (_, Some(c)) => c,
        (_, None) => return Err(Failure::InvalidParams(format!("mode {mode} needs content"))),
    };
    writegate_text::validate(&writegate_text::EditRequest {
        mode,
        content,
        find,
        line,
        end_line,
        display_path: "",
        want_diff: false,
    })
    .map_err(|e| Failure::InvalidParams(e.hint()))
}

/// A read (`fs/read_text_file`, `_writegate/read_lines`).
#[derive(Debug, Clone)]
pub struct ReadParams {
    /// Absolute path as the request named it.
    pub path: PathBuf,
    /// First line, 1-based (0 is treated as 1).
    pub line: Option<u64>,
    /// At most this many lines.
    pub limit: Option<u64>,
}

/// A file's format as found: what reads report and what an edit keeps.
/// Serialised (camelCase: `encoding`, `bom`, `lineEnding`) as every front
/// end shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct FileFormat {
    /// The file's encoding ("utf-8", "utf-16le", "windows-1252", ...).
    pub encoding: &'static str,
    /// Whether the file starts with a byte order mark.
    pub bom: bool,
    /// The file's dominant line ending: "lf", "crlf" or "cr" ("lf" when
    /// it has none).
    pub line_ending: LineEnding,
}

/// A line ending, by name (`lf`, `crlf`, `cr` when serialised).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum LineEnding {
    /// `\n`
    Lf,
    /// `\r\n`
    Crlf,
    /// A lone `\r`
    Cr,
}

impl LineEnding {
    /// `lf`, `crlf` or `cr`.
    pub fn as_str(self) -> &'static str {
        match self {
            LineEnding::Lf => "lf",
            LineEnding::Crlf => "crlf",
            LineEnding::Cr => "cr",
        }
    }
}

impl From<&Format> for FileFormat {
    fn from(f: &Format) -> Self {
        FileFormat {
            encoding: f.encoding.name(),
            bom: f.bom,
            line_ending: match f.dominant {
                Some(Ending::CrLf) => LineEnding::Crlf,
                Some(Ending::Cr) => LineEnding::Cr,
                _ => LineEnding::Lf,
            },
        }
    }
}

/// What a committed whole-file write did. Serialised (camelCase) as every
/// front end shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct WriteOutcome {
    /// The file did not exist before.
    pub created: bool,
    /// Size before, in bytes (0 when created).
    pub bytes_before: u64,
    /// Size after, in bytes.
    pub bytes_after: u64,
    /// `sha256:<hex>` of the new bytes.
    pub hash: String,
    /// The operation's `opId` (its audit event's, the history's: what an
    /// undo names). Not serialised here: a front end that shows it says so
    /// (MCP's `write_file` result does).
    #[serde(skip)]
    pub op_id: Option<String>,
}

/// What an edit did (SPEC 8.6). Serialised (camelCase, absent members
/// left out) as every front end shows it: ACP's result, MCP's
/// `structuredContent`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct EditReport {
    /// One sentence a model can act on.
    pub message: String,
    /// The file did not exist before.
    pub created: bool,
    /// Size before, in bytes.
    pub bytes_before: u64,
    /// Size after, in bytes (what it would be, for a dry run).
    pub bytes_after: u64,
    /// `sha256:<hex>` of the new bytes.
    pub hash: String,
    /// First line edited.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub line: Option<u64>,
    /// The line asked for, when reconciliation moved the edit (SPEC 8.4).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub moved_from: Option<u64>,
    /// The indentation kept, in words ("4 spaces").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kept_indentation: Option<String>,
    /// The edited lines as they now read, whitespace made visible (at most 3).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub now_reads: Vec<String>,
    /// Unified diff (dry run only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    /// Present and true for a dry run: nothing was written.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
    /// The operation's `opId` (`None` for a dry run, which an undo cannot
    /// name). Not serialised here: SPEC 8.6's object has no such member;
    /// MCP's `edit_file` result shows it.
    #[serde(skip)]
    pub op_id: Option<String>,
}

/// One numbered line of a [`LinesRead`].
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct NumberedLine {
    /// 1-based line number.
    pub n: u64,
    /// The line's text, without its line ending.
    pub text: String,
}

/// Numbered lines for the edit tool (`_writegate/read_lines`, MCP
/// `read_file`, SPEC 3). Serialised (camelCase: `lines`, `totalLines`,
/// `hash`, `encoding`, `bom`, `lineEnding`) as every front end shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "camelCase")]
pub struct LinesRead {
    /// The lines asked for.
    pub lines: Vec<NumberedLine>,
    /// Lines in the whole file (SPEC 8.1).
    pub total_lines: usize,
    /// `sha256:<hex>` of the file's bytes (an edit's `expectedHash`).
    pub hash: String,
    /// The file's format.
    #[serde(flatten)]
    pub format: FileFormat,
}

/// Decoded text of whole lines (`fs/read_text_file`, SPEC 3).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextRead {
    /// The lines with their own endings.
    pub content: String,
    /// `sha256:<hex>` of the file's bytes.
    pub hash: String,
    /// The file's format.
    pub format: FileFormat,
}

/// One file written in a session (`_writegate/receipt`, SPEC 3),
/// serialised (camelCase) as the front ends show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    /// Canonical path.
    pub path: String,
    /// `write` or the edit mode.
    pub mode: EditMode,
    /// The file did not exist before.
    pub created: bool,
    /// Size before, in bytes.
    pub bytes_before: u64,
    /// Size after, in bytes.
    pub bytes_after: u64,
    /// `sha256:<hex>` after.
    pub hash_after: String,
    /// RFC 3339 UTC time of the commit.
    pub time: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A transport that declares nothing gets nothing (SPEC 4).
    #[test]
    fn the_default_allows_nothing() {
        assert_eq!(Allowances::default(), Allowances::NONE);
        let a = Allowances::default();
        assert!(!a.external_writer && !a.choose_workspace && !a.reads);
    }

    /// serde's names are the audit log's words.
    #[test]
    fn answers_serialise_as_their_audit_words() {
        for a in ApprovalAnswer::ALL {
            assert_eq!(
                serde_json::to_string(&a).unwrap(),
                format!("\"{}\"", a.as_str())
            );
        }
        assert_eq!(OpMode::Read.as_str(), "read");
        assert_eq!(OpMode::from(EditMode::Insert).as_str(), "insert");
    }

    /// `OpMode::ALL` holds every mode once: a new variant (or edit mode)
    /// fails to compile here until it is listed, so `writegate approve`,
    /// which accepts the names of `ALL`, accepts every command a refusal
    /// can name.
    #[test]
    fn every_op_mode_is_in_all() {
        let listed = |m: OpMode| OpMode::ALL.contains(&m);
        for m in OpMode::ALL {
            match m {
                OpMode::Edit(e) => assert!(EditMode::ALL.contains(&e)),
                OpMode::Read | OpMode::Undo => {}
            }
        }
        for e in EditMode::ALL {
            assert!(listed(OpMode::Edit(e)), "{e}");
        }
        assert!(listed(OpMode::Read) && listed(OpMode::Undo));
        let mut names: Vec<&str> = OpMode::ALL.iter().map(|m| m.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), OpMode::ALL.len());
    }
}
