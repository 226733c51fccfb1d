//! Schedules that keep non-blocking operations in flight across collectives
//! or receive tags in another order than they were sent: correct under the
//! language's semantics, they run on the HCCL backend (through the stand-in
//! library) through plans, with the host backend's results. Ranks that call
//! one schedule with different arguments all get `Err(Mismatch)`.

use std::fmt::Debug;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use hcomm::hccl::Hccl;
use hcomm::{comm_schedule, Comm, CommOptions, Error, ReduceOp};

comm_schedule! {
    /// A send in flight across a barrier.
    #[verify(world in 2..=4)]
    pub fn isend_across_barrier(a: &[T; n], b: &mut [T; n]) {
        if rank == 0 { let h = isend a to 1; barrier; wait h; }
        else if rank == 1 { barrier; recv b from 0; }
        else { barrier; }
    }

    /// A receive in flight across an all-reduce, its send after it.
    #[verify(world in 2..=4)]
    pub fn irecv_across_all_reduce(a: &[T; n], b: &mut [T; n], x: &mut [T; n]) {
        if rank == 1 { let h = irecv b from 0; all_reduce(x, sum); wait h; }
        else if rank == 0 { all_reduce(x, sum); send a to 1; }
        else { all_reduce(x, sum); }
    }

    /// Sends to both neighbours in flight across an all-gather.
    #[verify(world in 2..=5)]
    pub fn ring_across_all_gather(a: &[T; n], l: &mut [T; n], r: &mut [T; n], g: &mut [T; n * world]) {
        let hs = isend a to (rank + 1) % world tag 1;
        let hr = irecv l from (rank - 1) % world tag 1;
        all_gather(a -> g);
        let h2 = isend a to (rank - 1) % world tag 2;
        recv r from (rank + 1) % world tag 2;
        wait hs, hr, h2;
    }

    /// A send in flight across an all-reduce over a subgroup of the
    /// receiver's.
    #[verify(world in [2, 4, 6])]
    pub fn isend_across_subgroup_all_reduce(a: &[T; n], b: &mut [T; n], x: &mut [T; n]) {
        if rank % 2 == 0 {
            let h = isend a to rank + 1;
            all_reduce(x, sum) over rank / 2;
            wait h;
        } else {
            all_reduce(x, sum) over rank / 2;
            recv b from rank - 1;
        }
    }

    /// Three tagged messages received in reverse.
    #[verify(world in 2..=3)]
    pub fn reverse_tags(a: &[T; 3 * n], b: &mut [T; 3 * n]) {
        if rank == 0 {
            let h0 = isend a.chunk(0, 3) to 1 tag 0;
            let h1 = isend a.chunk(1, 3) to 1 tag 1;
            let h2 = isend a.chunk(2, 3) to 1 tag 2;
            wait h0, h1, h2;
        } else if rank == 1 {
            for t in (0..3).rev() { recv b.chunk(t, 3) from 0 tag t; }
        }
    }

    /// Receives posted in another order than the sends, both directions at
    /// once, some messages to self.
    #[verify(world in 1..=4)]
    pub fn crossed_orders(a: &[T; 4 * n], b: &mut [T; 4 * n], c: &mut [T; n]) {
        let next = (rank + 1) % world;
        let prev = (rank - 1) % world;
        let r1 = irecv b.chunk(1, 4) from prev tag 1;
        let r0 = irecv b.chunk(0, 4) from prev tag 0;
        let s0 = isend a.chunk(0, 4) to next tag 0;
        let s2 = isend a.chunk(2, 4) to next tag 2;
        let s1 = isend a.chunk(1, 4) to next tag 1;
        let r2 = irecv b.chunk(2, 4) from prev tag 2;
        let me = isend a.chunk(3, 4) to rank tag 5;
        let mr = irecv c from rank tag 5;
        wait s1, r1, mr;
        wait r0, r2, s0, s2, me;
        batch {
            send a.chunk(3, 4) to next tag 3;
            recv b.chunk(3, 4) from prev tag 3;
        }
    }

    /// A root scalar: ranks must agree on it.
    #[verify(world in 1..=4, root in 0..world)]
    pub fn rooted_fan_out(x: &mut [T; n], root: usize) {
        if rank == root {
            for p in 0..world { if p != root { send x to p; } }
        } else {
            recv x from root;
        }
    }
}

