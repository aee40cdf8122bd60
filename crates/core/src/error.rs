//! Error kinds on the wire (SPEC 11) and the failure type of every operation.

/// The stable `errorKind` strings of SPEC 11. Clients branch on these, so the
/// strings never change; `status` is the HTTP-like number the table gives.
/// Serialised (and parsed, [`FromStr`](std::str::FromStr)) as its wire
/// string, [`ErrorKind::as_str`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// The path is outside the workspace, or a suspicious name (SPEC 5, 6).
    PathOutsideWorkspace,
    /// A symlink leads outside the root, loops, or the file was swapped while checked.
    SymlinkEscape,
    /// The path cannot name a file: empty, NUL, a non-directory in the
    /// middle, or a leaf that is a fifo, socket or device.
    ParseError,
    /// The path names a directory where a regular file is needed (its own
    /// kind, so that the answer says what the path is).
    NotAFile,
    /// A component is a DOS device name (`con.txt`), refused everywhere
    /// (inside the workspace too: it is not an outside path).
    ReservedName,
    /// No such file, or no existing ancestor.
    PathNotFound,
    /// Over `max_write_bytes` or `max_edit_bytes`.
    FileTooLarge,
    /// A NUL byte in a file that is not UTF-16/32 (edits only).
    BinaryFile,
    /// `find` occurs nowhere (or is empty).
    TextNotFound,
    /// `find` occurs more than once.
    AmbiguousTextMatch,
    /// A line number past the last line (or 0).
    LineOutOfRange,
    /// The numbered line does not hold `find`, and not exactly one other line does.
    LineMismatch,
    /// The edit would leave a line's lone `\r` ending right before a `\n`,
    /// where the two read as one `\r\n`.
    LineEndingConflict,
    /// The workspace is not trusted for writes.
    UntrustedWorkspace,
    /// The operating system refused access.
    PermissionDenied,
    /// The approval gate holds the operation until someone approves it.
    ApprovalRequired,
    /// The file changed since it was read (`expectedHash`).
    HashMismatch,
    /// The file exists where a new one was asked for.
    FileAlreadyExists,
    /// The workspace was removed or its trust changed meanwhile.
    GenerationClosed,
    /// Any other I/O failure (`ENOSPC` included), or the audit log cannot be written.
    IoError,
    /// A bug caught by a guard; nothing was written.
    InternalError,
    /// An unknown encoding name, or a file whose encoding cannot be detected.
    UnsupportedEncoding,
    /// A character the target encoding cannot represent.
    UnmappableCharacter,
    /// Another writer replaced or removed the file while this write was in
    /// progress (no symlink involved); nothing was written.
    FileChanged,
    /// An undo that cannot be done: no such operation in the history, its
    /// before-image evicted, or no history kept.
    NotUndoable,
    /// The path is one of writegate's own files (its config, approvals,
    /// state, history store, runtime directory, service units or binary):
    /// refused on every route of an agent, approval or not.
    WritegateFile,
    /// `writegate answer` named no question waiting in the approval queue
    /// (answered already, timed out, cancelled, or never asked).
    NotPending,
}

impl ErrorKind {
    /// Every kind, in SPEC 11 table order (used by tests and docs).
    pub const ALL: [ErrorKind; 27] = [
        Self::PathOutsideWorkspace,
        Self::SymlinkEscape,
        Self::ParseError,
        Self::NotAFile,
        Self::ReservedName,
        Self::PathNotFound,
        Self::FileTooLarge,
        Self::BinaryFile,
        Self::TextNotFound,
        Self::AmbiguousTextMatch,
        Self::LineOutOfRange,
        Self::LineMismatch,
        Self::LineEndingConflict,
        Self::UntrustedWorkspace,
        Self::PermissionDenied,
        Self::ApprovalRequired,
        Self::HashMismatch,
        Self::FileAlreadyExists,
        Self::GenerationClosed,
        Self::IoError,
        Self::InternalError,
        Self::UnsupportedEncoding,
        Self::UnmappableCharacter,
        Self::FileChanged,
        Self::NotUndoable,
        Self::WritegateFile,
        Self::NotPending,
    ];

