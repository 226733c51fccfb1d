//! The entry agreement check of `comm_schedule!` calls on every backend
//! and layout that runs here: threads of the host backend (ranks sharing
//! memory), host ranks joined as processes are (`init_job_with`: notes
//! carried on their connections), the HCCL stand-in in one process (ranks
//! sharing memory, schedules run through plans) and HCCL ranks joined one
//! by one as processes are (`init_rank`: notes all-gathered by the
//! library). Disagreeing calls name both calls (operators by name, other
//! schedules by name) on every rank, within seconds; and what the check
//! costs per call. The same check between real processes, over shared
//! memory and over TCP, is tested in `hcomm-run/tests/multiproc.rs`.

use std::net::TcpListener;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use hcomm::auth::JobSecret;
use hcomm::hccl::{Hccl, RootInfo};
use hcomm::schedules::{bruck_all_gather, ring_all_gather, ring_all_reduce};
use hcomm::{comm_schedule, init_job_with, BackendKind, Comm, CommOptions, Error, JobEnv, ReduceOp};

fn options() -> CommOptions {
    CommOptions::default().with_timeout(Duration::from_secs(20))
}

/// How the ranks of a test are made.
#[derive(Clone, Copy, Debug)]
enum Layout {
    /// `host::run_with`: threads sharing the group's memory.
    Threads,
    /// `init_job_with` on the host backend, one thread per rank as one
    /// process per rank would.
    HostJob,
    /// `Hccl::run` on the stand-in: in-process device ranks.
    HcclThreads,
    /// `Hccl::init_rank` on the stand-in, one thread per rank as one
    /// process per rank would.
    HcclRanks,
}

const LAYOUTS: [Layout; 4] = [Layout::Threads, Layout::HostJob, Layout::HcclThreads, Layout::HcclRanks];

fn hccl() -> &'static Hccl {
    static HCCL: OnceLock<Hccl> = OnceLock::new();
    HCCL.get_or_init(|| {
        let path = hcomm_hccl_standin::cdylib_path().expect("the stand-in cdylib is built next to the tests");
        Hccl::load_from(path).unwrap_or_else(|e| panic!("{e}"))
    })
}

/// `f` on each rank of `world` made as `layout` says, results in rank order.
fn on_ranks<R: Send>(layout: Layout, world: usize, f: impl Fn(&Comm) -> R + Sync) -> Vec<R> {
    match layout {
        Layout::Threads => hcomm::host::run_with(world, &options(), |c| Ok(f(c))).unwrap(),
        Layout::HcclThreads => hccl().run(world, &options(), |c| Ok(f(c))).unwrap(),
        Layout::HostJob => {
            let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
            let secret = JobSecret::new("schedule-entry-test-secret").unwrap();
            threads(world, |rank| {
                let (r, w, p) = (rank.to_string(), world.to_string(), port.to_string());
                let job = JobEnv::from_vars(|name| match name {
                    "HCOMM_RANK" => Some(r.clone()),
                    "HCOMM_WORLD_SIZE" => Some(w.clone()),
                    "HCOMM_MASTER_ADDR" => Some("127.0.0.1".into()),
                    "HCOMM_MASTER_PORT" => Some(p.clone()),
                    _ => None,
                })
                .unwrap();
                let comm = init_job_with(BackendKind::Host, &job, &options(), &secret).unwrap();
                f(&comm)
            })
        }
        Layout::HcclRanks => {
            let bytes = hccl().root_info(0).unwrap().as_bytes().to_vec();
            threads(world, |rank| {
                let root = RootInfo::from_bytes(&bytes).unwrap();
                let comm = hccl().init_rank(world, rank, &root, rank as i32, &options()).unwrap();
                f(&comm)
            })
        }
    }
}

/// `f(rank)` on one thread per rank, results in rank order.
fn threads<R: Send>(world: usize, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
    std::thread::scope(|s| {
        let f = &f;
        let ranks: Vec<_> = (0..world).map(|r| s.spawn(move || f(r))).collect();
        ranks.into_iter().map(|t| t.join().unwrap()).collect()
    })
}