fn hccl() -> &'static Hccl {
    static HCCL: OnceLock<Hccl> = OnceLock::new();
    HCCL.get_or_init(|| {
        let path = hcomm_hccl_standin::cdylib_path().expect("the stand-in cdylib is built next to the tests");
        Hccl::load_from(path).unwrap_or_else(|e| panic!("{e}"))
    })
}

fn options() -> CommOptions {
    CommOptions::default().with_timeout(Duration::from_secs(20))
}

/// Runs `f` on `world` ranks of the host backend and of the HCCL stand-in;
/// both must give the same per-rank results, which are returned.
fn on_both<R: Send + PartialEq + Debug>(world: usize, f: impl Fn(&Comm) -> hcomm::Result<R> + Sync) -> Vec<R> {
    let host = hcomm::host::run_with(world, &options(), &f).unwrap_or_else(|e| panic!("host, world {world}: {e}"));
    let device = hccl()
        .run(world, &options(), |c| {
            assert_eq!(c.backend_name(), "hccl");
            f(c)
        })
        .unwrap_or_else(|e| panic!("hccl, world {world}: {e}"));
    assert_eq!(host, device, "host and hccl differ at world {world}");
    host
}

fn data(rank: usize, n: usize) -> Vec<i64> {
    (0..n).map(|i| (rank * 100 + i) as i64 + 1).collect()
}

#[test]
fn a_send_in_flight_across_a_barrier_completes() {
    for w in 2..=4 {
        let out = on_both(w, |c| {
            let mut b = vec![0i64; 3];
            isend_across_barrier(c, &data(c.rank(), 3), &mut b)?;
            Ok(b)
        });
        assert_eq!(out[1], data(0, 3), "world {w}");
        assert!(out.iter().enumerate().all(|(r, b)| r == 1 || b == &[0; 3]));
    }
}

#[test]
fn a_receive_in_flight_across_an_all_reduce_completes() {
    for w in 2..=4 {
        let out = on_both(w, |c| {
            let (mut b, mut x) = (vec![0i64; 2], vec![c.rank() as i64; 2]);
            irecv_across_all_reduce(c, &data(c.rank(), 2), &mut b, &mut x)?;
            Ok((b, x))
        });
        let sum = (w * (w - 1) / 2) as i64;
        for (r, (b, x)) in out.iter().enumerate() {
            assert_eq!(x, &[sum; 2], "world {w} rank {r}");
            let want = if r == 1 { data(0, 2) } else { vec![0; 2] };
            assert_eq!(b, &want, "world {w} rank {r}");
        }
    }
}

#[test]
fn ring_messages_in_flight_across_an_all_gather_complete() {
    for w in 2..=5 {
        let n = 2;
        let out = on_both(w, |c| {
            let (mut l, mut r, mut g) = (vec![0i64; n], vec![0i64; n], vec![0i64; n * c.world()]);
            ring_across_all_gather(c, &data(c.rank(), n), &mut l, &mut r, &mut g)?;
            Ok((l, r, g))
        });
        let all: Vec<i64> = (0..w).flat_map(|q| data(q, n)).collect();
        for (q, (l, r, g)) in out.iter().enumerate() {
            assert_eq!(l, &data((q + w - 1) % w, n), "world {w} rank {q}");
            assert_eq!(r, &data((q + 1) % w, n), "world {w} rank {q}");
            assert_eq!(g, &all, "world {w} rank {q}");
        }
    }
}

#[test]
fn a_send_in_flight_across_a_subgroup_all_reduce_completes() {
    for w in [2, 4, 6] {
        let out = on_both(w, |c| {
            let (mut b, mut x) = (vec![0i64; 2], vec![c.rank() as i64 + 1; 2]);
            isend_across_subgroup_all_reduce(c, &data(c.rank(), 2), &mut b, &mut x)?;
            Ok((b, x))
        });
        for (r, (b, x)) in out.iter().enumerate() {
            let pair = (r / 2 * 2) as i64;
            assert_eq!(x, &[2 * pair + 3; 2], "world {w} rank {r}");
            let want = if r % 2 == 1 { data(r - 1, 2) } else { vec![0; 2] };
            assert_eq!(b, &want, "world {w} rank {r}");
        }
    }
}

