//! Direct algorithms (every message of a collective posted in one batch):
//! all-to-all(v), all-gather, gather, scatter and all-reduce; and the
//! dissemination barrier.

use crate::element::{Element, ReduceOp};
use crate::error::Result;
use crate::raw::{Ctx, RawBuf};

/// Gather of `send` into block `r` of `out` on `root`.
///
/// # Safety
///
/// `send` valid; on the root `out` valid, writable, disjoint from `send`.
pub(super) unsafe fn gather<T: Element>(c: &Ctx<'_>, send: RawBuf<T>, out: RawBuf<T>, root: usize) -> Result<()> {
    let mut x = c.xfer();
    if c.rank == root {
        for peer in 0..c.world {
            let dst = out.block(peer, send.len);
            if peer == root {
                // SAFETY: forwarded from the caller.
                unsafe { send.copy_to(dst) };
            } else {
                x.recv(dst, peer, 0);
            }
        }
    } else {
        x.send(send, root, 0);
    }
    // SAFETY: forwarded from the caller.
    unsafe { x.run("gather") }
}

/// Scatter of block `r` of `src` on `root` into `recv` of rank `r`.
///
/// # Safety
///
/// `recv` valid and writable; on the root `src` valid and disjoint from `recv`.
pub(super) unsafe fn scatter<T: Element>(c: &Ctx<'_>, src: RawBuf<T>, recv: RawBuf<T>, root: usize) -> Result<()> {
    let mut x = c.xfer();
    if c.rank == root {
        for peer in 0..c.world {
            let block = src.block(peer, recv.len);
            if peer == root {
                // SAFETY: forwarded from the caller.
                unsafe { block.copy_to(recv) };
            } else {
                x.send(block, peer, 0);
            }
        }
    } else {
        x.recv(recv, root, 0);
    }
    // SAFETY: forwarded from the caller.
    unsafe { x.run("scatter") }
}

/// Dissemination barrier: in round `k` send an empty message to
/// `rank + 2^k` and wait for one from `rank - 2^k`.
pub(super) fn barrier(c: &Ctx<'_>) -> Result<()> {
    let empty = RawBuf::<u8> {
        ptr: std::ptr::NonNull::dangling().as_ptr(),
        len: 0,
    };
    let mut d = 1;
    while d < c.world {
        let mut x = c.xfer();
        x.send(empty, c.right(d), 0).recv(empty, c.left(d), 0);
        // SAFETY: empty buffers are never read or written.
        unsafe { x.run("barrier round")? };
        d *= 2;
    }
    Ok(())
}

/// Direct all-to-all(v): every block posted at once. `sends[j]` goes to rank
/// `j`, `recvs[j]` comes from rank `j`. The all-to-all's messages are
/// those of the `pairwise_all_to_all` schedule, posted together (checked
/// in `conformance.rs`).
///
/// # Safety
///
/// Every view valid, receive views writable and disjoint from all others.
pub(super) unsafe fn all_to_all_direct<T: Element>(
    c: &Ctx<'_>,
    sends: impl Iterator<Item = RawBuf<T>>,
    recvs: impl Iterator<Item = RawBuf<T>>,
) -> Result<()> {
    let mut x = c.xfer();
    for (peer, (s, r)) in sends.zip(recvs).enumerate() {
        if peer == c.rank {
            // SAFETY: forwarded from the caller.
            unsafe { s.copy_to(r) };
        } else {
            x.send(s, peer, 0).recv(r, peer, 0);
        }
    }
    // SAFETY: forwarded from the caller.
    unsafe { x.run("direct all-to-all") }
}

/// Direct all-gather: `send` goes to every peer and every peer's input
/// comes into its block of `recv`, all posted at once. Every message is
/// read from the sender's input, which the call does not write, so no rank
/// reads data another has just written (as a ring's forwarded blocks are),
/// and no rank waits for a neighbour to have received before it can send.
/// Its messages are those of the `direct_all_gather` schedule (checked in
/// `conformance.rs`).
///
/// # Safety
///
/// `send` valid; `recv` valid, writable, disjoint from `send`, of length
/// `send.len * world`, neither accessed otherwise for the whole call.
pub(super) unsafe fn all_gather<T: Element>(c: &Ctx<'_>, send: RawBuf<T>, recv: RawBuf<T>) -> Result<()> {
    let n = send.len;
    // SAFETY: forwarded from the caller; the blocks of `recv` are disjoint.
    unsafe {
        all_to_all_direct(
            c,
            std::iter::repeat_n(send, c.world),
            (0..c.world).map(|j| recv.block(j, n)),
        )
    }
}

