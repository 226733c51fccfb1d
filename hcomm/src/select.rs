//! Algorithm names, which collective each serves, and the selection policy.

use crate::header::Collective;
use smallvec::SmallVec;

use crate::topology::Topology;
use hcomm_cost::{Builtin, Machine};

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

/// On two ranks, all-gathers of more bytes per rank than this leave the
/// board: its two copies (onto the board, off the peer's page) cost more
/// than the peer's one (the crossover on 2 processes and 2 threads is in
/// BENCHMARKS.md, "One-shot limits on two ranks").
const ONE_SHOT_PAIR_GATHER_BYTES: usize = 8 << 10;
/// The same for all-to-alls, whose own block stays off the board (same
/// section).
const ONE_SHOT_PAIR_ALL_TO_ALL_BYTES: usize = 16 << 10;

/// The collectives whose crossovers the cost model sets.
const MODELLED: [Collective; 4] = [
    Collective::AllReduce,
    Collective::AllGather,
    Collective::ReduceScatter,
    Collective::AllToAll,
];

/// Call sizes (bytes per rank, powers of two) at which the model is asked.
const MODEL_SIZES: std::ops::RangeInclusive<u32> = 10..=30;

/// The cost model's choices on one machine and world size: per modelled
/// collective, `(up to bytes, algorithm)` in increasing size (the model's
/// call size, nccl-tests': [`model_bytes`]), computed once per
/// communicator ([`Crossovers::new`]), read on each call.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Crossovers {
    world: usize,
    table: [Vec<(usize, Algorithm)>; MODELLED.len()],
}

/// The model's pattern of `algorithm` for `collective` (hcomm's direct
/// algorithms post every message at once; the model costs the direct
/// schedule, one peer per round).
fn builtin(collective: Collective, algorithm: Algorithm) -> Option<Builtin> {
    Builtin::from_names(collective.name(), algorithm.name())
}

/// The model's size of a call of `bytes` per rank (the policy's size): the
/// all-gather's output, the buffer of the others.
fn model_bytes(collective: Collective, bytes: usize, world: usize) -> usize {
    if collective == Collective::AllGather {
        bytes.saturating_mul(world)
    } else {
        bytes
    }
}

/// Predicted times closer than this (relative) are a tie.
const TIE: f64 = 1e-9;

impl Crossovers {
    /// Asks the model at every size of [`MODEL_SIZES`] for the fastest
    /// algorithm of each modelled collective, and says what it chose in a
    /// `tracing` event. Where several are predicted equally fast (on a
    /// flat host, ring and direct patterns move the same bytes in as many
    /// rounds), the choice of [`policy`]'s thresholds wins if it is one of
    /// them. `None` when the machine gives no prediction.
    pub(crate) fn new(machine: &Machine, world: usize) -> Option<Crossovers> {
        let mut table: [Vec<(usize, Algorithm)>; MODELLED.len()] = Default::default();
        for (k, &c) in MODELLED.iter().enumerate() {
            let candidates: Vec<(Algorithm, Builtin)> = Algorithm::for_collective(c)
                .iter()
                .filter(|a| a.supports_world(world))
                .filter_map(|&a| builtin(c, a).map(|b| (a, b)))
                .collect();
            for shift in MODEL_SIZES {
                let bytes = 1usize << shift;
                let times: Vec<(Algorithm, f64)> = candidates
                    .iter()
                    .filter_map(|&(a, b)| b.predict(machine, world, bytes).ok().map(|p| (a, p.us)))
                    .collect();
                let best = times.iter().map(|t| t.1).min_by(f64::total_cmp)?;
                let per_rank = if c == Collective::AllGather {
                    bytes / world
                } else {
                    bytes
                };
                let tuned = policy(c, &Topology::FullMesh, world, per_rank, None, None);
                let tied = |a: &&(Algorithm, f64)| a.1 <= best * (1.0 + TIE);
                let chosen = times
                    .iter()
                    .filter(tied)
                    .find(|t| t.0 == tuned)
                    .or_else(|| times.iter().find(tied))?
                    .0;
                match table[k].last_mut() {
                    Some(last) if last.1 == chosen => last.0 = bytes,
                    _ => table[k].push((bytes, chosen)),
                }
            }
            let choices: Vec<String> = table[k].iter().map(|(b, a)| format!("{a} up to {b} B")).collect();
            tracing::debug!(
                collective = c.name(),
                machine = machine.name.as_str(),
                world,
                choices = choices.join(", ").as_str(),
                "the cost model's fastest algorithm per call size (nccl-tests' size; past the last size, the last algorithm)"
            );
        }
        Some(Crossovers { world, table })
    }

