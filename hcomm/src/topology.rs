//! How the ranks of a communicator are connected, as far as algorithm choice
//! is concerned.

/// The shape of the links between the ranks of a communicator.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Topology {
    /// Every pair of ranks has a direct link of equal cost (threads in one
    /// process, ranks inside one server).
    #[default]
    FullMesh,
    /// Only neighbours `r` and `r + 1 mod world` are linked cheaply.
    Ring,
    /// Ranks are grouped; links inside a group are cheap, links between
    /// groups are not. `group_size` consecutive ranks form a group.
    Custom {
        /// Ranks per cheap group.
        group_size: usize,
    },
}

impl Topology {
    /// Parses `full_mesh`, `ring` or `custom:<group size>`.
    pub fn parse(text: &str) -> Option<Topology> {
        match text.trim() {
            "full_mesh" | "mesh" => Some(Topology::FullMesh),
            "ring" => Some(Topology::Ring),
            other => {
                let size = other.strip_prefix("custom:")?.trim().parse().ok()?;
                (size > 0).then_some(Topology::Custom { group_size: size })
            }
        }
    }
}