    /// The wire string, e.g. `"path_outside_workspace"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::PathOutsideWorkspace => "path_outside_workspace",
            Self::SymlinkEscape => "symlink_escape",
            Self::ParseError => "parse_error",
            Self::NotAFile => "not_a_file",
            Self::ReservedName => "reserved_name",
            Self::PathNotFound => "path_not_found",
            Self::FileTooLarge => "file_too_large",
            Self::BinaryFile => "binary_file",
            Self::TextNotFound => "text_not_found",
            Self::AmbiguousTextMatch => "ambiguous_text_match",
            Self::LineOutOfRange => "line_out_of_range",
            Self::LineMismatch => "line_mismatch",
            Self::LineEndingConflict => "line_ending_conflict",
            Self::UntrustedWorkspace => "untrusted_workspace",
            Self::PermissionDenied => "permission_denied",
            Self::ApprovalRequired => "approval_required",
            Self::HashMismatch => "hash_mismatch",
            Self::FileAlreadyExists => "file_already_exists",
            Self::GenerationClosed => "generation_closed",
            Self::IoError => "io_error",
            Self::InternalError => "internal_error",
            Self::UnsupportedEncoding => "unsupported_encoding",
            Self::UnmappableCharacter => "unmappable_character",
            Self::FileChanged => "file_changed",
            Self::NotUndoable => "not_undoable",
            Self::WritegateFile => "writegate_file",
            Self::NotPending => "not_pending",
        }
    }

    /// The HTTP-like status of SPEC 11's table.
    pub fn status(self) -> u16 {
        match self {
            Self::PathOutsideWorkspace
            | Self::SymlinkEscape
            | Self::ParseError
            | Self::NotAFile
            | Self::ReservedName => 400,
            Self::UntrustedWorkspace
            | Self::PermissionDenied
            | Self::ApprovalRequired
            | Self::WritegateFile => 403,
            Self::PathNotFound | Self::NotPending => 404,
            Self::HashMismatch
            | Self::FileAlreadyExists
            | Self::FileChanged
            | Self::NotUndoable => 409,
            Self::FileTooLarge => 413,
            Self::BinaryFile
            | Self::TextNotFound
            | Self::AmbiguousTextMatch
            | Self::LineOutOfRange
            | Self::LineMismatch
            | Self::LineEndingConflict
            | Self::UnsupportedEncoding
            | Self::UnmappableCharacter => 422,
            Self::InternalError => 500,
            Self::GenerationClosed | Self::IoError => 503,
        }
    }
}

/// A string that is no [`ErrorKind`]'s wire string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no errorKind is called {0:?}")]
pub struct UnknownErrorKind(pub String);

impl std::str::FromStr for ErrorKind {
    type Err = UnknownErrorKind;

    /// The kind whose wire string is `s`.
    fn from_str(s: &str) -> Result<ErrorKind, UnknownErrorKind> {
        Self::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownErrorKind(s.to_string()))
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Structured facts a refusal carries besides its kind and hint, for the
/// front ends to put on their wire (ACP `error.data`, an MCP tool result's
/// `_meta["writegate/error"]`). It serialises itself as the members every
/// front end shows, with the key names of the `data` table in
/// docs/protocol.md (a test holds the two equal); a front end only adds
/// what its own protocol needs (ACP's `approve` params and `uri`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(untagged)]
pub enum Detail {
    /// `ambiguous_text_match`: how many occurrences, and the 1-based line
    /// where each starts.
    Ambiguous {
        /// Number of occurrences (at least 2).
        count: usize,
        /// Start line of each occurrence.
        lines: Vec<usize>,
    },
    /// `line_out_of_range`: the line asked for and the file's line count.
    LineOutOfRange {
        /// The 1-based line asked for.
        line: u64,
        /// Lines in the file.
        #[serde(rename = "totalLines")]
        total: usize,
    },
    /// `line_mismatch`: the line asked for and what it holds.
    LineMismatch {
        /// The 1-based line asked for.
        line: u64,
        /// Its text, escaped for display.
        #[serde(rename = "lineHolds")]
        holds: String,
    },
    /// `approval_required`: the synthetic command to approve (SPEC 12),
    /// literally, and why it is held.
    Approval {
        /// `edit_file <mode> <canonical path>`.
        command: String,
        /// The rating: `moderate` or `dangerous`.
        level: crate::config::Level,
        /// Why, in words ("credential file .env").
        reason: String,
        /// The request's session, when it had one (then scope `once` can
        /// approve it; otherwise only `workspace` or `persistent`).
        #[serde(skip)]
        session: Option<String>,
        /// The person was asked through the front end's approver (or could
        /// not be): the caller has no `_writegate/approve` to call, so no
        /// front end offers its params.
        #[serde(skip)]
        asked: bool,
    },
    /// `path_not_found`: the path as the request named it.
    NotFound {
        /// The requested path.
        path: String,
    },
    /// `hash_mismatch`: the file's current hash (`sha256:<hex>`, or
    /// `missing` when the file does not exist).
    HashMismatch {
        /// The hash the request expected.
        #[serde(rename = "expectedHash")]
        expected: String,
        /// The file's hash now.
        #[serde(rename = "currentHash")]
        current: String,
    },
}

/// A refusal of an operation: an errorKind, a hint a model or a person can
/// act on (one or two sentences: what happened, what to do next), and the
/// structured [`Detail`] of that kind, if any.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The stable errorKind (SPEC 11).
    pub kind: ErrorKind,
    /// What happened and what to do next.
    pub hint: String,
    /// Structured facts for the wire.
    pub detail: Option<Detail>,
}

