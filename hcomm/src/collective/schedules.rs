//! The built-in algorithms that the schedule language can express, written
//! in it: each is checked at every build (matching, deadlock freedom,
//! hazards and its postcondition) for its whole `#[verify]` range, and at run
//! time, once per size, for larger communicators.
//!
//! The collectives of [`Comm`](crate::Comm) call these with a handle whose
//! messages belong to the collective, so they never match user messages.
//! Their length variables range from 0 (`n in 0..`): an empty buffer runs
//! the schedule, which moves nothing, so the ranks still agree on the call.
//! They are public so that programs can call a specific algorithm directly
//! (then on the user's message channels, tag 0) and read its IR
//! (`ring_all_gather::SCHEDULE`).

use super::Algorithm;
use crate::comm_schedule;
use crate::element::{Element, ReduceOp};
use crate::error::Result;
use crate::raw::{Ctx, RawBuf};

comm_schedule! {
    /// Ring all-gather: `world - 1` steps, each passes one block to the right.
    /// The first step sends the input itself rather than its copy in
    /// `output`: the copy was just written, so a neighbour reading it on
    /// another core would fetch every line from this core's cache (twice
    /// as slow at 1 MiB on two cores).
    #[verify(world in 1..=32, n in 0..)]
    #[postcondition(all_gather(input -> output))]
    pub fn ring_all_gather(input: &[T; n], output: &mut [T; n * world]) {
        copy input -> output.chunk(rank);
        if world > 1 {
            batch {
                send input to (rank + 1) % world;
                recv output.chunk((rank - 1) % world) from (rank - 1) % world;
            }
        }
        for s in 1..world - 1 {
            batch {
                send output.chunk((rank - s) % world) to (rank + 1) % world;
                recv output.chunk((rank - s - 1) % world) from (rank - 1) % world;
            }
        }
    }

    /// Recursive-doubling all-gather: partners `2^k` apart swap all they
    /// have gathered so far (the first swap sends the input itself, as the
    /// ring does).
    #[verify(world in 1..=32, n in 0..)]
    #[requires(is_pow2(world))]
    #[postcondition(all_gather(input -> output))]
    pub fn recursive_doubling_all_gather(input: &[T; n], output: &mut [T; n * world]) {
        copy input -> output.chunk(rank);
        if world > 1 {
            batch {
                send input to rank ^ 1;
                recv output.chunk(rank ^ 1) from rank ^ 1;
            }
        }
        for k in 1..log2(world) {
            let d = pow2(k);
            let peer = rank ^ d;
            let mine = rank / d * d;
            let theirs = peer / d * d;
            batch {
                send output[mine * n..(mine + d) * n] to peer;
                recv output[theirs * n..(theirs + d) * n] from peer;
            }
        }
    }

    /// Bruck's all-gather for any world size: gathers rotated into a
    /// scratch buffer in `ceil(log2(world))` steps, then rotates into place.
    #[verify(world in 1..=32, n in 0..)]
    #[postcondition(all_gather(input -> output))]
    pub fn bruck_all_gather(input: &[T; n], output: &mut [T; n * world]) {
        let tmp = scratch[T; n * world];
        copy input -> tmp.chunk(0);
        if world > 1 {
            for k in 0..log2(world - 1) + 1 {
                let d = pow2(k);
                let count = min(d, world - d);
                batch {
                    send tmp[0..count * n] to (rank - d) % world;
                    recv tmp[d * n..(d + count) * n] from (rank + d) % world;
                }
            }
        }
        for i in 0..world {
            copy tmp.chunk(i) -> output.chunk((rank + i) % world);
        }
    }

    /// Direct all-gather: in step `s` send the input to `rank + s` and
    /// receive the input of `rank - s`. The collectives' direct all-gather
    /// issues these messages, all posted at once.
    #[verify(world in 1..=32, n in 0..)]
    #[postcondition(all_gather(input -> output))]
    pub fn direct_all_gather(input: &[T; n], output: &mut [T; n * world]) {
        copy input -> output.chunk(rank);
        for s in 1..world {
            batch {
                send input to (rank + s) % world;
                recv output.chunk((rank - s) % world) from (rank - s) % world;
            }
        }
    }

    /// Pairwise all-to-all: in step `s` send to `rank + s`, receive from
    /// `rank - s`.
    #[verify(world in 1..=32, n in 0..)]
    #[postcondition(all_to_all(input -> output))]
    pub fn pairwise_all_to_all(input: &[T; n * world], output: &mut [T; n * world]) {
        copy input.chunk(rank) -> output.chunk(rank);
        for s in 1..world {
            batch {
                send input.chunk((rank + s) % world) to (rank + s) % world;
                recv output.chunk((rank - s) % world) from (rank - s) % world;
            }
        }
    }

    /// Binomial-tree broadcast from `root`: in round `k` every rank that has
    /// the data passes it `2^k` ranks further.
    #[verify(world in 1..=32, root in 0..world, n in 0..)]
    #[postcondition(broadcast(buf, root = root))]
    pub fn binomial_broadcast(buf: &mut [T; n], root: usize) {
        let v = (rank - root) % world;
        if world > 1 {
            for k in 0..log2(world - 1) + 1 {
                let d = pow2(k);
                if v < d && v + d < world {
                    send buf to (v + d + root) % world;
                } else if v >= d && v < 2 * d {
                    recv buf from (v - d + root) % world;
                }
            }
        }
    }
}

