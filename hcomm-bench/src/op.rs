//! The operations `hcomm-bench` times, what their size means and their
//! bus-bandwidth factors (both as in nccl-tests).

use hcomm::{Collective, ReduceOp};

/// What a benchmarked operation computes; decides the buffers, the size
/// semantics, the bus factor and the correctness check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Out-of-place all-reduce; size = the per-rank buffer.
    AllReduce(ReduceOp),
    /// All-reduce in place (the schedules); size = the per-rank buffer.
    AllReduceInPlace(ReduceOp),
    /// Size = the total output per rank (each rank contributes size / n).
    AllGather,
    /// Size = the total input per rank (each rank gets size / n).
    ReduceScatter(ReduceOp),
    /// Size = the total sent per rank (size / n to each peer).
    AllToAll,
    /// Size = the buffer, from rank 0.
    Broadcast,
    /// Ring of send to `rank + 1` and receive from `rank - 1`; size = bytes
    /// sent per rank.
    SendRecv,
    /// Reduce to rank 0; size = the per-rank buffer.
    Reduce(ReduceOp),
}

impl Shape {
    /// The nccl-tests factor from algorithm bandwidth to bus bandwidth on
    /// `ranks` ranks: the fraction of the size each rank must move over the
    /// slowest link of an optimal algorithm.
    pub fn bus_factor(self, ranks: usize) -> f64 {
        let n = ranks as f64;
        match self {
            Shape::AllReduce(_) | Shape::AllReduceInPlace(_) => 2.0 * (n - 1.0) / n,
            Shape::AllGather | Shape::ReduceScatter(_) | Shape::AllToAll => (n - 1.0) / n,
            Shape::Broadcast | Shape::SendRecv | Shape::Reduce(_) => 1.0,
        }
    }

    /// Whether the size is split into one block per rank (so it must be a
    /// multiple of `ranks` elements).
    pub fn splits(self) -> bool {
        matches!(
            self,
            Shape::AllReduceInPlace(_) | Shape::AllGather | Shape::ReduceScatter(_) | Shape::AllToAll
        )
    }
}

/// Whether an operation's output buffer is its input buffer: nccl-tests
/// times every collective both ways, in two groups of columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Separate input and output buffers.
    OutOfPlace,
    /// The output overwrites the input.
    InPlace,
}

/// A built-in or example schedule that `--schedule NAME` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// `hcomm::schedules::ring_all_gather`.
    RingAllGather,
    /// `hcomm::schedules::recursive_doubling_all_gather` (power-of-two worlds).
    RecursiveDoublingAllGather,
    /// `hcomm::schedules::bruck_all_gather`.
    BruckAllGather,
    /// `hcomm::schedules::pairwise_all_to_all`.
    PairwiseAllToAll,
    /// `hcomm::schedules::binomial_broadcast` from rank 0.
    BinomialBroadcast,
    /// `hcomm::schedules::ring_all_reduce` with this operator (named `ring_all_reduce_{sum,prod,max,min}` on the command line).
    RingAllReduce(ReduceOp),
    /// The example `two_level_all_gather`, in groups of 2 ranks (1 on odd worlds).
    TwoLevelAllGather,
    /// The example `sparse_all_gather` with every rank active.
    SparseAllGather,
    /// `hcomm::schedules::direct_all_reduce` (sum; sizes a multiple of the world).
    DirectAllReduce,
    /// `hcomm::schedules::halving_doubling_all_reduce` (sum; power-of-two worlds).
    HalvingDoublingAllReduce,
    /// `hcomm::schedules::recursive_doubling_all_reduce` (sum).
    RecursiveDoublingAllReduce,
    /// `hcomm::schedules::direct_reduce_scatter` (sum).
    DirectReduceScatter,
    /// `hcomm::schedules::ring_reduce_scatter` (sum).
    RingReduceScatter,
    /// `hcomm::schedules::recursive_halving_reduce_scatter` (sum; power-of-two worlds).
    RecursiveHalvingReduceScatter,
    /// `hcomm::schedules::binomial_reduce` (sum) to rank 0.
    BinomialReduce,
    /// `hcomm::schedules::one_shot_all_reduce` (sum).
    OneShotAllReduce,
    /// `hcomm::schedules::one_shot_all_gather`.
    OneShotAllGather,
    /// `hcomm::schedules::one_shot_reduce_scatter` (sum).
    OneShotReduceScatter,
    /// `hcomm::schedules::one_shot_all_to_all`.
    OneShotAllToAll,
    /// `hcomm::schedules::one_shot_broadcast` from rank 0.
    OneShotBroadcast,
    /// `hcomm::schedules::scatter_all_gather_broadcast` from rank 0 (sizes a
    /// multiple of the world).
    ScatterAllGatherBroadcast,
}

