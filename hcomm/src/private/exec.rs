//! The executor behind a `comm_schedule!` function: the buffer table,
//! regions, in-flight handles, batches, subgroups and run-time verification.
//!
//! The schedule checker proves, for every verified world size, that regions
//! are in bounds and that no operation touches a region an in-flight
//! operation uses. The executor still checks both before every operation (a
//! few comparisons), so that it is sound on its own: a wrong region is an
//! `Err`, never undefined behaviour.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Mutex, OnceLock};

use hcomm_schedule::ir::Schedule;
use hcomm_schedule::VerifyCache;
use smallvec::SmallVec;

use super::int;
use crate::backend::{OpId, OpIds};
use crate::buffer::{Buffer, BufferMut, Memory};
use crate::collective::{RawBuf, Xfer};
use crate::comm::Comm;
use crate::element::{Element, ReduceOp};
use crate::error::{Error, Result};

/// Elements `[start, end)` of registered buffer `buf`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Region {
    /// Index in the executor's buffer table.
    pub buf: usize,
    /// First element.
    pub start: i64,
    /// One past the last element.
    pub end: i64,
}

impl Region {
    fn overlaps(&self, other: &Region) -> bool {
        self.buf == other.buf
            && self.start < other.end
            && other.start < self.end
            && self.start < self.end
            && other.start < other.end
    }
}

/// A non-blocking operation in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Handle(u32);

/// A subgroup created by an `over` clause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Group(usize);

struct Slot<T> {
    ptr: *mut T,
    len: usize,
    writable: bool,
    memory: Memory,
}

struct InFlight {
    handle: u32,
    id: OpId,
    region: Region,
    writes: bool,
}

/// Runs one call of a schedule on one rank.
pub struct Exec<'a, T: Element> {
    comm: &'a Comm,
    schedule: &'static Schedule,
    slots: SmallVec<[Slot<T>; 4]>,
    scratch: Vec<Vec<T>>,
    inflight: SmallVec<[InFlight; 8]>,
    next_handle: u32,
    groups: SmallVec<[Comm; 2]>,
    _buffers: PhantomData<&'a mut [T]>,
}

