//! Blocking point-to-point operations.
//!
//! Messages travel on channels `(source, destination, tag)`; on each channel
//! they arrive in the order they were sent. A send and its receive must have
//! equal lengths and element types, or both ranks get [`Error::Mismatch`].

use crate::buffer::{Buffer, BufferMut};
use crate::comm::Comm;
use crate::element::{Element, ReduceOp};
use crate::error::{Error, Result};

/// A message tag; messages with different tags never match.
pub type Tag = u32;

impl Comm {
    /// Sends `buf` to `peer` on tag 0 and returns once it was received.
    pub fn send<B: Buffer + ?Sized>(&self, buf: &B, peer: usize) -> Result<()> {
        self.send_tagged(buf, peer, 0)
    }

    /// Sends `buf` to `peer` on `tag` and returns once it was received.
    pub fn send_tagged<B: Buffer + ?Sized>(&self, buf: &B, peer: usize, tag: Tag) -> Result<()> {
        self.check_blocking_peer(peer, "send")?;
        let span = tracing::trace_span!(
            "send",
            comm.rank = self.rank(),
            peer,
            tag,
            bytes = buf.elems() * size_of::<B::Elem>()
        );
        let _e = span.enter();
        let mut x = crate::raw::Xfer::p2p(self);
        x.send(self.view(buf)?, peer, i64::from(tag));
        // SAFETY: `buf` is borrowed for the whole call.
        unsafe { x.run("send") }
    }

    /// Receives into `buf` from `peer` on tag 0.
    pub fn recv<B: BufferMut + ?Sized>(&self, buf: &mut B, peer: usize) -> Result<()> {
        self.recv_tagged(buf, peer, 0)
    }

    /// Receives into `buf` from `peer` on `tag`.
    pub fn recv_tagged<B: BufferMut + ?Sized>(&self, buf: &mut B, peer: usize, tag: Tag) -> Result<()> {
        self.blocking_recv(buf, peer, tag, None)
    }

    /// Receives from `peer` on `tag` and combines the incoming data into
    /// `buf` with `op`, in one pass, without a staging buffer.
    pub fn recv_reduce<B: BufferMut + ?Sized>(&self, buf: &mut B, peer: usize, tag: Tag, op: ReduceOp) -> Result<()> {
        self.blocking_recv(buf, peer, tag, Some(op))
    }

    fn blocking_recv<B: BufferMut + ?Sized>(
        &self,
        buf: &mut B,
        peer: usize,
        tag: Tag,
        reduce: Option<ReduceOp>,
    ) -> Result<()> {
        self.check_blocking_peer(peer, "recv")?;
        let span = tracing::trace_span!(
            "recv",
            comm.rank = self.rank(),
            peer,
            tag,
            bytes = buf.elems() * size_of::<B::Elem>()
        );
        let _e = span.enter();
        let view = self.view_mut(buf)?;
        let mut x = crate::raw::Xfer::p2p(self);
        x.recv_with(view, peer, i64::from(tag), reduce);
        // SAFETY: `buf` is borrowed exclusively for the whole call.
        unsafe { x.run("recv") }
    }

    /// Sends `send` to `dst` and receives `recv` from `src` together (on tag
    /// 0), so that a ring of such calls cannot deadlock.
    pub fn send_recv<T, S, R>(&self, send: &S, dst: usize, recv: &mut R, src: usize) -> Result<()>
    where
        T: Element,
        S: Buffer<Elem = T> + ?Sized,
        R: BufferMut<Elem = T> + ?Sized,
    {
        self.batch(|b| {
            b.send(send, dst)?;
            b.recv(recv, src)
        })
    }

    fn check_blocking_peer(&self, peer: usize, what: &str) -> Result<()> {
        self.check_peer(peer, what)?;
        if peer == self.rank() {
            return Err(Error::precondition(format!(
                "blocking `{what}` on rank {peer} to itself can never complete; use a batch or `isend`/`irecv`"
            )));
        }
        Ok(())
    }
}
