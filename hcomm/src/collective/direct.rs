//! Direct algorithms (every message of a collective posted in one batch):
//! all-to-all(v), gather and scatter; and the dissemination barrier.

use super::raw::{Ctx, RawBuf};
use crate::element::Element;
use crate::error::Result;

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
