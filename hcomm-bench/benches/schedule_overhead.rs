//! What running an algorithm as a `comm_schedule!` costs over writing it by
//! hand: the built-in ring all-gather schedule against the same sends and
//! receives issued directly on the runtime API, on in-process ranks.
//!
//! `cargo bench -p hcomm-bench --bench schedule_overhead`
//!
//! Both variants run on one world of ranks that lives for the whole
//! benchmark (a fresh world per sample re-places its threads and re-learns
//! its spin budgets, which moved single samples by 4×). Besides criterion's
//! separate estimates, each size ends with a paired comparison: rounds of
//! calls of the two variants alternated (schedule, by hand, by hand,
//! schedule, ...) on the same world, and the median over rounds of the
//! ratio of their times, which load that drifts over seconds cancels out
//! of; then the same with the schedule's entry agreement check (which the
//! loop by hand does not make) turned off, which separates the executor's
//! cost from the check's. `--profile-time` skips the paired rounds.

// `criterion_group!` defines an undocumented function.
#![allow(missing_docs)]

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use hcomm::{schedules, Comm, CommOptions};

/// The ring all-gather of `hcomm::schedules::ring_all_gather`, by hand: copy
/// the own block into place, then `world - 1` steps that each send block
/// `rank - s` to the right (the input itself in the first) and receive
/// block `rank - s - 1` from the left.
fn ring_all_gather_by_hand(comm: &Comm, input: &[f32], output: &mut [f32]) -> hcomm::Result<()> {
    let (w, r, n) = (comm.world(), comm.rank(), input.len());
    output[r * n..(r + 1) * n].copy_from_slice(input);
    if w > 1 {
        let left = (r + w - 1) % w;
        comm.send_recv(input, (r + 1) % w, &mut output[left * n..(left + 1) * n], left)?;
    }
    for s in 1..w - 1 {
        let send = (r + w - s) % w;
        let recv = (r + 2 * w - s - 1) % w;
        let (send, recv) = two_blocks(output, n, send, recv);
        comm.send_recv(send, (r + 1) % w, recv, (r + w - 1) % w)?;
    }
    Ok(())
}

/// Blocks `a` (shared) and `b` (mutable) of `n` elements of `buf`; `a != b`.
fn two_blocks(buf: &mut [f32], n: usize, a: usize, b: usize) -> (&[f32], &mut [f32]) {
    if a < b {
        let (lo, hi) = buf.split_at_mut(b * n);
        (&lo[a * n..(a + 1) * n], &mut hi[..n])
    } else {
        let (lo, hi) = buf.split_at_mut(a * n);
        (&hi[..n], &mut lo[b * n..(b + 1) * n])
    }
}

type AllGather = fn(&Comm, &[f32], &mut [f32]) -> hcomm::Result<()>;

const SCHEDULE: AllGather = |c, i, o| schedules::ring_all_gather(c, i, o);
const BY_HAND: AllGather = ring_all_gather_by_hand;

/// `calls` calls of `f` with `n` elements per rank, after a barrier, with
/// the schedule-entry agreement check on or off.
struct Job {
    f: AllGather,
    n: usize,
    calls: u64,
    entry_check: bool,
}

/// A world of ranks that run jobs on request; each job's time is that of
/// its slowest rank.
struct World {
    jobs: Vec<Sender<Job>>,
    times: Receiver<hcomm::Result<Duration>>,
    ranks: Option<JoinHandle<()>>,
}

impl World {
    fn new(world: usize) -> World {
        let (job_senders, job_receivers): (Vec<_>, Vec<_>) = (0..world).map(|_| channel::<Job>()).unzip();
        let job_receivers: Vec<Mutex<Receiver<Job>>> = job_receivers.into_iter().map(Mutex::new).collect();
        let (time_sender, times) = channel();
        let time_sender = Mutex::new(time_sender);
        let ranks = std::thread::spawn(move || {
            let options = CommOptions::default().with_timeout(Duration::from_secs(60));
            let served = hcomm::host::run_with(world, &options, |comm| {
                let jobs = job_receivers[comm.rank()].lock().expect("job queue");
                let times = time_sender.lock().expect("time queue").clone();
                let mut buffers: (Vec<f32>, Vec<f32>) = (Vec::new(), Vec::new());
                while let Ok(job) = jobs.recv() {
                    let elapsed = run_job(comm, &job, &mut buffers);
                    let failed = elapsed.is_err();
                    let _ = times.send(elapsed);
                    if failed {
                        break;
                    }
                }
                Ok(())
            });
            served.expect("the benchmark's world");
        });
        World {
            jobs: job_senders,
            times,
            ranks: Some(ranks),
        }
    }

