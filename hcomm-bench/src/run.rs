//! Running a sweep: every rank loops over the sizes; per size, warm-up
//! runs, then timed iterations that each start at a barrier; rank 0 turns
//! the ranks' times into a [`Row`] as soon as a size is done.

use std::sync::Mutex;
use std::time::Instant;

use hcomm::{schedules, Algorithm, BackendKind, Comm, CommOptions, DataType, ReduceOp};
use hcomm_examples::all_gather::{sparse_all_gather, two_level_all_gather};

use crate::data::{BenchElem, Buffers};
use crate::op::{Op, Placement, Schedule, Shape};
use crate::report::{shape_name, Row, Timing};

/// One sweep: an operation over sizes, on one world.
#[derive(Clone, Debug)]
pub struct Config {
    /// What to time.
    pub op: Op,
    /// Sizes in bytes, as the operation's shape defines size.
    pub sizes: Vec<usize>,
    /// Number of ranks.
    pub ranks: usize,
    /// Element type.
    pub dtype: DataType,
    /// A forced algorithm (collectives only).
    pub algo: Option<Algorithm>,
    /// Where the ranks run.
    pub backend: BackendKind,
    /// Timed iterations per size (`None`: about 256 MiB of traffic, 20 to 1000).
    pub iters: Option<usize>,
    /// Warm-up iterations per size (`None`: a tenth of the timed ones, at least 3).
    pub warmup: Option<usize>,
    /// Whether every rank's result is compared with the serial reference.
    pub check: bool,
}

/// The adaptive iteration count of the Open MPI baseline: about 256 MiB of
/// "size" per measurement, between 20 and 1000 iterations.
pub fn default_iters(bytes: usize) -> usize {
    ((256 << 20) / bytes.max(1)).clamp(20, 1000)
}

impl Config {
    /// The element count of each size: bytes over the element size, rounded
    /// down to a multiple of the world size where the operation splits its
    /// buffer into blocks, and at least one element (one block).
    pub fn counts(&self) -> Vec<usize> {
        let unit = if self.op.splits() { self.ranks } else { 1 };
        self.sizes
            .iter()
            .map(|&b| (b / self.dtype.size() / unit).max(1) * unit)
            .collect()
    }

    fn iters_for(&self, bytes: usize) -> (usize, usize) {
        let iters = self.iters.unwrap_or_else(|| default_iters(bytes)).max(1);
        (iters, self.warmup.unwrap_or((iters / 10).max(3)))
    }
}

/// One rank's part of one form of one size.
struct RankResult {
    times: Vec<f64>,
    first_error: Option<usize>,
    /// Whether the result was compared with the reference (`-c 1`).
    checked: bool,
    algorithm: String,
}

/// This process's rank in a job of one process per rank (`HCOMM_RANK` from
/// `hcomm-run`, else `RANK` from torchrun), when it is one.
pub fn job_rank() -> Option<usize> {
    ["HCOMM_RANK", "RANK"]
        .into_iter()
        .find_map(|name| std::env::var(name).ok())
        .and_then(|v| v.trim().parse().ok())
}

/// Runs the sweep; `on_row` sees each row as soon as its size is done
/// (called from rank 0's thread). Returns the rows in size order.
pub fn sweep(config: &Config, on_row: &(dyn Fn(&Row) + Sync)) -> hcomm::Result<Vec<Row>> {
    match config.dtype {
        DataType::F32 => sweep_typed::<f32>(config, on_row),
        DataType::F64 => sweep_typed::<f64>(config, on_row),
        DataType::F16 => sweep_typed::<hcomm::f16>(config, on_row),
        DataType::Bf16 => sweep_typed::<hcomm::bf16>(config, on_row),
        DataType::I8 => sweep_typed::<i8>(config, on_row),
        DataType::U8 => sweep_typed::<u8>(config, on_row),
        DataType::I32 => sweep_typed::<i32>(config, on_row),
        DataType::U32 => sweep_typed::<u32>(config, on_row),
        DataType::I64 => sweep_typed::<i64>(config, on_row),
        DataType::U64 => sweep_typed::<u64>(config, on_row),
    }
}