/// Each rank's `Mismatch` message on ranks made as `layout` says, after
/// checking it came within seconds.
fn mismatches_on(layout: Layout, world: usize, f: impl Fn(&hcomm::Comm) -> hcomm::Result<()> + Sync) -> Vec<String> {
    on_ranks(layout, world, |c| {
        let start = Instant::now();
        let e = f(c).expect_err("disagreeing ranks must fail");
        assert!(start.elapsed() < Duration::from_secs(10), "{layout:?}");
        match e {
            Error::Mismatch { message } => message,
            other => panic!("{layout:?}, rank {}: expected a mismatch, got {other}", c.rank()),
        }
    })
}

/// Each rank's `Mismatch` message on in-process ranks.
fn mismatches(world: usize, f: impl Fn(&hcomm::Comm) -> hcomm::Result<()> + Sync) -> Vec<String> {
    mismatches_on(Layout::Threads, world, f)
}

#[test]
fn different_operators_are_named_by_their_keywords() {
    let got = mismatches(2, |c| {
        let op = if c.rank() == 1 { ReduceOp::Max } else { ReduceOp::Sum };
        ring_all_reduce(c, &mut [1i32; 4], op)
    });
    let want = "ranks 0 and 1 disagree on their call of `ring_all_reduce` (every rank must pass the same scalars and \
                lengths): rank 0 with T = i32, op = sum, n = 2; rank 1 with T = i32, op = max, n = 2";
    assert_eq!(got, vec![want; 2]);
}

#[test]
fn different_schedules_are_named() {
    let got = mismatches(3, |c| {
        let mut out = [0u32; 6];
        if c.rank() == 2 {
            bruck_all_gather(c, &[1, 2], &mut out)
        } else {
            ring_all_gather(c, &[1, 2], &mut out)
        }
    });
    // the first pair found is the one every rank reports
    assert!(
        got.iter().all(|m| m == &got[0]),
        "every rank reports the same disagreement: {got:?}"
    );
    let m = &got[0];
    assert!(
        m.starts_with("ranks 0 and 2 disagree on which schedule they call")
            || m.starts_with("ranks 1 and 2 disagree on which schedule they call"),
        "{m}"
    );
    assert!(
        m.ends_with(
            "called `ring_all_gather` with T = u32, n = 2; rank 2 called `bruck_all_gather` with T = u32, n = 2"
        ),
        "{m}"
    );
}

const SAME: &str = "(every rank must pass the same scalars and lengths)";

#[test]
fn every_layout_names_both_calls_on_every_rank() {
    for layout in LAYOUTS {
        // different operators
        let got = mismatches_on(layout, 2, |c| {
            let op = if c.rank() == 1 { ReduceOp::Max } else { ReduceOp::Sum };
            ring_all_reduce(c, &mut [1i32; 4], op)
        });
        let want = format!(
            "ranks 0 and 1 disagree on their call of `ring_all_reduce` {SAME}: rank 0 with T = i32, op = sum, n = 2; \
             rank 1 with T = i32, op = max, n = 2"
        );
        assert_eq!(got, vec![want; 2], "{layout:?}");
        // different schedules, the odd rank a neighbour of both others
        let got = mismatches_on(layout, 3, |c| {
            let mut out = [0u32; 6];
            if c.rank() == 2 {
                bruck_all_gather(c, &[1, 2], &mut out)
            } else {
                ring_all_gather(c, &[1, 2], &mut out)
            }
        });
        // each rank names a pair it saw disagree (ranks in one process, and
        // ranks that all-gather their calls, all name the first pair)
        for m in &got {
            let named = |lo: usize| {
                format!(
                    "ranks {lo} and 2 disagree on which schedule they call (every rank must call the same schedules \
                     in the same order): rank {lo} called `ring_all_gather` with T = u32, n = 2; rank 2 called \
                     `bruck_all_gather` with T = u32, n = 2"
                )
            };
            assert!(*m == named(0) || *m == named(1), "{layout:?}: {m}");
        }
        if !matches!(layout, Layout::HostJob) {
            assert!(got.iter().all(|m| m == &got[0]), "{layout:?}: {got:?}");
        }
    }
}

