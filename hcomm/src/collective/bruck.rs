//! Bruck's all-gather: `ceil(log2 world)` steps for any world size.

use super::raw::{Ctx, RawBuf};
use crate::element::Element;
use crate::error::Result;

/// Bruck all-gather; `out` holds `world` blocks of `block` elements, this
/// rank's own block already at position `rank`.
///
/// Works on `out` rotated so that this rank's block comes first: after step
/// `d` the first `2d` blocks hold ranks `rank .. rank + 2d`; a final rotation
/// puts every block at its rank.
///
/// # Safety
///
/// `out` valid and writable for the whole call.
pub(super) unsafe fn all_gather<T: Element>(c: &Ctx<'_>, out: RawBuf<T>, block: usize) -> Result<()> {
    let w = c.world;
    // SAFETY: `out` is valid and writable and nothing else uses it now.
    let slice = unsafe { out.as_mut_slice() };
    slice.copy_within(c.rank * block..(c.rank + 1) * block, 0);
    let mut d = 1;
    while d < w {
        let count = d.min(w - d);
        let mut x = c.xfer();
        x.send(out.sub(0, count * block), c.left(d), 0)
            .recv(out.sub(d * block, count * block), c.right(d), 0);
        // SAFETY: blocks [0, count) and [d, d + count) are disjoint (count <= d).
        unsafe { x.run("bruck step")? };
        d *= 2;
    }
    // SAFETY: as above; the transfers are complete.
    let slice = unsafe { out.as_mut_slice() };
    slice.rotate_right(c.rank * block);
    Ok(())
}
