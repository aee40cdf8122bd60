//! Path classification for writegate: the suspicious-path rules of SPEC 6, the
//! side-effect-free workspace resolver of SPEC 5, and steps 2-3 of the external
//! host writer's target check (SPEC 7.1).
//!
//! Everything here only *looks*: through the [`FsView`] trait it may `lstat`,
//! `readlink` and `realpath`, nothing else. This crate must never create, open
//! for writing, rename, remove or change the mode of anything, and it emits no
//! logs and no audit events; the writers in other crates do that, using the
//! canonical paths computed here. Every refusal is a [`ResolveError`], one
//! variant per wire `errorKind` of SPEC 11.
//!
//! Entry points:
//! - [`is_suspicious`] / [`is_suspicious_component`]: pure SPEC 6 rules.
//! - [`resolve`]: classify an absolute input path against the canonical roots
//!   of a runtime (SPEC 5), walking symlinks component by component.
//! - [`resolve_external`]: SPEC 7.1 steps 2-3 for a path [`resolve`] classified
//!   as [`ResolveError::OutsideWorkspace`].

mod error;
mod external;
mod resolve;
mod suspicious;
mod view;

pub use error::ResolveError;
pub use external::{EXTERNAL_CHECK_ATTEMPTS, ExternalTarget, resolve_external};
pub use resolve::{MAX_SYMLINK_HOPS, NAME_MAX, PATH_MAX, Resolved, is_within, resolve};
pub use suspicious::{is_suspicious, is_suspicious_component};
pub use view::{FileKind, FsView, OsView, Stat};