#[test]
fn every_layout_names_a_rank_that_failed_before_entry() {
    for layout in LAYOUTS {
        let got = on_ranks(layout, 2, |c| {
            // rank 1's output is one element too long
            let mut out = vec![0u8; 4 + c.rank()];
            ring_all_gather(c, &[1, 2], &mut out).expect_err("rank 1 fails, rank 0 learns of it")
        });
        assert!(matches!(got[1], Error::BufferLength { .. }), "{layout:?}: {}", got[1]);
        let Error::Mismatch { message } = &got[0] else {
            panic!("{layout:?}: expected a mismatch on rank 0, got {}", got[0]);
        };
        assert!(
            message.starts_with("ranks 0 and 1 disagree on their call of `ring_all_gather`")
                && message.contains("rank 0 with T = u8, n = 2; rank 1 failed before entering it: "),
            "{layout:?}: {message}"
        );
    }
}

#[test]
fn agreeing_calls_after_built_in_collectives_move_the_right_data_on_every_layout() {
    for layout in LAYOUTS {
        let got = on_ranks(layout, 3, |c| -> hcomm::Result<Vec<u32>> {
            let r = c.rank() as u32;
            let mut out = vec![0u32; 6];
            // a built-in collective, which may run a schedule, in between
            let mut x = [r];
            c.all_reduce_in_place(&mut x, ReduceOp::Sum)?;
            ring_all_gather(c, &[r, x[0]], &mut out)?;
            c.all_gather(&[r, x[0]], &mut out)?;
            ring_all_gather(c, &[r, 10], &mut out)?;
            Ok(out)
        });
        for (rank, out) in got.into_iter().enumerate() {
            assert_eq!(out.unwrap(), vec![0, 10, 1, 10, 2, 10], "{layout:?}, rank {rank}");
        }
    }
}

comm_schedule! {
    /// One local copy, no message.
    #[verify(world in 1..=8)]
    fn local_copy(a: &[T; n], b: &mut [T; n]) {
        copy a -> b;
    }
}

/// The cost of the entry check per call and rank, on 2 and 4 in-process
/// ranks, with the check on and off in alternate rounds of the same run:
/// `cargo test --release -p hcomm --test schedule_entry -- --ignored
/// --nocapture entry_check_cost`.
#[test]
#[ignore = "a measurement, not a check"]
fn entry_check_cost() {
    const CALLS: u32 = 100_000;
    for world in [2, 4] {
        let medians = hcomm::host::run_with(world, &options(), |c| {
            let (a, mut b) = ([1i32; 4], [0i32; 4]);
            let mut times = [Vec::new(), Vec::new()];
            for round in 0..10 {
                let on = round % 2 == 0;
                hcomm::__private::set_entry_check(c, on);
                c.barrier()?;
                let start = Instant::now();
                for _ in 0..CALLS {
                    local_copy(c, &a, &mut b)?;
                }
                times[usize::from(on)].push(start.elapsed() / CALLS);
            }
            for t in &mut times {
                t.sort();
            }
            Ok((times[1][2], times[0][2]))
        })
        .unwrap();
        let on = medians.iter().map(|m| m.0).max().unwrap();
        let off = medians.iter().map(|m| m.1).max().unwrap();
        eprintln!(
            "schedule call, {world} in-process ranks (slowest rank's median of 5 rounds): {on:?} with the entry check, \
             {off:?} without, {:?} for the check, ratio {:.2}",
            on.saturating_sub(off),
            on.as_secs_f64() / off.as_secs_f64()
        );
    }
    // ranks that share no memory on a device backend: the all-gather route
    for world in [2, 4] {
        let medians = on_ranks(Layout::HcclRanks, world, |c| {
            let (a, mut b) = ([1i32; 4], [0i32; 4]);
            let mut times = [Vec::new(), Vec::new()];
            for round in 0..6 {
                let on = round % 2 == 0;
                hcomm::__private::set_entry_check(c, on);
                c.barrier().unwrap();
                let start = Instant::now();
                for _ in 0..500 {
                    local_copy(c, &a, &mut b).unwrap();
                }
                times[usize::from(on)].push(start.elapsed() / 500);
            }
            for t in &mut times {
                t.sort();
            }
            (times[1][1], times[0][1])
        });
        let on = medians.iter().map(|m| m.0).max().unwrap();
        let off = medians.iter().map(|m| m.1).max().unwrap();
        eprintln!(
            "schedule call, {world} HCCL stand-in ranks joined by init_rank (all-gather route; slowest rank's median \
             of 3 rounds): {on:?} with the entry check, {off:?} without, {:?} for the check",
            on.saturating_sub(off)
        );
    }
}