impl Schedule {
    /// Every schedule, in the order `--help` lists them.
    pub const ALL: [Schedule; 24] = [
        Schedule::RingAllGather,
        Schedule::RecursiveDoublingAllGather,
        Schedule::BruckAllGather,
        Schedule::PairwiseAllToAll,
        Schedule::BinomialBroadcast,
        Schedule::RingAllReduce(ReduceOp::Sum),
        Schedule::RingAllReduce(ReduceOp::Prod),
        Schedule::RingAllReduce(ReduceOp::Max),
        Schedule::RingAllReduce(ReduceOp::Min),
        Schedule::TwoLevelAllGather,
        Schedule::SparseAllGather,
        Schedule::DirectAllReduce,
        Schedule::HalvingDoublingAllReduce,
        Schedule::RecursiveDoublingAllReduce,
        Schedule::DirectReduceScatter,
        Schedule::RingReduceScatter,
        Schedule::RecursiveHalvingReduceScatter,
        Schedule::BinomialReduce,
        Schedule::ScatterAllGatherBroadcast,
        Schedule::OneShotAllReduce,
        Schedule::OneShotAllGather,
        Schedule::OneShotReduceScatter,
        Schedule::OneShotAllToAll,
        Schedule::OneShotBroadcast,
    ];

    /// The schedule's function name.
    pub fn name(self) -> &'static str {
        match self {
            Schedule::RingAllGather => "ring_all_gather",
            Schedule::RecursiveDoublingAllGather => "recursive_doubling_all_gather",
            Schedule::BruckAllGather => "bruck_all_gather",
            Schedule::PairwiseAllToAll => "pairwise_all_to_all",
            Schedule::BinomialBroadcast => "binomial_broadcast",
            Schedule::RingAllReduce(ReduceOp::Sum) => "ring_all_reduce_sum",
            Schedule::RingAllReduce(ReduceOp::Prod) => "ring_all_reduce_prod",
            Schedule::RingAllReduce(ReduceOp::Max) => "ring_all_reduce_max",
            Schedule::RingAllReduce(ReduceOp::Min) => "ring_all_reduce_min",
            // Not in `ALL`: the schedule language has no mean, so the ring
            // refuses it (a precondition error) and nothing lists it.
            Schedule::RingAllReduce(ReduceOp::Avg) => "ring_all_reduce_avg",
            Schedule::TwoLevelAllGather => "two_level_all_gather",
            Schedule::SparseAllGather => "sparse_all_gather",
            Schedule::DirectAllReduce => "direct_all_reduce",
            Schedule::HalvingDoublingAllReduce => "halving_doubling_all_reduce",
            Schedule::RecursiveDoublingAllReduce => "recursive_doubling_all_reduce",
            Schedule::DirectReduceScatter => "direct_reduce_scatter",
            Schedule::RingReduceScatter => "ring_reduce_scatter",
            Schedule::RecursiveHalvingReduceScatter => "recursive_halving_reduce_scatter",
            Schedule::BinomialReduce => "binomial_reduce",
            Schedule::ScatterAllGatherBroadcast => "scatter_all_gather_broadcast",
            Schedule::OneShotAllReduce => "one_shot_all_reduce",
            Schedule::OneShotAllGather => "one_shot_all_gather",
            Schedule::OneShotReduceScatter => "one_shot_reduce_scatter",
            Schedule::OneShotAllToAll => "one_shot_all_to_all",
            Schedule::OneShotBroadcast => "one_shot_broadcast",
        }
    }

    /// Looks a schedule up by its function name.
    pub fn parse(name: &str) -> Result<Schedule, String> {
        Schedule::ALL
            .into_iter()
            .find(|s| s.name() == name.trim())
            .ok_or_else(|| {
                let names: Vec<_> = Schedule::ALL.iter().map(|s| s.name()).collect();
                format!("unknown schedule `{name}`; expected one of {}", names.join(", "))
            })
    }

    /// What the schedule computes.
    pub fn shape(self) -> Shape {
        match self {
            Schedule::RingAllGather
            | Schedule::RecursiveDoublingAllGather
            | Schedule::BruckAllGather
            | Schedule::TwoLevelAllGather
            | Schedule::SparseAllGather
            | Schedule::OneShotAllGather => Shape::AllGather,
            Schedule::PairwiseAllToAll | Schedule::OneShotAllToAll => Shape::AllToAll,
            Schedule::BinomialBroadcast | Schedule::ScatterAllGatherBroadcast | Schedule::OneShotBroadcast => {
                Shape::Broadcast
            }
            Schedule::RingAllReduce(op) => Shape::AllReduceInPlace(op),
            Schedule::HalvingDoublingAllReduce | Schedule::RecursiveDoublingAllReduce => {
                Shape::AllReduceInPlace(ReduceOp::Sum)
            }
            Schedule::DirectAllReduce | Schedule::OneShotAllReduce => Shape::AllReduce(ReduceOp::Sum),
            Schedule::DirectReduceScatter
            | Schedule::RingReduceScatter
            | Schedule::RecursiveHalvingReduceScatter
            | Schedule::OneShotReduceScatter => Shape::ReduceScatter(ReduceOp::Sum),
            Schedule::BinomialReduce => Shape::Reduce(ReduceOp::Sum),
        }
    }

    /// Whether the schedule splits its buffer into one chunk per rank, so
    /// sizes round to a multiple of the world (besides the shapes that
    /// always split).
    pub fn splits(self) -> bool {
        self.shape().splits() || matches!(self, Schedule::DirectAllReduce | Schedule::ScatterAllGatherBroadcast)
    }
}

