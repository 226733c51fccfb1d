//! Algorithm names, which collective each serves, and the selection policy.

use crate::header::Collective;
use smallvec::SmallVec;

use crate::topology::Topology;

/// The algorithms one collective call ran, in order.
pub(crate) type Ran = SmallVec<[Algorithm; 2]>;

/// A collective algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Algorithm {
    /// Ring: `world - 1` neighbour steps per phase; bandwidth-optimal.
    Ring,
    /// Recursive halving (reduce-scatter) then doubling (all-gather);
    /// non-power-of-two worlds fold the extra ranks in first.
    HalvingDoubling,
    /// Reduce to rank 0 along a binomial tree, then broadcast.
    ReduceBroadcast,
    /// Recursive doubling; power-of-two worlds only.
    RecursiveDoubling,
    /// Bruck's algorithm: `ceil(log2 world)` steps for any world size.
    Bruck,
    /// Recursive halving; power-of-two worlds only.
    RecursiveHalving,
    /// Pairwise exchange: `world - 1` steps, one peer each way per step.
    Pairwise,
    /// Every peer addressed directly: all-to-all, all-gather, gather and
    /// scatter post every message at once; reduce-scatter has each rank
    /// combine its own part of every rank's input; all-reduce does that,
    /// then fetches the other parts from their owners.
    Direct,
    /// Binomial tree rooted at the root.
    BinomialTree,
    /// Scatter from the root, then ring all-gather.
    ScatterAllGather,
    /// Dissemination barrier: `ceil(log2 world)` rounds of empty messages.
    Dissemination,
    /// The device library's own implementation (HCCL, NCCL), which picks
    /// its algorithm itself.
    Library,
    /// Every rank puts its contribution where every peer reads it (the
    /// host backend's board: memory its in-process ranks share) and takes
    /// what it needs from every rank's, in rank order: one step, no
    /// messages; small messages on in-process ranks only.
    OneShot,
    /// The device library moved every rank's contribution (an all-gather,
    /// or an all-to-all for reduce-scatter) and each rank combined them on
    /// the host in rank order: a reduction the library does not run
    /// (HCCL's support matrix, a mean on HCCL), with the host's result.
    LibraryFold,
}

impl Algorithm {
    /// Every algorithm.
    pub const ALL: [Algorithm; 14] = [
        Algorithm::Ring,
        Algorithm::HalvingDoubling,
        Algorithm::ReduceBroadcast,
        Algorithm::RecursiveDoubling,
        Algorithm::Bruck,
        Algorithm::RecursiveHalving,
        Algorithm::Pairwise,
        Algorithm::Direct,
        Algorithm::BinomialTree,
        Algorithm::ScatterAllGather,
        Algorithm::Dissemination,
        Algorithm::Library,
        Algorithm::OneShot,
        Algorithm::LibraryFold,
    ];

    /// The name used in `HCOMM_ALGO`, in tracing and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Ring => "ring",
            Algorithm::HalvingDoubling => "halving_doubling",
            Algorithm::ReduceBroadcast => "reduce_broadcast",
            Algorithm::RecursiveDoubling => "recursive_doubling",
            Algorithm::Bruck => "bruck",
            Algorithm::RecursiveHalving => "recursive_halving",
            Algorithm::Pairwise => "pairwise",
            Algorithm::Direct => "direct",
            Algorithm::BinomialTree => "binomial_tree",
            Algorithm::ScatterAllGather => "scatter_all_gather",
            Algorithm::Dissemination => "dissemination",
            Algorithm::Library => "library",
            Algorithm::OneShot => "one_shot",
            Algorithm::LibraryFold => "library_fold",
        }
    }

    /// Parses a name or a common alias (`rhd`, `rd`, `tree`, `naive`, ...).
    pub fn parse(name: &str) -> Option<Algorithm> {
        let name = name.trim();
        Algorithm::ALL.into_iter().find(|a| a.name() == name).or(match name {
            "rhd" | "hd" | "h-d_r" => Some(Algorithm::HalvingDoubling),
            "naive" | "reduce_bcast" => Some(Algorithm::ReduceBroadcast),
            "rd" => Some(Algorithm::RecursiveDoubling),
            "rh" => Some(Algorithm::RecursiveHalving),
            "tree" | "binomial" => Some(Algorithm::BinomialTree),
            "scatter_allgather" => Some(Algorithm::ScatterAllGather),
            "oneshot" | "one-shot" => Some(Algorithm::OneShot),
            _ => None,
        })
    }

    /// The algorithms that implement `collective`.
    pub fn for_collective(collective: Collective) -> &'static [Algorithm] {
        match collective {
            Collective::AllReduce => &[
                Algorithm::Ring,
                Algorithm::HalvingDoubling,
                Algorithm::ReduceBroadcast,
                Algorithm::Direct,
                Algorithm::OneShot,
            ],
            Collective::AllGather => &[
                Algorithm::Ring,
                Algorithm::RecursiveDoubling,
                Algorithm::Bruck,
                Algorithm::Direct,
                Algorithm::OneShot,
            ],
            Collective::ReduceScatter => &[
                Algorithm::Ring,
                Algorithm::RecursiveHalving,
                Algorithm::Direct,
                Algorithm::OneShot,
            ],
            Collective::AllToAll => &[Algorithm::Pairwise, Algorithm::Direct, Algorithm::OneShot],
            Collective::AllToAllV | Collective::Gather | Collective::Scatter => &[Algorithm::Direct],
            Collective::Broadcast => &[Algorithm::BinomialTree, Algorithm::ScatterAllGather, Algorithm::OneShot],
            Collective::Reduce => &[Algorithm::BinomialTree],
            Collective::Barrier => &[Algorithm::Dissemination, Algorithm::OneShot],
        }
    }

    /// Whether the algorithm works for `world` ranks.
    pub fn supports_world(self, world: usize) -> bool {
        match self {
            Algorithm::RecursiveDoubling | Algorithm::RecursiveHalving => world.is_power_of_two(),
            _ => world >= 1,
        }
    }

    /// Whether the algorithm can run a call of `bytes` per rank on `world`
    /// ranks whose backend has a board of `board` bytes per rank (`None`:
    /// no board).
    pub(crate) fn runs(self, world: usize, bytes: usize, board: Option<usize>) -> bool {
        self.supports_world(world) && (self != Algorithm::OneShot || board.is_some_and(|b| bytes <= b))
    }
}