#[test]
fn tags_received_in_reverse_arrive_where_they_belong() {
    for w in 2..=3 {
        let n = 2;
        let out = on_both(w, |c| {
            let mut b = vec![0i64; 3 * n];
            reverse_tags(c, &data(c.rank(), 3 * n), &mut b)?;
            Ok(b)
        });
        assert_eq!(out[1], data(0, 3 * n), "world {w}");
    }
}

#[test]
fn receives_posted_in_another_order_than_the_sends() {
    for w in 1..=4 {
        let n = 3;
        let out = on_both(w, |c| {
            let (mut b, mut me) = (vec![0i64; 4 * n], vec![0i64; n]);
            crossed_orders(c, &data(c.rank(), 4 * n), &mut b, &mut me)?;
            Ok((b, me))
        });
        for (r, (b, me)) in out.iter().enumerate() {
            assert_eq!(b, &data((r + w - 1) % w, 4 * n), "world {w} rank {r}");
            assert_eq!(me, &data(r, 4 * n)[3 * n..], "world {w} rank {r}");
        }
    }
}

/// Runs `f` on every backend and returns each rank's result.
fn each_backend<R: Send>(world: usize, f: impl Fn(&Comm) -> R + Sync) -> Vec<(&'static str, Vec<R>)> {
    let host = hcomm::host::run_with(world, &options(), |c| Ok(f(c))).expect("host ranks ran");
    let device = hccl().run(world, &options(), |c| Ok(f(c))).expect("hccl ranks ran");
    vec![("host", host), ("hccl", device)]
}

#[test]
fn ranks_passing_different_scalars_all_get_a_mismatch() {
    for (backend, out) in each_backend(3, |c| {
        let start = Instant::now();
        let mut x = [c.rank() as i32; 2];
        // a rank-dependent root: every rank believes it is the root
        let r = rooted_fan_out(c, &mut x, c.rank());
        (r, start.elapsed())
    }) {
        for (rank, (r, took)) in out.into_iter().enumerate() {
            let e = r.expect_err("disagreeing ranks must fail");
            assert!(matches!(&e, Error::Mismatch { .. }), "{backend} rank {rank}: {e}");
            assert!(e.to_string().contains("root = "), "{backend} rank {rank}: {e}");
            assert!(took < Duration::from_secs(10), "{backend} rank {rank} waited {took:?}");
        }
    }
}

#[test]
fn ranks_passing_different_lengths_all_get_a_mismatch() {
    for (backend, out) in each_backend(2, |c| {
        let mut x = vec![1i32; 2 + c.rank()];
        rooted_fan_out(c, &mut x, 0)
    }) {
        for (rank, r) in out.into_iter().enumerate() {
            let e = r.expect_err("disagreeing ranks must fail");
            assert!(matches!(&e, Error::Mismatch { .. }), "{backend} rank {rank}: {e}");
            assert!(
                e.to_string().contains("n = 2") && e.to_string().contains("n = 3"),
                "{e}"
            );
        }
    }
}

#[test]
fn a_rank_failing_before_entry_fails_the_others_with_a_mismatch() {
    for (backend, out) in each_backend(3, |c| {
        let start = Instant::now();
        let a = [1i64; 2];
        // rank 1's output has the wrong length: it fails before entering
        let mut b = vec![0i64; if c.rank() == 1 { 3 } else { 2 }];
        (isend_across_barrier(c, &a, &mut b), start.elapsed())
    }) {
        for (rank, (r, took)) in out.into_iter().enumerate() {
            let e = r.expect_err("the call must fail everywhere");
            if rank == 1 {
                assert!(matches!(&e, Error::BufferLength { .. }), "{backend} rank {rank}: {e}");
            } else {
                assert!(matches!(&e, Error::Mismatch { .. }), "{backend} rank {rank}: {e}");
                assert!(
                    e.to_string().contains("failed before entering"),
                    "{backend} rank {rank}: {e}"
                );
            }
            assert!(took < Duration::from_secs(10), "{backend} rank {rank} waited {took:?}");
        }
    }
}