/// One operation `hcomm-bench` can time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// A collective of [`hcomm::Comm`] (with `--algo`, a forced algorithm).
    Collective(Collective, Shape),
    /// `Comm::send_recv` around the ring.
    SendRecv,
    /// A schedule called directly on the communicator.
    Schedule(Schedule),
}

impl Op {
    /// The collectives `--op` accepts, besides `sendrecv`.
    pub const COLLECTIVES: [Collective; 5] = [
        Collective::AllReduce,
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::AllToAll,
        Collective::Broadcast,
    ];

    /// Parses a collective's name (`all_reduce`, ..., `sendrecv`; also as
    /// nccl-tests names its programs, `all_reduce_perf`), reducing with `op`
    /// where it reduces.
    pub fn parse(name: &str, op: ReduceOp) -> Result<Op, String> {
        let name = name.trim();
        let name = name.strip_suffix("_perf").unwrap_or(name);
        if name == "sendrecv" || name == "send_recv" {
            return Ok(Op::SendRecv);
        }
        let shape = |c| match c {
            Collective::AllReduce => Some(Shape::AllReduce(op)),
            Collective::AllGather => Some(Shape::AllGather),
            Collective::ReduceScatter => Some(Shape::ReduceScatter(op)),
            Collective::AllToAll => Some(Shape::AllToAll),
            Collective::Broadcast => Some(Shape::Broadcast),
            _ => None,
        };
        Collective::parse(name)
            .and_then(|c| shape(c).map(|s| Op::Collective(c, s)))
            .ok_or_else(|| {
                let names: Vec<_> = Op::COLLECTIVES.iter().map(|c| c.name()).collect();
                format!(
                    "unknown collective `{name}`; expected one of {}, sendrecv (or --schedule NAME)",
                    names.join(", ")
                )
            })
    }

    /// The name rows and JSON carry.
    pub fn name(self) -> &'static str {
        match self {
            Op::Collective(c, _) => c.name(),
            Op::SendRecv => "sendrecv",
            Op::Schedule(s) => s.name(),
        }
    }

    /// Whether sizes round to a multiple of the world.
    pub fn splits(self) -> bool {
        match self {
            Op::Schedule(s) => s.splits(),
            _ => self.shape().splits(),
        }
    }

    /// What the operation computes.
    pub fn shape(self) -> Shape {
        match self {
            Op::Collective(_, shape) => shape,
            Op::SendRecv => Shape::SendRecv,
            Op::Schedule(s) => s.shape(),
        }
    }

    /// The forms hcomm has of the operation, each with what it computes:
    /// all-reduce both out of place and in place, broadcast and the
    /// in-place schedules in place only, the others out of place only.
    pub fn placements(self) -> Vec<(Placement, Shape)> {
        match self.shape() {
            Shape::AllReduce(op) if matches!(self, Op::Collective(..)) => vec![
                (Placement::OutOfPlace, Shape::AllReduce(op)),
                (Placement::InPlace, Shape::AllReduceInPlace(op)),
            ],
            shape @ (Shape::AllReduceInPlace(_) | Shape::Broadcast) => vec![(Placement::InPlace, shape)],
            shape => vec![(Placement::OutOfPlace, shape)],
        }
    }

    /// The reduction operator, for the operations that reduce.
    pub fn reduce_op(self) -> Option<ReduceOp> {
        match self.shape() {
            Shape::AllReduce(op) | Shape::AllReduceInPlace(op) | Shape::ReduceScatter(op) | Shape::Reduce(op) => {
                Some(op)
            }
            Shape::AllGather | Shape::AllToAll | Shape::Broadcast | Shape::SendRecv => None,
        }
    }
}

