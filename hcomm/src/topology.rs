//! How the ranks of a communicator are connected, as far as algorithm choice
//! is concerned.

use std::sync::Arc;

use hcomm_cost::{Level, Link, Machine};

use crate::error::{Error, Result};

/// The shape of the links between the ranks of a communicator.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum Topology {
    /// Not given (`HCOMM_TOPOLOGY` and `HCOMM_TOPOLOGY_FILE` unset, or
    /// `HCOMM_TOPOLOGY=detect`): the host launchers describe what they
    /// find to the cost model as a [`Topology::Model`] (threads of one
    /// process: the preset `host`; processes of one host:
    /// `host-processes`; several hosts: that inside a host and TCP between
    /// hosts), and the model chooses. Where nothing is detected (device
    /// backends, whose library chooses), it chooses like
    /// [`Topology::FullMesh`].
    #[default]
    Detected,
    /// Every pair of ranks has a direct link of equal cost (threads in one
    /// process, ranks inside one server); the choice follows the policy's
    /// thresholds tuned on a 2-core host, without the cost model.
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

/// The network between hosts when ranks run on several (processes over
/// TCP), as the detected topology describes it: 10 Gb/s Ethernet per
/// host, GB/s. An assumption, not a measurement; a topology file
/// (`HCOMM_TOPOLOGY_FILE`) describes another network.
const TCP_BANDWIDTH_GBS: f64 = 1.25;

/// The latency of one message between hosts over TCP, microseconds (an
/// assumption, as [`TCP_BANDWIDTH_GBS`]).
const TCP_LATENCY_US: f64 = 25.0;

/// Where the ranks of a communicator run, as its launcher finds them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Placement {
    /// Threads of one process.
    Threads,
    /// One process per rank; `per_host` consecutive ranks share a host
    /// (the world when every rank runs on this one).
    Processes {
        /// Ranks per host.
        per_host: usize,
    },
}

