//! Raw buffer views and the transfer builder the algorithms are written with.
//!
//! Algorithms address disjoint parts of one buffer at once (send one block,
//! receive into another), which borrowed slices cannot express; these views
//! carry a pointer and a length, and every algorithm keeps its sends and
//! receives of one transfer disjoint.

use std::cell::RefCell;

use smallvec::SmallVec;

use crate::backend::{Context, Dir, OpIds, P2pOp};
use crate::buffer::{Buffer, BufferMut, Memory};
use crate::comm::Comm;
use crate::element::{Element, ReduceOp};
use crate::error::{Error, Result};
use crate::header::CollHeader;
use crate::select::{Algorithm, Ran};

/// A pointer and a length in elements.
pub(crate) struct RawBuf<T> {
    pub(crate) ptr: *mut T,
    pub(crate) len: usize,
}

impl<T> Clone for RawBuf<T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T> Copy for RawBuf<T> {}

impl<T: Element> RawBuf<T> {
    /// A view of a slice that may be written.
    pub(crate) fn of_mut(s: &mut [T]) -> Self {
        RawBuf {
            ptr: s.as_mut_ptr(),
            len: s.len(),
        }
    }

    /// Elements `[start, start + len)`; the caller keeps it in bounds.
    pub(crate) fn sub(self, start: usize, len: usize) -> Self {
        debug_assert!(start + len <= self.len, "sub-view {start}+{len} of {}", self.len);
        RawBuf {
            ptr: self.ptr.wrapping_add(start),
            len,
        }
    }

    /// Block `i` of `parts` equal-size blocks of `block` elements.
    pub(crate) fn block(self, i: usize, block: usize) -> Self {
        self.sub(i * block, block)
    }

    /// Part `i` of `parts` nearly equal parts.
    pub(crate) fn part(self, parts: usize, i: usize) -> Self {
        let (start, len) = part(self.len, parts, i);
        self.sub(start, len)
    }

    /// Copies `self` into `dst` (which may overlap it).
    ///
    /// # Safety
    ///
    /// Both views valid, equal lengths, `dst` writable.
    pub(crate) unsafe fn copy_to(self, dst: RawBuf<T>) {
        debug_assert_eq!(self.len, dst.len);
        if self.len > 0 && self.ptr != dst.ptr {
            // SAFETY: forwarded from the caller.
            unsafe { crate::memcopy::copy(self.ptr.cast(), dst.ptr.cast(), self.len * size_of::<T>()) };
        }
    }

    /// `dst = dst op self`.
    ///
    /// # Safety
    ///
    /// Both views valid, equal lengths, disjoint, `dst` writable.
    pub(crate) unsafe fn reduce_into(self, dst: RawBuf<T>, op: ReduceOp) {
        debug_assert_eq!(self.len, dst.len);
        if self.len > 0 {
            // SAFETY: forwarded from the caller.
            unsafe {
                T::reduce_into(
                    op,
                    std::slice::from_raw_parts_mut(dst.ptr, dst.len),
                    std::slice::from_raw_parts(self.ptr, self.len),
                );
            }
        }
    }

    /// The last step of `op` over `world` ranks once the pairwise kernels
    /// have combined every contribution into `self`: for
    /// [`ReduceOp::Avg`] the division by `world`; nothing for the others.
    ///
    /// # Safety
    ///
    /// `self` valid and writable.
    pub(crate) unsafe fn finish(self, op: ReduceOp, world: usize) {
        if op == ReduceOp::Avg && world > 1 && self.len > 0 {
            // SAFETY: forwarded from the caller.
            T::divide(unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }, world);
        }
    }

    /// `dst = self op other`, in one pass.
    ///
    /// # Safety
    ///
    /// All three views valid, equal lengths, `dst` writable and disjoint
    /// from both others.
    pub(crate) unsafe fn reduce_pair_into(self, other: RawBuf<T>, dst: RawBuf<T>, op: ReduceOp) {
        debug_assert!(self.len == dst.len && other.len == dst.len);
        if self.len > 0 {
            // SAFETY: forwarded from the caller.
            unsafe {
                T::reduce_pair(
                    op,
                    std::slice::from_raw_parts_mut(dst.ptr, dst.len),
                    std::slice::from_raw_parts(self.ptr, self.len),
                    std::slice::from_raw_parts(other.ptr, other.len),
                );
            }
        }
    }

    /// The view as a slice.
    ///
    /// # Safety
    ///
    /// Valid for `'a` and not written meanwhile.
    pub(crate) unsafe fn as_slice<'a>(self) -> &'a [T] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: forwarded from the caller.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The view as a mutable slice.
    ///
    /// # Safety
    ///
    /// Valid for `'a`, writable, and not accessed otherwise meanwhile.
    pub(crate) unsafe fn as_mut_slice<'a>(self) -> &'a mut [T] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: forwarded from the caller.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }

    fn byte_ptr(self) -> *mut u8 {
        if self.len == 0 {
            std::ptr::NonNull::<T>::dangling().as_ptr().cast()
        } else {
            self.ptr.cast()
        }
    }
}

