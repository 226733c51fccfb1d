//! The variable-size schedules of `hcomm_examples::vcollectives`, run on the
//! host backend and on the HCCL stand-in (with identical results) on random
//! counts, zeros included, and compared element for element with the
//! runtime's own `all_gatherv` and `all_to_allv` and with a serial reference.

mod backends;
use std::time::Duration;

use hcomm::{CommOptions, Error};
use hcomm_examples::vcollectives::{moe_combine, moe_dispatch, sparse_all_gather};
use proptest::prelude::*;

fn options() -> CommOptions {
    CommOptions::default().with_timeout(Duration::from_secs(20))
}

fn segment(rank: usize, len: usize) -> Vec<i64> {
    (0..len).map(|i| (rank * 1000 + i) as i64).collect()
}

/// Every rank's result of the sparse all-gather and of `Comm::all_gatherv`
/// on `counts`, checked against the serial reference.
fn check_sparse_all_gather(counts: &[usize]) {
    let world = counts.len();
    let total: usize = counts.iter().sum();
    let out = backends::on_both(world, &options(), |comm| {
        let mine = segment(comm.rank(), counts[comm.rank()]);
        let (mut ours, mut builtin) = (vec![-1_i64; total], vec![-2_i64; total]);
        sparse_all_gather(comm, counts, &mine, &mut ours)?;
        comm.all_gatherv(&mine, &mut builtin, counts)?;
        Ok((ours, builtin))
    })
    .unwrap_or_else(|e| panic!("counts {counts:?}: {e}"));
    let want: Vec<i64> = (0..world).flat_map(|r| segment(r, counts[r])).collect();
    for (r, (ours, builtin)) in out.iter().enumerate() {
        assert_eq!(ours, &want, "counts {counts:?}, rank {r}");
        assert_eq!(builtin, &want, "counts {counts:?}, rank {r} (built-in)");
    }
}

#[test]
fn sparse_all_gather_with_empty_and_uneven_segments() {
    check_sparse_all_gather(&[3]);
    check_sparse_all_gather(&[0]);
    check_sparse_all_gather(&[0, 0, 0]);
    check_sparse_all_gather(&[2, 0, 5, 1]);
    check_sparse_all_gather(&[0, 1, 0, 0, 7, 0, 2, 0]);
    // world 18 lies outside the verify set: checked at the first call
    let counts: Vec<usize> = (0..18).map(|r| (r * 7) % 4).collect();
    check_sparse_all_gather(&counts);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 10, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn sparse_all_gather_matches_all_gatherv(counts in prop::collection::vec(0_usize..5, 1..=8)) {
        check_sparse_all_gather(&counts);
    }

    #[test]
    fn moe_top2_matches_all_to_allv(world in 1_usize..=6, tokens in 0_usize..6, seed in any::<u64>()) {
        check_moe_top2(world, tokens, 2, seed);
    }
}

/// The two experts (ranks) of each of the `tokens` tokens of `rank`, from
/// `seed` (distinct when there are two ranks or more).
fn route(world: usize, rank: usize, tokens: usize, seed: u64) -> Vec<[usize; 2]> {
    (0..tokens)
        .map(|t| {
            let h = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add((rank * 131 + t * 7) as u64 + 1)
                .rotate_left(17);
            let first = (h % world as u64) as usize;
            let second = if world == 1 {
                first
            } else {
                (first + 1 + ((h >> 20) % (world as u64 - 1)) as usize) % world
            };
            [first, second]
        })
        .collect()
}

