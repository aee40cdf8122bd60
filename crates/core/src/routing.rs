//! Routing decisions (SPEC 4), pure: which writer handles a request, given
//! what the connection's transport allows, the request's marker (already
//! parsed by the front end) and the resolver's classification.

/// The tool that made a marked write (the marker's `source`, SPEC 4). Front
/// ends parse their own wire form of the marker into this; core never sees
/// the wire form. Serialised as [`MarkerSource::as_str`] (the audit event's
/// `source`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MarkerSource {
    /// `write_file`
    WriteFile,
    /// `edit`
    Edit,
    /// `notebook_edit`
    NotebookEdit,
    /// `shell_sed_edit`
    ShellSedEdit,
}

impl MarkerSource {
    /// Every source, in SPEC 4 order.
    pub const ALL: [MarkerSource; 4] = [
        Self::WriteFile,
        Self::Edit,
        Self::NotebookEdit,
        Self::ShellSedEdit,
    ];

    /// The marker's wire string, also the audit event's `source`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::WriteFile => "write_file",
            Self::Edit => "edit",
            Self::NotebookEdit => "notebook_edit",
            Self::ShellSedEdit => "shell_sed_edit",
        }
    }

    /// The source named by `s` exactly (`None` for anything else).
    pub fn from_name(s: &str) -> Option<MarkerSource> {
        Self::ALL.into_iter().find(|m| m.as_str() == s)
    }
}

/// The three-condition gate of SPEC 4, given the resolver already said
/// `path_outside_workspace`: external writes enabled for this connection
/// (its transport allows the external writer and the config has not turned
/// it off) and a valid marker. `Some(source)`: the external host writer
/// takes it, for the marker's source; `None`: the outside path is refused.
pub fn external_route(enabled: bool, marker: Option<MarkerSource>) -> Option<MarkerSource> {
    marker.filter(|_| enabled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn external_route_needs_both_conditions() {
        assert_eq!(
            external_route(true, Some(MarkerSource::Edit)),
            Some(MarkerSource::Edit)
        );
        assert_eq!(external_route(false, Some(MarkerSource::Edit)), None);
        assert_eq!(external_route(true, None), None);
    }

    #[test]
    fn source_names_round_trip() {
        for s in MarkerSource::ALL {
            assert_eq!(MarkerSource::from_name(s.as_str()), Some(s));
        }
        assert_eq!(MarkerSource::from_name("shell"), None);
        assert_eq!(MarkerSource::from_name("Edit"), None);
        for s in MarkerSource::ALL {
            assert_eq!(
                serde_json::to_string(&s).unwrap(),
                format!("\"{}\"", s.as_str())
            );
        }
    }
}