/// The members every front end shows for a refusal, but its hint (which
/// each words for its own readers): the detail's members as core
/// serialises them, then `errorKind` and `status`. A front end serialises
/// it into its own envelope.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct RefusalFacts<'a> {
    /// The refusal's structured facts, if any.
    #[serde(flatten)]
    pub detail: Option<&'a Detail>,
    /// The stable errorKind (SPEC 11).
    #[serde(rename = "errorKind")]
    pub error_kind: &'static str,
    /// The HTTP-style status of the kind.
    pub status: u16,
}

impl<'a> RefusalFacts<'a> {
    /// The facts of `r`.
    pub fn of(r: &'a Refusal) -> Self {
        RefusalFacts {
            detail: r.detail.as_ref(),
            error_kind: r.kind.as_str(),
            status: r.kind.status(),
        }
    }
}

impl Refusal {
    /// A refusal with a hint and no detail.
    pub fn new(kind: ErrorKind, hint: impl Into<String>) -> Self {
        Refusal {
            kind,
            hint: hint.into(),
            detail: None,
        }
    }

    /// The same refusal with `detail`.
    #[must_use]
    pub fn with_detail(mut self, detail: Detail) -> Self {
        self.detail = Some(detail);
        self
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.hint.is_empty() {
            f.write_str(self.kind.as_str())
        } else {
            write!(f, "{}: {}", self.kind.as_str(), self.hint)
        }
    }
}

impl std::error::Error for Refusal {}

/// How an operation can fail. Each front end maps these to its wire once:
/// for ACP, `Refused` is a JSON-RPC error with `data.errorKind` (`-32002`
/// for `path_not_found`, SPEC 11), `InvalidParams` is `-32602`, `Cancelled`
/// is `-32800`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// Refused with an errorKind (and audited).
    Refused(Refusal),
    /// The parameters do not fit the operation; the reason in words.
    InvalidParams(String),
    /// Cancelled before it began to commit.
    Cancelled,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Refused(r) => r.fmt(f),
            Failure::InvalidParams(why) => write!(f, "invalid params: {why}"),
            Failure::Cancelled => f.write_str("cancelled"),
        }
    }
}

impl std::error::Error for Failure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Failure::Refused(r) => Some(r),
            _ => None,
        }
    }
}

impl From<Refusal> for Failure {
    fn from(r: Refusal) -> Self {
        Failure::Refused(r)
    }
}

impl Failure {
    /// `internal_error` for a bug caught at the edge (a panic while a
    /// request ran): the one sentence every front end answers with.
    pub fn internal() -> Failure {
        Refusal::new(
            ErrorKind::InternalError,
            "the request failed inside writegate (see its log); read the file again before retrying",
        )
        .into()
    }
}

/// Runs `op` and catches a panic in it as [`Failure::internal`], logged
/// with `what` (the method or tool): a front end answers every request
/// once, whatever its handling does. An operation that panics has already
/// done its cleanup on unwinding (the publisher removes its temp file, the
/// pipeline writes the operation's one audit event).
pub fn guarded<T>(what: &str, op: impl FnOnce() -> T) -> Result<T, Failure> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(op)).map_err(|_| {
        tracing::error!(call = %what, "a request panicked; answered internal_error");
        Failure::internal()
    })
}

