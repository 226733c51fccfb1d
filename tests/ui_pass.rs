//! The schedules of `ui-tests/pass`, run on the host backend and on the HCCL
//! stand-in with identical results, each against its serial reference
//! (small integers in floats: exact).
#![allow(clippy::float_cmp)]

use std::time::Duration;

use hcomm::{CommOptions, Error};

mod backends;

#[allow(dead_code)]
#[path = "../ui-tests/pass/count-parameters.rs"]
mod count_parameters;
#[allow(dead_code)]
#[path = "../ui-tests/pass/nonblocking-exchange.rs"]
mod nonblocking_exchange;
#[allow(dead_code)]
#[path = "../ui-tests/pass/parity-ordered-ring.rs"]
mod parity_ordered_ring;
#[allow(dead_code)]
#[path = "../ui-tests/pass/recursive-doubling-all-reduce.rs"]
mod recursive_doubling;
#[allow(dead_code)]
#[path = "../ui-tests/pass/ring-all-gather.rs"]
mod ring_all_gather;
#[allow(dead_code)]
#[path = "../ui-tests/pass/run-time-verification-outside-verify-set.rs"]
mod run_time_verification;
#[allow(dead_code)]
#[path = "../ui-tests/pass/subgroup-all-reduce-and-scalar-root.rs"]
mod subgroup;

fn options() -> CommOptions {
    CommOptions::default().with_timeout(Duration::from_secs(20))
}

#[test]
fn nonblocking_exchange() {
    for w in 1..=8 {
        let out = backends::on_both(w, &options(), |comm| {
            let a = [comm.rank() as u64 + 100; 2];
            let (mut b, mut c) = ([0_u64; 2], [0_u64; 2]);
            nonblocking_exchange::exchange(comm, &a, &mut b, &mut c)?;
            Ok((b, c))
        })
        .unwrap();
        for (r, (b, c)) in out.iter().enumerate() {
            let from = ((r + w - 1) % w) as u64 + 100;
            assert_eq!((b, c), (&[from; 2], &[from; 2]), "world {w} rank {r}");
        }
    }
}

#[test]
fn parity_ordered_ring() {
    for w in [2, 4, 6, 8] {
        let out = backends::on_both(w, &options(), |comm| {
            let mut b = [0.0_f32; 3];
            parity_ordered_ring::shift_right(comm, &[comm.rank() as f32; 3], &mut b)?;
            Ok(b)
        })
        .unwrap();
        for (r, b) in out.iter().enumerate() {
            assert_eq!(b, &[((r + w - 1) % w) as f32; 3], "world {w} rank {r}");
        }
    }
    let err = backends::on_both(3, &options(), |comm| {
        parity_ordered_ring::shift_right(comm, &[1.0_f32], &mut [0.0])
    })
    .unwrap_err();
    assert!(matches!(err, Error::Precondition { .. }), "{err}");
}

#[test]
fn recursive_doubling_all_reduce() {
    for w in [1, 2, 4, 8] {
        let out = backends::on_both(w, &options(), |comm| {
            let mut buf = [comm.rank() as f64, 1.0];
            recursive_doubling::all_reduce_rd(comm, &mut buf)?;
            Ok(buf)
        })
        .unwrap();
        let sum = (w * (w - 1) / 2) as f64;
        assert!(out.iter().all(|b| *b == [sum, w as f64]), "world {w}: {out:?}");
    }
}

#[test]
fn ring_all_gather() {
    for w in 1..=8 {
        let out = backends::on_both(w, &options(), |comm| {
            let mut output = vec![0_i32; 2 * w];
            ring_all_gather::ring_all_gather(comm, &[comm.rank() as i32, -1], &mut output)?;
            Ok(output)
        })
        .unwrap();
        let want: Vec<i32> = (0..w as i32).flat_map(|q| [q, -1]).collect();
        assert!(out.iter().all(|o| *o == want), "world {w}: {out:?}");
    }
}

