//! Every statement, region form, expression and attribute of the schedule
//! language, compiled and run on the host backend and on the HCCL stand-in
//! (with identical results), with the data each rank must end with.

mod backends;
use std::time::Duration;

use hcomm::{comm_schedule, CommOptions, Error};

comm_schedule! {
    /// Non-blocking exchange with tags, handles waited together, reversed
    /// loops, `if`/`else if`/`else`, bit operators and built-in functions.
    #[verify(world in [1, 2, 3, 4, 5, 8])]
    pub fn tagged_exchange(mine: &[T; n], left: &mut [T; n], right: &mut [T; n], tmp: &mut [T; 2 * n]) {
        let l = (rank - 1) % world;
        let r = (rank + 1) % world;
        let a = irecv left from l tag 7;
        let b = irecv right from r tag 9;
        let c = isend mine to r tag 7;
        let d = isend mine to l tag 9;
        wait a, b;
        wait c, d;
        for i in (0..2).rev() {
            if i == 1 && (world & 1) == 0 {
                copy left -> tmp[n..2 * n];
            } else if i == 1 {
                copy right -> tmp.chunk(1, 2);
            } else {
                copy mine -> tmp[0..=n - 1];
            }
        }
        let unused = min(max(world << 1, 3), pow2(log2(world)) ^ 1) | (world >> 1);
    }

    /// Receive-and-combine, `accumulate`, scratch buffers and every
    /// collective, in place and out of place.
    #[verify(world in 1..=6)]
    pub fn collectives_tour(x: &mut [T; n * world], y: &mut [T; n * world], z: &mut [T; n]) {
        let s = scratch[T; n * world];
        copy x -> s;
        all_reduce(s, sum);
        all_reduce(x -> y, max);
        accumulate s -> y, sum;
        reduce_scatter(y -> z, sum);
        all_gather(z -> s);
        all_to_all(s -> x);
        broadcast(z, root = world - 1);
        reduce(x -> y, min, root = 0);
        barrier;
        if world > 1 {
            if rank == 0 {
                send z to 1;
            } else if rank == 1 {
                recv z from 0 reduce prod;
            }
        }
    }
}

comm_schedule! {
    /// Groups are their member sets: `over 0` holds every rank, so it is the
    /// communicator itself, and two `over` clauses with equal members are one
    /// group (their collectives match each other).
    #[verify(world in 1..=6)]
    pub fn groups_are_member_sets(buf: &mut [T; n], halves: &mut [T; n]) {
        if rank == 0 {
            all_reduce(buf, sum);
        } else {
            all_reduce(buf, sum) over 0;
        }
        if rank == 0 {
            all_reduce(halves, max) over rank % 2;
        } else {
            all_reduce(halves, max) over (rank + 2) % 2;
        }
    }
}

fn options() -> CommOptions {
    CommOptions::default().with_timeout(Duration::from_secs(20))
}

#[test]
fn tagged_non_blocking_exchange_and_local_copies() {
    for world in [1usize, 2, 3, 4, 5, 8] {
        let n = 3;
        let out = backends::on_both(world, &options(), |comm| {
            let r = comm.rank();
            let mine: Vec<i32> = (0..n).map(|i| (r * 10 + i) as i32).collect();
            let (mut left, mut right, mut tmp) = (vec![0; n], vec![0; n], vec![0; 2 * n]);
            tagged_exchange(comm, &mine, &mut left, &mut right, &mut tmp)?;
            Ok((left, right, tmp))
        })
        .unwrap();
        let mine = |r: usize| (0..n).map(|i| (r * 10 + i) as i32).collect::<Vec<_>>();
        for (r, (left, right, tmp)) in out.iter().enumerate() {
            let (l, rr) = ((r + world - 1) % world, (r + 1) % world);
            assert_eq!(left, &mine(l), "world {world} rank {r}");
            assert_eq!(right, &mine(rr), "world {world} rank {r}");
            let second = if world % 2 == 0 { mine(l) } else { mine(rr) };
            assert_eq!(tmp, &[mine(r), second].concat(), "world {world} rank {r}");
        }
    }
}

#[test]
fn every_collective_statement() {
    for world in 1..=6usize {
        let n = 2;
        let out = backends::on_both(world, &options(), |comm| {
            let r = comm.rank() as i64;
            let mut x: Vec<i64> = (0..n * world).map(|i| r + i as i64).collect();
            let mut y = vec![0i64; n * world];
            let mut z = vec![0i64; n];
            collectives_tour(comm, &mut x, &mut y, &mut z)?;
            Ok((x, y, z))
        })
        .unwrap();
        // Serial reference, step by step.
        let w = world as i64;
        let x0 = |r: i64| -> Vec<i64> { (0..n * world).map(|i| r + i as i64).collect() };
        let s: Vec<i64> = (0..n * world).map(|i| (0..w).map(|q| x0(q)[i]).sum()).collect();
        let y1: Vec<i64> = (0..n * world)
            .map(|i| (0..w).map(|q| x0(q)[i]).max().unwrap() + s[i])
            .collect();
        // every rank holds the same y1, so the reduce-scatter sums world copies
        let z_of = |r: usize| -> Vec<i64> { (0..n).map(|i| w * y1[r * n + i]).collect() };
        let s2: Vec<i64> = (0..world).flat_map(z_of).collect();
        let x_of = |r: usize| -> Vec<i64> { (0..n * world).map(|k| s2[r * n + k % n]).collect() };
        let z_final = z_of(world - 1);
        for (r, (x, y, z)) in out.iter().enumerate() {
            assert_eq!(x, &x_of(r), "all_to_all, world {world} rank {r}");
            if r == 0 {
                let want: Vec<i64> = (0..n * world)
                    .map(|i| (0..world).map(|q| x_of(q)[i]).min().unwrap())
                    .collect();
                assert_eq!(y, &want, "reduce to root 0, world {world}");
            }
            let want_z: Vec<i64> = if r == 1 {
                z_final.iter().map(|v| v * v).collect()
            } else {
                z_final.clone()
            };
            assert_eq!(z, &want_z, "broadcast then recv-reduce, world {world} rank {r}");
        }
    }
}

#[test]
fn buffer_lengths_that_fit_no_length_variable_are_errors() {
    let err = hcomm::host::run_with(2, &options(), |comm| {
        let mine = [1i32, 2];
        let (mut left, mut right, mut tmp) = ([0; 2], [0; 2], [0; 3]);
        tagged_exchange(comm, &mine, &mut left, &mut right, &mut tmp)
    })
    .unwrap_err();
    assert!(
        matches!(&err, Error::BufferLength { buffer, actual: 3, .. } if buffer == "tmp"),
        "{err}"
    );
}

#[test]
fn over_groups_with_equal_members_are_one_group() {
    for world in 1..=6usize {
        let out = backends::on_both(world, &options(), |comm| {
            let r = comm.rank() as i64;
            let (mut buf, mut halves) = ([r, 1], [r, -r]);
            groups_are_member_sets(comm, &mut buf, &mut halves)?;
            Ok((buf, halves))
        })
        .unwrap();
        let w = world as i64;
        for (r, (buf, halves)) in out.iter().enumerate() {
            assert_eq!(buf, &[w * (w - 1) / 2, w], "world {world} rank {r}");
            let parity: Vec<i64> = (0..w).filter(|q| q % 2 == r as i64 % 2).collect();
            let want = [*parity.iter().max().unwrap(), parity.iter().map(|q| -q).max().unwrap()];
            assert_eq!(halves, &want, "world {world} rank {r}");
        }
    }
}
