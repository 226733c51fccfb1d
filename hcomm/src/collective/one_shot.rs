//! One-shot collectives on the board of an in-process group
//! ([`crate::backend::Board`]): every rank puts its contribution where every
//! peer reads it, and takes what it needs from every rank's in rank order.
//! One step and no messages, so the latency of a small collective is one
//! copy in, one read per peer and one counter store, not a message per peer
//! and step. The part of a contribution that only its own rank reads (its
//! block of an all-to-all, its part of a reduce-scatter) is read from its
//! input and not copied onto the board.
//!
//! The all-reduce folds the ranks' vectors in rank order (`x0 op x1 op ...`),
//! so every rank ends with the same bits, as with the other algorithms.
//! The data each rank ends with is that of the `one_shot_*` schedules, which
//! move the same contributions as messages and fold them in the same order
//! (checked in `conformance.rs`).

use crate::backend::Board;
use crate::element::{Element, ReduceOp};
use crate::error::Result;
use crate::raw::{Ctx, RawBuf};

/// One exchange on the board: this rank contributes `mine` (its `len`
/// elements, where it contributes), then `take(rank, theirs)` gets every
/// rank's contribution of `len` elements, in rank order, this rank's
/// included (as copied onto the board).
///
/// With `own = Some((start, n))`, elements `start..start + n` of `mine`,
/// which only this rank reads, are not copied onto the board, and this
/// rank's `take` gets `mine` itself instead of its page.
///
/// # Safety
///
/// `mine` valid until this returns; every rank that contributes passes the
/// same `len` (the collective's header, which the board compares, fixes it).
/// With `own`, the part is in bounds, no peer's `take` reads it, and
/// nothing this rank's `take` writes overlaps `mine`.
unsafe fn exchange<T: Element>(
    c: &Ctx<'_>,
    board: &dyn Board,
    mine: Option<RawBuf<T>>,
    len: usize,
    own: Option<(usize, usize)>,
    mut take: impl FnMut(usize, RawBuf<T>),
) -> Result<()> {
    let bytes = mine.map_or(0, |m| m.len * size_of::<T>());
    let me = c.rank;
    board.exchange(
        &c.header,
        bytes,
        c.comm.timeout(),
        &mut |page| {
            if let Some(m) = mine {
                let (start, n) = own.unwrap_or((m.len, 0));
                let (head, tail) = (start * size_of::<T>(), (start + n) * size_of::<T>());
                // SAFETY: `m` is valid for its length, the page is as long
                // and a different allocation (the board's); `start + n <=
                // m.len` (the caller's contract), so both pieces are in
                // bounds of both.
                unsafe {
                    let src = m.ptr.cast::<u8>();
                    std::ptr::copy_nonoverlapping(src, page.as_mut_ptr(), head);
                    std::ptr::copy_nonoverlapping(src.add(tail), page.as_mut_ptr().add(tail), page.len() - tail);
                }
            }
        },
        &mut |rank, page| match mine {
            Some(m) if rank == me && own.is_some() => take(rank, m),
            _ if page.len() == len * size_of::<T>() => {
                // Board pages are 8-aligned, as every element type needs.
                take(
                    rank,
                    RawBuf {
                        ptr: page.as_ptr().cast::<T>().cast_mut(),
                        len,
                    },
                );
            }
            _ => {}
        },
    )
}

/// `recv` = part `start..start + recv.len` of every rank's `send`, folded
/// in rank order (`x0 op x1 op ...`).
///
/// # Safety
///
/// `send` valid, the part in bounds; `recv` valid and writable (equal to or
/// disjoint from `send`) until this returns.
unsafe fn fold<T: Element>(
    c: &Ctx<'_>,
    board: &dyn Board,
    send: RawBuf<T>,
    start: usize,
    recv: RawBuf<T>,
    op: ReduceOp,
    disjoint: bool,
) -> Result<()> {
    // Rank 0's part waits for rank 1's: `recv = x0 op x1` in one pass
    // (the same bits as copying `x0`, then combining `x1` into it). Pages
    // are read only inside the exchange, while their writers cannot write
    // them again.
    let world = c.world;
    let mut first: Option<RawBuf<T>> = None;
    // Where `recv` is disjoint from `send`, this rank's own part is read
    // from `send` and not copied onto the board: no peer reads it.
    let own = (disjoint && world > 1).then_some((start, recv.len));
    // SAFETY: `send` is valid; every rank passes the same length; peers read
    // only their own parts; `take` writes only `recv`, disjoint from `send`
    // where `own` is set.
    unsafe {
        exchange(c, board, Some(send), send.len, own, |rank, theirs| {
            let theirs = theirs.sub(start, recv.len);
            // SAFETY: board pages (not `recv`) holding the part, unchanged
            // until this rank's next exchange; `recv` is valid and
            // writable. `send` was copied onto the board before any write
            // to `recv`, so an in-place call folds its own input.
            match first.take() {
                None if rank == 0 && world > 1 => first = Some(theirs),
                None if rank == 0 => theirs.copy_to(recv),
                Some(x0) => x0.reduce_pair_into(theirs, recv, op),
                None => theirs.reduce_into(recv, op),
            }
        })
    }
}

