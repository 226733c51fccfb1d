//! hcomm's built-in algorithms as round patterns: the same messages, round
//! by round, as their `comm_schedule!` programs, written so that rounds in
//! which every block of ranks does what the first does are costed from that
//! block alone. That is what makes 4096 ranks take milliseconds (except
//! xor rounds on a ring level, which have no such symmetry and cost every
//! message's hops); a test in hcomm compares these patterns with
//! [`crate::predict_schedule`] over the schedules themselves.

use crate::coll::Coll;
use crate::error::{CostError, Result};
use crate::one_shot;
use crate::round::{round_us, Msg};
use crate::schedule::Prediction;
use crate::topology::{Link, Machine};

/// A built-in algorithm, named as its schedule in `hcomm::collective::schedules`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Builtin {
    /// `ring_all_gather`.
    RingAllGather,
    /// `recursive_doubling_all_gather` (power-of-two worlds).
    RecursiveDoublingAllGather,
    /// `bruck_all_gather`.
    BruckAllGather,
    /// `direct_all_gather`.
    DirectAllGather,
    /// `pairwise_all_to_all`.
    PairwiseAllToAll,
    /// `binomial_broadcast` (root 0).
    BinomialBroadcast,
    /// `ring_all_reduce`.
    RingAllReduce,
    /// `direct_all_reduce`.
    DirectAllReduce,
    /// `halving_doubling_all_reduce`.
    HalvingDoublingAllReduce,
    /// `recursive_halving_reduce_scatter` (power-of-two worlds).
    RecursiveHalvingReduceScatter,
    /// `ring_reduce_scatter`.
    RingReduceScatter,
    /// `direct_reduce_scatter`.
    DirectReduceScatter,
    /// `binomial_reduce` (root 0).
    BinomialReduce,
    /// hcomm's one-shot all-reduce on the shared board
    /// (module `one_shot`); its name is that of the schedule that moves
    /// the same data as messages, but the pattern is the board's.
    OneShotAllReduce,
    /// The one-shot all-gather on the board.
    OneShotAllGather,
    /// The one-shot reduce-scatter on the board.
    OneShotReduceScatter,
    /// The one-shot all-to-all on the board.
    OneShotAllToAll,
    /// The one-shot broadcast on the board (root 0).
    OneShotBroadcast,
}

/// Who sends to whom in a round.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Peers {
    /// Every rank `r` sends to `r + d` (modulo the world).
    Shift(usize),
    /// Every rank `r` sends to `r ^ d`.
    Xor(usize),
    /// These pairs only.
    List(Vec<(usize, usize)>),
}

/// One round: its pairs, their length in units of the length variable `n`,
/// and whether receivers reduce.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Round {
    peers: Peers,
    units: usize,
    reduce: bool,
}

fn log2_ceil(x: usize) -> u32 {
    usize::BITS - x.saturating_sub(1).leading_zeros()
}

impl Builtin {
    /// Every built-in pattern.
    pub const ALL: [Builtin; 18] = [
        Builtin::RingAllGather,
        Builtin::RecursiveDoublingAllGather,
        Builtin::BruckAllGather,
        Builtin::DirectAllGather,
        Builtin::PairwiseAllToAll,
        Builtin::BinomialBroadcast,
        Builtin::RingAllReduce,
        Builtin::DirectAllReduce,
        Builtin::HalvingDoublingAllReduce,
        Builtin::RecursiveHalvingReduceScatter,
        Builtin::RingReduceScatter,
        Builtin::DirectReduceScatter,
        Builtin::BinomialReduce,
        Builtin::OneShotAllReduce,
        Builtin::OneShotAllGather,
        Builtin::OneShotReduceScatter,
        Builtin::OneShotAllToAll,
        Builtin::OneShotBroadcast,
    ];

