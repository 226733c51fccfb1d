//! Batches: point-to-point operations that are posted together and complete
//! together (one `HcclBatchSendRecv` or `ncclGroupStart..End` on devices).

use std::marker::PhantomData;

use crate::buffer::{Buffer, BufferMut};
use crate::comm::Comm;
use crate::element::ReduceOp;
use crate::error::Result;
use crate::p2p::Tag;
use crate::raw::Xfer;

/// The operations of one batch, collected by [`Comm::batch`].
pub struct Batch<'c, 'b> {
    comm: &'c Comm,
    xfer: Xfer<'c>,
    _buffers: PhantomData<&'b mut [u8]>,
}

impl<'b> Batch<'_, 'b> {
    /// Adds a send of `buf` to `peer` on tag 0.
    pub fn send<B: Buffer + ?Sized>(&mut self, buf: &'b B, peer: usize) -> Result<()> {
        self.send_tagged(buf, peer, 0)
    }

    /// Adds a send of `buf` to `peer` on `tag`.
    pub fn send_tagged<B: Buffer + ?Sized>(&mut self, buf: &'b B, peer: usize, tag: Tag) -> Result<()> {
        self.comm.check_peer(peer, "batch send")?;
        self.xfer.send(self.comm.view(buf)?, peer, i64::from(tag));
        Ok(())
    }

    /// Adds a receive into `buf` from `peer` on tag 0.
    pub fn recv<B: BufferMut + ?Sized>(&mut self, buf: &'b mut B, peer: usize) -> Result<()> {
        self.recv_tagged(buf, peer, 0)
    }

    /// Adds a receive into `buf` from `peer` on `tag`.
    pub fn recv_tagged<B: BufferMut + ?Sized>(&mut self, buf: &'b mut B, peer: usize, tag: Tag) -> Result<()> {
        self.comm.check_peer(peer, "batch recv")?;
        self.xfer.recv(self.comm.view_mut(buf)?, peer, i64::from(tag));
        Ok(())
    }

    /// Adds a receive that combines the incoming data into `buf` with `op`.
    pub fn recv_reduce<B: BufferMut + ?Sized>(
        &mut self,
        buf: &'b mut B,
        peer: usize,
        tag: Tag,
        op: ReduceOp,
    ) -> Result<()> {
        self.comm.check_peer(peer, "batch recv")?;
        self.xfer
            .recv_reduce(self.comm.view_mut(buf)?, peer, i64::from(tag), op);
        Ok(())
    }
}

impl Comm {
    /// Collects the sends and receives `f` adds, posts them together and
    /// waits for all of them. Sends and receives to one peer in both
    /// directions, and messages to this rank itself, are fine in a batch.
    ///
    /// ```
    /// hcomm::host::run(3, |comm| {
    ///     let (r, w) = (comm.rank(), comm.world());
    ///     let mine = [r as i32];
    ///     let mut left = [0i32];
    ///     comm.batch(|b| {
    ///         b.send(&mine, (r + 1) % w)?;
    ///         b.recv(&mut left, (r + w - 1) % w)
    ///     })?;
    ///     assert_eq!(left[0] as usize, (r + w - 1) % w);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn batch<'b, R>(&self, f: impl FnOnce(&mut Batch<'_, 'b>) -> Result<R>) -> Result<R> {
        let mut batch = Batch {
            comm: self,
            xfer: Xfer::p2p(self),
            _buffers: PhantomData,
        };
        let out = f(&mut batch)?;
        let span = tracing::trace_span!("batch", comm.rank = self.rank());
        let _e = span.enter();
        if !batch.xfer.is_empty() {
            // SAFETY: every buffer was borrowed for `'b`, which outlives this
            // call; receive buffers exclusively.
            unsafe { batch.xfer.run("batch")? };
        }
        Ok(out)
    }
}