comm_schedule! {
    /// One-shot all-reduce: every rank sends its whole input to every peer
    /// and folds the world's inputs in rank order, so every rank ends with
    /// the same bits. The collectives' one-shot all-reduce moves the same
    /// contributions through the board of an in-process group instead of
    /// messages, and folds them in the same order.
    #[verify(world in 1..=16, n in 0..)]
    #[postcondition(all_reduce(input -> output, op))]
    pub fn one_shot_all_reduce(input: &[T; n], output: &mut [T; n], op: ReduceOp) {
        let all = scratch[T; n * world];
        copy input -> all.chunk(rank);
        batch {
            for s in 1..world {
                send input to (rank + s) % world;
                recv all.chunk((rank - s) % world) from (rank - s) % world;
            }
        }
        copy all.chunk(0) -> output;
        for j in 1..world {
            accumulate all.chunk(j) -> output, op;
        }
    }

    /// One-shot all-gather: every rank sends its input to every peer at
    /// once. The collectives' one-shot all-gather moves the same blocks
    /// through the board of an in-process group.
    #[verify(world in 1..=16, n in 0..)]
    #[postcondition(all_gather(input -> output))]
    pub fn one_shot_all_gather(input: &[T; n], output: &mut [T; n * world]) {
        copy input -> output.chunk(rank);
        batch {
            for s in 1..world {
                send input to (rank + s) % world;
                recv output.chunk((rank - s) % world) from (rank - s) % world;
            }
        }
    }
}

