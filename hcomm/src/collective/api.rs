//! The collective operations of [`Comm`]: argument checks, then one driver
//! ([`Comm::collective`]) that every collective goes through: the consistency
//! header, algorithm choice, the tracing span, the device library's own
//! implementation where the backend has one, else the algorithm, and the
//! confirmation that every rank called the same collective.

use super::{
    digest, direct, halving_doubling, one_shot, ring, schedules, tree, Algorithm, CollHeader, Collective, Exchange,
};
use crate::backend::NativeCall;
use crate::buffer::{Buffer, BufferMut};
use crate::comm::Comm;
use crate::element::{DataType, Element, ReduceOp};
use crate::error::{Error, Result};
use crate::raw::{Ctx, RawBuf, Xfer};

/// What a collective call agrees on across ranks, besides its kind.
struct Call<'a> {
    kind: Collective,
    dtype: DataType,
    /// The per-rank count every rank must pass (`None` where counts differ).
    count: Option<usize>,
    op: Option<ReduceOp>,
    root: Option<usize>,
    /// Bytes per rank, for algorithm choice and tracing.
    bytes: usize,
    native: NativeCall<'a>,
    /// The library exchange this call is (`None`: the user's collective).
    exchange: Option<Exchange>,
}

impl Comm {
    fn ctx(&self, header: CollHeader) -> Ctx<'_> {
        Ctx {
            comm: self,
            header,
            rank: self.rank(),
            world: self.world(),
            segment_bytes: self.segment_bytes(),
            ran: std::cell::RefCell::default(),
        }
    }

    /// Runs one collective: enters it (checking that the ranks that already
    /// entered agree), chooses the algorithm, opens the span, runs the device
    /// library's implementation or else `generic`, then waits until every
    /// rank has entered it, so ranks that disagree all get an error, even
    /// those whose part finished before the disagreeing rank arrived.
    ///
    /// # Safety
    ///
    /// The buffers of `call.native` (and those `generic` uses) valid, receive
    /// buffers writable and not accessed otherwise, until this returns.
    unsafe fn collective(
        &self,
        call: &Call<'_>,
        generic: impl FnOnce(&Ctx<'_>, Algorithm) -> Result<()>,
    ) -> Result<()> {
        // SAFETY: forwarded from the caller.
        self.call(call.kind.name(), || unsafe { self.collective_now(call, generic) })
    }

    /// [`Comm::collective`] inside the call already taken.
    ///
    /// # Safety
    ///
    /// As [`Comm::collective`].
    unsafe fn collective_now(
        &self,
        call: &Call<'_>,
        generic: impl FnOnce(&Ctx<'_>, Algorithm) -> Result<()>,
    ) -> Result<()> {
        let header = self.enter_collective(call.kind, call.dtype, call.count, call.op, call.root, call.exchange)?;
        let algorithm = self.algorithm(call.kind, call.bytes);
        let span = tracing::debug_span!(
            "collective",
            op = call.kind.name(),
            comm.rank = self.rank(),
            comm.world = self.world(),
            bytes = call.bytes,
            algorithm = algorithm.name(),
        );
        let _e = span.enter();
        // SAFETY: forwarded from the caller.
        let native = unsafe {
            self.inner
                .backend
                .native_collective(&call.native, call.dtype, self.timeout())
        };
        let ctx = self.ctx(header);
        let result = match native {
            // what the library ran: a fold of its data movement is
            // recorded as such
            Some(r) => r.map(|ran| ctx.ran(ran)),
            None => generic(&ctx, algorithm),
        };
        if let Err(e) = result {
            self.record_call(call.kind, algorithm, None);
            return Err(e);
        }
        let mut ran = ctx.ran.take();
        if ran.is_empty() {
            ran.push(algorithm);
        }
        self.record_call(call.kind, algorithm, Some(ran));
        if algorithm == Algorithm::OneShot {
            // Every rank's contribution was read, and its header compared:
            // every rank entered this collective and agreed on it.
            return Ok(());
        }
        self.inner.backend.confirm_collective(&header, self.timeout())
    }

    /// Checks that the buffer `whole` holds one block of the length of the
    /// buffer `part` per rank.
    pub(super) fn check_blocks(&self, whole: (&str, usize), part: (&str, usize)) -> Result<()> {
        let w = self.world();
        if whole.1 == part.1 * w {
            return Ok(());
        }
        Err(Error::buffer_length(
            whole.0,
            whole.1,
            format_args!("{} ({} length {} x world {w})", part.1 * w, part.0, part.1),
        ))
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
        // SAFETY: one exclusive borrow that outlives the call.
        unsafe { self.all_reduce_raw(buf, buf, op) }
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
        let call = Call {
            kind: Collective::AllReduce,
            dtype: T::DTYPE,
            count: Some(send.len),
            op: Some(op),
            root: None,
            bytes: send.len * size_of::<T>(),
            exchange: None,
            native: NativeCall::AllReduce {
                send: send.ptr.cast(),
                recv: recv.ptr.cast(),
                count: send.len,
                op,
            },
        };
        // SAFETY: forwarded from the caller; `recv` is valid and writable.
        unsafe {
            self.collective(&call, |c, algorithm| {
                // The algorithms combine pairwise; a mean divides once, after.
                let (mean, op) = (op, op.pairwise());
                let combined = || {
                    if algorithm == Algorithm::Direct {
                        return direct::all_reduce(c, send, recv, op);
                    }
                    if let (Algorithm::OneShot, Some(board)) = (algorithm, self.inner.backend.capabilities().board) {
                        return one_shot::all_reduce(c, board, send, recv, op);
                    }
                    send.copy_to(recv);
                    if c.world == 1 {
                        return Ok(());
                    }
                    match algorithm {
                        Algorithm::HalvingDoubling => halving_doubling::all_reduce(c, recv, op),
                        Algorithm::ReduceBroadcast => {
                            tree::reduce(c, recv, op, 0)?;
                            schedules::broadcast(c, recv, 0)
                        }
                        _ => schedules::ring_all_reduce_in_pieces(c, recv, op),
                    }
                };
                combined()?;
                recv.finish(mean, c.world);
                Ok(())
            })
        }
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
        self.check_blocks(("recv", recv.len), ("send", send.len))?;
        // SAFETY: distinct borrows that outlive the call.
        unsafe { self.all_gather_raw(send, recv) }
    }

    /// # Safety
    ///
    /// `send` valid; `recv` valid, writable, disjoint from `send`, of length
    /// `send.len * world`, until this returns.
    pub(crate) unsafe fn all_gather_raw<T: Element>(&self, send: RawBuf<T>, recv: RawBuf<T>) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.gather_all(send, recv, None) }
    }

    /// An all-gather of the library's own (`what`): every rank's `mine`
    /// lands in block `r` of `all`, under a header no user collective
    /// matches, so a rank in a user's collective meanwhile gets
    /// [`Error::Mismatch`] instead of this exchange's data.
    pub(crate) fn exchange<T: Element>(&self, what: Exchange, mine: &[T], all: &mut [T]) -> Result<()> {
        let (send, recv) = (self.view(mine)?, self.view_mut(all)?);
        self.check_blocks(("all", recv.len), ("mine", send.len))?;
        // SAFETY: distinct borrows that outlive the call.
        unsafe { self.gather_all(send, recv, Some(what)) }
    }

    /// # Safety
    ///
    /// As [`Comm::all_gather_raw`].
    unsafe fn gather_all<T: Element>(
        &self,
        send: RawBuf<T>,
        recv: RawBuf<T>,
        exchange: Option<Exchange>,
    ) -> Result<()> {
        let n = send.len;
        let call = Call {
            kind: Collective::AllGather,
            dtype: T::DTYPE,
            count: Some(n),
            op: None,
            root: None,
            bytes: n * size_of::<T>(),
            exchange,
            native: NativeCall::AllGather {
                send: send.ptr.cast(),
                recv: recv.ptr.cast(),
                send_count: n,
            },
        };
        // SAFETY: forwarded from the caller.
        unsafe {
            self.collective(&call, |c, algorithm| {
                match (algorithm, self.inner.backend.capabilities().board) {
                    (Algorithm::OneShot, Some(board)) => one_shot::all_gather(c, board, send, recv),
                    (Algorithm::Direct, _) => direct::all_gather(c, send, recv),
                    _ => schedules::all_gather(c, algorithm, send, recv),
                }
            })
        }
    }

    /// All-gather with per-rank counts: rank `r` passes `counts[r]` elements
    /// in `send`, and every rank receives every rank's elements packed in
    /// rank order in `recv` (length the sum of `counts`). Every rank passes
    /// the same `counts`; ranks whose `counts` disagree with what the others
    /// send all get [`Error::Mismatch`].
    ///
    /// The counts are agreed on with an all-gather of this communicator (so
    /// the call takes its place among this communicator's collectives), then
    /// the blocks move as one batch of point-to-point messages on a
    /// subgroup of every rank reserved for it (on device backends one
    /// `HcclBatchSendRecv` / NCCL group call), never on the user's channels.
    pub fn all_gatherv<T, S, R>(&self, send: &S, recv: &mut R, counts: &[usize]) -> Result<()>
    where
        T: Element,
        S: Buffer<Elem = T> + ?Sized,
        R: BufferMut<Elem = T> + ?Sized,
    {
        let (send, recv) = (self.view(send)?, self.view_mut(recv)?);
        // SAFETY: distinct borrows that outlive the call.
        unsafe { self.all_gatherv_raw(send, recv, counts) }
    }

    /// # Safety
    ///
    /// `send` valid; `recv` valid, writable and disjoint from `send`, until
    /// this returns (lengths are checked).
    pub(crate) unsafe fn all_gatherv_raw<T: Element>(
        &self,
        send: RawBuf<T>,
        recv: RawBuf<T>,
        counts: &[usize],
    ) -> Result<()> {
        // SAFETY: forwarded from the caller.
        self.call("all_gatherv", || unsafe {
            self.all_gatherv_now(send, recv, counts, Exchange::Counts)
        })
    }

    /// [`Comm::all_gatherv`] of the library's own: its count exchange
    /// carries `what`, so no user collective matches it.
    #[cfg(feature = "ndarray")]
    pub(crate) fn exchange_gatherv<T: Element>(
        &self,
        what: Exchange,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
    ) -> Result<()> {
        let (send, recv) = (self.view(send)?, self.view_mut(recv)?);
        // SAFETY: distinct borrows that outlive the call.
        self.call(what.name(), || unsafe {
            self.all_gatherv_now(send, recv, counts, what)
        })
    }

    /// [`Comm::all_gatherv_raw`] inside the call already taken.
    ///
    /// # Safety
    ///
    /// As [`Comm::all_gatherv_raw`].
    unsafe fn all_gatherv_now<T: Element>(
        &self,
        send: RawBuf<T>,
        recv: RawBuf<T>,
        counts: &[usize],
        exchange: Exchange,
    ) -> Result<()> {
        let (w, me) = (self.world(), self.rank());
        check_len("counts", counts.len(), w)?;
        check_len("send", send.len, counts[me])?;
        let total: usize = counts.iter().sum();
        if recv.len != total {
            return Err(Error::buffer_length(
                "recv",
                recv.len,
                format_args!("{total} (the sum of counts)"),
            ));
        }
        let span = tracing::debug_span!(
            "collective",
            op = "all_gatherv",
            comm.rank = me,
            comm.world = w,
            bytes = send.len * size_of::<T>(),
        );
        let _e = span.enter();
        let mine = [send.len as u64, digest(counts)];
        let mut all = vec![0u64; 2 * w];
        self.exchange(exchange, &mine, &mut all)?;
        let actual: Vec<usize> = (0..w).map(|r| all[2 * r] as usize).collect();
        let want = digest(&actual);
        let wrong: Vec<usize> = (0..w).filter(|&r| all[2 * r + 1] != want).collect();
        if !wrong.is_empty() {
            return Err(Error::mismatch(format!(
                "all_gatherv: ranks {wrong:?} pass counts that differ from what the ranks send ({actual:?})"
            )));
        }
        let every: Vec<usize> = (0..w).collect();
        let side = self.subgroup("hcomm.all_gatherv", &every)?;
        side.set_timeout(self.timeout());
        let mut x = Xfer::p2p(&side);
        let mut start = 0;
        for (peer, &n) in counts.iter().enumerate() {
            x.send(send, peer, 0).recv(recv.sub(start, n), peer, 0);
            start += n;
        }
        // SAFETY: `send` and `recv` are valid and disjoint until this
        // returns (the caller's contract); the receive views are disjoint
        // parts of `recv`.
        unsafe { x.run("all_gatherv") }
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
        self.check_blocks(("send", send.len), ("recv", recv.len))?;
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
        let call = Call {
            kind: Collective::ReduceScatter,
            dtype: T::DTYPE,
            count: Some(n),
            op: Some(op),
            root: None,
            bytes: send.len * size_of::<T>(),
            exchange: None,
            native: NativeCall::ReduceScatter {
                send: send.ptr.cast(),
                recv: recv.ptr.cast(),
                recv_count: n,
                op,
            },
        };
        // SAFETY: forwarded from the caller; `work` is owned by the closure.
        unsafe {
            self.collective(&call, |c, algorithm| {
                // The algorithms combine pairwise; a mean divides once, after.
                let (mean, op) = (op, op.pairwise());
                let combined = || {
                    if c.world == 1 {
                        send.copy_to(recv);
                        return Ok(());
                    }
                    if algorithm == Algorithm::Direct {
                        return direct::reduce_scatter(c, send, recv, op);
                    }
                    if let (Algorithm::OneShot, Some(board)) = (algorithm, self.inner.backend.capabilities().board) {
                        return one_shot::reduce_scatter(c, board, send, recv, op);
                    }
                    if algorithm != Algorithm::RecursiveHalving {
                        return ring::reduce_scatter(c, send, recv, op);
                    }
                    let mut work = send.as_slice().to_vec();
                    let view = RawBuf::of_mut(&mut work);
                    halving_doubling::reduce_scatter(c, view, op)?;
                    view.block(c.rank, n).copy_to(recv);
                    Ok(())
                };
                combined()?;
                recv.finish(mean, c.world);
                Ok(())
            })
        }
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
        // SAFETY: forwarded from the caller.
        unsafe { self.to_all(send, recv, None) }
    }

    /// An all-to-all of the library's own (`what`), under a header no user
    /// collective matches (see [`Comm::exchange`]).
    #[cfg(feature = "ndarray")]
    pub(crate) fn exchange_all_to_all<T: Element>(&self, what: Exchange, send: &[T], recv: &mut [T]) -> Result<()> {
        let (send, recv) = (self.view(send)?, self.view_mut(recv)?);
        check_len("recv", recv.len, send.len)?;
        if send.len % self.world() != 0 {
            return Err(Error::buffer_length(
                "send",
                send.len,
                format_args!("a multiple of the world size {}", self.world()),
            ));
        }
        // SAFETY: distinct borrows that outlive the call.
        unsafe { self.to_all(send, recv, Some(what)) }
    }

    /// # Safety
    ///
    /// As [`Comm::all_to_all_raw`].
    unsafe fn to_all<T: Element>(&self, send: RawBuf<T>, recv: RawBuf<T>, exchange: Option<Exchange>) -> Result<()> {
        let w = self.world();
        let block = send.len / w;
        let call = Call {
            kind: Collective::AllToAll,
            dtype: T::DTYPE,
            count: Some(block),
            op: None,
            root: None,
            bytes: send.len * size_of::<T>(),
            exchange,
            native: NativeCall::AllToAll {
                send: send.ptr.cast(),
                recv: recv.ptr.cast(),
                count_per_peer: block,
            },
        };
        // SAFETY: forwarded from the caller.
        unsafe {
            self.collective(&call, |c, algorithm| {
                match (algorithm, self.inner.backend.capabilities().board) {
                    (Algorithm::Direct, _) => direct::all_to_all_direct(
                        c,
                        (0..w).map(|j| send.block(j, block)),
                        (0..w).map(|j| recv.block(j, block)),
                    ),
                    (Algorithm::OneShot, Some(board)) => one_shot::all_to_all(c, board, send, recv),
                    _ => schedules::all_to_all(c, send, recv),
                }
            })
        }
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
        // SAFETY: distinct borrows that outlive the call.
        unsafe { self.all_to_allv_raw(send, send_counts, recv, recv_counts) }
    }

    /// # Safety
    ///
    /// `send` valid; `recv` valid, writable and disjoint from `send`, until
    /// this returns (lengths are checked).
    pub(crate) unsafe fn all_to_allv_raw<T: Element>(
        &self,
        send: RawBuf<T>,
        send_counts: &[usize],
        recv: RawBuf<T>,
        recv_counts: &[usize],
    ) -> Result<()> {
        let (w, r) = (self.world(), self.rank());
        // Empty buffers may share one dangling address, which device
        // libraries reject as aliasing; an empty receive gets an address of
        // its own (never dereferenced: it has no elements).
        let recv = if recv.len == 0 && recv.ptr == send.ptr {
            RawBuf {
                ptr: send.ptr.wrapping_add(1),
                len: 0,
            }
        } else {
            recv
        };
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
        if send_counts[r] != recv_counts[r] {
            return Err(Error::mismatch(format!(
                "rank {r} sends {} elements to itself but expects {}",
                send_counts[r], recv_counts[r]
            )));
        }
        let call = Call {
            kind: Collective::AllToAllV,
            dtype: T::DTYPE,
            count: None,
            op: None,
            root: None,
            bytes: send.len * size_of::<T>(),
            exchange: None,
            native: NativeCall::AllToAllV {
                send: send.ptr.cast(),
                send_counts,
                recv: recv.ptr.cast(),
                recv_counts,
            },
        };
        let views = |base: RawBuf<T>, counts: &[usize]| {
            let mut start = 0;
            counts
                .iter()
                .map(|&n| {
                    start += n;
                    base.sub(start - n, n)
                })
                .collect::<smallvec::SmallVec<[RawBuf<T>; 16]>>()
        };
        // SAFETY: the views are disjoint parts of two disjoint buffers valid
        // until this returns (the caller's contract).
        unsafe {
            self.collective(&call, |c, _| {
                direct::all_to_all_direct(
                    c,
                    views(send, send_counts).into_iter(),
                    views(recv, recv_counts).into_iter(),
                )
            })
        }
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
        let call = Call {
            kind: Collective::Broadcast,
            dtype: T::DTYPE,
            count: Some(buf.len),
            op: None,
            root: Some(root),
            bytes: buf.len * size_of::<T>(),
            exchange: None,
            native: NativeCall::Broadcast {
                buf: buf.ptr.cast(),
                count: buf.len,
                root,
            },
        };
        // SAFETY: forwarded from the caller.
        unsafe {
            self.collective(&call, |c, algorithm| {
                if c.world == 1 {
                    return Ok(());
                }
                if let (Algorithm::OneShot, Some(board)) = (algorithm, self.inner.backend.capabilities().board) {
                    return one_shot::broadcast(c, board, buf, root);
                }
                match algorithm {
                    Algorithm::ScatterAllGather => {
                        let w = c.world;
                        let mut x = c.xfer();
                        if c.rank == root {
                            for peer in (0..w).filter(|&p| p != root) {
                                x.send(buf.part(w, peer), peer, 0);
                            }
                        } else {
                            x.recv(buf.part(w, c.rank), root, 0);
                        }
                        x.run("broadcast scatter")?;
                        ring::all_gather_phase(c, buf, w - 1)
                    }
                    _ => schedules::broadcast(c, buf, root),
                }
            })
        }
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
        let call = Call {
            kind: Collective::Reduce,
            dtype: T::DTYPE,
            count: Some(send.len),
            op: Some(op),
            root: Some(root),
            bytes: send.len * size_of::<T>(),
            exchange: None,
            native: NativeCall::Reduce {
                send: send.ptr.cast(),
                recv: recv.ptr.cast(),
                count: send.len,
                op,
                root,
            },
        };
        // SAFETY: forwarded from the caller; a leaf only sends `send`, and
        // an inner rank combines into its own scratch copy.
        unsafe {
            self.collective(&call, |c, _| {
                // The tree combines pairwise; a mean divides once, after.
                let (mean, op) = (op, op.pairwise());
                if c.rank == root {
                    send.copy_to(recv);
                    tree::reduce(c, recv, op, root)?;
                    recv.finish(mean, c.world);
                    return Ok(());
                }
                if !tree::has_children(c.rank, root, c.world) {
                    return tree::reduce(c, send, op, root);
                }
                let mut acc = send.as_slice().to_vec();
                tree::reduce(c, RawBuf::of_mut(&mut acc), op, root)
            })
        }
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
        let call = Call {
            kind: Collective::Gather,
            dtype: T::DTYPE,
            count: Some(send.len),
            op: None,
            root: Some(root),
            bytes: send.len * size_of::<T>(),
            exchange: None,
            native: NativeCall::Gather {
                send: send.ptr.cast(),
                recv: recv.ptr.cast(),
                count: send.len,
                root,
            },
        };
        // SAFETY: distinct borrows that outlive the call.
        unsafe { self.collective(&call, |c, _| direct::gather(c, send, recv, root)) }
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
        let call = Call {
            kind: Collective::Scatter,
            dtype: T::DTYPE,
            count: Some(recv.len),
            op: None,
            root: Some(root),
            bytes: recv.len * size_of::<T>(),
            exchange: None,
            native: NativeCall::Scatter {
                send: send.ptr.cast(),
                recv: recv.ptr.cast(),
                count: recv.len,
                root,
            },
        };
        // SAFETY: distinct borrows that outlive the call.
        unsafe { self.collective(&call, |c, _| direct::scatter(c, send, recv, root)) }
    }

    /// Returns once every rank has entered the barrier.
    pub fn barrier(&self) -> Result<()> {
        let call = Call {
            kind: Collective::Barrier,
            dtype: DataType::U8,
            count: Some(0),
            op: None,
            root: None,
            bytes: 0,
            exchange: None,
            native: NativeCall::Barrier,
        };
        // SAFETY: a barrier touches no buffer.
        unsafe {
            self.collective(&call, |c, algorithm| {
                match (algorithm, self.inner.backend.capabilities().board) {
                    (Algorithm::OneShot, Some(board)) => one_shot::barrier(c, board),
                    _ => direct::barrier(c),
                }
            })
        }
    }
}

fn check_len(buffer: &str, actual: usize, expected: usize) -> Result<()> {
    if actual == expected {
        Ok(())
    } else {
        Err(Error::buffer_length(buffer, actual, expected))
    }
}