impl From<writegate_paths::ResolveError> for Refusal {
    fn from(e: writegate_paths::ResolveError) -> Self {
        use writegate_paths::ResolveError as R;
        let kind = match &e {
            R::ParseError(_) => ErrorKind::ParseError,
            R::NotAFile(_) => ErrorKind::NotAFile,
            R::ReservedName(_) => ErrorKind::ReservedName,
            R::OutsideWorkspace(_) => ErrorKind::PathOutsideWorkspace,
            R::SymlinkEscape(_) => ErrorKind::SymlinkEscape,
            R::NotFound(_) => ErrorKind::PathNotFound,
            R::PermissionDenied(_) => ErrorKind::PermissionDenied,
        };
        Refusal::new(kind, e.hint())
    }
}

impl From<writegate_fs::FsError> for Refusal {
    fn from(e: writegate_fs::FsError) -> Self {
        use writegate_fs::{FsError as F, Swap};
        let kind = match &e {
            // Another writer replaced a regular file under us: not an
            // escape, a concurrent change.
            F::SymlinkEscape {
                what:
                    Swap::ReplacedAfterCheck | Swap::VanishedAfterCheck | Swap::ChangedWhilePublishing,
                ..
            } => ErrorKind::FileChanged,
            F::SymlinkEscape { .. } => ErrorKind::SymlinkEscape,
            // A directory where a file is needed says what it is;
            // a fifo, socket or device leaf and a non-directory in the
            // middle of the path stay `parse_error` (conformance case X20).
            F::NotAFile {
                found: "directory",
                expected: "regular file",
                ..
            } => ErrorKind::NotAFile,
            F::NotAFile { .. } => ErrorKind::ParseError,
            F::NotFound { .. } => ErrorKind::PathNotFound,
            F::PermissionDenied { .. } | F::NotPrivate { .. } => ErrorKind::PermissionDenied,
            F::Aborted { .. } => ErrorKind::GenerationClosed,
            F::Io { .. } | F::ShortWrite { .. } | F::InvalidInput { .. } => ErrorKind::IoError,
        };
        let mut hint = with_causes(&e);
        if kind == ErrorKind::NotAFile {
            hint.push_str("; name a file inside it instead");
        }
        Refusal::new(kind, hint)
    }
}

/// `e`'s message followed by those of its sources, each after `": "`, so the
/// operating system's reason (kept as a source by `writegate-fs`) is shown.
pub fn with_causes(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        next = cause.source();
    }
    out
}