impl std::fmt::Display for Algorithm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A forced algorithm per collective; unset entries are chosen by policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AlgorithmTable {
    forced: [Option<Algorithm>; Collective::ALL.len()],
}

impl AlgorithmTable {
    /// Parses `all_reduce=ring,all_gather=bruck` (also `;`-separated).
    pub fn parse(text: &str) -> Result<AlgorithmTable, String> {
        let mut table = AlgorithmTable::default();
        for item in text.split([',', ';']).map(str::trim).filter(|s| !s.is_empty()) {
            let (coll, algo) = item
                .split_once('=')
                .ok_or_else(|| format!("`{item}` is not of the form `collective=algorithm`"))?;
            let collective = Collective::parse(coll).ok_or_else(|| {
                let names: Vec<_> = Collective::ALL.iter().map(|c| c.name()).collect();
                format!(
                    "unknown collective `{}`; expected one of {}",
                    coll.trim(),
                    names.join(", ")
                )
            })?;
            let algorithm = Algorithm::parse(algo)
                .filter(|a| Algorithm::for_collective(collective).contains(a))
                .ok_or_else(|| {
                    let names: Vec<_> = Algorithm::for_collective(collective).iter().map(|a| a.name()).collect();
                    format!(
                        "`{}` is not an algorithm of `{collective}`; expected one of {}",
                        algo.trim(),
                        names.join(", ")
                    )
                })?;
            table.set(collective, Some(algorithm));
        }
        Ok(table)
    }

    /// Forces (or, with `None`, un-forces) an algorithm.
    pub fn set(&mut self, collective: Collective, algorithm: Option<Algorithm>) {
        self.forced[collective.index()] = algorithm;
    }

    /// The forced algorithm, if any.
    pub fn get(&self, collective: Collective) -> Option<Algorithm> {
        self.forced[collective.index()]
    }
}

/// Messages up to this many bytes per rank count as small (latency-bound).
const SMALL_BYTES: usize = 64 << 10;