comm_schedule! {
    /// One-shot reduce-scatter: every rank sends chunk `j` of its input to
    /// rank `j` at once, and folds the chunks it gets in rank order. The
    /// collectives' one-shot reduce-scatter reads the same chunks from the
    /// board of an in-process group and folds them in the same order.
    #[verify(world in 1..=16, n in 0..)]
    #[postcondition(reduce_scatter(input -> output, op))]
    pub fn one_shot_reduce_scatter(input: &[T; n * world], output: &mut [T; n], op: ReduceOp) {
        let all = scratch[T; n * world];
        copy input.chunk(rank) -> all.chunk(rank);
        batch {
            for s in 1..world {
                send input.chunk((rank + s) % world) to (rank + s) % world;
                recv all.chunk((rank - s) % world) from (rank - s) % world;
            }
        }
        copy all.chunk(0) -> output;
        for j in 1..world {
            accumulate all.chunk(j) -> output, op;
        }
    }

    /// One-shot all-to-all: every rank sends block `j` of its input to rank
    /// `j` at once. The collectives' one-shot all-to-all reads the same
    /// blocks from the board of an in-process group.
    #[verify(world in 1..=16, n in 0..)]
    #[postcondition(all_to_all(input -> output))]
    pub fn one_shot_all_to_all(input: &[T; n * world], output: &mut [T; n * world]) {
        copy input.chunk(rank) -> output.chunk(rank);
        batch {
            for s in 1..world {
                send input.chunk((rank + s) % world) to (rank + s) % world;
                recv output.chunk((rank - s) % world) from (rank - s) % world;
            }
        }
    }

    /// One-shot broadcast: the root sends its buffer to every rank at once.
    /// The collectives' one-shot broadcast has every rank read it from the
    /// board of an in-process group.
    #[verify(world in 1..=16, root in 0..world, n in 0..)]
    #[postcondition(broadcast(buf, root = root))]
    pub fn one_shot_broadcast(buf: &mut [T; n], root: usize) {
        if rank == root {
            batch {
                for s in 1..world {
                    send buf to (root + s) % world;
                }
            }
        } else {
            recv buf from root;
        }
    }
}

comm_schedule! {
    /// Ring all-reduce of `buf` in place with `op`: a reduce-scatter ring
    /// (receives combine into the block), then an all-gather ring. Checked
    /// for every operator.
    #[verify(world in 1..=32, n in 0..)]
    #[postcondition(all_reduce(buf, op))]
    pub fn ring_all_reduce(buf: &mut [T; n * world], op: ReduceOp) {
        for s in 0..world - 1 {
            batch {
                send buf.chunk((rank - s) % world) to (rank + 1) % world;
                recv buf.chunk((rank - s - 1) % world) from (rank - 1) % world reduce op;
            }
        }
        for s in 0..world - 1 {
            batch {
                send buf.chunk((rank + 1 - s) % world) to (rank + 1) % world;
                recv buf.chunk((rank - s) % world) from (rank - 1) % world;
            }
        }
    }
}