impl<'a, T: Element> Exec<'a, T> {
    /// Runs `body` with an executor for `schedule` on `comm`. Whatever
    /// `body` returns (or if it panics), every operation still in flight is
    /// cancelled before the borrowed buffers are released.
    pub fn run(
        comm: &'a Comm,
        schedule: &'static Schedule,
        body: impl FnOnce(&mut Exec<'a, T>) -> Result<()>,
    ) -> Result<()> {
        let span = tracing::debug_span!(
            "schedule",
            name = schedule.name.as_str(),
            comm.rank = comm.rank(),
            comm.world = comm.world()
        );
        let _e = span.enter();
        let mut exec = Exec {
            comm,
            schedule,
            slots: SmallVec::new(),
            scratch: Vec::new(),
            inflight: SmallVec::new(),
            next_handle: 0,
            groups: SmallVec::new(),
            _buffers: PhantomData,
        };
        let out = body(&mut exec);
        if out.is_ok() && !exec.inflight.is_empty() {
            exec.cancel_inflight();
            return Err(Error::Schedule {
                schedule: schedule.name.clone(),
                message: "unwaited request: a non-blocking operation was still pending at the end".into(),
            });
        }
        out
    }

    /// This rank.
    pub fn rank(&self) -> i64 {
        self.comm.rank() as i64
    }

    /// The communicator size.
    pub fn world(&self) -> i64 {
        self.comm.world() as i64
    }

    /// `Err(Precondition)` unless the `#[requires]` condition holds.
    pub fn requires(&self, holds: bool, condition: &'static str) -> Result<()> {
        if holds {
            return Ok(());
        }
        Err(Error::precondition(format!(
            "`{}` requires `{condition}`, which does not hold with world = {}",
            self.schedule.name,
            self.comm.world()
        )))
    }

    /// A scalar argument, checked against its declared range `lo..hi`.
    pub fn scalar(&self, name: &'static str, value: usize, lo: i64, hi_exclusive: i64) -> Result<i64> {
        match int(value) {
            Ok(v) if (lo..hi_exclusive).contains(&v) => Ok(v),
            _ => Err(Error::precondition(format!(
                "`{}`: scalar `{name}` = {value} is outside its range {lo}..{hi_exclusive} (world = {})",
                self.schedule.name,
                self.comm.world()
            ))),
        }
    }

    /// The length variable `var` from `actual == coef * var + constant`.
    pub fn solve_len(
        &self,
        buffer: &'static str,
        actual: usize,
        coef: i64,
        constant: i64,
        var: &'static str,
    ) -> Result<i64> {
        let actual_i = int(actual)?;
        let fits = coef != 0 && (actual_i - constant) % coef == 0 && (actual_i - constant) / coef >= 1;
        if fits {
            return Ok((actual_i - constant) / coef);
        }
        let shape = match (coef, constant) {
            (1, 0) => var.to_owned(),
            (c, 0) => format!("{c} * {var}"),
            (1, k) => format!("{var} + {k}"),
            (c, k) => format!("{c} * {var} + {k}"),
        };
        Err(Error::buffer_length(
            buffer,
            actual,
            format_args!("`{shape}` with `{var}` >= 1"),
        ))
    }

    /// `Err(BufferLength)` unless `actual == expected`.
    pub fn check_len(&self, buffer: &'static str, actual: usize, expected: i64) -> Result<()> {
        if int(actual)? == expected {
            Ok(())
        } else {
            Err(Error::buffer_length(buffer, actual, expected))
        }
    }

    /// Runs the schedule checker for this world size (and these scalars)
    /// when it lies outside the compile-time verify set; once per
    /// (schedule, size, scalars), cached.
    pub fn verify(&self, scalars: &[i64]) -> Result<()> {
        let world = self.world();
        if self.schedule.verify_set_contains(world) {
            return Ok(());
        }
        let span = tracing::debug_span!("verify", schedule = self.schedule.name.as_str(), world);
        let _e = span.enter();
        verify_cache(self.schedule)
            .check(self.schedule, world, scalars)
            .map_err(|message| Error::Schedule {
                schedule: self.schedule.name.clone(),
                message,
            })
    }

    /// Registers a read-only buffer (a slice, or a device buffer of the
    /// communicator's backend); returns its index.
    pub fn input<B: Buffer<Elem = T> + ?Sized>(&mut self, buf: &'a B) -> usize {
        let (ptr, len) = buf.raw_parts();
        self.slots.push(Slot {
            ptr: ptr.cast_mut(),
            len,
            writable: false,
            memory: buf.memory(),
        });
        self.slots.len() - 1
    }

    /// Registers a writable buffer; returns its index.
    pub fn output<B: BufferMut<Elem = T> + ?Sized>(&mut self, buf: &'a mut B) -> usize {
        let memory = buf.memory();
        let (ptr, len) = buf.raw_parts_mut();
        self.slots.push(Slot {
            ptr,
            len,
            writable: true,
            memory,
        });
        self.slots.len() - 1
    }

    /// A temporary buffer of `len` elements for the rest of the call.
    pub fn scratch(&mut self, len: i64) -> Result<usize> {
        let len = usize::try_from(len).map_err(|_| Error::Evaluation {
            message: format!("scratch length {len} is negative"),
        })?;
        let mut storage = vec![T::ZERO; len];
        self.slots.push(Slot {
            ptr: storage.as_mut_ptr(),
            len,
            writable: true,
            memory: Memory::Host,
        });
        self.scratch.push(storage);
        Ok(self.slots.len() - 1)
    }

    fn view(&self, r: Region, write: bool) -> Result<RawBuf<T>> {
        let slot = self
            .slots
            .get(r.buf)
            .ok_or_else(|| Error::precondition(format!("region of unknown buffer #{}", r.buf)))?;
        if r.start < 0 || r.start > r.end || usize::try_from(r.end).map_or(true, |e| e > slot.len) {
            return Err(Error::precondition(format!(
                "region out of bounds: [{}, {}) of a buffer of {} elements",
                r.start, r.end, slot.len
            )));
        }
        if write && !slot.writable {
            return Err(Error::precondition("write to read-only buffer"));
        }
        if slot.memory != Memory::Host && !self.comm.inner.backend.accepts(slot.memory) {
            return Err(Error::precondition(format!(
                "`{}` on the `{}` backend: {:?} memory cannot be used with this communicator",
                self.schedule.name,
                self.comm.backend_name(),
                slot.memory
            )));
        }
        let start = r.start as usize;
        Ok(RawBuf {
            ptr: slot.ptr.wrapping_add(start),
            len: (r.end - r.start) as usize,
        })
    }

    fn hazard(&self, r: Region, writes: bool, what: &str) -> Result<()> {
        for f in &self.inflight {
            if f.region.overlaps(&r) && (writes || f.writes) {
                return Err(Error::precondition(format!(
                    "buffer hazard: {what} touches a region a pending non-blocking operation uses"
                )));
            }
        }
        Ok(())
    }

    fn peer(peer: i64, group: &Comm) -> Result<usize> {
        usize::try_from(peer)
            .ok()
            .filter(|&p| p < group.world())
            .ok_or_else(|| Error::precondition(format!("rank out of range: {peer} with world = {}", group.world())))
    }

    fn blocking_peer(&self, peer: i64, what: &str) -> Result<usize> {
        let p = Self::peer(peer, self.comm)?;
        if p == self.comm.rank() {
            return Err(Error::precondition(format!(
                "{what} to self: rank {p} would block forever"
            )));
        }
        Ok(p)
    }

    /// Blocking send.
    pub fn send(&mut self, r: Region, peer: i64, tag: i64) -> Result<()> {
        let p = self.blocking_peer(peer, "send")?;
        let v = self.view(r, false)?;
        self.hazard(r, false, "`send`")?;
        let mut x = Xfer::p2p(self.comm);
        x.send(v, p, tag);
        // SAFETY: the region is in bounds of a buffer borrowed for `'a` and
        // no in-flight operation writes it.
        unsafe { x.run("send") }
    }

    /// Blocking receive, optionally combining with `reduce`.
    pub fn recv(&mut self, r: Region, peer: i64, tag: i64, reduce: Option<ReduceOp>) -> Result<()> {
        let p = self.blocking_peer(peer, "recv")?;
        let v = self.view(r, true)?;
        self.hazard(r, true, "`recv`")?;
        let mut x = Xfer::p2p(self.comm);
        x.recv_with(v, p, tag, reduce);
        // SAFETY: the region is in bounds of a writable buffer borrowed for
        // `'a` and no in-flight operation uses it.
        unsafe { x.run("recv") }
    }

    fn post(&mut self, r: Region, writes: bool, x: &Xfer<'_>) -> Result<Handle> {
        let mut ids = OpIds::new();
        // SAFETY: the region is in bounds of a buffer borrowed for `'a`;
        // the op stays in `inflight` until waited, and `Exec::run` and
        // `Drop` cancel it before the borrow ends.
        unsafe { self.comm.post_ops(x.ops(), &mut ids)? };
        let handle = self.next_handle;
        self.next_handle += 1;
        self.inflight.push(InFlight {
            handle,
            id: ids[0],
            region: r,
            writes,
        });
        Ok(Handle(handle))
    }

    /// Non-blocking send.
    pub fn isend(&mut self, r: Region, peer: i64, tag: i64) -> Result<Handle> {
        let p = Self::peer(peer, self.comm)?;
        let v = self.view(r, false)?;
        self.hazard(r, false, "`isend`")?;
        let mut x = Xfer::p2p(self.comm);
        x.send(v, p, tag);
        self.post(r, false, &x)
    }

    /// Non-blocking receive, optionally combining with `reduce`.
    pub fn irecv(&mut self, r: Region, peer: i64, tag: i64, reduce: Option<ReduceOp>) -> Result<Handle> {
        let p = Self::peer(peer, self.comm)?;
        let v = self.view(r, true)?;
        self.hazard(r, true, "`irecv`")?;
        let mut x = Xfer::p2p(self.comm);
        x.recv_with(v, p, tag, reduce);
        self.post(r, true, &x)
    }

    /// Waits for `handles`.
    pub fn wait(&mut self, handles: &[Handle]) -> Result<()> {
        let mut ids: SmallVec<[OpId; 8]> = SmallVec::new();
        for h in handles {
            let i = self
                .inflight
                .iter()
                .position(|f| f.handle == h.0)
                .ok_or_else(|| Error::precondition("unknown request: the handle is not pending"))?;
            ids.push(self.inflight.swap_remove(i).id);
        }
        self.comm.wait_ids(&ids, "wait")
    }

    /// Starts a batch; see [`Batch`].
    pub fn batch(&mut self) -> Batch<'_, 'a, T> {
        Batch {
            exec: self,
            ops: SmallVec::new(),
        }
    }

    /// `dst = src` (a local copy).
    pub fn copy(&mut self, src: Region, dst: Region) -> Result<()> {
        let (s, d) = (self.view(src, false)?, self.view(dst, true)?);
        self.hazard(src, false, "`copy`")?;
        self.hazard(dst, true, "`copy`")?;
        same_len(s.len, d.len, "copy")?;
        if !self.on_host(src, dst) {
            // SAFETY: in bounds of borrowed buffers the backend accepts.
            return unsafe {
                self.comm
                    .inner
                    .backend
                    .local_copy(d.ptr.cast(), s.ptr.cast(), s.len * size_of::<T>())
            };
        }
        // SAFETY: in bounds of borrowed buffers; `copy_to` allows overlap.
        unsafe { s.copy_to(d) };
        Ok(())
    }

    /// `dst = dst op src`.
    pub fn accumulate(&mut self, src: Region, dst: Region, op: ReduceOp) -> Result<()> {
        let (s, d) = (self.view(src, false)?, self.view(dst, true)?);
        self.hazard(src, false, "`accumulate`")?;
        self.hazard(dst, true, "`accumulate`")?;
        same_len(s.len, d.len, "accumulate")?;
        if src.overlaps(&dst) {
            return Err(Error::precondition(
                "buffer hazard: `accumulate` source and destination overlap",
            ));
        }
        if !self.on_host(src, dst) {
            // SAFETY: in bounds of borrowed buffers the backend accepts, disjoint.
            return unsafe {
                self.comm
                    .inner
                    .backend
                    .local_reduce(T::DTYPE, op, d.ptr.cast(), s.ptr.cast(), s.len)
            };
        }
        // SAFETY: in bounds of borrowed buffers, disjoint.
        unsafe { s.reduce_into(d, op) };
        Ok(())
    }

    /// Whether both regions lie in host memory (device regions are copied
    /// and combined through the backend).
    fn on_host(&self, a: Region, b: Region) -> bool {
        [a, b]
            .iter()
            .all(|r| self.slots.get(r.buf).is_some_and(|s| s.memory == Memory::Host))
    }

    /// The subgroup of ranks whose `color_of` equals this rank's (the `over`
    /// clause at call site `site`); created once per communicator and member
    /// set, then reused.
    pub fn group(&mut self, site: u32, color_of: &dyn Fn(i64) -> Result<i64>) -> Result<Group> {
        let mine = color_of(self.rank())?;
        let mut members = Vec::new();
        for r in 0..self.comm.world() {
            if color_of(int(r)?)? == mine {
                members.push(r);
            }
        }
        // Groups are their member sets (spec section 4): every `over` clause
        // with the same members uses one communicator, and one that holds
        // every rank is the communicator itself.
        tracing::trace!(schedule = self.schedule.name.as_str(), site, ?members, "over group");
        let comm = if members.len() == self.comm.world() {
            self.comm.clone()
        } else {
            self.comm.subgroup("comm_schedule over", &members)?
        };
        self.groups.push(comm);
        Ok(Group(self.groups.len() - 1))
    }

    fn group_comm(&self, g: Option<Group>) -> Result<Comm> {
        match g {
            None => Ok(self.comm.clone()),
            Some(Group(i)) => self
                .groups
                .get(i)
                .cloned()
                .ok_or_else(|| Error::precondition("unknown group")),
        }
    }

    fn coll_views(&self, src: Region, dst: Region, what: &str) -> Result<(RawBuf<T>, RawBuf<T>)> {
        let (s, d) = (self.view(src, false)?, self.view(dst, true)?);
        self.hazard(src, false, what)?;
        self.hazard(dst, true, what)?;
        if src != dst && src.overlaps(&dst) {
            return Err(Error::precondition(format!(
                "buffer hazard: {what} input and output overlap"
            )));
        }
        Ok((s, d))
    }

    /// All-reduce (`src == dst` for in place).
    pub fn all_reduce(&mut self, src: Region, dst: Region, op: ReduceOp, group: Option<Group>) -> Result<()> {
        let (s, d) = self.coll_views(src, dst, "`all_reduce`")?;
        same_len(s.len, d.len, "all_reduce")?;
        // SAFETY: checked in bounds, equal or disjoint, borrowed for `'a`.
        unsafe { self.group_comm(group)?.all_reduce_raw(s, d, op) }
    }

    /// All-gather.
    pub fn all_gather(&mut self, src: Region, dst: Region, group: Option<Group>) -> Result<()> {
        let (s, d) = self.coll_views(src, dst, "`all_gather`")?;
        let g = self.group_comm(group)?;
        same_len(s.len * g.world(), d.len, "all_gather")?;
        // SAFETY: checked in bounds, disjoint, borrowed for `'a`.
        unsafe { g.all_gather_raw(s, d) }
    }

    /// Reduce-scatter.
    pub fn reduce_scatter(&mut self, src: Region, dst: Region, op: ReduceOp, group: Option<Group>) -> Result<()> {
        let (s, d) = self.coll_views(src, dst, "`reduce_scatter`")?;
        let g = self.group_comm(group)?;
        same_len(s.len, d.len * g.world(), "reduce_scatter")?;
        // SAFETY: checked in bounds, disjoint, borrowed for `'a`.
        unsafe { g.reduce_scatter_raw(s, d, op) }
    }

    /// All-to-all.
    pub fn all_to_all(&mut self, src: Region, dst: Region, group: Option<Group>) -> Result<()> {
        let (s, d) = self.coll_views(src, dst, "`all_to_all`")?;
        let g = self.group_comm(group)?;
        same_len(s.len, d.len, "all_to_all")?;
        if !s.len.is_multiple_of(g.world()) {
            return Err(Error::buffer_length(
                "all_to_all input",
                s.len,
                format_args!("a multiple of {}", g.world()),
            ));
        }
        // SAFETY: checked in bounds, disjoint, borrowed for `'a`.
        unsafe { g.all_to_all_raw(s, d) }
    }

    /// Broadcast from `root` (a rank of the group).
    pub fn broadcast(&mut self, r: Region, root: i64, group: Option<Group>) -> Result<()> {
        let g = self.group_comm(group)?;
        let root = Self::peer(root, &g)?;
        let v = self.view(r, true)?;
        self.hazard(r, true, "`broadcast`")?;
        // SAFETY: checked in bounds, borrowed for `'a`.
        unsafe { g.broadcast_raw(v, root) }
    }

    /// Reduce to `root` (a rank of the group); `dst` is only used there.
    pub fn reduce(&mut self, src: Region, dst: Region, op: ReduceOp, root: i64, group: Option<Group>) -> Result<()> {
        let g = self.group_comm(group)?;
        let root = Self::peer(root, &g)?;
        let (s, d) = self.coll_views(src, dst, "`reduce`")?;
        same_len(s.len, d.len, "reduce")?;
        // SAFETY: checked in bounds, equal or disjoint, borrowed for `'a`.
        unsafe { g.reduce_raw(s, d, op, root) }
    }

    /// Barrier.
    pub fn barrier(&mut self, group: Option<Group>) -> Result<()> {
        self.group_comm(group)?.barrier()
    }

    fn cancel_inflight(&mut self) {
        let ids: SmallVec<[OpId; 8]> = self.inflight.drain(..).map(|f| f.id).collect();
        if !ids.is_empty() {
            self.comm.cancel_ids(&ids);
        }
    }
}

impl<T: Element> Drop for Exec<'_, T> {
    fn drop(&mut self) {
        self.cancel_inflight();
    }
}