fn sweep_typed<T: BenchElem>(config: &Config, on_row: &(dyn Fn(&Row) + Sync)) -> hcomm::Result<Vec<Row>> {
    if job_rank().is_some() {
        return sweep_process::<T>(config, &hcomm::init_from_env()?, on_row);
    }
    let counts = config.counts();
    let world = config.ranks;
    let forms = config.op.placements();
    let slots = counts.len() * forms.len();
    let results: Mutex<Vec<Vec<Option<RankResult>>>> =
        Mutex::new((0..slots).map(|_| (0..world).map(|_| None).collect()).collect());
    let rows = Mutex::new(Vec::new());
    let options = CommOptions::from_env()?;
    hcomm::run_on(config.backend, world, &options, |comm| {
        let rank = comm.rank();
        if let (Op::Collective(c, _), Some(a)) = (config.op, config.algo) {
            comm.set_algorithm(c, Some(a))?;
        }
        for (k, &count) in counts.iter().enumerate() {
            let (iters, warmup) = config.iters_for(count * size_of::<T>());
            for (f, &(_, shape)) in forms.iter().enumerate() {
                let result = time_one::<T>(config, shape, comm, count, iters, warmup)?;
                results.lock().unwrap_or_else(std::sync::PoisonError::into_inner)[k * forms.len() + f][rank] =
                    Some(result);
            }
            comm.barrier()?;
            if rank == 0 {
                let mut timings = Vec::with_capacity(forms.len());
                for (f, &(placement, _)) in forms.iter().enumerate() {
                    let per_rank: Vec<RankResult> = results.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
                        [k * forms.len() + f]
                        .iter_mut()
                        .filter_map(Option::take)
                        .collect();
                    timings.push((
                        placement,
                        timing(config, count * size_of::<T>(), &summarize(&per_rank), "host"),
                    ));
                }
                let row = row(config, count * size_of::<T>(), count, timings);
                on_row(&row);
                rows.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(row);
            }
        }
        Ok(())
    })?;
    Ok(rows.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner))
}

/// The sweep of one rank of a job of processes (started by `hcomm-run`,
/// whose world size replaces `config.ranks`): the ranks' times and checks
/// meet on every rank through an all-gather; rank 0 reports the rows.
fn sweep_process<T: BenchElem>(
    config: &Config,
    comm: &Comm,
    on_row: &(dyn Fn(&Row) + Sync),
) -> hcomm::Result<Vec<Row>> {
    let config = Config {
        ranks: comm.world(),
        ..config.clone()
    };
    if let (Op::Collective(c, _), Some(a)) = (config.op, config.algo) {
        comm.set_algorithm(c, Some(a))?;
    }
    let mut rows = Vec::new();
    for count in config.counts() {
        let (iters, warmup) = config.iters_for(count * size_of::<T>());
        let mut timings = Vec::new();
        for (placement, shape) in config.op.placements() {
            let mine = time_one::<T>(&config, shape, comm, count, iters, warmup)?;
            // Each rank's times, then its first wrong element (or -1).
            let mut sent = mine.times.clone();
            sent.push(mine.first_error.map_or(-1.0, |i| i as f64));
            let mut all = vec![0.0f64; sent.len() * comm.world()];
            comm.all_gather(&sent, &mut all)?;
            let per_rank: Vec<RankResult> = all
                .chunks(sent.len())
                .map(|r| RankResult {
                    times: r[..iters].to_vec(),
                    first_error: (r[iters] >= 0.0).then_some(r[iters] as usize),
                    checked: mine.checked,
                    algorithm: mine.algorithm.clone(),
                })
                .collect();
            timings.push((
                placement,
                timing(&config, count * size_of::<T>(), &summarize(&per_rank), "host-processes"),
            ));
        }
        if comm.rank() == 0 {
            let row = row(&config, count * size_of::<T>(), count, timings);
            on_row(&row);
            rows.push(row);
        }
    }
    Ok(rows)
}