/// The policy's choice for `collective` on `world` ranks with `topology` and
/// `bytes` per rank, on a backend with a board of `board` bytes per rank
/// (`None`: none). Every choice [runs](Algorithm::runs) the call.
pub(crate) fn policy(
    collective: Collective,
    topology: &Topology,
    world: usize,
    bytes: usize,
    board: Option<usize>,
) -> Algorithm {
    let small = bytes <= SMALL_BYTES;
    let ring_links = matches!(topology, Topology::Ring);
    // A declared ring keeps ring algorithms: the program models links that
    // the board would bypass.
    let one_shot = world > 1 && !ring_links && board.is_some_and(|b| bytes <= b);
    match collective {
        Collective::AllReduce
        | Collective::AllGather
        | Collective::ReduceScatter
        | Collective::AllToAll
        | Collective::Broadcast
        | Collective::Barrier
            if one_shot =>
        {
            Algorithm::OneShot
        }
        Collective::AllReduce => {
            if ring_links {
                Algorithm::Ring
            } else if small {
                Algorithm::HalvingDoubling
            } else {
                Algorithm::Direct
            }
        }
        Collective::AllGather => {
            if ring_links {
                Algorithm::Ring
            } else if !small {
                Algorithm::Direct
            } else if world.is_power_of_two() {
                Algorithm::RecursiveDoubling
            } else {
                Algorithm::Bruck
            }
        }
        Collective::ReduceScatter => {
            if ring_links {
                Algorithm::Ring
            } else if !small {
                Algorithm::Direct
            } else if world.is_power_of_two() {
                Algorithm::RecursiveHalving
            } else {
                Algorithm::Ring
            }
        }
        Collective::AllToAll => {
            // Large calls stay pairwise: posting every message at once saved
            // up to a third on 4 ranks sharing 2 cores at 16 MiB, but took up
            // to twice as long on 2 ranks.
            if small && !ring_links {
                Algorithm::Direct
            } else {
                Algorithm::Pairwise
            }
        }
        Collective::Broadcast => {
            if small || bytes < world * 4096 {
                Algorithm::BinomialTree
            } else {
                Algorithm::ScatterAllGather
            }
        }
        Collective::Reduce => Algorithm::BinomialTree,
        Collective::Barrier => Algorithm::Dissemination,
        Collective::AllToAllV | Collective::Gather | Collective::Scatter => Algorithm::Direct,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hcomm_algo_parses_and_rejects_with_a_reason() {
        let t = AlgorithmTable::parse("all_reduce=ring, all_gather=bruck").unwrap();
        assert_eq!(t.get(Collective::AllReduce), Some(Algorithm::Ring));
        assert_eq!(t.get(Collective::AllGather), Some(Algorithm::Bruck));
        assert_eq!(t.get(Collective::Broadcast), None);
        let e = AlgorithmTable::parse("all_gather=pairwise").unwrap_err();
        assert!(e.contains("not an algorithm of `all_gather`"), "{e}");
        let e = AlgorithmTable::parse("allreduce=ring").unwrap_err();
        assert!(e.contains("unknown collective `allreduce`"), "{e}");
    }

    /// Per collective, on 4 ranks without a board: the choice for 1 MiB and
    /// for 4 KiB on a full mesh, and for 1 MiB on a declared ring.
    #[test]
    fn the_policy_by_topology_and_size() {
        use Algorithm::*;
        for (c, large, small, ring) in [
            (Collective::AllReduce, Direct, HalvingDoubling, Ring),
            (Collective::ReduceScatter, Direct, RecursiveHalving, Ring),
            (Collective::AllGather, Direct, RecursiveDoubling, Ring),
            (Collective::AllToAll, Pairwise, Direct, Pairwise),
        ] {
            let p = |topo, bytes| policy(c, &topo, 4, bytes, None);
            assert_eq!(p(Topology::FullMesh, 1 << 20), large, "{c}, 1 MiB");
            assert_eq!(p(Topology::FullMesh, 4 << 10), small, "{c}, 4 KiB");
            assert_eq!(p(Topology::Ring, 1 << 20), ring, "{c} on a ring");
        }
    }

    #[test]
    fn small_calls_on_a_board_are_one_shot() {
        let board = Some(64 << 10);
        for c in [
            Collective::AllReduce,
            Collective::AllGather,
            Collective::AllToAll,
            Collective::Barrier,
        ] {
            assert_eq!(policy(c, &Topology::FullMesh, 4, 4 << 10, board), Algorithm::OneShot);
            assert_ne!(policy(c, &Topology::FullMesh, 4, 4 << 10, None), Algorithm::OneShot);
            assert_ne!(policy(c, &Topology::Ring, 4, 4 << 10, board), Algorithm::OneShot);
            assert_ne!(policy(c, &Topology::FullMesh, 1, 4 << 10, board), Algorithm::OneShot);
        }
        assert_ne!(
            policy(Collective::AllReduce, &Topology::FullMesh, 4, 1 << 20, board),
            Algorithm::OneShot
        );
    }

    #[test]
    fn policy_choices_support_every_world() {
        for c in Collective::ALL {
            for world in 1..=9 {
                for bytes in [0, 1 << 10, 1 << 24] {
                    for topo in [Topology::FullMesh, Topology::Ring] {
                        for board in [None, Some(64 << 10)] {
                            let a = policy(c, &topo, world, bytes, board);
                            assert!(a.runs(world, bytes, board) && Algorithm::for_collective(c).contains(&a));
                        }
                    }
                }
            }
        }
    }
}