impl Topology {
    /// Parses `detect`, `full_mesh`, `ring`, `custom:<group size>` or
    /// `preset:<name>` (a preset of the cost model: `dgx-h100`,
    /// `ascend-910b-node`, `ascend-910b-pod`, `host`, `host-processes`).
    pub fn parse(text: &str) -> Option<Topology> {
        match text.trim() {
            "detect" | "detected" => Some(Topology::Detected),
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

    /// This topology where the launcher found `placement` for `world`
    /// ranks: a [`Topology::Detected`] one becomes the cost model's
    /// description of it; any other stays as given. Threads of one process
    /// get the preset `host` (fitted to this host's threads), processes of
    /// one host `host-processes`, processes on several hosts
    /// `host-processes` inside a host and a TCP network between hosts
    /// ([`TCP_BANDWIDTH_GBS`], [`TCP_LATENCY_US`]). Where hosts hold
    /// different numbers of ranks, there is no such description and the
    /// choice follows [`Topology::FullMesh`]'s thresholds (a `tracing`
    /// event says so).
    pub(crate) fn detected(self, placement: Placement, world: usize) -> Topology {
        if self != Topology::Detected {
            return self;
        }
        let machine = match placement {
            Placement::Threads => hcomm_cost::preset("host"),
            Placement::Processes { per_host } if per_host >= world => hcomm_cost::preset("host-processes"),
            Placement::Processes { per_host } => {
                hcomm_cost::preset("host-processes").and_then(|m| on_hosts(&m, per_host))
            }
        };
        match machine {
            Ok(m) if world.is_multiple_of(m.levels.first().and_then(|l| l.ranks).unwrap_or(1)) => {
                tracing::debug!(?placement, world, machine = m.name.as_str(), "topology detected");
                Topology::Model(ModelTopology(Arc::new(m)))
            }
            other => {
                tracing::debug!(
                    ?placement,
                    world,
                    reason = other.err().map(|e| e.to_string()),
                    "no model of the detected topology; the tuned thresholds choose"
                );
                Topology::Detected
            }
        }
    }

    /// The machine the cost model sees, where the policy asks it: a model
    /// topology, or a `custom` one (this host's fitted machine in groups,
    /// links between groups [`CUSTOM_GROUP_FACTOR`] times slower). `None`
    /// for a full mesh or a ring, whose choices are tuned on the host, and
    /// for a topology left undetected.
    pub(crate) fn machine(&self) -> Option<Machine> {
        match self {
            Topology::Model(m) => Some(Machine::clone(&m.0)),
            Topology::Custom { group_size } => hcomm_cost::preset("host")
                .and_then(|h| h.grouped(*group_size, CUSTOM_GROUP_FACTOR))
                .ok(),
            Topology::Detected | Topology::FullMesh | Topology::Ring => None,
        }
    }
}

/// `host` (one level) in groups of `per_host` ranks, joined by the TCP
/// network this module assumes; one level of TCP when a host holds one
/// rank.
fn on_hosts(host: &Machine, per_host: usize) -> hcomm_cost::Result<Machine> {
    let tcp = Level {
        name: "tcp".to_owned(),
        ranks: None,
        link: Link::Switch,
        bandwidth_gbs: TCP_BANDWIDTH_GBS,
        latency_us: TCP_LATENCY_US,
        cached_bytes: None,
        cached_bandwidth_gbs: None,
        llc_bytes: None,
        llc_bandwidth_gbs: None,
        shared_gbs: None,
    };
    let mut m = host.clone();
    m.name = format!("{} on hosts of {per_host} ranks over tcp", host.name);
    if per_host > 1 {
        for l in &mut m.levels {
            l.ranks = Some(per_host);
        }
        m.levels.push(tcp);
    } else {
        m.levels = vec![tcp];
    }
    m.validate()?;
    Ok(m)
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

    /// Processes on several hosts get two levels (the fitted processes'
    /// machine inside a host, TCP between hosts), one rank per host a
    /// level of TCP alone; hosts that do not divide the world get no model;
    /// a topology that was given stays.
    #[test]
    fn detection_describes_hosts_and_keeps_given_topologies() {
        let two = Topology::Detected.detected(Placement::Processes { per_host: 4 }, 8);
        let Topology::Model(m) = &two else { panic!("{two:?}") };
        let names: Vec<(&str, Option<usize>)> = m.0.levels.iter().map(|l| (l.name.as_str(), l.ranks)).collect();
        assert_eq!(names, [("host", Some(4)), ("tcp", None)]);
        assert_eq!(
            (m.0.levels[1].bandwidth_gbs, m.0.levels[1].latency_us),
            (TCP_BANDWIDTH_GBS, TCP_LATENCY_US)
        );
        let one = Topology::Detected.detected(Placement::Processes { per_host: 1 }, 3);
        assert!(
            matches!(&one, Topology::Model(m) if m.0.levels.len() == 1 && m.0.levels[0].name == "tcp"),
            "{one:?}"
        );
        assert_eq!(
            Topology::Detected.detected(Placement::Processes { per_host: 4 }, 6),
            Topology::Detected
        );
        assert_eq!(Topology::Detected.machine(), None);
        for given in [Topology::FullMesh, Topology::Ring, Topology::Custom { group_size: 2 }] {
            assert_eq!(given.clone().detected(Placement::Threads, 4), given);
        }
        assert_eq!(Topology::parse("detect"), Some(Topology::Detected));
        assert_eq!(options_with(&[]).unwrap().topology, Topology::Detected);
    }

    #[test]
    fn custom_topologies_have_a_machine_and_meshes_do_not() {
        let m = Topology::Custom { group_size: 2 }.machine().unwrap();
        assert_eq!(m.levels.len(), 2);
        assert_eq!(m.levels[0].ranks, Some(2));
        assert!(Topology::FullMesh.machine().is_none() && Topology::Ring.machine().is_none());
    }
}
