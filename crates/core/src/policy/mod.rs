//! The approval gate (SPEC 12; seed 000 "approval as a synthetic command").
//!
//! Every write and edit is judged as `edit_file <mode> <canonical path>`
//! ([`synthetic_command`]). The rating is pure ([`judge`], [`rate`]): the
//! first matching config rule, else the built-in protected-path rules
//! ([`protected_reason`]), an existing read-only file
//! ([`read_only_reason`]) or a system path ([`system_reason`]), else
//! `moderate`. Approvals live
//! in [`Approvals`]; the persistent scope is written through `writegate-fs`.
//!
//! An approval names what it covers in one of two forms ([`Grant`]):
//!
//! - **`command`**: one exact synthetic command, compared byte for byte. This
//!   is what a host copies from the `approval_required` refusal
//!   (`data.command`). A path is never a pattern: a file literally named
//!   `id_rsa*` approved this way approves that file and nothing else.
//! - **`pattern`**: a glob a person wrote on purpose ([`Glob`]: `*` any run of
//!   characters, `/` included; `?` one character; `\` makes the next
//!   character literal; nothing else is special).
//!
//! Literal approvals are kept in a hash map keyed by the exact command, so a
//! lookup is O(1) however many there are; globs are tried only when some
//! exist. Grants are bounded ([`MAX_APPROVAL_BYTES`],
//! [`MAX_APPROVALS_PER_SESSION`], [`MAX_LIVE_APPROVALS`],
//! [`MAX_PERSISTENT_APPROVALS`]) and `once`/`session` grants expire
//! ([`ONCE_TTL`], [`SESSION_TTL`]). Dropping a grant can only make the gate
//! hold more writes, never fewer.

mod approvals;
mod glob;
mod own;
mod protected;
mod rating;

pub use approvals::{
    Approvals, GateRequest, Grant, GrantError, GrantForm, GrantOutcome, GrantParamsError,
    MAX_APPROVAL_BYTES, MAX_APPROVALS_PER_SESSION, MAX_LIVE_APPROVALS, MAX_PERSISTENT_APPROVALS,
    MAX_REMEMBERED_REFUSALS, ONCE_TTL, SESSION_TTL, Scope,
};
pub use glob::{Glob, escape_glob, glob_match};
pub use own::{OwnFiles, OwnKind};
pub use protected::{protected_reason, read_protected_reason};
pub use rating::{
    Verdict, is_read_only, judge, rate, read_only_reason, synthetic_command, system_reason,
};

/// Helpers the tests of the policy modules share.
#[cfg(test)]
mod testing {
    use super::{Approvals, synthetic_command};
    use std::path::Path;

    pub(super) const METACHARS: [char; 7] = ['*', '?', '[', ']', '{', '}', '\\'];

    pub(super) fn cmd(path: &str) -> String {
        synthetic_command("write", Path::new(path))
    }

    pub(super) fn approvals() -> (tempfile::TempDir, Approvals) {
        let d = tempfile::tempdir().unwrap();
        let a = Approvals::load(d.path().join("state/approvals.json"));
        (d, a)
    }
}