/// The point-to-point operations of one algorithm step, posted together and
/// completed together.
pub(crate) struct Xfer<'c> {
    comm: &'c Comm,
    header: Option<CollHeader>,
    context: Context,
    ops: SmallVec<[P2pOp; 8]>,
}

impl<'c> Xfer<'c> {
    /// A step of the collective `header`.
    #[inline]
    pub(crate) fn coll(comm: &'c Comm, header: &CollHeader) -> Self {
        Xfer {
            comm,
            header: Some(*header),
            context: Context::Coll,
            ops: SmallVec::new(),
        }
    }

    /// A group of user point-to-point operations.
    #[inline]
    pub(crate) fn p2p(comm: &'c Comm) -> Self {
        if let Some(header) = &comm.traffic {
            return Xfer::coll(comm, header);
        }
        Xfer {
            comm,
            header: None,
            context: Context::P2p,
            ops: SmallVec::new(),
        }
    }

    pub(crate) fn ops(&self) -> &[P2pOp] {
        &self.ops
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    fn push<T: Element>(&mut self, dir: Dir, buf: RawBuf<T>, peer: usize, tag: i64, reduce: Option<ReduceOp>) {
        self.ops.push(P2pOp {
            dir,
            ptr: buf.byte_ptr(),
            count: buf.len,
            dtype: T::DTYPE,
            peer,
            tag,
            reduce,
            context: self.context,
            header: self.header,
        });
    }

    /// Adds a send of `buf` to `peer`.
    pub(crate) fn send<T: Element>(&mut self, buf: RawBuf<T>, peer: usize, tag: i64) -> &mut Self {
        self.push(Dir::Send, buf, peer, tag, None);
        self
    }

    /// Adds a receive into `buf` from `peer`.
    pub(crate) fn recv<T: Element>(&mut self, buf: RawBuf<T>, peer: usize, tag: i64) -> &mut Self {
        self.push(Dir::Recv, buf, peer, tag, None);
        self
    }

    /// Adds a receive into `buf` from `peer`, combining with `reduce` when
    /// given.
    pub(crate) fn recv_with<T: Element>(
        &mut self,
        buf: RawBuf<T>,
        peer: usize,
        tag: i64,
        reduce: Option<ReduceOp>,
    ) -> &mut Self {
        self.push(Dir::Recv, buf, peer, tag, reduce);
        self
    }

    /// Adds a receive that combines the incoming data into `buf` with `op`.
    pub(crate) fn recv_reduce<T: Element>(&mut self, buf: RawBuf<T>, peer: usize, tag: i64, op: ReduceOp) -> &mut Self {
        self.push(Dir::Recv, buf, peer, tag, Some(op));
        self
    }

    /// Posts every operation and returns without waiting; the operations
    /// complete by [`InFlight::wait`] or are cancelled when it is dropped.
    ///
    /// # Safety
    ///
    /// As for [`Xfer::run`], until the returned guard is waited or dropped.
    pub(crate) unsafe fn post(&mut self) -> Result<InFlight<'c>> {
        let mut flight = InFlight {
            comm: self.comm,
            ids: OpIds::new(),
        };
        if !self.ops.is_empty() {
            // SAFETY: forwarded from the caller; the guard cancels whatever
            // was posted if it is dropped unwaited.
            unsafe { self.comm.post_ops(&self.ops, &mut flight.ids)? };
        }
        self.ops.clear();
        Ok(flight)
    }

    /// Posts every operation and waits for all of them.
    ///
    /// # Safety
    ///
    /// Every buffer valid (receive buffers writable and not accessed
    /// otherwise) until this returns, and no receive buffer overlapping
    /// another buffer of this step.
    pub(crate) unsafe fn run(&mut self, what: &str) -> Result<()> {
        if self.ops.is_empty() {
            return Ok(());
        }
        // SAFETY: forwarded from the caller; `wait_ops` releases every op
        // before returning, so the buffers are untouched afterwards.
        let result = unsafe { self.comm.run_ops(&self.ops, what) };
        self.ops.clear();
        result
    }
}

