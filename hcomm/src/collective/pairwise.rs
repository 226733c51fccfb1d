//! All-to-all: pairwise exchange and the direct (one batch) form.

use super::raw::{Ctx, RawBuf};
use crate::element::Element;
use crate::error::Result;

/// Pairwise all-to-all of `world` blocks of `block` elements: in step `k`
/// this rank sends to `rank + k` and receives from `rank - k`.
///
/// # Safety
///
/// `send` valid, `recv` valid and writable and disjoint from `send`.
pub(super) unsafe fn all_to_all<T: Element>(c: &Ctx<'_>, send: RawBuf<T>, recv: RawBuf<T>, block: usize) -> Result<()> {
    // SAFETY: equal-size blocks of valid buffers.
    unsafe { send.block(c.rank, block).copy_to(recv.block(c.rank, block)) };
    for k in 1..c.world {
        let (to, from) = (c.right(k), c.left(k));
        let mut x = c.xfer();
        x.send(send.block(to, block), to, 0)
            .recv(recv.block(from, block), from, 0);
        // SAFETY: forwarded from the caller.
        unsafe { x.run("pairwise all-to-all step")? };
    }
    Ok(())
}

/// Direct all-to-all(v): every block posted at once. `sends[j]` goes to rank
/// `j`, `recvs[j]` comes from rank `j`.
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