comm_schedule! {
    /// Direct all-reduce: rank `r` combines chunk `r` of every rank's input
    /// into its output, peer `r + s` in step `s`, then fetches every other
    /// chunk from its owner. The collectives' direct all-reduce issues
    /// these messages (in cache-sized pieces, its sends posted up front).
    #[verify(world in 1..=16, n in 0..)]
    #[postcondition(all_reduce(input -> output, op))]
    pub fn direct_all_reduce(input: &[T; n * world], output: &mut [T; n * world], op: ReduceOp) {
        copy input.chunk(rank) -> output.chunk(rank);
        for s in 1..world {
            batch {
                send input.chunk((rank - s) % world) to (rank - s) % world;
                recv output.chunk(rank) from (rank + s) % world reduce op;
            }
        }
        for s in 1..world {
            batch {
                send output.chunk(rank) to (rank + s) % world;
                recv output.chunk((rank - s) % world) from (rank - s) % world;
            }
        }
    }

    /// Direct reduce-scatter: rank `r` combines chunk `r` of every rank's
    /// input into its output, peer `r + s` in step `s`. The collectives'
    /// direct reduce-scatter issues these messages (in cache-sized pieces,
    /// its sends posted up front).
    #[verify(world in 1..=16, n in 0..)]
    #[postcondition(reduce_scatter(input -> output, op))]
    pub fn direct_reduce_scatter(input: &[T; n * world], output: &mut [T; n], op: ReduceOp) {
        copy input.chunk(rank) -> output;
        for s in 1..world {
            batch {
                send input.chunk((rank - s) % world) to (rank - s) % world;
                recv output from (rank + s) % world reduce op;
            }
        }
    }

    /// Halving-doubling all-reduce (Rabenseifner) for any world: the first
    /// `2 * extra` ranks (`extra = world - p`, `p` the largest power of two
    /// up to `world`) fold in pairs, even into odd; the `p` remaining ranks,
    /// as virtual ranks `v`, reduce-scatter by recursive halving and
    /// all-gather by recursive doubling over `p` chunks; the odd ranks hand
    /// the result back. The collectives' halving-doubling all-reduce issues
    /// these messages.
    #[verify(world in 1..=16, n in 0..)]
    #[postcondition(all_reduce(buf, op))]
    pub fn halving_doubling_all_reduce(buf: &mut [T; n * pow2(log2(world))], op: ReduceOp) {
        let p = pow2(log2(world));
        let extra = world - p;
        let folded = rank < 2 * extra;
        let v = folded * (rank / 2) + (1 - folded) * (rank - extra);
        if folded && rank % 2 == 0 {
            send buf to rank + 1;
            recv buf from rank + 1;
        } else {
            if folded {
                recv buf from rank - 1 reduce op;
            }
            for k in 0..log2(p) {
                let d = p / pow2(k + 1);
                let u = v ^ d;
                let peer = (u < extra) * (2 * u + 1) + (u >= extra) * (u + extra);
                batch {
                    send buf[u / d * d * n..(u / d * d + d) * n] to peer;
                    recv buf[v / d * d * n..(v / d * d + d) * n] from peer reduce op;
                }
            }
            for k in 0..log2(p) {
                let d = pow2(k);
                let u = v ^ d;
                let peer = (u < extra) * (2 * u + 1) + (u >= extra) * (u + extra);
                batch {
                    send buf[v / d * d * n..(v / d * d + d) * n] to peer;
                    recv buf[u / d * d * n..(u / d * d + d) * n] from peer;
                }
            }
            if folded {
                send buf to rank - 1;
            }
        }
    }

    /// Recursive-doubling all-reduce of whole vectors (the halving-doubling
    /// all-reduce of small messages): after the same fold as
    /// [`halving_doubling_all_reduce()`], virtual ranks `2^k` apart exchange
    /// their whole partial results (sent from a copy) and combine them.
    #[verify(world in 1..=16, n in 0..)]
    #[postcondition(all_reduce(buf, op))]
    pub fn recursive_doubling_all_reduce(buf: &mut [T; n], op: ReduceOp) {
        let p = pow2(log2(world));
        let extra = world - p;
        let folded = rank < 2 * extra;
        let v = folded * (rank / 2) + (1 - folded) * (rank - extra);
        let tmp = scratch[T; n];
        if folded && rank % 2 == 0 {
            send buf to rank + 1;
            recv buf from rank + 1;
        } else {
            if folded {
                recv buf from rank - 1 reduce op;
            }
            for k in 0..log2(p) {
                let u = v ^ pow2(k);
                let peer = (u < extra) * (2 * u + 1) + (u >= extra) * (u + extra);
                copy buf -> tmp;
                batch {
                    send tmp to peer;
                    recv buf from peer reduce op;
                }
            }
            if folded {
                send buf to rank - 1;
            }
        }
    }

    /// Recursive-halving reduce-scatter (power-of-two worlds): on a copy of
    /// the input, partners `world / 2^(k+1)` apart exchange the half of
    /// their current range that the other keeps and combine the half they
    /// keep; chunk `rank` is the result.
    #[verify(world in [1, 2, 4, 8, 16], n in 0..)]
    #[requires(is_pow2(world))]
    #[postcondition(reduce_scatter(input -> output, op))]
    pub fn recursive_halving_reduce_scatter(input: &[T; n * world], output: &mut [T; n], op: ReduceOp) {
        let tmp = scratch[T; n * world];
        copy input -> tmp;
        for k in 0..log2(world) {
            let d = world / pow2(k + 1);
            let peer = rank ^ d;
            batch {
                send tmp[peer / d * d * n..(peer / d * d + d) * n] to peer;
                recv tmp[rank / d * d * n..(rank / d * d + d) * n] from peer reduce op;
            }
        }
        copy tmp.chunk(rank) -> output;
    }

    /// Ring reduce-scatter without a copy of the input: in step `s` a rank
    /// copies its chunk `rank - s - 2` into a partial result (one of two
    /// scratch chunks in turn, the output in the last step), passes on the
    /// previous partial result (its chunk `rank - 1` in the first step) and
    /// combines the one arriving from the left into the new one.
    #[verify(world in 1..=16, n in 0..)]
    #[postcondition(reduce_scatter(input -> output, op))]
    pub fn ring_reduce_scatter(input: &[T; n * world], output: &mut [T; n], op: ReduceOp) {
        let tmp = scratch[T; 2 * n];
        if world == 1 {
            copy input -> output;
        }
        for s in 0..world - 1 {
            let last = s == world - 2;
            if last {
                copy input.chunk((rank - s - 2) % world) -> output;
            } else {
                copy input.chunk((rank - s - 2) % world) -> tmp[s % 2 * n..(s % 2 + 1) * n];
            }
            if s == 0 && last {
                batch {
                    send input.chunk((rank - 1) % world) to (rank + 1) % world;
                    recv output from (rank - 1) % world reduce op;
                }
            } else if s == 0 {
                batch {
                    send input.chunk((rank - 1) % world) to (rank + 1) % world;
                    recv tmp[0..n] from (rank - 1) % world reduce op;
                }
            } else if last {
                batch {
                    send tmp[(s - 1) % 2 * n..((s - 1) % 2 + 1) * n] to (rank + 1) % world;
                    recv output from (rank - 1) % world reduce op;
                }
            } else {
                batch {
                    send tmp[(s - 1) % 2 * n..((s - 1) % 2 + 1) * n] to (rank + 1) % world;
                    recv tmp[s % 2 * n..(s % 2 + 1) * n] from (rank - 1) % world reduce op;
                }
            }
        }
    }

    /// Binomial-tree reduce to `root`: virtual rank `v = rank - root`
    /// combines the partial results of `v + 2^k` for each `k` below its
    /// lowest set bit, then sends its own to `v - 2^k` at that bit. The root
    /// accumulates in the output, inner ranks in a copy of the input, and
    /// leaves send their input as it is.
    #[verify(world in 1..=16, root in 0..world, n in 0..)]
    #[postcondition(reduce(input -> output, op, root = root))]
    pub fn binomial_reduce(input: &[T; n], output: &mut [T; n], op: ReduceOp, root: usize) {
        let v = (rank - root) % world;
        let tmp = scratch[T; n];
        if v == 0 {
            copy input -> output;
            if world > 1 {
                for k in 0..log2(world - 1) + 1 {
                    let d = pow2(k);
                    if d < world {
                        recv output from (d + root) % world reduce op;
                    }
                }
            }
        } else if v % 2 == 0 && v + 1 < world {
            copy input -> tmp;
            for k in 0..log2(world - 1) + 1 {
                let d = pow2(k);
                if v % (2 * d) == d {
                    send tmp to (v - d + root) % world;
                } else if v % (2 * d) == 0 && v + d < world {
                    recv tmp from (v + d + root) % world reduce op;
                }
            }
        } else {
            for k in 0..log2(world - 1) + 1 {
                let d = pow2(k);
                if v % (2 * d) == d {
                    send input to (v - d + root) % world;
                }
            }
        }
    }

    /// Scatter + ring all-gather broadcast from `root`: the root sends chunk
    /// `j` to rank `j`, then `world - 1` ring steps pass chunk `rank - s` to
    /// the right. The collectives' scatter + all-gather broadcast issues
    /// these messages (the ring in pipelined segments).
    #[verify(world in 1..=16, root in 0..world, n in 0..)]
    #[postcondition(broadcast(buf, root = root))]
    pub fn scatter_all_gather_broadcast(buf: &mut [T; n * world], root: usize) {
        if rank == root {
            for j in 0..world {
                if j != root {
                    send buf.chunk(j) to j;
                }
            }
        } else {
            recv buf.chunk(rank) from root;
        }
        for s in 0..world - 1 {
            batch {
                send buf.chunk((rank - s) % world) to (rank + 1) % world;
                recv buf.chunk((rank - s - 1) % world) from (rank - 1) % world;
            }
        }
    }
}