/// Operations posted by [`Xfer::post`] and not yet waited for: dropping it
/// (an early return) cancels them, which waits for a copy already in
/// progress, so no buffer is touched after the guard is gone.
pub(crate) struct InFlight<'c> {
    comm: &'c Comm,
    ids: OpIds,
}

impl InFlight<'_> {
    /// Waits for every operation.
    pub(crate) fn wait(mut self, what: &str) -> Result<()> {
        let ids = std::mem::take(&mut self.ids);
        // `wait` releases every operation, whatever it returns.
        self.comm.wait_ids(&ids, what)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if !self.ids.is_empty() {
            self.comm.cancel_ids(&self.ids);
        }
    }
}

/// What an algorithm runs with: the communicator, the call's header, and its
/// place in the group.
pub(crate) struct Ctx<'c> {
    pub(crate) comm: &'c Comm,
    pub(crate) header: CollHeader,
    pub(crate) rank: usize,
    pub(crate) world: usize,
    pub(crate) segment_bytes: usize,
    /// The algorithms that ran, as they report themselves ([`Ctx::ran`]).
    pub(crate) ran: RefCell<Ran>,
}

impl<'c> Ctx<'c> {
    /// Notes that `algorithm` ran (a part of) this call.
    pub(crate) fn ran(&self, algorithm: Algorithm) {
        let mut ran = self.ran.borrow_mut();
        if ran.last() != Some(&algorithm) {
            ran.push(algorithm);
        }
    }

    /// A new step of this collective.
    pub(crate) fn xfer(&self) -> Xfer<'c> {
        Xfer::coll(self.comm, &self.header)
    }

    /// `rank + d` modulo the world size.
    pub(crate) fn right(&self, d: usize) -> usize {
        (self.rank + d) % self.world
    }

    /// `rank - d` modulo the world size.
    pub(crate) fn left(&self, d: usize) -> usize {
        (self.rank + self.world - d % self.world) % self.world
    }

    /// How many segments a transfer of up to `elems` elements of `T` moves in.
    pub(crate) fn segments<T>(&self, elems: usize) -> usize {
        let bytes = elems * std::mem::size_of::<T>();
        bytes.div_ceil(self.segment_bytes.max(1)).max(1)
    }

    /// One step that sends `send` to `to` and receives (or, with `op`,
    /// receives and combines) `recv` from `from`, split into `segments`
    /// pipelined pieces.
    ///
    /// # Safety
    ///
    /// As for [`Xfer::run`]: valid buffers, `recv` writable and disjoint
    /// from `send`.
    pub(crate) unsafe fn shift<T: Element>(
        &self,
        send: RawBuf<T>,
        to: usize,
        recv: RawBuf<T>,
        from: usize,
        op: Option<ReduceOp>,
        segments: usize,
        what: &str,
    ) -> Result<()> {
        let mut x = self.xfer();
        for k in 0..segments {
            x.send(send.part(segments, k), to, 0);
            x.recv_with(recv.part(segments, k), from, 0, op);
            // SAFETY: forwarded from the caller.
            unsafe { x.run(what)? };
        }
        Ok(())
    }
}

impl Comm {
    /// A raw view of a buffer this communicator's backend can use.
    pub(crate) fn view<B: Buffer + ?Sized>(&self, b: &B) -> Result<RawBuf<B::Elem>> {
        self.check_memory(b.memory())?;
        check_layout(b)?;
        let (ptr, len) = b.raw_parts();
        Ok(RawBuf {
            ptr: ptr.cast_mut(),
            len,
        })
    }

    /// A raw view of a buffer this communicator's backend can write.
    pub(crate) fn view_mut<B: BufferMut + ?Sized>(&self, b: &mut B) -> Result<RawBuf<B::Elem>> {
        self.check_memory(b.memory())?;
        check_layout(b)?;
        let (ptr, len) = b.raw_parts_mut();
        Ok(RawBuf { ptr, len })
    }

    fn check_memory(&self, memory: Memory) -> Result<()> {
        if self.inner.backend.accepts(memory) {
            return Ok(());
        }
        Err(Error::precondition(format!(
            "a buffer in {memory:?} memory cannot be used with the `{}` backend; allocate it through this communicator",
            self.backend_name()
        )))
    }
}

fn check_layout<B: Buffer + ?Sized>(b: &B) -> Result<()> {
    b.layout_problem().map_or(Ok(()), |m| Err(Error::precondition(m)))
}

/// Start and length of part `i` of `len` elements split into `parts` nearly
/// equal parts (the first `len % parts` parts are one element longer).
pub(crate) fn part(len: usize, parts: usize, i: usize) -> (usize, usize) {
    let base = len / parts;
    let extra = len % parts;
    (i * base + i.min(extra), base + usize::from(i < extra))
}