    /// The slowest rank's time for `calls` calls of `f`, run on every rank.
    fn time(&self, f: AllGather, n: usize, calls: u64) -> Duration {
        self.time_checked(f, n, calls, true)
    }

    /// [`World::time`] with the schedule-entry agreement check on or off.
    fn time_checked(&self, f: AllGather, n: usize, calls: u64, entry_check: bool) -> Duration {
        for jobs in &self.jobs {
            jobs.send(Job {
                f,
                n,
                calls,
                entry_check,
            })
            .expect("a rank of the benchmark's world stopped");
        }
        (0..self.jobs.len())
            .map(|_| {
                self.times
                    .recv_timeout(Duration::from_secs(120))
                    .expect("a rank of the benchmark's world did not answer")
                    .expect("all-gather")
            })
            .max()
            .unwrap_or_default()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        self.jobs.clear();
        if let Some(ranks) = self.ranks.take() {
            let _ = ranks.join();
        }
    }
}

/// One rank's part of `job`: a warm-up call, a barrier, the timed calls,
/// and a check of the result against the serial reference.
fn run_job(comm: &Comm, job: &Job, (input, output): &mut (Vec<f32>, Vec<f32>)) -> hcomm::Result<Duration> {
    let world = comm.world();
    hcomm::__private::set_entry_check(comm, job.entry_check);
    input.clear();
    input.resize(job.n, comm.rank() as f32);
    output.clear();
    output.resize(job.n * world, -1.0);
    (job.f)(comm, input, output)?;
    comm.barrier()?;
    let t0 = Instant::now();
    for _ in 0..job.calls {
        (job.f)(comm, input, output)?;
    }
    let elapsed = t0.elapsed();
    let expected = (0..job.n * world).map(|k| (k / job.n) as f32);
    assert!(output.iter().copied().eq(expected), "wrong all-gather result");
    Ok(elapsed)
}

/// The median and quartiles over `rounds` rounds of the ratio of the
/// schedule's time (with the entry agreement check on or off) to the
/// hand-written loop's, for `calls` calls each, alternating which runs
/// first.
fn paired_ratio(world: &World, n: usize, calls: u64, rounds: usize, entry_check: bool) -> [f64; 3] {
    let schedule = || world.time_checked(SCHEDULE, n, calls, entry_check);
    let mut ratios: Vec<f64> = (0..rounds)
        .map(|round| {
            let (s, h) = if round % 2 == 0 {
                let s = schedule();
                (s, world.time(BY_HAND, n, calls))
            } else {
                let h = world.time(BY_HAND, n, calls);
                (schedule(), h)
            };
            s.as_secs_f64() / h.as_secs_f64().max(1e-12)
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    let at = |q: f64| ratios[((ratios.len() - 1) as f64 * q).round() as usize];
    [at(0.25), at(0.5), at(0.75)]
}

fn ring_all_gather(c: &mut Criterion) {
    let ranks = 2;
    let world = World::new(ranks);
    // `--profile-time` profiles one variant: the paired rounds would run
    // both.
    let profiling = std::env::args().any(|a| a == "--profile-time");
    let mut group = c.benchmark_group("ring_all_gather");
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(3));
    for bytes in [1usize << 10, 64 << 10, 1 << 20] {
        let n = bytes / size_of::<f32>() / ranks;
        group.throughput(Throughput::Bytes(bytes as u64));
        for (name, f) in [("schedule", SCHEDULE), ("by_hand", BY_HAND)] {
            group.bench_with_input(BenchmarkId::new(name, bytes), &n, |b, &n| {
                b.iter_custom(|iters| world.time(f, n, iters));
            });
        }
        if profiling {
            continue;
        }
        // About 20 ms of calls per variant and round.
        let per_call = world.time(BY_HAND, n, 200).as_secs_f64() / 200.0;
        let calls = ((0.02 / per_call.max(1e-9)) as u64).clamp(10, 20_000);
        for (entry_check, what) in [(true, "schedule"), (false, "schedule without the entry check")] {
            let [q1, median, q3] = paired_ratio(&world, n, calls, 41, entry_check);
            println!(
                "ring_all_gather/{bytes}: {what} / by hand, median over 41 paired rounds of {calls} calls: \
                 {median:.3} (quartiles {q1:.3} to {q3:.3})"
            );
        }
    }
    group.finish();
}

criterion_group!(benches, ring_all_gather);
criterion_main!(benches);