/// Ring all-reduce of `buf` in place with [`ring_all_reduce`]. The buffer
/// goes through the ring in pieces of about `segment_bytes` per rank (a
/// multiple of the world size, so the schedule's chunks divide evenly),
/// which keeps each piece's working set in cache; a tail shorter than the
/// world size goes through halving-doubling.
///
/// # Safety
///
/// `buf` valid, writable and not accessed otherwise for the whole call.
pub(super) unsafe fn ring_all_reduce_in_pieces<T: Element>(c: &Ctx<'_>, buf: RawBuf<T>, op: ReduceOp) -> Result<()> {
    let w = c.world;
    let coll = c.comm.for_collective(&c.header);
    let piece = (c.segment_bytes / size_of::<T>() / w).max(1) * w;
    let bulk = buf.len - buf.len % w;
    if bulk > 0 {
        c.ran(Algorithm::Ring);
    }
    let mut start = 0;
    while start < bulk {
        let len = piece.min(bulk - start);
        // SAFETY: a sub-range of `buf`, which the caller lends exclusively.
        let slice = unsafe { buf.sub(start, len).as_mut_slice() };
        ring_all_reduce(&coll, slice, op)?;
        start += len;
    }
    if bulk < buf.len {
        // SAFETY: the tail of `buf`, lent exclusively.
        unsafe { super::halving_doubling::all_reduce(c, buf.sub(bulk, buf.len - bulk), op)? };
    }
    Ok(())
}

