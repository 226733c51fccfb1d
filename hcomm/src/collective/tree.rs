//! Binomial-tree reduce rooted at any rank (the broadcast is the
//! `binomial_broadcast` schedule). Its messages are those of the
//! `binomial_reduce` schedule (checked in `conformance.rs`).

use crate::element::{Element, ReduceOp};
use crate::error::Result;
use crate::raw::{Ctx, RawBuf};

/// Binomial-tree reduce to `root`: `acc` starts as this rank's contribution
/// and, on the root, ends as the result. Children's partial results are
/// combined into `acc` as they arrive.
///
/// # Safety
///
/// `acc` valid and writable for the whole call.
pub(super) unsafe fn reduce<T: Element>(c: &Ctx<'_>, acc: RawBuf<T>, op: ReduceOp, root: usize) -> Result<()> {
    let w = c.world;
    let v = (c.rank + w - root) % w;
    let real = |v: usize| (v + root) % w;
    let mut mask = 1;
    while mask < w {
        let mut x = c.xfer();
        if v & mask != 0 {
            x.send(acc, real(v - mask), 0);
            // SAFETY: one valid buffer, sent only.
            return unsafe { x.run("binomial reduce send") };
        }
        if v + mask < w {
            x.recv_reduce(acc, real(v + mask), 0, op);
            // SAFETY: one valid writable buffer.
            unsafe { x.run("binomial reduce receive")? };
        }
        mask <<= 1;
    }
    Ok(())
}

/// Whether rank `rank` receives anything in a binomial reduce to `root`
/// (leaves can send their input directly, without a scratch copy).
pub(super) fn has_children(rank: usize, root: usize, world: usize) -> bool {
    let v = (rank + world - root) % world;
    v.is_multiple_of(2) && v + 1 < world
}