    /// The schedule's name.
    pub fn schedule_name(self) -> &'static str {
        match self {
            Builtin::RingAllGather => "ring_all_gather",
            Builtin::RecursiveDoublingAllGather => "recursive_doubling_all_gather",
            Builtin::BruckAllGather => "bruck_all_gather",
            Builtin::DirectAllGather => "direct_all_gather",
            Builtin::PairwiseAllToAll => "pairwise_all_to_all",
            Builtin::BinomialBroadcast => "binomial_broadcast",
            Builtin::RingAllReduce => "ring_all_reduce",
            Builtin::DirectAllReduce => "direct_all_reduce",
            Builtin::HalvingDoublingAllReduce => "halving_doubling_all_reduce",
            Builtin::RecursiveHalvingReduceScatter => "recursive_halving_reduce_scatter",
            Builtin::RingReduceScatter => "ring_reduce_scatter",
            Builtin::DirectReduceScatter => "direct_reduce_scatter",
            Builtin::BinomialReduce => "binomial_reduce",
            Builtin::OneShotAllReduce => "one_shot_all_reduce",
            Builtin::OneShotAllGather => "one_shot_all_gather",
            Builtin::OneShotReduceScatter => "one_shot_reduce_scatter",
            Builtin::OneShotAllToAll => "one_shot_all_to_all",
            Builtin::OneShotBroadcast => "one_shot_broadcast",
        }
    }

    /// The collective it implements.
    pub fn collective(self) -> Coll {
        match self {
            Builtin::RingAllGather
            | Builtin::RecursiveDoublingAllGather
            | Builtin::BruckAllGather
            | Builtin::DirectAllGather
            | Builtin::OneShotAllGather => Coll::AllGather,
            Builtin::PairwiseAllToAll | Builtin::OneShotAllToAll => Coll::AllToAll,
            Builtin::BinomialBroadcast | Builtin::OneShotBroadcast => Coll::Broadcast,
            Builtin::RingAllReduce
            | Builtin::DirectAllReduce
            | Builtin::HalvingDoublingAllReduce
            | Builtin::OneShotAllReduce => Coll::AllReduce,
            Builtin::RecursiveHalvingReduceScatter
            | Builtin::RingReduceScatter
            | Builtin::DirectReduceScatter
            | Builtin::OneShotReduceScatter => Coll::ReduceScatter,
            Builtin::BinomialReduce => Coll::Reduce,
        }
    }

    /// Whether it runs on `world` ranks.
    pub fn supports(self, world: usize) -> bool {
        match self {
            Builtin::RecursiveDoublingAllGather | Builtin::RecursiveHalvingReduceScatter => world.is_power_of_two(),
            _ => world >= 1,
        }
    }

    /// How many units of the length variable `n` the collective's data of
    /// `bytes` (nccl-tests' size: the all-reduce buffer, the all-gather
    /// output, the reduce-scatter input, the all-to-all buffer, the
    /// broadcast or reduce buffer) holds.
    pub fn units_per_call(self, world: usize) -> usize {
        match self {
            Builtin::BinomialBroadcast
            | Builtin::BinomialReduce
            | Builtin::OneShotAllReduce
            | Builtin::OneShotBroadcast => 1,
            Builtin::HalvingDoublingAllReduce => 1 << (usize::BITS - 1 - world.max(1).leading_zeros()),
            _ => world,
        }
    }

    /// The rounds on `world` ranks.
    fn rounds(self, world: usize) -> Vec<Round> {
        let p = world;
        let shift = |d: usize, units, reduce| Round {
            peers: Peers::Shift(d % p),
            units,
            reduce,
        };
        let xor = |d, units, reduce| Round {
            peers: Peers::Xor(d),
            units,
            reduce,
        };
        if p < 2 {
            return Vec::new();
        }
        match self {
            Builtin::RingAllGather => (0..p - 1).map(|_| shift(1, 1, false)).collect(),
            Builtin::RecursiveDoublingAllGather => (0..log2_ceil(p)).map(|k| xor(1 << k, 1 << k, false)).collect(),
            Builtin::BruckAllGather => (0..log2_ceil(p))
                .map(|k| {
                    let d = 1 << k;
                    shift(p - d, d.min(p - d), false)
                })
                .collect(),
            Builtin::DirectAllGather | Builtin::PairwiseAllToAll => (1..p).map(|s| shift(s, 1, false)).collect(),
            Builtin::RingAllReduce => (0..2 * (p - 1)).map(|s| shift(1, 1, s < p - 1)).collect(),
            Builtin::RingReduceScatter => (0..p - 1).map(|_| shift(1, 1, true)).collect(),
            Builtin::DirectReduceScatter => (1..p).map(|s| shift(p - s, 1, true)).collect(),
            Builtin::DirectAllReduce => (1..p)
                .map(|s| shift(p - s, 1, true))
                .chain((1..p).map(|s| shift(s, 1, false)))
                .collect(),
            Builtin::RecursiveHalvingReduceScatter => (0..log2_ceil(p))
                .map(|k| {
                    let d = p >> (k + 1);
                    xor(d, d, true)
                })
                .collect(),
            Builtin::HalvingDoublingAllReduce => halving_doubling(p),
            // The board's pattern is not made of rounds (module `one_shot`).
            Builtin::OneShotAllReduce
            | Builtin::OneShotAllGather
            | Builtin::OneShotReduceScatter
            | Builtin::OneShotAllToAll
            | Builtin::OneShotBroadcast => Vec::new(),
            Builtin::BinomialBroadcast => (0..log2_ceil(p))
                .map(|k| {
                    let d = 1 << k;
                    Round {
                        peers: Peers::List((0..d.min(p - d)).map(|v| (v, v + d)).collect()),
                        units: 1,
                        reduce: false,
                    }
                })
                .collect(),
            Builtin::BinomialReduce => (0..log2_ceil(p))
                .map(|k| {
                    let d = 1 << k;
                    Round {
                        peers: Peers::List((0..p).filter(|v| v % (2 * d) == d).map(|v| (v, v - d)).collect()),
                        units: 1,
                        reduce: true,
                    }
                })
                .collect(),
        }
    }

    /// Whether it runs on the shared board (module `one_shot`).
    pub fn is_one_shot(self) -> bool {
        matches!(
            self,
            Builtin::OneShotAllReduce
                | Builtin::OneShotAllGather
                | Builtin::OneShotReduceScatter
                | Builtin::OneShotAllToAll
                | Builtin::OneShotBroadcast
        )
    }

    /// Predicts it on `world` ranks of `machine` for a call of `bytes`
    /// (nccl-tests' size, see [`Builtin::units_per_call`]).
    pub fn predict(self, machine: &Machine, world: usize, bytes: usize) -> Result<Prediction> {
        if !self.supports(world) {
            return Err(CostError::Unsupported {
                what: self.schedule_name().to_owned(),
                message: format!("it needs a power-of-two world, not {world}"),
            });
        }
        if self.is_one_shot() {
            return Ok(one_shot::predict(machine, self.collective(), world, bytes));
        }
        let unit = bytes as f64 / self.units_per_call(world) as f64;
        let mut p = Prediction { us: 0.0, rounds: 0 };
        let mut last: Option<(&Round, f64)> = None;
        let rounds = self.rounds(world);
        for r in &rounds {
            let us = match last {
                Some((prev, us)) if prev == r => us,
                _ => round_time(machine, world, r, unit),
            };
            last = Some((r, us));
            p.us += us;
            p.rounds += 1;
        }
        Ok(p)
    }
}

