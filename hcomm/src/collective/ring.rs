//! Ring phases over `world` nearly equal parts (any length): the ring
//! reduce-scatter and the all-gather phase of the scatter + all-gather
//! broadcast. Each step moves one part to the right neighbour and takes one
//! from the left, in pipelined segments. (Ring all-reduce and ring
//! all-gather are schedules: see `schedules.rs`.)

use super::raw::{Ctx, RawBuf};
use crate::element::{Element, ReduceOp};
use crate::error::Result;

/// Reduce-scatter over the `world` parts of `buf`, in place: afterwards rank
/// `r` holds the full reduction of part `(r + 1 + offset) mod world`.
///
/// # Safety
///
/// `buf` valid and writable for the whole call.
pub(super) unsafe fn reduce_scatter_phase<T: Element>(
    c: &Ctx<'_>,
    buf: RawBuf<T>,
    op: ReduceOp,
    offset: usize,
) -> Result<()> {
    let w = c.world;
    let segments = c.segments::<T>(buf.part(w, 0).len);
    for s in 0..w - 1 {
        let send = buf.part(w, (c.rank + offset + w - s % w) % w);
        let recv = buf.part(w, (c.rank + offset + 2 * w - s - 1) % w);
        // SAFETY: distinct parts of one valid buffer.
        unsafe {
            c.shift(
                send,
                c.right(1),
                recv,
                c.left(1),
                Some(op),
                segments,
                "ring reduce-scatter step",
            )?;
        }
    }
    Ok(())
}

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

/// Ring reduce-scatter of `work` (a scratch copy of the input) in place;
/// afterwards block `rank` of `work` is the result.
///
/// # Safety
///
/// `work` valid and writable for the whole call.
pub(super) unsafe fn reduce_scatter<T: Element>(c: &Ctx<'_>, work: RawBuf<T>, op: ReduceOp) -> Result<()> {
    // SAFETY: forwarded; with offset `world - 1` rank r ends with block r.
    unsafe { reduce_scatter_phase(c, work, op, c.world - 1) }
}