impl From<writegate_text::TextError> for Failure {
    fn from(e: writegate_text::TextError) -> Self {
        use writegate_text::TextError as T;
        let hint = e.hint();
        let r = match e {
            T::UnsupportedEncoding(_) => Refusal::new(ErrorKind::UnsupportedEncoding, hint),
            T::UnmappableCharacter(_) => Refusal::new(ErrorKind::UnmappableCharacter, hint),
            T::BinaryFile => Refusal::new(ErrorKind::BinaryFile, hint),
            T::TextNotFound(_) => Refusal::new(ErrorKind::TextNotFound, hint),
            T::AmbiguousTextMatch { count, lines } => {
                Refusal::new(ErrorKind::AmbiguousTextMatch, hint)
                    .with_detail(Detail::Ambiguous { count, lines })
            }
            T::LineOutOfRange { line, total } => Refusal::new(ErrorKind::LineOutOfRange, hint)
                .with_detail(Detail::LineOutOfRange { line, total }),
            T::LineMismatch { line, holds } => Refusal::new(ErrorKind::LineMismatch, hint)
                .with_detail(Detail::LineMismatch { line, holds }),
            T::LineEndingConflict { .. } => Refusal::new(ErrorKind::LineEndingConflict, hint),
            T::InvalidRequest(msg) => return Failure::InvalidParams(msg),
            T::Guard(_) => Refusal::new(ErrorKind::InternalError, hint),
        };
        Failure::Refused(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defect pinned: a panic in a request at the edge must still be
    /// answered, once, as `internal_error` in the one sentence.
    #[test]
    fn a_panic_in_a_guarded_call_is_the_internal_failure() {
        assert_eq!(guarded("ok", || 7).ok(), Some(7));
        let f = guarded("boom", || -> u8 { panic!("boom") }).unwrap_err();
        let Failure::Refused(r) = &f else {
            panic!("{f:?}")
        };
        assert_eq!(r.kind, ErrorKind::InternalError);
        assert_eq!(f.to_string(), Failure::internal().to_string());
    }

    #[test]
    fn every_kind_round_trips_and_has_a_status_from_the_table() {
        for k in ErrorKind::ALL {
            assert_eq!(k.as_str().parse::<ErrorKind>(), Ok(k));
            // serde's name is the wire string (the audit log's `errorKind`).
            assert_eq!(
                serde_json::to_string(&k).unwrap(),
                format!("\"{}\"", k.as_str())
            );
            assert!([400, 403, 404, 409, 413, 422, 500, 503].contains(&k.status()));
        }
        assert_eq!(ErrorKind::GenerationClosed.status(), 503);
        assert_eq!(ErrorKind::FileTooLarge.status(), 413);
        assert_eq!(ErrorKind::HashMismatch.status(), 409);
        assert!("Path_Not_Found".parse::<ErrorKind>().is_err());
    }

    /// One of each [`Detail`], with the errorKind it comes with (the match
    /// is exhaustive: a new variant needs a row here and in the docs).
    fn every_detail() -> Vec<(ErrorKind, Detail)> {
        let all = vec![
            Detail::Ambiguous {
                count: 2,
                lines: vec![1, 3],
            },
            Detail::LineOutOfRange { line: 9, total: 3 },
            Detail::LineMismatch {
                line: 2,
                holds: "x".into(),
            },
            Detail::Approval {
                command: "edit_file write /w/.env".into(),
                level: crate::config::Level::Dangerous,
                reason: "r".into(),
                session: Some("s".into()),
                asked: false,
            },
            Detail::NotFound {
                path: "/w/a".into(),
            },
            Detail::HashMismatch {
                expected: "sha256:00".into(),
                current: "missing".into(),
            },
        ];
        all.into_iter()
            .map(|d| {
                let kind = match &d {
                    Detail::Ambiguous { .. } => ErrorKind::AmbiguousTextMatch,
                    Detail::LineOutOfRange { .. } => ErrorKind::LineOutOfRange,
                    Detail::LineMismatch { .. } => ErrorKind::LineMismatch,
                    Detail::Approval { .. } => ErrorKind::ApprovalRequired,
                    Detail::NotFound { .. } => ErrorKind::PathNotFound,
                    Detail::HashMismatch { .. } => ErrorKind::HashMismatch,
                };
                (kind, d)
            })
            .collect()
    }

    /// The `data` table of docs/protocol.md names exactly the members each
    /// detail serialises to (its rows for that errorKind, but those a
    /// single front end adds, marked "ACP only").
    #[test]
    fn every_detail_serialises_to_the_members_protocol_md_lists() {
        let doc = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/protocol.md"),
        )
        .unwrap();
        let rows: Vec<(Vec<String>, String)> = doc
            .lines()
            .filter_map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                // `| fields | present | meaning |`
                (cells.len() == 5 && cells[1].starts_with('`')).then(|| {
                    let fields = cells[1]
                        .split(',')
                        .map(|f| f.trim().trim_matches('`').to_string())
                        .collect();
                    (fields, cells[2].to_string())
                })
            })
            .collect();
        for (kind, detail) in every_detail() {
            let mut documented: Vec<String> = rows
                .iter()
                .filter(|(_, present)| {
                    present.starts_with(&format!("`{}`", kind.as_str()))
                        && !present.contains("ACP only")
                })
                .flat_map(|(fields, _)| fields.clone())
                .collect();
            documented.sort();
            let serde_json::Value::Object(members) = serde_json::to_value(&detail).unwrap() else {
                panic!("{detail:?} is not an object")
            };
            let mut keys: Vec<String> = members.keys().cloned().collect();
            keys.sort();
            assert_eq!(keys, documented, "{}: {detail:?}", kind.as_str());
        }
    }

    fn refused(f: Failure) -> &'static str {
        match f {
            Failure::Refused(r) => r.kind.as_str(),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn text_errors_map_to_their_spec_11_kinds() {
        use writegate_text::TextError as T;
        let kinds: Vec<&str> = [
            T::UnsupportedEncoding("x".into()),
            T::UnmappableCharacter("x".into()),
            T::BinaryFile,
            T::TextNotFound("x".into()),
            T::AmbiguousTextMatch {
                count: 2,
                lines: vec![1, 3],
            },
            T::LineOutOfRange { line: 9, total: 2 },
            T::LineMismatch {
                line: 2,
                holds: "b".into(),
            },
            T::LineEndingConflict { line: 1 },
            T::Guard("x".into()),
        ]
        .into_iter()
        .map(|e| refused(e.into()))
        .collect();
        assert_eq!(
            kinds,
            [
                "unsupported_encoding",
                "unmappable_character",
                "binary_file",
                "text_not_found",
                "ambiguous_text_match",
                "line_out_of_range",
                "line_mismatch",
                "line_ending_conflict",
                "internal_error"
            ]
        );
        // invalid_params: JSON-RPC -32602, not a refusal.
        assert!(matches!(
            Failure::from(T::InvalidRequest("x".into())),
            Failure::InvalidParams(m) if m == "x"
        ));
    }

    #[test]
    fn resolve_errors_map_to_their_spec_11_kinds() {
        use writegate_paths::ResolveError as R;
        let m = String::new;
        let kind = |e: R| Refusal::from(e).kind.as_str();
        assert_eq!(kind(R::ParseError(m())), "parse_error");
        assert_eq!(kind(R::NotAFile(m())), "not_a_file");
        assert_eq!(kind(R::ReservedName(m())), "reserved_name");
        assert_eq!(kind(R::OutsideWorkspace(m())), "path_outside_workspace");
        assert_eq!(kind(R::SymlinkEscape(m())), "symlink_escape");
        assert_eq!(kind(R::NotFound(m())), "path_not_found");
        assert_eq!(kind(R::PermissionDenied(m())), "permission_denied");
    }

    #[test]
    fn fs_errors_map_to_their_spec_11_kinds_and_keep_the_os_reason() {
        use std::io;
        use writegate_fs::{FsError as F, FsOp, Swap};
        let path = || std::path::PathBuf::from("/w/a.txt");
        let os = |code: i32| io::Error::from_raw_os_error(code);
        let cases = [
            (
                F::SymlinkEscape {
                    path: path(),
                    what: Swap::Symlink,
                    source: None,
                },
                "symlink_escape",
            ),
            // Another writer replacing a regular file under
            // us is a concurrent change, not a symlink escape.
            (
                F::SymlinkEscape {
                    path: path(),
                    what: Swap::ReplacedAfterCheck,
                    source: None,
                },
                "file_changed",
            ),
            (
                F::SymlinkEscape {
                    path: path(),
                    what: Swap::ChangedWhilePublishing,
                    source: None,
                },
                "file_changed",
            ),
            (
                F::NotAFile {
                    path: path(),
                    found: "directory",
                    expected: "regular file",
                },
                "not_a_file",
            ),
            (
                F::NotAFile {
                    path: path(),
                    found: "socket",
                    expected: "regular file",
                },
                "parse_error",
            ),
            (
                F::NotAFile {
                    path: path(),
                    found: "regular file",
                    expected: "directory",
                },
                "parse_error",
            ),
            (
                F::NotFound {
                    path: path(),
                    source: os(2),
                },
                "path_not_found",
            ),
            (
                F::PermissionDenied {
                    op: FsOp::Open,
                    path: path(),
                    source: os(13),
                },
                "permission_denied",
            ),
            (
                F::Aborted {
                    path: path(),
                    reason: "generation closed".into(),
                },
                "generation_closed",
            ),
            (
                F::Io {
                    op: FsOp::WriteTemp,
                    path: path(),
                    source: os(28),
                },
                "io_error",
            ),
            (
                F::InvalidInput {
                    path: path(),
                    problem: "is not a single file name component",
                },
                "io_error",
            ),
        ];
        for (e, want) in cases {
            assert_eq!(Refusal::from(e).kind.as_str(), want);
        }
        // The hint names the path, the operation and the OS reason.
        let r = Refusal::from(F::Io {
            op: FsOp::WriteTemp,
            path: path(),
            source: os(28),
        });
        assert!(
            r.hint
                .starts_with("cannot write the temp file for `/w/a.txt`: ")
        );
        assert!(r.hint.contains(&os(28).to_string()), "{}", r.hint);
    }
}