#[test]
fn ranks_that_agree_run_the_rooted_schedule_on_both_backends() {
    for w in 1..=4 {
        for root in 0..w {
            let out = on_both(w, |c| {
                let mut x = if c.rank() == root { data(root, 3) } else { vec![0; 3] };
                rooted_fan_out(c, &mut x, root)?;
                Ok(x)
            });
            assert!(out.iter().all(|x| x == &data(root, 3)), "world {w} root {root}");
        }
    }
}

comm_schedule! {
    /// The smallest schedule: one local copy, no message.
    #[verify(world in 1..=8, k in 0..world)]
    pub fn local_copy(a: &[T; n], b: &mut [T; n], k: usize) {
        copy a -> b;
    }
}

/// The cost of a schedule call that sends nothing (entry check included),
/// per call and rank on 4 host ranks: `cargo test -p hcomm --release --test
/// hccl_plans -- --ignored --nocapture schedule_call_cost`.
#[test]
#[ignore = "a measurement, not a check"]
fn schedule_call_cost() {
    const CALLS: u32 = 200_000;
    let per_call = hcomm::host::run_with(4, &options(), |c| {
        let (a, mut b) = ([1i32; 4], [0i32; 4]);
        let start = Instant::now();
        for _ in 0..CALLS {
            local_copy(c, &a, &mut b, 1)?;
        }
        Ok(start.elapsed() / CALLS)
    })
    .unwrap();
    eprintln!("schedule call, 4 host ranks: {per_call:?} per call and rank");
}

#[test]
fn the_built_in_schedules_give_the_host_results_on_hccl() {
    use hcomm::schedules::{
        binomial_broadcast, bruck_all_gather, pairwise_all_to_all, recursive_doubling_all_gather, ring_all_reduce,
    };
    for w in 1..=6 {
        let n = 2;
        let out = on_both(w, |c| {
            let (r, w) = (c.rank(), c.world());
            let mine = data(r, n);
            let mut bruck = vec![0i64; n * w];
            bruck_all_gather(c, &mine, &mut bruck)?;
            let mut rd = vec![0i64; n * w];
            if w.is_power_of_two() {
                recursive_doubling_all_gather(c, &mine, &mut rd)?;
            }
            let mut a2a = vec![0i64; n * w];
            pairwise_all_to_all(c, &data(r, n * w), &mut a2a)?;
            let mut bcast = if r == w - 1 { data(r, n) } else { vec![0; n] };
            binomial_broadcast(c, &mut bcast, w - 1)?;
            let (mut sum, mut max) = (data(r, n * w), data(r, n * w));
            ring_all_reduce(c, &mut sum, ReduceOp::Sum)?;
            ring_all_reduce(c, &mut max, ReduceOp::Max)?;
            Ok((bruck, rd, a2a, bcast, sum, max))
        });
        let all: Vec<i64> = (0..w).flat_map(|q| data(q, n)).collect();
        for (r, (bruck, rd, a2a, bcast, sum, max)) in out.iter().enumerate() {
            assert_eq!(bruck, &all, "world {w} rank {r}");
            if w.is_power_of_two() {
                assert_eq!(rd, &all, "world {w} rank {r}");
            }
            let want: Vec<i64> = (0..w)
                .flat_map(|q| data(q, n * w)[r * n..(r + 1) * n].to_vec())
                .collect();
            assert_eq!(a2a, &want, "world {w} rank {r}");
            assert_eq!(bcast, &data(w - 1, n), "world {w} rank {r}");
            let s: Vec<i64> = (0..n * w).map(|i| (0..w).map(|q| data(q, n * w)[i]).sum()).collect();
            assert_eq!(sum, &s, "world {w} rank {r}");
            assert_eq!(max, &data(w - 1, n * w), "world {w} rank {r}");
        }
    }
}
