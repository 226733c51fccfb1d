//! Recursive halving and doubling over nearly equal parts (any length):
//! all-reduce as recursive-halving reduce-scatter then recursive-doubling
//! all-gather (Rabenseifner; a non-power-of-two world first folds its extra
//! ranks into partners), and the recursive-halving reduce-scatter. Where
//! latency dominates (small messages) the all-reduce
//! skips the halving: partners exchange and combine whole vectors,
//! `log2 p` steps instead of `2 log2 p`. The messages are those of the
//! `halving_doubling_all_reduce`, `recursive_doubling_all_reduce` and
//! `recursive_halving_reduce_scatter` schedules (checked in
//! `conformance.rs`).

use super::Algorithm;
use crate::element::{Element, ReduceOp};
use crate::error::Result;
use crate::raw::{Ctx, RawBuf};

/// Recursive-halving reduce-scatter over `p` (a power of two) virtual ranks:
/// virtual rank `v` ends with the reduction of part `v` of `buf`.
///
/// # Safety
///
/// `buf` valid and writable for the whole call, and not accessed by anything
/// else meanwhile (each step receives into one half while sending the other).
unsafe fn halving<T: Element>(
    c: &Ctx<'_>,
    buf: RawBuf<T>,
    op: ReduceOp,
    v: usize,
    p: usize,
    real: &dyn Fn(usize) -> usize,
) -> Result<()> {
    let (mut lo, mut hi) = (0, p);
    let mut mask = p / 2;
    while mask > 0 {
        let partner = real(v ^ mask);
        let mid = lo + (hi - lo) / 2;
        let (keep, give) = if v & mask == 0 {
            ((lo, mid), (mid, hi))
        } else {
            ((mid, hi), (lo, mid))
        };
        let span = |(a, b): (usize, usize)| {
            let start = super::part(buf.len, p, a).0;
            let end = if b == p { buf.len } else { super::part(buf.len, p, b).0 };
            buf.sub(start, end - start)
        };
        let mut x = c.xfer();
        x.send(span(give), partner, 0).recv_reduce(span(keep), partner, 0, op);
        // SAFETY: `keep` and `give` are disjoint ranges of a valid buffer.
        unsafe { x.run("recursive-halving step")? };
        (lo, hi) = keep;
        mask /= 2;
    }
    Ok(())
}

/// Recursive-doubling all-gather over `p` (a power of two) virtual ranks:
/// virtual rank `v` holds part `v` of `blocks` parts and ends with all.
///
/// # Safety
///
/// `buf` valid and writable for the whole call, and not accessed by anything
/// else meanwhile (each step receives into the parts it does not send).
unsafe fn doubling<T: Element>(
    c: &Ctx<'_>,
    buf: RawBuf<T>,
    v: usize,
    p: usize,
    real: &dyn Fn(usize) -> usize,
) -> Result<()> {
    let span = |first: usize, count: usize| {
        let start = super::part(buf.len, p, first).0;
        let end = if first + count == p {
            buf.len
        } else {
            super::part(buf.len, p, first + count).0
        };
        buf.sub(start, end - start)
    };
    let mut mask = 1;
    while mask < p {
        let partner = v ^ mask;
        let mine = v & !(mask - 1);
        let theirs = partner & !(mask - 1);
        let mut x = c.xfer();
        x.send(span(mine, mask), real(partner), 0)
            .recv(span(theirs, mask), real(partner), 0);
        // SAFETY: the two aligned groups of parts are disjoint.
        unsafe { x.run("recursive-doubling step")? };
        mask *= 2;
    }
    Ok(())
}

/// Messages up to this many bytes reduce by whole-vector doubling.
const WHOLE_VECTOR_BYTES: usize = 32 << 10;

/// Recursive-doubling all-reduce over `p` (a power of two) virtual ranks:
/// partners `2^k` apart exchange their whole partial results and combine
/// them (both combine the same two values, so every rank ends with the same
/// result, bit for bit).
///
/// # Safety
///
/// `buf` valid and writable for the whole call, and not accessed by anything
/// else meanwhile.
unsafe fn whole_doubling<T: Element>(
    c: &Ctx<'_>,
    buf: RawBuf<T>,
    op: ReduceOp,
    v: usize,
    p: usize,
    real: &dyn Fn(usize) -> usize,
) -> Result<()> {
    // SAFETY: `buf` is valid and not written while this copy is made.
    let mut outgoing = unsafe { buf.as_slice() }.to_vec();
    let mut mask = 1;
    while mask < p {
        if mask > 1 {
            // SAFETY: as above; the previous step has completed.
            outgoing.copy_from_slice(unsafe { buf.as_slice() });
        }
        let mut x = c.xfer();
        x.send(RawBuf::of_mut(&mut outgoing), real(v ^ mask), 0)
            .recv_reduce(buf, real(v ^ mask), 0, op);
        // SAFETY: `outgoing` is this function's own copy, disjoint from `buf`.
        unsafe { x.run("recursive-doubling all-reduce step")? };
        mask *= 2;
    }
    Ok(())
}

/// Halving-doubling all-reduce of `buf`, in place, for any world size.
///
/// # Safety
///
/// `buf` valid and writable for the whole call.
pub(super) unsafe fn all_reduce<T: Element>(c: &Ctx<'_>, buf: RawBuf<T>, op: ReduceOp) -> Result<()> {
    let w = c.world;
    let p = 1 << w.ilog2();
    let extra = w - p;
    let r = c.rank;
    c.ran(if buf.len * size_of::<T>() <= WHOLE_VECTOR_BYTES {
        Algorithm::RecursiveDoubling
    } else {
        Algorithm::HalvingDoubling
    });
    // Fold: among the first 2 * extra ranks, even ranks hand their data to
    // the odd rank above them and wait for the result.
    if r < 2 * extra {
        let mut x = c.xfer();
        if r.is_multiple_of(2) {
            x.send(buf, r + 1, 0);
            // SAFETY: one valid buffer, sent only.
            unsafe { x.run("halving-doubling fold")? };
            let mut x = c.xfer();
            x.recv(buf, r + 1, 0);
            // SAFETY: one valid writable buffer.
            return unsafe { x.run("halving-doubling unfold") };
        }
        x.recv_reduce(buf, r - 1, 0, op);
        // SAFETY: one valid writable buffer.
        unsafe { x.run("halving-doubling fold")? };
    }
    let v = if r < 2 * extra { r / 2 } else { r - extra };
    let real = |v: usize| if v < extra { 2 * v + 1 } else { v + extra };
    // SAFETY: forwarded.
    unsafe {
        if buf.len * size_of::<T>() <= WHOLE_VECTOR_BYTES {
            whole_doubling(c, buf, op, v, p, &real)?;
        } else {
            halving(c, buf, op, v, p, &real)?;
            doubling(c, buf, v, p, &real)?;
        }
    }
    if r < 2 * extra {
        let mut x = c.xfer();
        x.send(buf, r - 1, 0);
        // SAFETY: one valid buffer, sent only.
        unsafe { x.run("halving-doubling unfold")? };
    }
    Ok(())
}

/// Recursive-halving reduce-scatter of `work` (a scratch copy of the input)
/// in place; afterwards block `rank` is the result. Power-of-two worlds only.
///
/// # Safety
///
/// `work` valid and writable for the whole call.
pub(super) unsafe fn reduce_scatter<T: Element>(c: &Ctx<'_>, work: RawBuf<T>, op: ReduceOp) -> Result<()> {
    // SAFETY: forwarded.
    unsafe { halving(c, work, op, c.rank, c.world, &|v| v) }
}