/// Direct reduce-scatter of `send` (`world` nearly equal parts) into `own`
/// (the length of part `rank`): this rank combines its own part of every
/// rank's input into `own`, one peer after another in the order `r + 1,
/// r + 2, ...`, while every peer does the same with its part of this rank's
/// input.
///
/// Each message goes straight from the peer's buffer into `own` (the host
/// transport copies, or combines, once, on the receiver), so no scratch copy
/// is made. `own` fills in pieces of about `segment_bytes`: a piece of this
/// rank's own part is copied into it and combined with every peer's piece
/// while it is still in cache. Every rank posts all its outgoing pieces at
/// the start, so a rank's receives wait for nothing but the peer having
/// started. Its messages are those of the `direct_reduce_scatter` schedule
/// (checked in `conformance.rs`).
///
/// # Safety
///
/// `send` valid; `own` valid, writable, and equal to or disjoint from part
/// `rank` of `send` and disjoint from its other parts; neither accessed
/// otherwise for the whole call.
pub(super) unsafe fn reduce_scatter<T: Element>(
    c: &Ctx<'_>,
    send: RawBuf<T>,
    own: RawBuf<T>,
    op: ReduceOp,
) -> Result<()> {
    let (w, r) = (c.world, c.rank);
    let piece = (c.segment_bytes / size_of::<T>()).max(1);
    let pieces = |part: RawBuf<T>| {
        (0..part.len.div_ceil(piece)).map(move |k| part.sub(k * piece, piece.min(part.len - k * piece)))
    };
    let mut out = c.xfer();
    for s in 1..w {
        let to = c.left(s);
        for p in pieces(send.part(w, to)) {
            out.send(p, to, 0);
        }
    }
    // SAFETY: the parts sent are read only (by the peers) until `sent`
    // completes; this rank writes only `own` meanwhile, which is disjoint
    // from them.
    let sent = unsafe { out.post()? };
    for (mine, into) in pieces(send.part(w, r)).zip(pieces(own)) {
        // SAFETY: `mine` and `into` are the same piece of part `rank` and of
        // `own`, equal or disjoint.
        unsafe { mine.copy_to(into) };
        for s in 1..w {
            let mut x = c.xfer();
            x.recv_reduce(into, c.right(s), 0, op);
            // SAFETY: `into` is a piece of `own`, which no send of this call
            // reads.
            unsafe { x.run("direct reduce-scatter")? };
        }
    }
    sent.wait("direct reduce-scatter")
}

/// Direct all-reduce of `send` into `recv` (which may be `send` itself):
/// rank `r` owns part `r` of `world` nearly equal parts. First the direct
/// reduce-scatter ([`reduce_scatter`]) combines part `r` of every rank's
/// input into part `r` of the output; then every rank fetches the other
/// parts from their owners' outputs, all at once. Every byte moves the
/// minimum number of times, and no scratch copy is made. Its messages are
/// those of the `direct_all_reduce` schedule (checked in `conformance.rs`).
///
/// # Safety
///
/// `send` valid; `recv` valid, writable, equal to or disjoint from `send`,
/// of equal length, neither accessed otherwise for the whole call.
pub(super) unsafe fn all_reduce<T: Element>(c: &Ctx<'_>, send: RawBuf<T>, recv: RawBuf<T>, op: ReduceOp) -> Result<()> {
    let w = c.world;
    let own = recv.part(w, c.rank);
    // SAFETY: `own` is part `rank` of `recv`, which equals `send` or is
    // disjoint from it.
    unsafe { reduce_scatter(c, send, own, op)? };
    let mut x = c.xfer();
    for s in 1..w {
        x.send(own, c.right(s), 0).recv(recv.part(w, c.left(s)), c.left(s), 0);
    }
    // SAFETY: the own part is only sent; the other parts of `recv` are
    // disjoint from it and from each other, and (in place) every peer has
    // finished reading them: the reduce-scatter's sends completed.
    unsafe { x.run("direct all-reduce: gather") }
}
