//! Ring algorithms written by hand: the reduce-scatter (in cache-sized
//! pieces, without a copy of the input) and the all-gather phase of the
//! scatter + all-gather broadcast, which moves one of `world` nearly equal
//! parts per step in pipelined segments. Their messages are those of the
//! `ring_reduce_scatter` (per piece) and `scatter_all_gather_broadcast`
//! schedules (checked in `conformance.rs`). (Ring all-reduce and ring
//! all-gather run as schedules: see `schedules.rs`.)

use crate::element::{Element, ReduceOp};
use crate::error::Result;
use crate::raw::{Ctx, RawBuf};

/// All-gather over the `world` parts of `buf`, in place, when rank `r`
/// already holds part `(r + 1 + offset) mod world`.
///
/// # Safety
///
/// `buf` valid and writable for the whole call.
pub(super) unsafe fn all_gather_phase<T: Element>(c: &Ctx<'_>, buf: RawBuf<T>, offset: usize) -> Result<()> {
    let w = c.world;
    let segments = c.segments::<T>(buf.part(w, 0).len);
    for s in 0..w - 1 {
        let send = buf.part(w, (c.rank + 1 + offset + w - s % w) % w);
        let recv = buf.part(w, (c.rank + offset + w - s % w) % w);
        // SAFETY: distinct parts of one valid buffer.
        unsafe {
            c.shift(
                send,
                c.right(1),
                recv,
                c.left(1),
                None,
                segments,
                "ring all-gather step",
            )?;
        }
    }
    Ok(())
}

/// Ring reduce-scatter of `send` (`world` blocks of `recv.len` elements)
/// into `recv`, the reduction of block `rank`. The blocks go around the ring
/// in pieces of about `segment_bytes`, each piece a full ring, so a piece's
/// partial results stay in cache: in step `s` a rank passes on the partial
/// result of block `rank - s - 1` and combines its own part of block
/// `rank - s - 2` with the partial result coming from the left; partial
/// results alternate between two scratch pieces, and the last step combines
/// straight into `recv`. No copy of the whole input is made.
///
/// # Safety
///
/// `send` valid for `world * recv.len` elements; `recv` valid, writable and
/// disjoint from `send`; neither accessed otherwise for the whole call.
pub(super) unsafe fn reduce_scatter<T: Element>(
    c: &Ctx<'_>,
    send: RawBuf<T>,
    recv: RawBuf<T>,
    op: ReduceOp,
) -> Result<()> {
    let (w, r, n) = (c.world, c.rank, recv.len);
    let piece = (c.segment_bytes / size_of::<T>()).clamp(1, n.max(1));
    let mut scratch = vec![T::ZERO; if w > 2 { 2 * piece } else { 0 }];
    let tmp = RawBuf::of_mut(&mut scratch);
    let mut start = 0;
    while start < n {
        let len = piece.min(n - start);
        let own = |block: usize| send.sub(block * n + start, len);
        let mut sending = own((r + w - 1) % w);
        for s in 0..w - 1 {
            let into = if s == w - 2 {
                recv.sub(start, len)
            } else {
                tmp.sub((s % 2) * piece, len)
            };
            let mut x = c.xfer();
            // SAFETY: `into` (a piece of `recv` or a scratch piece) is disjoint
            // from `send`, and from `sending` (the other scratch piece or a
            // piece of `send`); every view lies inside its valid buffer.
            unsafe {
                own((r + 2 * w - s - 2) % w).copy_to(into);
                x.send(sending, c.right(1), 0);
                x.recv_reduce(into, c.left(1), 0, op);
                x.run("ring reduce-scatter step")?;
            }
            sending = into;
        }
        start += len;
    }
    Ok(())
}