/// What a size's row is made of, over every rank.
pub(crate) struct Summary {
    /// Median over iterations of the slowest rank's time, in seconds.
    pub(crate) median_s: f64,
    /// The fastest iteration's slowest rank, in seconds.
    pub(crate) min_s: f64,
    /// Timed iterations.
    pub(crate) iters: usize,
    /// The algorithm rank 0 reports.
    pub(crate) algorithm: String,
    /// `"ok"`, or which ranks got a wrong result and where.
    pub(crate) check: String,
}

fn summarize(ranks: &[RankResult]) -> Summary {
    let iters = ranks.iter().map(|r| r.times.len()).min().unwrap_or(0);
    let mut slowest: Vec<f64> = (0..iters)
        .map(|i| ranks.iter().map(|r| r.times[i]).fold(0.0, f64::max))
        .collect();
    slowest.sort_by(f64::total_cmp);
    let median_s = median_sorted(&slowest);
    let bad: Vec<String> = ranks
        .iter()
        .enumerate()
        .filter_map(|(rank, r)| r.first_error.map(|i| format!("rank {rank} element {i}")))
        .collect();
    Summary {
        median_s,
        min_s: slowest.first().copied().unwrap_or(0.0),
        iters,
        algorithm: ranks.first().map_or_else(String::new, |r| r.algorithm.clone()),
        check: if !ranks.iter().all(|r| r.checked) {
            "unchecked".into()
        } else if bad.is_empty() {
            "ok".into()
        } else {
            format!("wrong: {}", bad.join(", "))
        },
    }
}

/// The median of sorted values (the mean of the middle two for an even
/// count, 0 for none).
pub fn median_sorted(v: &[f64]) -> f64 {
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => 0.5 * (v[n / 2 - 1] + v[n / 2]),
    }
}

fn time_one<T: BenchElem>(
    config: &Config,
    shape: Shape,
    comm: &Comm,
    count: usize,
    iters: usize,
    warmup: usize,
) -> hcomm::Result<RankResult> {
    let op = config.op;
    let mut bufs = Buffers::<T>::new(shape, comm.rank(), comm.world(), count);
    for _ in 0..warmup {
        bufs.reset(shape);
        run_once(op, shape, comm, &mut bufs)?;
    }
    let mut times = Vec::with_capacity(iters);
    for _ in 0..iters {
        bufs.reset(shape);
        comm.barrier()?;
        let t0 = Instant::now();
        run_once(op, shape, comm, &mut bufs)?;
        times.push(t0.elapsed().as_secs_f64());
    }
    let algorithm = match op {
        Op::Collective(c, _) => ran(&comm.last_algorithms(c)),
        Op::SendRecv => "p2p".into(),
        Op::Schedule(s) => s.name().into(),
    };
    Ok(RankResult {
        times,
        first_error: if config.check {
            bufs.first_error(shape, comm.rank(), comm.world())
        } else {
            None
        },
        checked: config.check,
        algorithm,
    })
}

/// The algorithms a collective ran, joined by `+` (`ring+recursive_doubling`
/// for a ring all-reduce whose tail went through recursive doubling).
fn ran(algorithms: &[Algorithm]) -> String {
    if algorithms.is_empty() {
        return "none".into();
    }
    algorithms.iter().map(|a| a.name()).collect::<Vec<_>>().join("+")
}