/// `recv = send_0 op send_1 op ... op send_{world-1}` on every rank.
///
/// # Safety
///
/// `send` valid, `recv` valid and writable (equal to or disjoint from
/// `send`), of equal lengths, until this returns.
pub(super) unsafe fn all_reduce<T: Element>(
    c: &Ctx<'_>,
    board: &dyn Board,
    send: RawBuf<T>,
    recv: RawBuf<T>,
    op: ReduceOp,
) -> Result<()> {
    // SAFETY: forwarded from the caller; the part is the whole of `send`,
    // which `recv` may be.
    unsafe { fold(c, board, send, 0, recv, op, false) }
}

/// Rank `r` ends with chunk `r` of every rank's `send` folded in rank order.
///
/// # Safety
///
/// `send` valid, of length `recv.len * world`; `recv` valid, writable and
/// disjoint from `send`, until this returns.
pub(super) unsafe fn reduce_scatter<T: Element>(
    c: &Ctx<'_>,
    board: &dyn Board,
    send: RawBuf<T>,
    recv: RawBuf<T>,
    op: ReduceOp,
) -> Result<()> {
    // SAFETY: forwarded from the caller; chunk `rank` is in bounds, and
    // `recv` is disjoint from `send`.
    unsafe { fold(c, board, send, c.rank * recv.len, recv, op, true) }
}

/// Block `r` of `recv` = rank `r`'s `send`, on every rank.
///
/// # Safety
///
/// `send` valid; `recv` valid, writable, disjoint from `send`, of length
/// `send.len * world`, until this returns.
pub(super) unsafe fn all_gather<T: Element>(
    c: &Ctx<'_>,
    board: &dyn Board,
    send: RawBuf<T>,
    recv: RawBuf<T>,
) -> Result<()> {
    let n = send.len;
    // SAFETY: `send` is valid; every rank passes the same length. Block
    // `rank` of `recv` is in bounds, writable and not the board page.
    unsafe {
        exchange(c, board, Some(send), n, None, |rank, theirs| {
            theirs.copy_to(recv.block(rank, n));
        })
    }
}

/// Block `j` of `send` lands as block `r` of `recv` on rank `j`.
///
/// # Safety
///
/// `send` valid; `recv` valid, writable and disjoint from `send`; equal
/// lengths divisible by the world size; until this returns.
pub(super) unsafe fn all_to_all<T: Element>(
    c: &Ctx<'_>,
    board: &dyn Board,
    send: RawBuf<T>,
    recv: RawBuf<T>,
) -> Result<()> {
    let (block, me) = (send.len / c.world, c.rank);
    // SAFETY: `send` is valid; every rank passes the same length. Block `me`
    // of a page and block `rank` of `recv` are in bounds; `recv` is
    // writable, not the page, and disjoint from `send`, whose block `me`
    // (read by this rank alone) stays off the board.
    unsafe {
        exchange(
            c,
            board,
            Some(send),
            send.len,
            Some((me * block, block)),
            |rank, theirs| {
                theirs.block(me, block).copy_to(recv.block(rank, block));
            },
        )
    }
}

/// Every rank's `buf` = the root's.
///
/// # Safety
///
/// `buf` valid and writable until this returns.
pub(super) unsafe fn broadcast<T: Element>(c: &Ctx<'_>, board: &dyn Board, buf: RawBuf<T>, root: usize) -> Result<()> {
    let me = c.rank;
    // SAFETY: `buf` is valid; only the root contributes, `buf.len` elements
    // as on every rank. `buf` is writable and not the root's page.
    unsafe {
        exchange(c, board, (me == root).then_some(buf), buf.len, None, |rank, theirs| {
            if rank == root && me != root {
                theirs.copy_to(buf);
            }
        })
    }
}

/// No rank returns before every rank has published this call.
pub(super) fn barrier(c: &Ctx<'_>, board: &dyn Board) -> Result<()> {
    board.exchange(&c.header, 0, c.comm.timeout(), &mut |_| {}, &mut |_, _| {})
}
