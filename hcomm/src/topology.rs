//! How the ranks of a communicator are connected, as far as algorithm choice
//! is concerned.

use std::sync::Arc;

use hcomm_cost::Machine;

use crate::error::{Error, Result};

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
    /// A machine described to the cost model (a topology file, or a
    /// preset): the policy takes the algorithm the model predicts fastest.
    Model(ModelTopology),
}

/// A [`Machine`] of the cost model, as a [`Topology`].
#[derive(Clone, Debug, PartialEq)]
pub struct ModelTopology(pub Arc<Machine>);

// A validated machine has no NaN figures, so equality is reflexive.
impl Eq for ModelTopology {}

/// How much slower links between the groups of a `custom` topology are
/// than links inside a group (latency times, bandwidth divided by it).
const CUSTOM_GROUP_FACTOR: f64 = 4.0;

impl Topology {
    /// Parses `full_mesh`, `ring`, `custom:<group size>` or
    /// `preset:<name>` (a preset of the cost model: `dgx-h100`,
    /// `ascend-910b-node`, `ascend-910b-pod`, `host`, `host-processes`).
    pub fn parse(text: &str) -> Option<Topology> {
        match text.trim() {
            "full_mesh" | "mesh" => Some(Topology::FullMesh),
            "ring" => Some(Topology::Ring),
            other => {
                if let Some(name) = other.strip_prefix("preset:") {
                    let m = hcomm_cost::preset(name.trim()).ok()?;
                    return Some(Topology::Model(ModelTopology(Arc::new(m))));
                }
                let size = other.strip_prefix("custom:")?.trim().parse().ok()?;
                (size > 0).then_some(Topology::Custom { group_size: size })
            }
        }
    }

    /// Reads a topology file of the cost model (TOML: levels of links; see
    /// the `hcomm-cost` crate). A file that cannot be read, does not parse
    /// or does not make sense is an [`Error::Config`] naming `variable`
    /// and the problem.
    pub fn from_file(path: &std::path::Path, variable: &str) -> Result<Topology> {
        let m = Machine::from_file(path).map_err(|e| Error::Config {
            message: format!("`{variable}={}`: {e}", path.display()),
        })?;
        Ok(Topology::Model(ModelTopology(Arc::new(m))))
    }

    /// The machine the cost model sees, where the policy asks it: a model
    /// topology, or a `custom` one (this host's fitted machine in groups,
    /// links between groups [`CUSTOM_GROUP_FACTOR`] times slower). `None`
    /// for a full mesh or a ring, whose choices are tuned on the host.
    pub(crate) fn machine(&self) -> Option<Machine> {
        match self {
            Topology::Model(m) => Some(Machine::clone(&m.0)),
            Topology::Custom { group_size } => hcomm_cost::preset("host")
                .and_then(|h| h.grouped(*group_size, CUSTOM_GROUP_FACTOR))
                .ok(),
            Topology::FullMesh | Topology::Ring => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::CommOptions;
    use std::ffi::OsString;

    fn options_with(vars: &[(&str, &str)]) -> Result<CommOptions> {
        CommOptions::from_vars(|name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| OsString::from(v)))
    }

    #[test]
    fn presets_parse_as_model_topologies() {
        let t = Topology::parse("preset:dgx-h100").unwrap();
        assert!(matches!(&t, Topology::Model(m) if m.0.name == "dgx-h100"), "{t:?}");
        assert_eq!(Topology::parse("preset:dgx-a100"), None);
        let e = options_with(&[("HCOMM_TOPOLOGY", "preset:dgx-a100")]).unwrap_err();
        assert!(
            matches!(&e, Error::Config { message } if message.contains("`HCOMM_TOPOLOGY=preset:dgx-a100`") && message.contains("dgx-h100")),
            "{e}"
        );
    }

    #[test]
    fn topology_files_are_read_and_bad_ones_named() {
        let dir = std::env::temp_dir().join(format!("hcomm-topology-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.toml");
        std::fs::write(
            &good,
            "name = \"two\"\nreduce_gbs = 10.0\n[[level]]\nname = \"a\"\nranks = 2\nlink = \"mesh\"\nbandwidth_gbs = 5.0\nlatency_us = 1.0\n[[level]]\nname = \"b\"\nlink = \"switch\"\nbandwidth_gbs = 1.0\nlatency_us = 5.0\n",
        )
        .unwrap();
        let o = options_with(&[("HCOMM_TOPOLOGY_FILE", good.to_str().unwrap())]).unwrap();
        assert!(matches!(&o.topology, Topology::Model(m) if m.0.name == "two" && m.0.levels.len() == 2));
        let bad = dir.join("bad.toml");
        std::fs::write(&bad, "name = \"bad\"\nreduce_gbs = 10.0\n[[level]]\nname = \"a\"\nranks = 2\nlink = \"switch\"\nbandwidth_gbs = 5.0\nlatency_us = 1.0\n").unwrap();
        for (path, expect) in [
            (bad.to_str().unwrap(), "the last level `a` has `ranks`"),
            ("/nonexistent/t.toml", "cannot read it"),
        ] {
            let e = options_with(&[("HCOMM_TOPOLOGY_FILE", path)]).unwrap_err();
            assert!(
                matches!(&e, Error::Config { message } if message.contains("`HCOMM_TOPOLOGY_FILE=") && message.contains(expect)),
                "{e}"
            );
        }
        let e = options_with(&[
            ("HCOMM_TOPOLOGY_FILE", good.to_str().unwrap()),
            ("HCOMM_TOPOLOGY", "ring"),
        ])
        .unwrap_err();
        assert!(e.to_string().contains("are both set"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn custom_topologies_have_a_machine_and_meshes_do_not() {
        let m = Topology::Custom { group_size: 2 }.machine().unwrap();
        assert_eq!(m.levels.len(), 2);
        assert_eq!(m.levels[0].ranks, Some(2));
        assert!(Topology::FullMesh.machine().is_none() && Topology::Ring.machine().is_none());
    }
}
