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
    use crate::element::Element;
    use crate::{Comm, CommOptions, ReduceOp, Result};

    /// An algorithm or a schedule run on one rank's buffers: the input
    /// first, then the outputs.
    type Run<'a> = &'a (dyn Fn(&Comm, &[i64], &mut [Vec<i64>]) -> Result<()> + Sync);

    /// On `world` ranks with `collective` forced to `algorithm` (segments of
    /// 24 bytes unless `segment_bytes` says otherwise), runs `ours` (the
    /// collective) and `theirs` (its schedule), each on fresh buffers: an
    /// input of `input_len` elements and zeroed outputs of `output_lens`.
    /// Both must end with the same data, and `ours` must post the messages
    /// of `theirs`.
    #[allow(clippy::too_many_arguments)]
    fn follows(
        what: &str,
        world: usize,
        (collective, algorithm): (Collective, Algorithm),
        segment_bytes: Option<usize>,
        input_len: usize,
        output_lens: &[usize],
        ours: Run<'_>,
        theirs: Run<'_>,
    ) {
        let mut options = CommOptions::default()
            .with_timeout(std::time::Duration::from_secs(20))
            .with_algorithm(collective, algorithm);
        options.segment_bytes = segment_bytes.unwrap_or(24);
        crate::host::run_with(world, &options, |comm| {
            let r = comm.rank();
            let input: Vec<i64> = (0..input_len).map(|i| (r * 1000 + i) as i64).collect();
            let fresh = || output_lens.iter().map(|&n| vec![0i64; n]).collect::<Vec<_>>();
            let (mut a_bufs, mut b_bufs) = (fresh(), fresh());
            let (res, a) = record(|| ours(comm, &input, &mut a_bufs));
            res?;
            let (res, b) = record(|| theirs(comm, &input, &mut b_bufs));
            res?;
            assert_eq!(a_bufs, b_bufs, "{what}, world {world}, rank {r}: the results differ");
            let places = |bufs: &[Vec<i64>]| {
                std::iter::once(&input)
                    .chain(bufs)
                    .map(|v| (v.as_ptr() as usize, v.len()))
                    .collect::<Vec<_>>()
            };
            let a = resolve(&a, &places(&a_bufs), 8);
            let b = resolve(&b, &places(&b_bufs), 8);
            assert_eq!(a.is_empty(), world == 1, "{what}, world {world}, rank {r}");
            let mut lens = vec![input_len];
            lens.extend_from_slice(output_lens);
            // Scratch: as long as the longest buffer, which bounds it here.
            lens.push(lens.iter().copied().max().unwrap_or(0) * 2);
            assert_follows(&format!("{what}, world {world}"), r, &a, &b, &lens);
            Ok(())
        })
        .unwrap();
    }

    #[test]
    fn direct_all_reduce_follows_its_schedule() {
        for world in 1..=9 {
            for n in [1, 5] {
                let len = n * world;
                follows(
                    "direct all-reduce",
                    world,
                    (Collective::AllReduce, Algorithm::Direct),
                    None,
                    len,
                    &[len],
                    &|c, i, o| c.all_reduce(i, &mut o[0], ReduceOp::Sum),
                    &|c, i, o| schedules::direct_all_reduce(c, i, &mut o[0], ReduceOp::Sum),
                );
            }
        }
    }

    #[test]
    fn direct_all_gather_follows_its_schedule() {
        for world in 1..=9 {
            follows(
                "direct all-gather",
                world,
                (Collective::AllGather, Algorithm::Direct),
                None,
                5,
                &[5 * world],
                &|c, i, o| c.all_gather(i, &mut o[0]),
                &|c, i, o| schedules::direct_all_gather(c, i, &mut o[0]),
            );
        }
    }

    /// The direct all-to-all posts at once what the pairwise schedule posts
    /// step by step: per channel, the same messages.
    #[test]
    fn direct_all_to_all_follows_the_pairwise_schedule() {
        for world in 1..=9 {
            let len = 3 * world;
            follows(
                "direct all-to-all",
                world,
                (Collective::AllToAll, Algorithm::Direct),
                None,
                len,
                &[len],
                &|c, i, o| c.all_to_all(i, &mut o[0]),
                &|c, i, o| schedules::pairwise_all_to_all(c, i, &mut o[0]),
            );
        }
    }

    /// Halving then doubling above the whole-vector threshold; recursive
    /// doubling of whole vectors below it. In place.
    #[test]
    fn halving_doubling_all_reduces_follow_their_schedules() {
        for world in 1usize..=9 {
            let p = 1 << world.ilog2();
            let large = 4200usize.div_ceil(p) * p;
            for len in [large, 37] {
                let ours: Run<'_> = &|c, i, o| {
                    o[0].copy_from_slice(i);
                    c.all_reduce_in_place(&mut o[0], ReduceOp::Max)
                };
                let theirs: Run<'_> = &|c, i, o| {
                    o[0].copy_from_slice(i);
                    if len == large {
                        schedules::halving_doubling_all_reduce(c, &mut o[0], ReduceOp::Max)
                    } else {
                        schedules::recursive_doubling_all_reduce(c, &mut o[0], ReduceOp::Max)
                    }
                };
                let key = (Collective::AllReduce, Algorithm::HalvingDoubling);
                follows(
                    "halving-doubling all-reduce",
                    world,
                    key,
                    None,
                    len,
                    &[len],
                    ours,
                    theirs,
                );
            }
        }
    }

    /// The ring in one piece (a longer message is the same ring once per
    /// piece), recursive halving, and the direct one in pieces.
    #[test]
    fn reduce_scatters_follow_their_schedules() {
        for (algorithm, worlds) in [
            (Algorithm::Ring, &[1usize, 2, 3, 4, 5, 6, 7, 8, 9][..]),
            (Algorithm::RecursiveHalving, &[1, 2, 4, 8][..]),
            (Algorithm::Direct, &[1, 2, 3, 4, 5, 6, 7, 8, 9][..]),
        ] {
            for &world in worlds {
                let n = 11;
                let segment = (algorithm == Algorithm::Ring).then_some(1 << 20);
                follows(
                    &format!("{algorithm} reduce-scatter"),
                    world,
                    (Collective::ReduceScatter, algorithm),
                    segment,
                    n * world,
                    &[n],
                    &|c, i, o| c.reduce_scatter(i, &mut o[0], ReduceOp::Sum),
                    &|c, i, o| match algorithm {
                        Algorithm::Ring => schedules::ring_reduce_scatter(c, i, &mut o[0], ReduceOp::Sum),
                        Algorithm::Direct => schedules::direct_reduce_scatter(c, i, &mut o[0], ReduceOp::Sum),
                        _ => schedules::recursive_halving_reduce_scatter(c, i, &mut o[0], ReduceOp::Sum),
                    },
                );
            }
        }
    }

    #[test]
    fn binomial_reduce_follows_its_schedule() {
        for world in 1..=9 {
            for root in [0, world / 2, world - 1] {
                follows(
                    &format!("binomial reduce to {root}"),
                    world,
                    (Collective::Reduce, Algorithm::BinomialTree),
                    None,
                    9,
                    &[9],
                    &|c, i, o| c.reduce(i, &mut o[0], ReduceOp::Sum, root),
                    &|c, i, o| schedules::binomial_reduce(c, i, &mut o[0], ReduceOp::Sum, root),
                );
            }
        }
    }

    #[test]
    fn scatter_all_gather_broadcast_follows_its_schedule() {
        for world in 1..=9 {
            for root in [0, world / 2, world - 1] {
                let len = 7 * world;
                follows(
                    &format!("broadcast from {root}"),
                    world,
                    (Collective::Broadcast, Algorithm::ScatterAllGather),
                    None,
                    len,
                    &[len],
                    &|c, i, o| {
                        o[0].copy_from_slice(i);
                        c.broadcast(&mut o[0], root)
                    },
                    &|c, i, o| {
                        o[0].copy_from_slice(i);
                        schedules::scatter_all_gather_broadcast(c, &mut o[0], root)
                    },
                );
            }
        }
    }

    /// The one-shot collectives move no messages (their contributions go
    /// through the board) and end with the bits of their schedules, which
    /// send the same contributions and fold them in the same order: the
    /// all-reduce runs on floats whose sum depends on that order, in place
    /// and not, for every operator.
    #[test]
    fn one_shot_collectives_end_with_their_schedules_bits() {
        for world in 1..=9 {
            for n in [1, 7, 1000] {
                for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min] {
                    let options = CommOptions::default()
                        .with_timeout(std::time::Duration::from_secs(20))
                        .with_algorithm(Collective::AllReduce, Algorithm::OneShot)
                        .with_algorithm(Collective::AllGather, Algorithm::OneShot)
                        .with_algorithm(Collective::ReduceScatter, Algorithm::OneShot)
                        .with_algorithm(Collective::AllToAll, Algorithm::OneShot)
                        .with_algorithm(Collective::Broadcast, Algorithm::OneShot);
                    crate::host::run_with(world, &options, |comm| {
                        let r = comm.rank();
                        let value = |r: usize, i: usize| 1.0f32 + ((r * 7919 + i * 104_729) % 1000) as f32 * 1e-3;
                        let input: Vec<f32> = (0..n).map(|i| value(r, i)).collect();
                        let mut ours = vec![0f32; n];
                        let ((), posted) = record(|| comm.all_reduce(&input, &mut ours, op).unwrap());
                        assert!(
                            posted.is_empty(),
                            "world {world}: the one-shot all-reduce posted messages"
                        );
                        assert_eq!(comm.last_algorithms(Collective::AllReduce), [Algorithm::OneShot]);
                        let mut in_place = input.clone();
                        comm.all_reduce_in_place(&mut in_place, op)?;
                        let mut theirs = vec![0f32; n];
                        schedules::one_shot_all_reduce(comm, &input, &mut theirs, op)?;
                        let serial: Vec<f32> = (0..n)
                            .map(|i| (1..world).fold(value(0, i), |acc, q| f32::combine(op, acc, value(q, i))))
                            .collect();
                        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
                        assert_eq!(bits(&ours), bits(&serial), "world {world}, {op}, rank {r}");
                        assert_eq!(
                            bits(&in_place),
                            bits(&serial),
                            "in place, world {world}, {op}, rank {r}"
                        );
                        assert_eq!(bits(&theirs), bits(&serial), "schedule, world {world}, {op}, rank {r}");

                        let mut ours = vec![0f32; n * world];
                        let ((), posted) = record(|| comm.all_gather(&input, &mut ours).unwrap());
                        assert!(
                            posted.is_empty(),
                            "world {world}: the one-shot all-gather posted messages"
                        );
                        let mut theirs = vec![0f32; n * world];
                        schedules::one_shot_all_gather(comm, &input, &mut theirs)?;
                        let serial: Vec<f32> = (0..world).flat_map(|q| (0..n).map(move |i| value(q, i))).collect();
                        assert_eq!(bits(&ours), bits(&serial), "all-gather, world {world}, rank {r}");
                        assert_eq!(
                            bits(&theirs),
                            bits(&serial),
                            "all-gather schedule, world {world}, rank {r}"
                        );

                        // Reduce-scatter and all-to-all over `n` per peer.
                        let whole: Vec<f32> = (0..n * world).map(|i| value(r, i)).collect();
                        let mut ours = vec![0f32; n];
                        let ((), posted) = record(|| comm.reduce_scatter(&whole, &mut ours, op).unwrap());
                        assert!(
                            posted.is_empty(),
                            "world {world}: the one-shot reduce-scatter posted messages"
                        );
                        let mut theirs = vec![0f32; n];
                        schedules::one_shot_reduce_scatter(comm, &whole, &mut theirs, op)?;
                        let serial: Vec<f32> = (r * n..(r + 1) * n)
                            .map(|i| (1..world).fold(value(0, i), |acc, q| f32::combine(op, acc, value(q, i))))
                            .collect();
                        assert_eq!(
                            bits(&ours),
                            bits(&serial),
                            "reduce-scatter, world {world}, {op}, rank {r}"
                        );
                        assert_eq!(
                            bits(&theirs),
                            bits(&serial),
                            "reduce-scatter schedule, world {world}, rank {r}"
                        );

                        let mut ours = vec![0f32; n * world];
                        let ((), posted) = record(|| comm.all_to_all(&whole, &mut ours).unwrap());
                        assert!(
                            posted.is_empty(),
                            "world {world}: the one-shot all-to-all posted messages"
                        );
                        let mut theirs = vec![0f32; n * world];
                        schedules::one_shot_all_to_all(comm, &whole, &mut theirs)?;
                        let serial: Vec<f32> = (0..world)
                            .flat_map(|q| (0..n).map(move |i| value(q, r * n + i)))
                            .collect();
                        assert_eq!(bits(&ours), bits(&serial), "all-to-all, world {world}, rank {r}");
                        assert_eq!(
                            bits(&theirs),
                            bits(&serial),
                            "all-to-all schedule, world {world}, rank {r}"
                        );

                        let root = (n + world) % world;
                        let mut ours = input.clone();
                        let ((), posted) = record(|| comm.broadcast(&mut ours, root).unwrap());
                        assert!(
                            posted.is_empty(),
                            "world {world}: the one-shot broadcast posted messages"
                        );
                        let mut theirs = input.clone();
                        schedules::one_shot_broadcast(comm, &mut theirs, root)?;
                        let serial: Vec<f32> = (0..n).map(|i| value(root, i)).collect();
                        assert_eq!(bits(&ours), bits(&serial), "broadcast, world {world}, rank {r}");
                        assert_eq!(
                            bits(&theirs),
                            bits(&serial),
                            "broadcast schedule, world {world}, rank {r}"
                        );
                        Ok(())
                    })
                    .unwrap();
                }
            }
        }
    }
}