/// Top-2 `MoE`: rank `r`'s token `t` (`hidden` values) goes to its two
/// experts; expert rank `e` multiplies by `e + 2`; the owner adds the two
/// results with weights 3 and 1. Dispatch and combine run as the checked
/// schedules and as `Comm::all_to_allv`, and must agree with the serial
/// computation.
fn check_moe_top2(world: usize, tokens: usize, hidden: usize, seed: u64) {
    let routes: Vec<Vec<[usize; 2]>> = (0..world).map(|r| route(world, r, tokens, seed)).collect();
    // sizes[i][j]: elements rank i sends to rank j
    let mut sizes = vec![0_usize; world * world];
    for (i, rs) in routes.iter().enumerate() {
        for pair in rs {
            for &e in pair {
                sizes[i * world + e] += hidden;
            }
        }
    }
    let value = |r: usize, t: usize, h: usize| (r * 10_000 + t * 10 + h) as i64;
    let out = backends::on_both(world, &options(), |comm| {
        let r = comm.rank();
        // packed by destination expert, tokens in order within each
        let mut send = Vec::new();
        for e in 0..world {
            for (t, pair) in routes[r].iter().enumerate() {
                for _ in pair.iter().filter(|&&x| x == e) {
                    send.extend((0..hidden).map(|h| value(r, t, h)));
                }
            }
        }
        let row: Vec<usize> = sizes[r * world..(r + 1) * world].to_vec();
        let col: Vec<usize> = (0..world).map(|i| sizes[i * world + r]).collect();
        let mut routed = vec![-1_i64; col.iter().sum()];
        let mut builtin = vec![-2_i64; routed.len()];
        moe_dispatch(comm, &sizes, &send, &mut routed)?;
        comm.all_to_allv(&send, &row, &mut builtin, &col)?;
        assert_eq!(routed, builtin, "dispatch on rank {r}");
        // the experts of this rank
        let outputs: Vec<i64> = routed.iter().map(|x| x * (r as i64 + 2)).collect();
        let mut combined = vec![-1_i64; send.len()];
        let mut builtin = vec![-2_i64; send.len()];
        moe_combine(comm, &sizes, &outputs, &mut combined)?;
        comm.all_to_allv(&outputs, &col, &mut builtin, &row)?;
        assert_eq!(combined, builtin, "combine on rank {r}");
        // weighted sum of each token's two results, in token order
        let mut next = vec![0_usize; world];
        let starts: Vec<usize> = (0..world).map(|e| row[..e].iter().sum()).collect();
        let mut result = vec![0_i64; tokens * hidden];
        for (t, pair) in routes[r].iter().enumerate() {
            for (k, &e) in pair.iter().enumerate() {
                let at = starts[e] + next[e];
                next[e] += hidden;
                for h in 0..hidden {
                    result[t * hidden + h] += combined[at + h] * if k == 0 { 3 } else { 1 };
                }
            }
        }
        Ok(result)
    })
    .unwrap_or_else(|e| panic!("world {world}, tokens {tokens}: {e}"));
    for (r, result) in out.iter().enumerate() {
        let want: Vec<i64> = routes[r]
            .iter()
            .enumerate()
            .flat_map(|(t, [a, b])| (0..hidden).map(move |h| value(r, t, h) * (3 * (*a as i64 + 2) + (*b as i64 + 2))))
            .collect();
        assert_eq!(result, &want, "world {world}, tokens {tokens}, rank {r}");
    }
}

#[test]
fn moe_top2_on_fixed_routes() {
    for world in 1..=5 {
        check_moe_top2(world, 4, 3, 7);
    }
    // no tokens at all: every count is zero
    check_moe_top2(4, 0, 3, 1);
}

#[test]
fn counts_of_the_wrong_length_or_that_disagree_fail_clearly() {
    let e = hcomm::host::run_with(3, &options(), |comm| {
        let mut out = [0_u8; 3];
        sparse_all_gather(comm, &[1, 1], &[0_u8], &mut out)
    })
    .unwrap_err();
    assert!(
        matches!(&e, Error::BufferLength { buffer, .. } if buffer == "counts"),
        "{e}"
    );
    // a segment that does not have its count
    let e = hcomm::host::run_with(2, &options(), |comm| {
        let mut out = [0_u8; 3];
        sparse_all_gather(comm, &[1, 2], &[0_u8; 2], &mut out)
    })
    .unwrap_err();
    assert!(e.to_string().contains("segment"), "{e}");
    // ranks that pass different counts (with lengths that fit each)
    let e = hcomm::host::run_with(2, &options(), |comm| {
        let counts = if comm.rank() == 0 { [1, 2] } else { [2, 1] };
        let mine = vec![0_u8; counts[comm.rank()]];
        let mut out = [0_u8; 3];
        sparse_all_gather(comm, &counts, &mine, &mut out)
    })
    .unwrap_err();
    assert!(matches!(e, Error::Mismatch { .. }), "{e}");
    assert!(e.to_string().contains("counts = [1, 2]"), "{e}");
}