#[test]
fn run_time_verification_outside_the_verify_set() {
    for w in [5, 6, 7] {
        let out = backends::on_both(w, &options(), |comm| {
            let mut b = [0_i64];
            run_time_verification::shift(comm, &[comm.rank() as i64], &mut b)?;
            Ok(b[0])
        })
        .unwrap();
        let want: Vec<i64> = (0..w as i64).map(|r| (r + w as i64 - 1) % w as i64).collect();
        assert_eq!(out, want, "world {w}");
    }
    let err = backends::on_both(6, &options(), |comm| {
        run_time_verification::small_only(comm, &[0_i64], &mut [0])
    })
    .unwrap_err();
    assert!(matches!(err, Error::Schedule { .. }), "{err}");
}

#[test]
fn subgroup_all_reduce_and_scalar_root() {
    for w in [2, 4, 6] {
        for root in 0..w {
            let out = backends::on_both(w, &options(), |comm| {
                let (mut a, mut b) = ([comm.rank() as i32 + 1], [0]);
                subgroup::pairs_then_broadcast(comm, &mut a, &mut b, root)?;
                Ok((a[0], b[0]))
            })
            .unwrap();
            let pair_sum = |r: usize| (r / 2 * 2) as i32 * 2 + 3;
            for (r, (a, b)) in out.iter().enumerate() {
                assert_eq!(
                    (*a, *b),
                    (pair_sum(r), pair_sum(root)),
                    "world {w} root {root} rank {r}"
                );
            }
        }
    }
}

#[test]
fn count_parameters() {
    for w in 1..=6 {
        // counts with zeros, different on every rank
        let counts: Vec<usize> = (0..w).map(|r| (r * 5 + 2) % 4).collect();
        let total: usize = counts.iter().sum();
        let sizes: Vec<usize> = (0..w * w).map(|k| (k * 7 + 1) % 3).collect();
        let out = backends::on_both(w, &options(), |comm| {
            let r = comm.rank();
            let x: Vec<i32> = (0..counts[r]).map(|i| (10 * r + i) as i32).collect();
            let mut gathered = vec![-1_i32; total];
            count_parameters::gather_through_scratch(comm, &counts, &x, &mut gathered)?;
            let a: Vec<i32> = (0..w)
                .flat_map(|j| (0..sizes[r * w + j]).map(move |e| (1000 * r + 10 * j + e) as i32))
                .collect();
            let mut b = vec![-1_i32; (0..w).map(|i| sizes[i * w + r]).sum()];
            count_parameters::exchange(comm, &sizes, &a, &mut b)?;
            let mut b2 = vec![-1_i32; b.len()];
            count_parameters::exchange_then_own_part(comm, &sizes, &a, &mut b2)?;
            assert_eq!(b2, b);
            let tail = [7_i32; 2];
            let mut twice: Vec<i32> = (0..2 * total + 2).map(|i| i as i32).collect();
            count_parameters::own_part_twice(comm, &counts, &mut twice, &tail)?;
            Ok((gathered, b, twice))
        })
        .unwrap();
        let want: Vec<i32> = (0..w)
            .flat_map(|r| (0..counts[r]).map(move |i| (10 * r + i) as i32))
            .collect();
        for (r, (gathered, b, twice)) in out.iter().enumerate() {
            assert_eq!(gathered, &want, "world {w} rank {r}");
            let from: Vec<i32> = (0..w)
                .flat_map(|i| (0..sizes[i * w + r]).map(move |e| (1000 * i + 10 * r + e) as i32))
                .collect();
            assert_eq!(b, &from, "world {w} rank {r}");
            let mut expect: Vec<i32> = (0..2 * total + 2).map(|i| i as i32).collect();
            let start: usize = counts[..r].iter().sum();
            for k in 0..counts[r] {
                expect[total + start + k] = (start + k) as i32;
            }
            expect[2 * total..].copy_from_slice(&[7, 7]);
            assert_eq!(twice, &expect, "world {w} rank {r}");
        }
    }
}
