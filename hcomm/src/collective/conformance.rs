//! The algorithms written in Rust against the schedules they follow: each
//! rank records the point-to-point operations the Rust algorithm posts and
//! those the executor posts for its checked schedule, on the same buffers,
//! and the two must move the same regions. Operations are compared per
//! channel (direction and peer), where messages match in order, after
//! joining the consecutive pieces a segmented transfer splits a region
//! into; and every element must be combined with the same peers in the same
//! order. World sizes 1 to 9, segments on where the algorithm has them.
//! Scratch memory is compared by offset within the call's one scratch
//! allocation.

use std::cell::RefCell;

use crate::backend::{Dir, P2pOp};
use crate::element::ReduceOp;

thread_local! {
    static RECORDED: RefCell<Option<Vec<P2pOp>>> = const { RefCell::new(None) };
}

/// Records `ops` when this thread is recording.
pub(crate) fn note(ops: &[P2pOp]) {
    RECORDED.with(|r| {
        if let Some(v) = r.borrow_mut().as_mut() {
            v.extend_from_slice(ops);
        }
    });
}

/// The operations this thread posts while `f` runs.
fn record<R>(f: impl FnOnce() -> R) -> (R, Vec<P2pOp>) {
    RECORDED.with(|r| *r.borrow_mut() = Some(Vec::new()));
    let out = f();
    let ops = RECORDED.with(|r| r.borrow_mut().take()).unwrap_or_default();
    (out, ops)
}

/// Where a region lies: in which buffer (by index) and at which element.
type Place = (usize, usize);

/// One operation, its region resolved against the caller's buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Op {
    send: bool,
    peer: usize,
    place: Place,
    len: usize,
    reduce: Option<ReduceOp>,
}

/// Resolves each operation's region against the caller's buffers `bufs`
/// (start, length); a region outside them lies in the algorithm's scratch
/// memory (one allocation per call), which counts as buffer `bufs.len()`,
/// offsets from the lowest such address.
fn resolve(ops: &[P2pOp], bufs: &[(usize, usize)], elem: usize) -> Vec<Op> {
    let inside = |at: usize| {
        bufs.iter()
            .position(|&(base, len)| at >= base && at < base + len * elem)
    };
    let scratch = ops
        .iter()
        .filter(|o| o.count > 0 && inside(o.ptr as usize).is_none())
        .map(|o| o.ptr as usize)
        .min()
        .unwrap_or(0);
    ops.iter()
        .filter(|o| o.count > 0)
        .map(|o| {
            let at = o.ptr as usize;
            let place = match inside(at) {
                Some(b) => (b, (at - bufs[b].0) / elem),
                None => (bufs.len(), (at - scratch) / elem),
            };
            Op {
                send: o.dir == Dir::Send,
                peer: o.peer,
                place,
                len: o.count,
                reduce: o.reduce,
            }
        })
        .collect()
}

/// Per channel (direction, peer), in order, with consecutive pieces of one
/// region joined.
fn channels(ops: &[Op]) -> Vec<((bool, usize), Vec<Op>)> {
    let mut out: Vec<((bool, usize), Vec<Op>)> = Vec::new();
    for &op in ops {
        let key = (op.send, op.peer);
        let i = out.iter().position(|(k, _)| *k == key).unwrap_or_else(|| {
            out.push((key, Vec::new()));
            out.len() - 1
        });
        let list = &mut out[i].1;
        if let Some(last) = list.last_mut() {
            let ((b, o), (b2, o2)) = (last.place, op.place);
            if b == b2 && o + last.len == o2 && last.reduce == op.reduce {
                last.len += op.len;
                continue;
            }
        }
        list.push(op);
    }
    out.sort_by_key(|(k, _)| *k);
    out
}

/// For every element of buffer `buf` (of `len` elements), the peers whose
/// data is combined into it, in order.
fn combines(ops: &[Op], buf: usize, len: usize) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new(); len];
    for op in ops.iter().filter(|o| !o.send && o.reduce.is_some()) {
        let (b, at) = op.place;
        if b == buf {
            for e in &mut out[at..at + op.len] {
                e.push(op.peer);
            }
        }
    }
    out
}