/// Runs `op` once in the form that computes `shape` (for a collective, the
/// in-place shape of all-reduce selects `all_reduce_in_place`).
fn run_once<T: BenchElem>(op: Op, shape: Shape, comm: &Comm, b: &mut Buffers<T>) -> hcomm::Result<()> {
    let (send, recv) = (&b.send, &mut b.recv);
    let (rank, world) = (comm.rank(), comm.world());
    match (op, shape) {
        (Op::Collective(..), Shape::AllReduce(op)) => comm.all_reduce(send, recv, op),
        (Op::Collective(..), Shape::AllReduceInPlace(op)) => comm.all_reduce_in_place(recv, op),
        (Op::Collective(..), Shape::AllGather) => comm.all_gather(send, recv),
        (Op::Collective(..), Shape::ReduceScatter(op)) => comm.reduce_scatter(send, recv, op),
        (Op::Collective(..), Shape::AllToAll) => comm.all_to_all(send, recv),
        (Op::Collective(..), Shape::Broadcast) => comm.broadcast(recv, 0),
        (Op::Collective(..), Shape::Reduce(op)) => comm.reduce(send, recv, op, 0),
        (Op::Collective(..), Shape::SendRecv) | (Op::SendRecv, _) => {
            comm.send_recv(send, (rank + 1) % world, recv, (rank + world - 1) % world)
        }
        (Op::Schedule(s), _) => match s {
            Schedule::RingAllGather => schedules::ring_all_gather(comm, send, recv),
            Schedule::RecursiveDoublingAllGather => schedules::recursive_doubling_all_gather(comm, send, recv),
            Schedule::BruckAllGather => schedules::bruck_all_gather(comm, send, recv),
            Schedule::PairwiseAllToAll => schedules::pairwise_all_to_all(comm, send, recv),
            Schedule::BinomialBroadcast => schedules::binomial_broadcast(comm, recv, 0),
            Schedule::RingAllReduce(op) => schedules::ring_all_reduce(comm, recv, op),
            Schedule::TwoLevelAllGather => two_level_all_gather(comm, send, recv, if world % 2 == 0 { 2 } else { 1 }),
            Schedule::SparseAllGather => sparse_all_gather(comm, send, recv, world),
            Schedule::DirectAllReduce => schedules::direct_all_reduce(comm, send, recv, ReduceOp::Sum),
            Schedule::HalvingDoublingAllReduce => schedules::halving_doubling_all_reduce(comm, recv, ReduceOp::Sum),
            Schedule::RecursiveDoublingAllReduce => schedules::recursive_doubling_all_reduce(comm, recv, ReduceOp::Sum),
            Schedule::DirectReduceScatter => schedules::direct_reduce_scatter(comm, send, recv, ReduceOp::Sum),
            Schedule::RingReduceScatter => schedules::ring_reduce_scatter(comm, send, recv, ReduceOp::Sum),
            Schedule::RecursiveHalvingReduceScatter => {
                schedules::recursive_halving_reduce_scatter(comm, send, recv, ReduceOp::Sum)
            }
            Schedule::BinomialReduce => schedules::binomial_reduce(comm, send, recv, ReduceOp::Sum, 0),
            Schedule::ScatterAllGatherBroadcast => schedules::scatter_all_gather_broadcast(comm, recv, 0),
            Schedule::OneShotAllReduce => schedules::one_shot_all_reduce(comm, send, recv, ReduceOp::Sum),
            Schedule::OneShotAllGather => schedules::one_shot_all_gather(comm, send, recv),
            Schedule::OneShotReduceScatter => schedules::one_shot_reduce_scatter(comm, send, recv, ReduceOp::Sum),
            Schedule::OneShotAllToAll => schedules::one_shot_all_to_all(comm, send, recv),
            Schedule::OneShotBroadcast => schedules::one_shot_broadcast(comm, recv, 0),
        },
    }
}

