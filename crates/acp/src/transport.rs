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
    /// A same-UID Unix-socket peer inside a `writegate run` sandbox
    /// ([`crate::sandboxed`]): the tools of [`Transport::Socket`], none of
    /// the person's powers.
    SandboxedSocket,
    /// The agent that `writegate proxy` spawned, on the child's
    /// stdin/stdout: its `fs/*` and `_writegate/*` requests are answered by
    /// writegate in the workspace of the request's session.
    ProxyAgent,
}

impl Transport {
    /// What a connection over this transport may do: all three may use the
    /// external writer and read (SPEC 4: on for stdio and same-UID socket
    /// peers; the proxy's agent is a same-user process the person started,
    /// and its edit tool reads a file before it writes it); only a socket
    /// connection may choose its workspace (SPEC 2: a proxy session's
    /// workspace is the `cwd` the editor gave it).
    // Each transport states its own allowances, even where two agree.
    #[allow(clippy::match_same_arms)]
    pub fn allowances(self) -> Allowances {
        match self {
            Transport::Stdio => Allowances {
                external_writer: true,
                choose_workspace: false,
                reads: true,
            },
            Transport::Socket | Transport::SandboxedSocket => Allowances {
                external_writer: true,
                choose_workspace: true,
                reads: true,
            },
            Transport::ProxyAgent => Allowances {
                external_writer: true,
                choose_workspace: false,
                reads: true,
            },
        }
    }

    /// Whether a peer on this transport may grant approvals
    /// (`_writegate/approve`). Not the proxy's agent: its writes are the ones
    /// the gate holds, and the person answers through the editor's
    /// permission dialog instead. Not a peer inside a sandbox either: that
    /// is the agent whose writes the gate holds.
    pub fn grants_approvals(self) -> bool {
        match self {
            Transport::Stdio | Transport::Socket => true,
            Transport::ProxyAgent | Transport::SandboxedSocket => false,
        }
    }
}