/// Asserts that `ours` (the Rust algorithm's operations) follow `theirs`
/// (the schedule's) on rank `rank`.
fn assert_follows(what: &str, rank: usize, ours: &[Op], theirs: &[Op], lens: &[usize]) {
    assert_eq!(
        channels(ours),
        channels(theirs),
        "{what}, rank {rank}: the messages differ from the schedule's"
    );
    for (b, &len) in lens.iter().enumerate() {
        assert_eq!(
            combines(ours, b, len),
            combines(theirs, b, len),
            "{what}, rank {rank}: buffer {b} is combined in another order than the schedule's"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collective::{schedules, Algorithm, Collective};
    use crate::{CommOptions, ReduceOp};

    fn options(collective: Collective, algorithm: Algorithm) -> CommOptions {
        let mut o = CommOptions::default()
            .with_timeout(std::time::Duration::from_secs(20))
            .with_algorithm(collective, algorithm);
        // Several pieces per message.
        o.segment_bytes = 24;
        o
    }

    fn base(v: &[i64]) -> (usize, usize) {
        (v.as_ptr() as usize, v.len())
    }

    fn value(rank: usize, i: usize) -> i64 {
        (rank * 1000 + i) as i64
    }

    #[test]
    fn direct_all_reduce_follows_its_schedule() {
        for world in 1usize..=9 {
            for n in [1, 5] {
                let len = n * world;
                crate::host::run_with(world, &options(Collective::AllReduce, Algorithm::Direct), |comm| {
                    let r = comm.rank();
                    let input: Vec<i64> = (0..len).map(|i| value(r, i)).collect();
                    let mut ours = vec![0i64; len];
                    let mut theirs = vec![0i64; len];
                    let (res, a) = record(|| comm.all_reduce(&input, &mut ours, ReduceOp::Sum));
                    res?;
                    let (res, b) = record(|| schedules::direct_all_reduce(comm, &input, &mut theirs, ReduceOp::Sum));
                    res?;
                    assert_eq!(ours, theirs);
                    let a = resolve(&a, &[base(&input), base(&ours)], 8);
                    let b = resolve(&b, &[base(&input), base(&theirs)], 8);
                    assert_eq!(a.is_empty(), world == 1);
                    assert_follows(&format!("direct all-reduce, world {world}"), r, &a, &b, &[len, len]);
                    Ok(())
                })
                .unwrap();
            }
        }
    }

    #[test]
    fn halving_doubling_all_reduce_follows_its_schedule() {
        for world in 1usize..=9 {
            let p = 1usize << world.ilog2();
            // Above the whole-vector threshold: halving then doubling.
            let n = 4200usize.div_ceil(p);
            let len = n * p;
            crate::host::run_with(
                world,
                &options(Collective::AllReduce, Algorithm::HalvingDoubling),
                |comm| {
                    let r = comm.rank();
                    let mut ours: Vec<i64> = (0..len).map(|i| value(r, i)).collect();
                    let mut theirs = ours.clone();
                    let (res, a) = record(|| comm.all_reduce_in_place(&mut ours, ReduceOp::Max));
                    res?;
                    let (res, b) = record(|| schedules::halving_doubling_all_reduce(comm, &mut theirs, ReduceOp::Max));
                    res?;
                    assert_eq!(ours, theirs);
                    let a = resolve(&a, &[base(&ours)], 8);
                    let b = resolve(&b, &[base(&theirs)], 8);
                    assert_eq!(a.is_empty(), world == 1);
                    assert_follows(
                        &format!("halving-doubling all-reduce, world {world}"),
                        r,
                        &a,
                        &b,
                        &[len],
                    );
                    Ok(())
                },
            )
            .unwrap();
        }
    }

    #[test]
    fn scatter_all_gather_broadcast_follows_its_schedule() {
        for world in 1usize..=9 {
            for root in [0, world / 2, world - 1] {
                let len = 7 * world;
                crate::host::run_with(
                    world,
                    &options(Collective::Broadcast, Algorithm::ScatterAllGather),
                    |comm| {
                        let r = comm.rank();
                        let start: Vec<i64> = (0..len).map(|i| value(r, i)).collect();
                        let (mut ours, mut theirs) = (start.clone(), start);
                        let (res, a) = record(|| comm.broadcast(&mut ours, root));
                        res?;
                        let (res, b) = record(|| schedules::scatter_all_gather_broadcast(comm, &mut theirs, root));
                        res?;
                        assert_eq!(ours, theirs);
                        let a = resolve(&a, &[base(&ours)], 8);
                        let b = resolve(&b, &[base(&theirs)], 8);
                        assert_eq!(a.is_empty(), world == 1);
                        assert_follows(&format!("broadcast, world {world}, root {root}"), r, &a, &b, &[len]);
                        Ok(())
                    },
                )
                .unwrap();
            }
        }
    }

    #[test]
    fn recursive_doubling_all_reduce_follows_its_schedule() {
        for world in 1usize..=9 {
            let n = 37;
            crate::host::run_with(
                world,
                &options(Collective::AllReduce, Algorithm::HalvingDoubling),
                |comm| {
                    let r = comm.rank();
                    let mut ours: Vec<i64> = (0..n).map(|i| value(r, i)).collect();
                    let mut theirs = ours.clone();
                    let (res, a) = record(|| comm.all_reduce_in_place(&mut ours, ReduceOp::Sum));
                    res?;
                    let (res, b) =
                        record(|| schedules::recursive_doubling_all_reduce(comm, &mut theirs, ReduceOp::Sum));
                    res?;
                    assert_eq!(ours, theirs);
                    let a = resolve(&a, &[base(&ours)], 8);
                    let b = resolve(&b, &[base(&theirs)], 8);
                    assert_eq!(a.is_empty(), world == 1);
                    assert_follows(
                        &format!("recursive-doubling all-reduce, world {world}"),
                        r,
                        &a,
                        &b,
                        &[n],
                    );
                    Ok(())
                },
            )
            .unwrap();
        }
    }

    /// The reduce-scatters: the ring in one piece (a longer message is the
    /// same ring once per piece), recursive halving, and the direct one in
    /// pieces.
    #[test]
    fn reduce_scatters_follow_their_schedules() {
        for (algorithm, worlds) in [
            (Algorithm::Ring, &[1usize, 2, 3, 4, 5, 6, 7, 8, 9][..]),
            (Algorithm::RecursiveHalving, &[1, 2, 4, 8][..]),
            (Algorithm::Direct, &[1usize, 2, 3, 4, 5, 6, 7, 8, 9][..]),
        ] {
            for &world in worlds {
                let n = 11;
                let mut opts = options(Collective::ReduceScatter, algorithm);
                if algorithm == Algorithm::Ring {
                    opts.segment_bytes = 1 << 20;
                }
                crate::host::run_with(world, &opts, |comm| {
                    let r = comm.rank();
                    let input: Vec<i64> = (0..n * world).map(|i| value(r, i)).collect();
                    let (mut ours, mut theirs) = (vec![0i64; n], vec![0i64; n]);
                    let (res, a) = record(|| comm.reduce_scatter(&input, &mut ours, ReduceOp::Sum));
                    res?;
                    let (res, b) = record(|| match algorithm {
                        Algorithm::Ring => schedules::ring_reduce_scatter(comm, &input, &mut theirs, ReduceOp::Sum),
                        Algorithm::Direct => schedules::direct_reduce_scatter(comm, &input, &mut theirs, ReduceOp::Sum),
                        _ => schedules::recursive_halving_reduce_scatter(comm, &input, &mut theirs, ReduceOp::Sum),
                    });
                    res?;
                    assert_eq!(ours, theirs);
                    let a = resolve(&a, &[base(&input), base(&ours)], 8);
                    let b = resolve(&b, &[base(&input), base(&theirs)], 8);
                    assert_eq!(a.is_empty(), world == 1);
                    let what = format!("{algorithm} reduce-scatter, world {world}");
                    assert_follows(&what, r, &a, &b, &[n * world, n, 2 * n * world]);
                    Ok(())
                })
                .unwrap();
            }
        }
    }

    #[test]
    fn binomial_reduce_follows_its_schedule() {
        for world in 1usize..=9 {
            for root in [0, world / 2, world - 1] {
                let n = 9;
                crate::host::run_with(world, &options(Collective::Reduce, Algorithm::BinomialTree), |comm| {
                    let r = comm.rank();
                    let input: Vec<i64> = (0..n).map(|i| value(r, i)).collect();
                    let (mut ours, mut theirs) = (vec![0i64; n], vec![0i64; n]);
                    let (res, a) = record(|| comm.reduce(&input, &mut ours, ReduceOp::Sum, root));
                    res?;
                    let (res, b) =
                        record(|| schedules::binomial_reduce(comm, &input, &mut theirs, ReduceOp::Sum, root));
                    res?;
                    if r == root {
                        assert_eq!(ours, theirs);
                    }
                    let a = resolve(&a, &[base(&input), base(&ours)], 8);
                    let b = resolve(&b, &[base(&input), base(&theirs)], 8);
                    assert_eq!(a.is_empty(), world == 1);
                    let what = format!("binomial reduce, world {world}, root {root}");
                    assert_follows(&what, r, &a, &b, &[n, n, n]);
                    Ok(())
                })
                .unwrap();
            }
        }
    }
}