/// The figures of one form of one size; `host_preset` names the cost
/// model's preset of how the ranks run on the host backend.
fn timing(config: &Config, bytes: usize, s: &Summary, host_preset: &str) -> Timing {
    let predicted_us = (config.backend == BackendKind::Host)
        .then(|| hcomm_cost::Builtin::from_row(config.op.name(), &s.algorithm))
        .flatten()
        .and_then(|b| {
            let m = hcomm_cost::preset(host_preset).ok()?;
            b.predict(&m, config.ranks, bytes).ok()
        })
        .map(|p| p.us);
    let algbw = if s.median_s > 0.0 {
        bytes as f64 / s.median_s / 1e9
    } else {
        0.0
    };
    Timing {
        algorithm: s.algorithm.clone(),
        iters: s.iters,
        time_us: s.median_s * 1e6,
        min_us: s.min_s * 1e6,
        algbw,
        busbw: algbw * config.op.shape().bus_factor(config.ranks),
        predicted_us,
        check: s.check.clone(),
    }
}

/// The row of one size from the forms timed.
fn row(config: &Config, bytes: usize, count: usize, forms: Vec<(Placement, Timing)>) -> Row {
    let op = match config.op {
        Op::Schedule(_) => shape_name(config.op.shape()),
        other => other.name(),
    };
    let mut row = Row {
        op: op.into(),
        schedule: match config.op {
            Op::Schedule(sc) => Some(sc.name().into()),
            _ => None,
        },
        redop: config.op.reduce_op().map(|o| o.name().into()),
        bytes,
        count,
        ranks: config.ranks,
        dtype: config.dtype.name().into(),
        backend: config.backend.name().into(),
        out_of_place: None,
        in_place: None,
    };
    for (placement, timing) in forms {
        match placement {
            Placement::OutOfPlace => row.out_of_place = Some(timing),
            Placement::InPlace => row.in_place = Some(timing),
        }
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert!((median_sorted(&[1.0, 2.0, 9.0]) - 2.0).abs() < 1e-12);
        assert!((median_sorted(&[1.0, 2.0, 4.0, 9.0]) - 3.0).abs() < 1e-12);
        assert!(median_sorted(&[]).abs() < 1e-12);
    }

    #[test]
    fn the_slowest_rank_counts_per_iteration() {
        let r = |times: Vec<f64>| RankResult {
            times,
            first_error: None,
            checked: true,
            algorithm: "ring".into(),
        };
        let s = summarize(&[r(vec![1.0, 5.0, 2.0]), r(vec![3.0, 1.0, 2.5])]);
        // Slowest per iteration: 3, 5, 2.5 -> median 3, min 2.5.
        assert!((s.median_s - 3.0).abs() < 1e-12);
        assert!((s.min_s - 2.5).abs() < 1e-12);
        assert_eq!(s.check, "ok");
        let bad = summarize(&[
            r(vec![1.0]),
            RankResult {
                first_error: Some(7),
                ..r(vec![1.0])
            },
        ]);
        assert_eq!(bad.check, "wrong: rank 1 element 7");
        let unchecked = summarize(&[RankResult {
            checked: false,
            ..r(vec![1.0])
        }]);
        assert_eq!(unchecked.check, "unchecked");
    }

    #[test]
    fn counts_round_to_whole_blocks() {
        let config = Config {
            op: Op::parse("all_gather", ReduceOp::Sum).unwrap(),
            sizes: vec![4096, 100, 1],
            ranks: 3,
            dtype: DataType::F32,
            algo: None,
            backend: BackendKind::Host,
            iters: None,
            warmup: None,
            check: true,
        };
        assert_eq!(config.counts(), vec![1023, 24, 3]);
        let all_reduce = Config {
            op: Op::parse("all_reduce", ReduceOp::Sum).unwrap(),
            ..config
        };
        assert_eq!(all_reduce.counts(), vec![1024, 25, 1]);
        assert_eq!(default_iters(4096), 1000);
        assert_eq!(default_iters(64 << 20), 20);
        assert_eq!(default_iters(1 << 20), 256);
    }
}