/// All-gather with the schedule for `algorithm` (ring, recursive doubling or
/// Bruck).
///
/// # Safety
///
/// `send` valid; `recv` valid, writable, disjoint from `send`, of length
/// `send.len * world`, for the whole call.
pub(super) unsafe fn all_gather<T: Element>(
    c: &Ctx<'_>,
    algorithm: Algorithm,
    send: RawBuf<T>,
    recv: RawBuf<T>,
) -> Result<()> {
    let coll = c.comm.for_collective(&c.header);
    // SAFETY: forwarded from the caller; the two views are disjoint.
    let (input, output) = unsafe { (send.as_slice(), recv.as_mut_slice()) };
    match algorithm {
        Algorithm::RecursiveDoubling => recursive_doubling_all_gather(&coll, input, output),
        Algorithm::Bruck => bruck_all_gather(&coll, input, output),
        _ => ring_all_gather(&coll, input, output),
    }
}

/// Pairwise all-to-all with the schedule.
///
/// # Safety
///
/// `send` valid; `recv` valid, writable, disjoint from `send`, of equal
/// length divisible by the world size, for the whole call.
pub(super) unsafe fn all_to_all<T: Element>(c: &Ctx<'_>, send: RawBuf<T>, recv: RawBuf<T>) -> Result<()> {
    let coll = c.comm.for_collective(&c.header);
    // SAFETY: forwarded from the caller; the two views are disjoint.
    let (input, output) = unsafe { (send.as_slice(), recv.as_mut_slice()) };
    pairwise_all_to_all(&coll, input, output)
}

/// Binomial-tree broadcast with the schedule.
///
/// # Safety
///
/// `buf` valid, writable and not accessed otherwise for the whole call.
pub(super) unsafe fn broadcast<T: Element>(c: &Ctx<'_>, buf: RawBuf<T>, root: usize) -> Result<()> {
    let coll = c.comm.for_collective(&c.header);
    // SAFETY: forwarded from the caller.
    binomial_broadcast(&coll, unsafe { buf.as_mut_slice() }, root)
}