/// Halving-doubling: ranks past the largest power of two fold into their
/// neighbours first and get the result back last.
fn halving_doubling(p: usize) -> Vec<Round> {
    let q = 1 << (usize::BITS - 1 - p.leading_zeros());
    let extra = p - q;
    let real = |v: usize| if v < extra { 2 * v + 1 } else { v + extra };
    let virt = |d: usize| -> Peers {
        if extra == 0 {
            Peers::Xor(d)
        } else {
            Peers::List((0..q).map(|v| (real(v), real(v ^ d))).collect())
        }
    };
    let mut rounds = Vec::new();
    if extra > 0 {
        rounds.push(Round {
            peers: Peers::List((0..extra).map(|i| (2 * i, 2 * i + 1)).collect()),
            units: q,
            reduce: true,
        });
    }
    for k in 0..q.trailing_zeros() {
        let d = q >> (k + 1);
        rounds.push(Round {
            peers: virt(d),
            units: d,
            reduce: true,
        });
    }
    for k in 0..q.trailing_zeros() {
        let d = 1 << k;
        rounds.push(Round {
            peers: virt(d),
            units: d,
            reduce: false,
        });
    }
    if extra > 0 {
        rounds.push(Round {
            peers: Peers::List((0..extra).map(|i| (2 * i + 1, 2 * i)).collect()),
            units: q,
            reduce: false,
        });
    }
    rounds
}