/// Parses a reduction operator as nccl-tests' `-o` takes it (`sum`, `prod`,
/// `max`, `min`).
pub fn parse_reduce_op(name: &str) -> Result<ReduceOp, String> {
    let name = name.trim();
    ReduceOp::ALL.into_iter().find(|o| o.name() == name).ok_or_else(|| {
        let names: Vec<_> = ReduceOp::ALL.iter().map(|o| o.name()).collect();
        format!(
            "unknown reduction operator `{name}`; expected one of {}",
            names.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_factors_are_those_of_nccl_tests() {
        let sum = ReduceOp::Sum;
        assert!((Shape::AllReduce(sum).bus_factor(4) - 1.5).abs() < 1e-12);
        assert!((Shape::AllReduce(sum).bus_factor(2) - 1.0).abs() < 1e-12);
        assert!((Shape::AllReduceInPlace(sum).bus_factor(8) - 1.75).abs() < 1e-12);
        for s in [Shape::AllGather, Shape::ReduceScatter(sum), Shape::AllToAll] {
            assert!((s.bus_factor(4) - 0.75).abs() < 1e-12);
            assert!((s.bus_factor(2) - 0.5).abs() < 1e-12);
        }
        assert!((Shape::Broadcast.bus_factor(4) - 1.0).abs() < 1e-12);
        assert!((Shape::SendRecv.bus_factor(4) - 1.0).abs() < 1e-12);
        assert!(Shape::AllReduce(sum).bus_factor(1).abs() < 1e-12);
    }

    #[test]
    fn ops_and_schedules_parse_by_name() {
        assert_eq!(
            Op::parse("all_reduce", ReduceOp::Sum),
            Ok(Op::Collective(Collective::AllReduce, Shape::AllReduce(ReduceOp::Sum)))
        );
        assert_eq!(
            Op::parse("reduce_scatter_perf", ReduceOp::Max),
            Ok(Op::Collective(
                Collective::ReduceScatter,
                Shape::ReduceScatter(ReduceOp::Max)
            ))
        );
        assert_eq!(Op::parse("sendrecv", ReduceOp::Sum), Ok(Op::SendRecv));
        assert!(Op::parse("gather", ReduceOp::Sum)
            .unwrap_err()
            .contains("unknown collective `gather`"));
        assert_eq!(parse_reduce_op("min"), Ok(ReduceOp::Min));
        assert!(parse_reduce_op("mean")
            .unwrap_err()
            .contains("expected one of sum, prod, max, min"));
        for s in Schedule::ALL {
            assert_eq!(Schedule::parse(s.name()), Ok(s));
        }
        assert!(Schedule::parse("ring").unwrap_err().contains("ring_all_gather"));
    }

    #[test]
    fn all_reduce_is_timed_both_ways_and_the_others_in_their_one_form() {
        let max = ReduceOp::Max;
        let all_reduce = Op::parse("all_reduce", max).unwrap();
        assert_eq!(
            all_reduce.placements(),
            [
                (Placement::OutOfPlace, Shape::AllReduce(max)),
                (Placement::InPlace, Shape::AllReduceInPlace(max))
            ]
        );
        let broadcast = Op::parse("broadcast", max).unwrap();
        assert_eq!(broadcast.placements(), [(Placement::InPlace, Shape::Broadcast)]);
        assert_eq!(broadcast.reduce_op(), None);
        let gather = Op::parse("all_gather", max).unwrap();
        assert_eq!(gather.placements(), [(Placement::OutOfPlace, Shape::AllGather)]);
        let ring = Op::Schedule(Schedule::RingAllReduce(ReduceOp::Min));
        assert_eq!(
            ring.placements(),
            [(Placement::InPlace, Shape::AllReduceInPlace(ReduceOp::Min))]
        );
        assert_eq!(ring.reduce_op(), Some(ReduceOp::Min));
        let direct = Op::Schedule(Schedule::DirectAllReduce);
        assert_eq!(
            direct.placements(),
            [(Placement::OutOfPlace, Shape::AllReduce(ReduceOp::Sum))]
        );
    }
}
