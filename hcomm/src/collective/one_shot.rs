//! One-shot collectives on the board of an in-process group
//! (`backend/host/board.rs`): every rank puts its contribution where every
//! peer reads it, and takes what it needs from every rank's in rank order.
//! One step and no messages, so the latency of a small collective is one
//! copy in, one read per peer and one counter store, not a message per peer
//! and step.
//!
//! The all-reduce folds the ranks' vectors in rank order (`x0 op x1 op ...`),
//! so every rank ends with the same bits, as with the other algorithms.
//! The data each rank ends with is that of the `one_shot_*` schedules, which
//! move the same contributions as messages and fold them in the same order
//! (checked in `conformance.rs`).

use super::raw::{Ctx, RawBuf};
use crate::backend::host::HostBoard;
use crate::element::{Element, ReduceOp};
use crate::error::Result;

/// The contribution `bytes` of a rank, as `len` elements.
///
/// # Safety
///
/// `bytes` 8-aligned (as board pages are) and of `len * size_of::<T>()`
/// bytes, valid for the returned view's use.
unsafe fn view<T>(bytes: &[u8], len: usize) -> RawBuf<T> {
    debug_assert_eq!(bytes.len(), len * size_of::<T>());
    RawBuf {
        ptr: bytes.as_ptr().cast::<T>().cast_mut(),
        len,
    }
}

/// Copies `src` into a board page.
///
/// # Safety
///
/// `src` valid; `page` of `src.len * size_of::<T>()` bytes.
unsafe fn fill<T>(page: &mut [u8], src: RawBuf<T>) {
    debug_assert_eq!(page.len(), src.len * size_of::<T>());
    // SAFETY: `src` is valid for its length, `page` is as long and a
    // different allocation (the board's).
    unsafe { std::ptr::copy_nonoverlapping(src.ptr.cast::<u8>(), page.as_mut_ptr(), page.len()) };
}

/// `recv = send_0 op send_1 op ... op send_{world-1}` on every rank.
///
/// # Safety
///
/// `send` valid, `recv` valid and writable (equal to or disjoint from
/// `send`), of equal lengths, until this returns.
pub(super) unsafe fn all_reduce<T: Element>(
    c: &Ctx<'_>,
    board: &HostBoard<'_>,
    send: RawBuf<T>,
    recv: RawBuf<T>,
    op: ReduceOp,
) -> Result<()> {
    let n = send.len;
    board.exchange(
        &c.header,
        n * size_of::<T>(),
        c.comm.timeout(),
        // SAFETY: `send` is valid; the page has its size.
        |page| unsafe { fill(page, send) },
        |rank, bytes| {
            // SAFETY: a board page holding `n` elements; `recv` is valid,
            // writable and not the page. `send` was copied out before any
            // write to `recv`, so an in-place call reads its own input.
            unsafe {
                let theirs = view::<T>(bytes, n);
                if rank == 0 {
                    theirs.copy_to(recv);
                } else {
                    theirs.reduce_into(recv, op);
                }
            }
        },
    )
}

/// Block `r` of `recv` = rank `r`'s `send`, on every rank.
///
/// # Safety
///
/// `send` valid; `recv` valid, writable, disjoint from `send`, of length
/// `send.len * world`, until this returns.
pub(super) unsafe fn all_gather<T: Element>(
    c: &Ctx<'_>,
    board: &HostBoard<'_>,
    send: RawBuf<T>,
    recv: RawBuf<T>,
) -> Result<()> {
    let n = send.len;
    board.exchange(
        &c.header,
        n * size_of::<T>(),
        c.comm.timeout(),
        // SAFETY: `send` is valid; the page has its size.
        |page| unsafe { fill(page, send) },
        // SAFETY: a board page holding `n` elements; block `rank` of `recv`
        // is in bounds, writable and not the page.
        |rank, bytes| unsafe { view::<T>(bytes, n).copy_to(recv.block(rank, n)) },
    )
}

/// Rank `r` ends with chunk `r` of every rank's `send` folded in rank order.
///
/// # Safety
///
/// `send` valid, of length `recv.len * world`; `recv` valid, writable and
/// disjoint from `send`, until this returns.
pub(super) unsafe fn reduce_scatter<T: Element>(
    c: &Ctx<'_>,
    board: &HostBoard<'_>,
    send: RawBuf<T>,
    recv: RawBuf<T>,
    op: ReduceOp,
) -> Result<()> {
    let (n, me) = (recv.len, c.rank);
    board.exchange(
        &c.header,
        send.len * size_of::<T>(),
        c.comm.timeout(),
        // SAFETY: `send` is valid; the page has its size.
        |page| unsafe { fill(page, send) },
        |rank, bytes| {
            // SAFETY: a board page holding `n * world` elements, whose chunk
            // `me` is in bounds; `recv` is valid, writable and not the page.
            unsafe {
                let theirs = view::<T>(bytes, send.len).block(me, n);
                if rank == 0 {
                    theirs.copy_to(recv);
                } else {
                    theirs.reduce_into(recv, op);
                }
            }
        },
    )
}

/// Block `j` of `send` lands as block `r` of `recv` on rank `j`.
///
/// # Safety
///
/// `send` valid; `recv` valid, writable and disjoint from `send`; equal
/// lengths divisible by the world size; until this returns.
pub(super) unsafe fn all_to_all<T: Element>(
    c: &Ctx<'_>,
    board: &HostBoard<'_>,
    send: RawBuf<T>,
    recv: RawBuf<T>,
) -> Result<()> {
    let (block, me) = (send.len / c.world, c.rank);
    board.exchange(
        &c.header,
        send.len * size_of::<T>(),
        c.comm.timeout(),
        // SAFETY: `send` is valid; the page has its size.
        |page| unsafe { fill(page, send) },
        // SAFETY: a board page holding `send.len` elements; block `me` of it
        // and block `rank` of `recv` are in bounds; `recv` is writable and
        // not the page.
        |rank, bytes| unsafe {
            view::<T>(bytes, send.len)
                .block(me, block)
                .copy_to(recv.block(rank, block));
        },
    )
}

/// Every rank's `buf` = the root's.
///
/// # Safety
///
/// `buf` valid and writable until this returns.
pub(super) unsafe fn broadcast<T: Element>(
    c: &Ctx<'_>,
    board: &HostBoard<'_>,
    buf: RawBuf<T>,
    root: usize,
) -> Result<()> {
    let me = c.rank;
    let len = if me == root { buf.len * size_of::<T>() } else { 0 };
    board.exchange(
        &c.header,
        len,
        c.comm.timeout(),
        |page| {
            if me == root {
                // SAFETY: `buf` is valid; the root's page has its size.
                unsafe { fill(page, buf) };
            }
        },
        |rank, bytes| {
            if rank == root && me != root {
                // SAFETY: the root's page holds `buf.len` elements; `buf` is
                // writable and not the page.
                unsafe { view::<T>(bytes, buf.len).copy_to(buf) };
            }
        },
    )
}

/// No rank returns before every rank has published this call.
pub(super) fn barrier(c: &Ctx<'_>, board: &HostBoard<'_>) -> Result<()> {
    board.exchange(&c.header, 0, c.comm.timeout(), |_| {}, |_, _| {})
}