/// The ranks of the first block of the machine's symmetry: the group below
/// the outermost level (one rank when there is one level), when it divides
/// the world.
fn block(m: &Machine, world: usize) -> usize {
    let b = if m.levels.len() < 2 {
        1
    } else {
        m.group(m.levels.len() - 2, world)
    };
    if world.is_multiple_of(b) {
        b
    } else {
        world
    }
}

/// One round's time: symmetric rounds from the first block's messages,
/// others from all of them.
fn round_time(m: &Machine, world: usize, r: &Round, unit: f64) -> f64 {
    let msg = |from, to| Msg {
        from,
        to,
        bytes: unit * r.units as f64,
        reduce: r.reduce,
    };
    let b = block(m, world);
    let rings = m.levels.iter().any(|l| l.link == Link::Ring);
    match &r.peers {
        Peers::Shift(d) => {
            let sends: Vec<Msg> = (0..b).map(|x| msg(x, (x + d) % world)).collect();
            let recvs: Vec<Msg> = (0..b).map(|x| msg((x + world - d) % world, x)).collect();
            round_us(m, world, b, &sends, &recvs)
        }
        Peers::Xor(d) => {
            // Xor rounds are symmetric under xor with a multiple of a
            // power-of-two block, which rings do not share.
            let b = if b.is_power_of_two() && !rings { b } else { world };
            let sends: Vec<Msg> = (0..b).map(|x| msg(x, x ^ d)).collect();
            let recvs: Vec<Msg> = (0..b).map(|x| msg(x ^ d, x)).collect();
            round_us(m, world, b, &sends, &recvs)
        }
        Peers::List(pairs) => {
            let all: Vec<Msg> = pairs.iter().map(|&(a, c)| msg(a, c)).collect();
            round_us(m, world, world, &all, &all)
        }
    }
}

impl Builtin {
    /// The built-in that runs `algorithm` (hcomm's name, as in
    /// `HCOMM_ALGO` and hcomm-bench's rows) for collective `op`, among the
    /// message algorithms whose crossovers the selection policy takes from
    /// the model; `None` for the others (`one_shot`, which the policy
    /// takes first where the board applies, and `library`).
    /// hcomm's direct all-gather and all-to-all post every message at once;
    /// their pattern is the direct schedule's, one peer per round.
    pub fn from_names(op: &str, algorithm: &str) -> Option<Builtin> {
        Some(match (op, algorithm) {
            ("all_reduce", "ring") => Builtin::RingAllReduce,
            ("all_reduce", "direct") => Builtin::DirectAllReduce,
            ("all_reduce", "halving_doubling") => Builtin::HalvingDoublingAllReduce,
            ("all_gather", "ring") => Builtin::RingAllGather,
            ("all_gather", "recursive_doubling") => Builtin::RecursiveDoublingAllGather,
            ("all_gather", "bruck") => Builtin::BruckAllGather,
            ("all_gather", "direct") => Builtin::DirectAllGather,
            ("reduce_scatter", "ring") => Builtin::RingReduceScatter,
            ("reduce_scatter", "recursive_halving") => Builtin::RecursiveHalvingReduceScatter,
            ("reduce_scatter", "direct") => Builtin::DirectReduceScatter,
            ("all_to_all", "pairwise" | "direct") => Builtin::PairwiseAllToAll,
            ("broadcast", "binomial_tree") => Builtin::BinomialBroadcast,
            ("reduce", "binomial_tree") => Builtin::BinomialReduce,
            _ => return None,
        })
    }

    /// The built-in that ran a measured row of collective `op` by
    /// `algorithm`: [`Builtin::from_names`]'s, and the board's one-shot
    /// patterns; `None` for `library` and ops the model has no pattern for.
    pub fn from_row(op: &str, algorithm: &str) -> Option<Builtin> {
        Builtin::from_names(op, algorithm).or(match (op, algorithm) {
            ("all_reduce", "one_shot") => Some(Builtin::OneShotAllReduce),
            ("all_gather", "one_shot") => Some(Builtin::OneShotAllGather),
            ("reduce_scatter", "one_shot") => Some(Builtin::OneShotReduceScatter),
            ("all_to_all", "one_shot") => Some(Builtin::OneShotAllToAll),
            ("broadcast", "one_shot") => Some(Builtin::OneShotBroadcast),
            _ => None,
        })
    }
}
