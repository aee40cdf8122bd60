//! The transports a connection can come over, and what each allows.

use writegate_core::Allowances;

/// Which transport a connection came over (SPEC 1, 2, 4). What each allows
/// is decided here, in one match: a variant added later must state its
/// allowances, and core's [`Allowances::default`] allows nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// stdin/stdout of a host that spawned the daemon.
    Stdio,
    /// A same-UID Unix-socket peer (the UID is checked at accept).
    Socket,
}

impl Transport {
    /// What a connection over this transport may do: both may use the
    /// external writer and read (SPEC 4: on for stdio and same-UID socket
    /// peers); only a socket connection may choose its workspace (SPEC 2).
    pub fn allowances(self) -> Allowances {
        match self {
            Transport::Stdio => Allowances {
                external_writer: true,
                choose_workspace: false,
                reads: true,
            },
            Transport::Socket => Allowances {
                external_writer: true,
                choose_workspace: true,
                reads: true,
            },
        }
    }
}
