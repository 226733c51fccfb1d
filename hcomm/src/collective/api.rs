//! The collective operations of [`Comm`]: argument checks, the consistency
//! header, algorithm choice, tracing, then the algorithm.

use super::raw::{Ctx, RawBuf};
use super::{direct, halving_doubling, ring, schedules, tree, Algorithm, CollHeader, Collective};
use crate::backend::NativeCall;
use crate::buffer::{Buffer, BufferMut};
use crate::comm::Comm;
use crate::element::{Element, ReduceOp};
use crate::error::{Error, Result};

impl Comm {
    fn ctx(&self, header: CollHeader) -> Ctx<'_> {
        Ctx {
            comm: self,
            header,
            rank: self.rank(),
            world: self.world(),
            segment_bytes: self.segment_bytes(),
        }
    }

    fn choose(&self, collective: Collective, bytes: usize) -> (Algorithm, tracing::Span) {
        let algorithm = self.algorithm(collective, bytes);
        self.record_algorithm(collective, algorithm);
        let span = tracing::debug_span!(
            "collective",
            op = collective.name(),
            comm.rank = self.rank(),
            comm.world = self.world(),
            bytes,
            algorithm = algorithm.name(),
        );
        (algorithm, span)
    }

    /// After this rank's part of a collective: waits until every rank has
    /// entered it, so ranks that disagree all get an error, even those whose
    /// part finished before the disagreeing rank arrived.
    fn confirm(&self, header: &CollHeader, result: Result<()>) -> Result<()> {
        result?;
        self.inner.backend.confirm_collective(header, self.timeout())
    }

    /// The device library's own implementation of `call`, if the backend has one.
    ///
    /// # Safety
    ///
    /// The call's buffers valid until this returns.
    unsafe fn native<T: Element>(&self, call: NativeCall<'_>) -> Option<Result<()>> {
        // SAFETY: forwarded from the caller.
        unsafe { self.inner.backend.native_collective(&call, T::DTYPE, self.timeout()) }
    }

    fn check_root(&self, root: usize, what: &str) -> Result<()> {
        if root >= self.world() {
            return Err(Error::precondition(format!(
                "{what}: root {root} is out of range for a communicator of {} ranks",
                self.world()
            )));
        }
        Ok(())
    }

    /// Sums (or combines with `op`) `send` over every rank into `recv` on
    /// every rank. `send` and `recv` must have equal lengths; any length.
    pub fn all_reduce<T, S, R>(&self, send: &S, recv: &mut R, op: ReduceOp) -> Result<()>
    where
        T: Element,
        S: Buffer<Elem = T> + ?Sized,
        R: BufferMut<Elem = T> + ?Sized,
    {
        let (send, recv) = (self.view(send)?, self.view_mut(recv)?);
        check_len("recv", recv.len, send.len)?;
        // SAFETY: `send` and `recv` are distinct borrows that outlive the call.
        unsafe { self.all_reduce_raw(send, recv, op) }
    }

    /// [`Comm::all_reduce`] in place.
    pub fn all_reduce_in_place<B: BufferMut + ?Sized>(&self, buf: &mut B, op: ReduceOp) -> Result<()> {
        let buf = self.view_mut(buf)?;
        let view = buf;
        // SAFETY: one exclusive borrow that outlives the call.
        unsafe { self.all_reduce_raw(view, view, op) }
    }

    /// # Safety
    ///
    /// `send` valid; `recv` valid, writable and equal to or disjoint from
    /// `send`, both of equal length, until this returns.
    pub(crate) unsafe fn all_reduce_raw<T: Element>(
        &self,
        send: RawBuf<T>,
        recv: RawBuf<T>,
        op: ReduceOp,
    ) -> Result<()> {
        let header = self.enter_collective(Collective::AllReduce, T::DTYPE, Some(send.len), Some(op), None)?;
        let (algorithm, span) = self.choose(Collective::AllReduce, send.len * size_of::<T>());
        let _e = span.enter();
        let result = (|| -> Result<()> {
            // SAFETY: forwarded from the caller.
            if let Some(r) = unsafe {
                self.native::<T>(NativeCall::AllReduce {
                    send: send.ptr.cast(),
                    recv: recv.ptr.cast(),
                    count: send.len,
                    op,
                })
            } {
                return r;
            }
            // SAFETY: forwarded from the caller.
            unsafe { send.copy_to(recv) };
            if self.world() == 1 {
                return Ok(());
            }
            let c = self.ctx(header);
            // SAFETY: `recv` is valid and writable for the whole call.
            unsafe {
                match algorithm {
                    Algorithm::HalvingDoubling => halving_doubling::all_reduce(&c, recv, op),
                    Algorithm::ReduceBroadcast => {
                        tree::reduce(&c, recv, op, 0)?;
                        schedules::broadcast(&c, recv, 0)
                    }
                    _ => schedules::ring_all_reduce(&c, recv, op),
                }
            }
        })();
        self.confirm(&header, result)
    }

    /// Every rank's `send` (all of equal length `n`) lands in block `r` of
    /// `recv` (length `n * world`) on every rank.
    pub fn all_gather<T, S, R>(&self, send: &S, recv: &mut R) -> Result<()>
    where
        T: Element,
        S: Buffer<Elem = T> + ?Sized,
        R: BufferMut<Elem = T> + ?Sized,
    {
        let (send, recv) = (self.view(send)?, self.view_mut(recv)?);
        if recv.len != send.len * self.world() {
            return Err(Error::buffer_length(
                "recv",
                recv.len,
                format_args!(
                    "{} (send length {} x world {})",
                    send.len * self.world(),
                    send.len,
                    self.world()
                ),
            ));
        }
        // SAFETY: distinct borrows that outlive the call.
        unsafe { self.all_gather_raw(send, recv) }
    }

    /// # Safety
    ///
    /// `send` valid; `recv` valid, writable, disjoint from `send`, of length
    /// `send.len * world`, until this returns.
    pub(crate) unsafe fn all_gather_raw<T: Element>(&self, send: RawBuf<T>, recv: RawBuf<T>) -> Result<()> {
        let n = send.len;
        let header = self.enter_collective(Collective::AllGather, T::DTYPE, Some(n), None, None)?;
        let (algorithm, span) = self.choose(Collective::AllGather, n * size_of::<T>());
        let _e = span.enter();
        let result = (|| -> Result<()> {
            // SAFETY: forwarded from the caller.
            if let Some(r) = unsafe {
                self.native::<T>(NativeCall::AllGather {
                    send: send.ptr.cast(),
                    recv: recv.ptr.cast(),
                    send_count: n,
                })
            } {
                return r;
            }
            // SAFETY: forwarded from the caller.
            unsafe { schedules::all_gather(&self.ctx(header), algorithm, send, recv) }
        })();
        self.confirm(&header, result)
    }

    /// Reduces `send` (length `n * world`) over every rank; rank `r` gets
    /// block `r` of the result in `recv` (length `n`).
    pub fn reduce_scatter<T, S, R>(&self, send: &S, recv: &mut R, op: ReduceOp) -> Result<()>
    where
        T: Element,
        S: Buffer<Elem = T> + ?Sized,
        R: BufferMut<Elem = T> + ?Sized,
    {
        let (send, recv) = (self.view(send)?, self.view_mut(recv)?);
        if send.len != recv.len * self.world() {
            return Err(Error::buffer_length(
                "send",
                send.len,
                format_args!(
                    "{} (recv length {} x world {})",
                    recv.len * self.world(),
                    recv.len,
                    self.world()
                ),
            ));
        }
        // SAFETY: distinct borrows that outlive the call.
        unsafe { self.reduce_scatter_raw(send, recv, op) }
    }

    /// # Safety
    ///
    /// `send` valid; `recv` valid, writable, disjoint from `send`, with
    /// `send.len == recv.len * world`, until this returns.
    pub(crate) unsafe fn reduce_scatter_raw<T: Element>(
        &self,
        send: RawBuf<T>,
        recv: RawBuf<T>,
        op: ReduceOp,
    ) -> Result<()> {
        let n = recv.len;
        let header = self.enter_collective(Collective::ReduceScatter, T::DTYPE, Some(n), Some(op), None)?;
        let (algorithm, span) = self.choose(Collective::ReduceScatter, send.len * size_of::<T>());
        let _e = span.enter();
        let result = (|| -> Result<()> {
            // SAFETY: forwarded from the caller.
            if let Some(r) = unsafe {
                self.native::<T>(NativeCall::ReduceScatter {
                    send: send.ptr.cast(),
                    recv: recv.ptr.cast(),
                    recv_count: n,
                    op,
                })
            } {
                return r;
            }
            if self.world() == 1 {
                // SAFETY: forwarded from the caller.
                unsafe { send.copy_to(recv) };
                return Ok(());
            }
            // SAFETY: `send` is valid for reads.
            let mut work = unsafe { send.as_slice() }.to_vec();
            let view = RawBuf::of_mut(&mut work);
            let c = self.ctx(header);
            // SAFETY: `work` is owned here; `recv` valid and writable.
            unsafe {
                match algorithm {
                    Algorithm::RecursiveHalving => halving_doubling::reduce_scatter(&c, view, op)?,
                    _ => ring::reduce_scatter(&c, view, op)?,
                }
                view.block(self.rank(), n).copy_to(recv);
            }
            Ok(())
        })();
        self.confirm(&header, result)
    }

    /// Block `j` of `send` goes to rank `j`, which stores it as block `r`
    /// of `recv`. Both have length `n * world`.
    pub fn all_to_all<T, S, R>(&self, send: &S, recv: &mut R) -> Result<()>
    where
        T: Element,
        S: Buffer<Elem = T> + ?Sized,
        R: BufferMut<Elem = T> + ?Sized,
    {
        let (send, recv) = (self.view(send)?, self.view_mut(recv)?);
        check_len("recv", recv.len, send.len)?;
        if !send.len.is_multiple_of(self.world()) {
            return Err(Error::buffer_length(
                "send",
                send.len,
                format_args!("a multiple of world = {}", self.world()),
            ));
        }
        // SAFETY: distinct borrows that outlive the call.
        unsafe { self.all_to_all_raw(send, recv) }
    }

    /// # Safety
    ///
    /// `send` valid; `recv` valid, writable, disjoint from `send`, equal
    /// lengths divisible by the world size, until this returns.
    pub(crate) unsafe fn all_to_all_raw<T: Element>(&self, send: RawBuf<T>, recv: RawBuf<T>) -> Result<()> {
        let block = send.len / self.world();
        let header = self.enter_collective(Collective::AllToAll, T::DTYPE, Some(block), None, None)?;
        let (algorithm, span) = self.choose(Collective::AllToAll, send.len * size_of::<T>());
        let _e = span.enter();
        let result = (|| -> Result<()> {
            // SAFETY: forwarded from the caller.
            if let Some(r) = unsafe {
                self.native::<T>(NativeCall::AllToAll {
                    send: send.ptr.cast(),
                    recv: recv.ptr.cast(),
                    count_per_peer: send.len / self.world(),
                })
            } {
                return r;
            }
            let c = self.ctx(header);
            let w = self.world();
            // SAFETY: forwarded from the caller.
            unsafe {
                match algorithm {
                    Algorithm::Direct => direct::all_to_all_direct(
                        &c,
                        (0..w).map(|j| send.block(j, block)),
                        (0..w).map(|j| recv.block(j, block)),
                    ),
                    _ => schedules::all_to_all(&c, send, recv),
                }
            }
        })();
        self.confirm(&header, result)
    }

    /// All-to-all with per-peer counts: `send_counts[j]` elements of `send`
    /// (packed in rank order) go to rank `j`; `recv_counts[j]` elements come
    /// from rank `j` into `recv` (packed in rank order). Each pair of ranks
    /// must agree on the count between them.
    pub fn all_to_allv<T, S, R>(
        &self,
        send: &S,
        send_counts: &[usize],
        recv: &mut R,
        recv_counts: &[usize],
    ) -> Result<()>
    where
        T: Element,
        S: Buffer<Elem = T> + ?Sized,
        R: BufferMut<Elem = T> + ?Sized,
    {
        let (send, recv) = (self.view(send)?, self.view_mut(recv)?);
        let w = self.world();
        check_len("send_counts", send_counts.len(), w)?;
        check_len("recv_counts", recv_counts.len(), w)?;
        for (name, len, counts) in [("send", send.len, send_counts), ("recv", recv.len, recv_counts)] {
            let total: usize = counts.iter().sum();
            if len != total {
                return Err(Error::buffer_length(
                    name,
                    len,
                    format_args!("{total} (the sum of {name}_counts)"),
                ));
            }
        }
        let header = self.enter_collective(Collective::AllToAllV, T::DTYPE, None, None, None)?;
        let (_, span) = self.choose(Collective::AllToAllV, send.len * size_of::<T>());
        let _e = span.enter();
        let result = (|| -> Result<()> {
            // SAFETY: forwarded from the caller.
            if let Some(r) = unsafe {
                self.native::<T>(NativeCall::AllToAllV {
                    send: send.ptr.cast(),
                    send_counts,
                    recv: recv.ptr.cast(),
                    recv_counts,
                })
            } {
                return r;
            }
            let views = |base: RawBuf<T>, counts: &[usize]| {
                let mut start = 0;
                counts
                    .iter()
                    .map(|&n| {
                        let v = base.sub(start, n);
                        start += n;
                        v
                    })
                    .collect::<smallvec::SmallVec<[RawBuf<T>; 16]>>()
            };
            let sends = views(send, send_counts);
            let recvs = views(recv, recv_counts);
            if send_counts[self.rank()] != recv_counts[self.rank()] {
                return Err(Error::mismatch(format!(
                    "rank {} sends {} elements to itself but expects {}",
                    self.rank(),
                    send_counts[self.rank()],
                    recv_counts[self.rank()]
                )));
            }
            let c = self.ctx(header);
            // SAFETY: the views are disjoint parts of two distinct borrows.
            unsafe { direct::all_to_all_direct(&c, sends.into_iter(), recvs.into_iter()) }
        })();
        self.confirm(&header, result)
    }

    /// Copies `buf` of rank `root` into `buf` of every rank.
    pub fn broadcast<B: BufferMut + ?Sized>(&self, buf: &mut B, root: usize) -> Result<()> {
        let buf = self.view_mut(buf)?;
        // SAFETY: one exclusive borrow that outlives the call.
        unsafe { self.broadcast_raw(buf, root) }
    }

    /// # Safety
    ///
    /// `buf` valid and writable until this returns.
    pub(crate) unsafe fn broadcast_raw<T: Element>(&self, buf: RawBuf<T>, root: usize) -> Result<()> {
        self.check_root(root, "broadcast")?;
        let header = self.enter_collective(Collective::Broadcast, T::DTYPE, Some(buf.len), None, Some(root))?;
        let (algorithm, span) = self.choose(Collective::Broadcast, buf.len * size_of::<T>());
        let _e = span.enter();
        let result = (|| -> Result<()> {
            // SAFETY: forwarded from the caller.
            if let Some(r) = unsafe {
                self.native::<T>(NativeCall::Broadcast {
                    buf: buf.ptr.cast(),
                    count: buf.len,
                    root,
                })
            } {
                return r;
            }
            if self.world() == 1 {
                return Ok(());
            }
            let c = self.ctx(header);
            // SAFETY: forwarded from the caller.
            unsafe {
                match algorithm {
                    Algorithm::ScatterAllGather => {
                        let w = self.world();
                        let mut x = c.xfer();
                        if self.rank() == root {
                            for peer in (0..w).filter(|&p| p != root) {
                                x.send(buf.part(w, peer), peer, 0);
                            }
                        } else {
                            x.recv(buf.part(w, self.rank()), root, 0);
                        }
                        x.run("broadcast scatter")?;
                        ring::all_gather_phase(&c, buf, w - 1)
                    }
                    _ => schedules::broadcast(&c, buf, root),
                }
            }
        })();
        self.confirm(&header, result)
    }

    /// Combines `send` of every rank into `recv` on `root`. `recv` is only
    /// used on the root, where it must have `send`'s length; other ranks may
    /// pass an empty slice.
    pub fn reduce<T, S, R>(&self, send: &S, recv: &mut R, op: ReduceOp, root: usize) -> Result<()>
    where
        T: Element,
        S: Buffer<Elem = T> + ?Sized,
        R: BufferMut<Elem = T> + ?Sized,
    {
        let (send, recv) = (self.view(send)?, self.view_mut(recv)?);
        self.check_root(root, "reduce")?;
        if self.rank() == root {
            check_len("recv", recv.len, send.len)?;
        }
        // SAFETY: distinct borrows that outlive the call.
        unsafe { self.reduce_raw(send, recv, op, root) }
    }

    /// # Safety
    ///
    /// `send` valid; on the root `recv` valid, writable, equal to or disjoint
    /// from `send` and of equal length, until this returns.
    pub(crate) unsafe fn reduce_raw<T: Element>(
        &self,
        send: RawBuf<T>,
        recv: RawBuf<T>,
        op: ReduceOp,
        root: usize,
    ) -> Result<()> {
        self.check_root(root, "reduce")?;
        let header = self.enter_collective(Collective::Reduce, T::DTYPE, Some(send.len), Some(op), Some(root))?;
        let (_, span) = self.choose(Collective::Reduce, send.len * size_of::<T>());
        let _e = span.enter();
        let result = (|| -> Result<()> {
            // SAFETY: forwarded from the caller.
            if let Some(r) = unsafe {
                self.native::<T>(NativeCall::Reduce {
                    send: send.ptr.cast(),
                    recv: recv.ptr.cast(),
                    count: send.len,
                    op,
                    root,
                })
            } {
                return r;
            }
            let c = self.ctx(header);
            if self.rank() == root {
                // SAFETY: forwarded from the caller.
                unsafe {
                    send.copy_to(recv);
                    return tree::reduce(&c, recv, op, root);
                }
            }
            if !tree::has_children(self.rank(), root, self.world()) {
                // SAFETY: a leaf only sends `send`, never writes it.
                return unsafe { tree::reduce(&c, send, op, root) };
            }
            // SAFETY: `send` valid for reads; the scratch copy is owned here.
            let mut acc = unsafe { send.as_slice() }.to_vec();
            // SAFETY: `acc` is owned and outlives the call.
            unsafe { tree::reduce(&c, RawBuf::of_mut(&mut acc), op, root) }
        })();
        self.confirm(&header, result)
    }

    /// Every rank's `send` (equal lengths `n`) lands in block `r` of `recv`
    /// (length `n * world`) on `root`; other ranks may pass an empty `recv`.
    pub fn gather<T, S, R>(&self, send: &S, recv: &mut R, root: usize) -> Result<()>
    where
        T: Element,
        S: Buffer<Elem = T> + ?Sized,
        R: BufferMut<Elem = T> + ?Sized,
    {
        let (send, recv) = (self.view(send)?, self.view_mut(recv)?);
        self.check_root(root, "gather")?;
        if self.rank() == root {
            check_len("recv", recv.len, send.len * self.world())?;
        }
        let header = self.enter_collective(Collective::Gather, T::DTYPE, Some(send.len), None, Some(root))?;
        let (_, span) = self.choose(Collective::Gather, send.len * size_of::<T>());
        let _e = span.enter();
        let result = (|| -> Result<()> {
            // SAFETY: forwarded from the caller.
            if let Some(r) = unsafe {
                self.native::<T>(NativeCall::Gather {
                    send: send.ptr.cast(),
                    recv: recv.ptr.cast(),
                    count: send.len,
                    root,
                })
            } {
                return r;
            }
            // SAFETY: distinct borrows that outlive the call.
            unsafe { direct::gather(&self.ctx(header), send, recv, root) }
        })();
        self.confirm(&header, result)
    }

    /// Block `r` of `send` on `root` (length `n * world`) lands in `recv`
    /// (length `n`) of rank `r`; other ranks may pass an empty `send`.
    pub fn scatter<T, S, R>(&self, send: &S, recv: &mut R, root: usize) -> Result<()>
    where
        T: Element,
        S: Buffer<Elem = T> + ?Sized,
        R: BufferMut<Elem = T> + ?Sized,
    {
        let (send, recv) = (self.view(send)?, self.view_mut(recv)?);
        self.check_root(root, "scatter")?;
        if self.rank() == root {
            check_len("send", send.len, recv.len * self.world())?;
        }
        let header = self.enter_collective(Collective::Scatter, T::DTYPE, Some(recv.len), None, Some(root))?;
        let (_, span) = self.choose(Collective::Scatter, recv.len * size_of::<T>());
        let _e = span.enter();
        let result = (|| -> Result<()> {
            // SAFETY: forwarded from the caller.
            if let Some(r) = unsafe {
                self.native::<T>(NativeCall::Scatter {
                    send: send.ptr.cast(),
                    recv: recv.ptr.cast(),
                    count: recv.len,
                    root,
                })
            } {
                return r;
            }
            // SAFETY: distinct borrows that outlive the call.
            unsafe { direct::scatter(&self.ctx(header), send, recv, root) }
        })();
        self.confirm(&header, result)
    }

    /// Returns once every rank has entered the barrier.
    pub fn barrier(&self) -> Result<()> {
        let header = self.enter_collective(Collective::Barrier, crate::element::DataType::U8, Some(0), None, None)?;
        let (_, span) = self.choose(Collective::Barrier, 0);
        let _e = span.enter();
        let result = (|| -> Result<()> {
            // SAFETY: a barrier touches no buffer.
            if let Some(r) = unsafe { self.native::<u8>(NativeCall::Barrier) } {
                return r;
            }
            direct::barrier(&self.ctx(header))
        })();
        self.confirm(&header, result)
    }
}

fn check_len(buffer: &str, actual: usize, expected: usize) -> Result<()> {
    if actual == expected {
        Ok(())
    } else {
        Err(Error::buffer_length(buffer, actual, expected))
    }
}