/// The run-time verdict cache of `schedule` (one per schedule, kept for the
/// life of the process like the schedule itself).
fn verify_cache(schedule: &'static Schedule) -> &'static VerifyCache {
    static CACHES: OnceLock<Mutex<HashMap<usize, &'static VerifyCache>>> = OnceLock::new();
    let mut caches = CACHES
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    caches
        .entry(std::ptr::from_ref(schedule) as usize)
        .or_insert_with(|| Box::leak(Box::new(VerifyCache::new())))
}

fn same_len(a: usize, b: usize, what: &str) -> Result<()> {
    if a == b {
        Ok(())
    } else {
        Err(Error::buffer_length(what, b, a))
    }
}

#[derive(Clone, Copy)]
enum BatchOp {
    Send,
    Recv(Option<ReduceOp>),
}

/// The operations of one `batch { .. }`: posted together by [`Batch::finish`].
pub struct Batch<'x, 'a, T: Element> {
    exec: &'x mut Exec<'a, T>,
    ops: SmallVec<[(Region, BatchOp, usize, i64); 8]>,
}

impl<T: Element> Batch<'_, '_, T> {
    /// Adds a send (to self is fine in a batch).
    pub fn send(&mut self, r: Region, peer: i64, tag: i64) -> Result<()> {
        let p = Exec::<T>::peer(peer, self.exec.comm)?;
        self.exec.view(r, false)?;
        self.ops.push((r, BatchOp::Send, p, tag));
        Ok(())
    }

    /// Adds a receive, optionally combining with `reduce`.
    pub fn recv(&mut self, r: Region, peer: i64, tag: i64, reduce: Option<ReduceOp>) -> Result<()> {
        let p = Exec::<T>::peer(peer, self.exec.comm)?;
        self.exec.view(r, true)?;
        self.ops.push((r, BatchOp::Recv(reduce), p, tag));
        Ok(())
    }

    /// Posts every operation and waits for all of them.
    pub fn finish(self) -> Result<()> {
        let exec = &*self.exec;
        let mut x = Xfer::p2p(exec.comm);
        for (i, &(r, op, peer, tag)) in self.ops.iter().enumerate() {
            let writes = matches!(op, BatchOp::Recv(_));
            exec.hazard(r, writes, "a `batch` operation")?;
            for &(other, other_op, ..) in &self.ops[..i] {
                if r.overlaps(&other) && (writes || matches!(other_op, BatchOp::Recv(_))) {
                    return Err(Error::precondition(
                        "buffer hazard: two operations of one `batch` overlap and one writes",
                    ));
                }
            }
            let v = exec.view(r, writes)?;
            match op {
                BatchOp::Send => x.send(v, peer, tag),
                BatchOp::Recv(reduce) => x.recv_with(v, peer, tag, reduce),
            };
        }
        // SAFETY: every region is in bounds of a buffer borrowed for `'a`,
        // receives are disjoint from every other region of the batch and from
        // in-flight operations.
        unsafe { x.run("batch") }
    }
}