    /// The model's choice for `collective` at `bytes` per rank, if it
    /// models it.
    pub(crate) fn choice(&self, collective: Collective, bytes: usize) -> Option<Algorithm> {
        let k = MODELLED.iter().position(|&c| c == collective)?;
        let t = &self.table[k];
        let bytes = model_bytes(collective, bytes, self.world);
        t.iter().find(|(upto, _)| bytes <= *upto).or(t.last()).map(|(_, a)| *a)
    }
}

/// The policy's choice for `collective` on `world` ranks with `topology` and
/// `bytes` per rank, on a backend with a board of `board` bytes per rank
/// (`None`: none). With `model` (the cost model's crossovers for the
/// communicator's topology), the model chooses the algorithms of the
/// collectives it covers, after the one-shot rule. Every choice
/// [runs](Algorithm::runs) the call.
pub(crate) fn policy(
    collective: Collective,
    topology: &Topology,
    world: usize,
    bytes: usize,
    board: Option<usize>,
    model: Option<&Crossovers>,
) -> Algorithm {
    let small = bytes <= SMALL_BYTES;
    let ring_links = matches!(topology, Topology::Ring);
    // A declared ring keeps ring algorithms: the program models links that
    // the board would bypass.
    let pair_limit = match collective {
        Collective::AllGather if world == 2 => ONE_SHOT_PAIR_GATHER_BYTES,
        Collective::AllToAll if world == 2 => ONE_SHOT_PAIR_ALL_TO_ALL_BYTES,
        _ => usize::MAX,
    };
    let one_shot = world > 1 && !ring_links && board.is_some_and(|b| bytes <= b.min(pair_limit));
    // Every modelled collective has a one-shot algorithm, which goes first.
    let modelled = model
        .and_then(|m| m.choice(collective, bytes))
        .filter(|a| !one_shot && a.runs(world, bytes, board));
    if let Some(a) = modelled {
        return a;
    }
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
            let p = |topo, bytes| policy(c, &topo, 4, bytes, None, None);
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
            assert_eq!(
                policy(c, &Topology::FullMesh, 4, 4 << 10, board, None),
                Algorithm::OneShot
            );
            assert_ne!(
                policy(c, &Topology::FullMesh, 4, 4 << 10, None, None),
                Algorithm::OneShot
            );
            assert_ne!(policy(c, &Topology::Ring, 4, 4 << 10, board, None), Algorithm::OneShot);
            assert_ne!(
                policy(c, &Topology::FullMesh, 1, 4 << 10, board, None),
                Algorithm::OneShot
            );
        }
        assert_ne!(
            policy(Collective::AllReduce, &Topology::FullMesh, 4, 1 << 20, board, None),
            Algorithm::OneShot
        );
    }

    #[test]
    fn two_ranks_leave_the_board_for_all_gathers_and_all_to_alls_past_their_limits() {
        let board = Some(64 << 10);
        let p = |c, world, bytes| policy(c, &Topology::FullMesh, world, bytes, board, None);
        for (c, limit) in [
            (Collective::AllGather, ONE_SHOT_PAIR_GATHER_BYTES),
            (Collective::AllToAll, ONE_SHOT_PAIR_ALL_TO_ALL_BYTES),
        ] {
            assert_eq!(p(c, 2, limit), Algorithm::OneShot, "{c}");
            assert_ne!(p(c, 2, limit + 1), Algorithm::OneShot, "{c}");
            assert_eq!(p(c, 4, limit + 1), Algorithm::OneShot, "{c} on 4 ranks");
        }
        assert_eq!(p(Collective::AllReduce, 2, 64 << 10), Algorithm::OneShot);
    }

    #[test]
    fn policy_choices_support_every_world() {
        for c in Collective::ALL {
            for world in 1..=9 {
                for bytes in [0, 1 << 10, 1 << 24] {
                    for topo in [Topology::FullMesh, Topology::Ring] {
                        for board in [None, Some(64 << 10)] {
                            let a = policy(c, &topo, world, bytes, board, None);
                            assert!(a.runs(world, bytes, board) && Algorithm::for_collective(c).contains(&a));
                        }
                    }
                }
            }
        }
    }

    /// The model's time for `algorithm` of `c` on `m` at `bytes` per rank.
    fn predicted(m: &Machine, c: Collective, algorithm: Algorithm, world: usize, bytes: usize) -> f64 {
        builtin(c, algorithm)
            .and_then(|b| b.predict(m, world, model_bytes(c, bytes, world)).ok())
            .map_or(f64::INFINITY, |p| p.us)
    }

    /// Asserts that on `topology`, with the crossovers of its machine, the
    /// policy's choice for every modelled collective at every size the
    /// model was asked at (per rank) is predicted as fast as the model's
    /// argmin; returns how many choices were ties settled by the tuned
    /// thresholds.
    fn assert_argmin(name: &str, topology: &Topology, world: usize) -> usize {
        let m = topology.machine().unwrap();
        let x = Crossovers::new(&m, world).unwrap();
        let mut ties = 0;
        for c in MODELLED {
            let candidates: Vec<Builtin> = Algorithm::for_collective(c)
                .iter()
                .filter(|a| a.supports_world(world))
                .filter_map(|&a| builtin(c, a))
                .collect();
            for shift in MODEL_SIZES {
                let bytes = if c == Collective::AllGather {
                    (1 << shift) / world
                } else {
                    1 << shift
                };
                let chosen = policy(c, topology, world, bytes, None, Some(&x));
                let (best, p) = hcomm_cost::argmin(&m, &candidates, world, model_bytes(c, bytes, world)).unwrap();
                let t = predicted(&m, c, chosen, world, bytes);
                assert!(
                    (t - p.us).abs() <= p.us * TIE,
                    "{c} on {name}, {world} ranks, {bytes} B per rank: chose {chosen} ({t} us), the model's best is {} ({} us)",
                    best.schedule_name(),
                    p.us
                );
                ties += usize::from(builtin(c, chosen) != Some(best));
            }
        }
        ties
    }

    /// On the presets, the policy's choice is the model's fastest pattern
    /// for every modelled collective, world and size it was asked at.
    #[test]
    fn on_presets_the_choice_is_the_models_argmin() {
        for name in ["dgx-h100", "ascend-910b-node", "ascend-910b-pod", "host"] {
            let topo = Topology::parse(&format!("preset:{name}")).unwrap();
            for world in [8, 12, 64] {
                assert_argmin(name, &topo, world);
            }
        }
    }

    /// With no topology given, threads and processes of this host get the
    /// fitted host presets, and the default choice is the argmin of the
    /// detected machine; ties (ring and direct on a flat host) go to the
    /// tuned thresholds' choice, which keeps the large all-reduce direct.
    #[test]
    fn the_default_choice_is_the_argmin_of_the_detected_topology() {
        use crate::topology::Placement;
        for (placement, preset) in [
            (Placement::Threads, "host"),
            (Placement::Processes { per_host: 4 }, "host-processes"),
        ] {
            for world in [2, 4] {
                let topo = Topology::Detected.detected(placement, world);
                assert!(
                    matches!(&topo, Topology::Model(m) if m.0.name == preset),
                    "{placement:?}: {topo:?}"
                );
                let ties = assert_argmin(preset, &topo, world);
                assert!(ties > 0, "{preset} at {world}: no tie settled by the thresholds");
                let x = Crossovers::new(&topo.machine().unwrap(), world).unwrap();
                assert_eq!(
                    policy(Collective::AllReduce, &topo, world, 16 << 20, None, Some(&x)),
                    Algorithm::Direct
                );
            }
        }
    }

    /// The model's crossovers change the choice with the size: on the
    /// 910B pod, a small all-reduce and a large one take different
    /// algorithms; a `custom` topology gets crossovers too.
    #[test]
    fn crossovers_depend_on_size_and_custom_topologies_get_them() {
        let m = hcomm_cost::preset("ascend-910b-pod").unwrap();
        let x = Crossovers::new(&m, 64).unwrap();
        let small = x.choice(Collective::AllReduce, 4 << 10).unwrap();
        let large = x.choice(Collective::AllReduce, 1 << 30).unwrap();
        assert_ne!(small, large);
        let custom = Topology::Custom { group_size: 2 };
        assert!(Crossovers::new(&custom.machine().unwrap(), 4).is_some());
        assert_eq!(x.choice(Collective::Broadcast, 4096), None);
    }
}
