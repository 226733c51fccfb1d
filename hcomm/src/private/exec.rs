//! The executor behind a `comm_schedule!` function: the buffer table,
//! regions, in-flight handles, batches, subgroups and run-time verification.
//!
//! The schedule checker proves, for every verified world size, that regions
//! are in bounds and that no operation touches a region an in-flight
//! operation uses. The executor still checks bounds before every operation
//! (a few comparisons), so that a wrong region is an `Err`, never undefined
//! behaviour. Hazards (an operation touching a region an in-flight one
//! uses, two operations of a batch overlapping where one writes) it checks
//! only where the checker did not prove their absence: before the call's
//! verification ([`Exec::verify`]) succeeded, which is how a body the
//! checker rejected runs (tests do that), never in a generated function.
//!
//! On the host backend every statement is issued as it runs: the backend
//! implements the language's semantics (tagged channels, non-blocking
//! operations that progress during collectives) directly. A device backend
//! has neither, so there the body only records its calls, with their
//! concrete regions, and the executor then issues them in the order of the
//! schedule's plan ([`hcomm_schedule::plan`], `replay.rs`).
//!
//! At entry ([`Exec::verify`]) every rank announces what it called —
//! schedule, element type, world size, scalars and lengths — to the other
//! ranks of the communicator (`crate::entry`, on every backend); ranks that
//! disagree all get `Err(Mismatch)` instead of waiting for messages that
//! never come. A built-in collective's schedule is not announced: its
//! ranks agreed on the collective already (`Comm::collective`).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::marker::PhantomData;
use std::rc::Rc;
use std::sync::{Mutex, OnceLock};

use hcomm_schedule::ir::Schedule;
use hcomm_schedule::{PlanCache, VerifyCache};
use smallvec::SmallVec;

use super::counts::{CountLine, Counts};
use super::int;
use super::replay::{CollCall, Rec, RecOp};
use crate::backend::{Issue, OpId, OpIds};
use crate::buffer::{Buffer, BufferMut, Memory};
use crate::comm::Comm;
use crate::element::{Element, ReduceOp};
use crate::entry::{self, Entry};
use crate::error::{Error, Result};
use crate::raw::{RawBuf, Xfer};

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
    pub(super) fn overlaps(&self, other: &Region) -> bool {
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
    /// The backend's operation; `None` while recording for a plan.
    id: Option<OpId>,
    region: Region,
    writes: bool,
    /// A message to this rank itself.
    to_self: bool,
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
    /// The calls of the body, when the backend runs plans.
    record: Option<Vec<Rec>>,
    /// The scalars, once [`Exec::verify`] has them.
    scalars: RefCell<Option<SmallVec<[i64; 4]>>>,
    /// The length variables solved so far, in order.
    lens: RefCell<SmallVec<[i64; 3]>>,
    /// The count parameters, once the body registers one.
    counts: Option<Rc<Counts>>,
    /// This call's place among the communicator's schedule calls; `None`
    /// for a built-in collective's schedule, which `Comm::collective`
    /// agreed already and the entry check leaves alone.
    seq: Option<u64>,
    /// Whether this rank announced its call ([`Exec::verify`]).
    entered: Cell<bool>,
    /// Whether the checker proved this call free of hazards: its world size
    /// and scalars passed verification ([`Exec::verify`]).
    proven: Cell<bool>,
    /// The operations of the current `batch`, where they are kept
    /// ([`Batch`]), and to post, on their checked views (kept here, not in
    /// the [`Batch`], so that starting a batch moves nothing).
    batch_ops: SmallVec<[RecOp; 8]>,
    batch_xfer: Xfer<'a>,
    _buffers: PhantomData<&'a mut [T]>,
}

impl<'a, T: Element> Exec<'a, T> {
    /// Runs `body` with an executor for `schedule` on `comm`. Whatever
    /// `body` returns (or if it panics), every operation still in flight is
    /// cancelled before the borrowed buffers are released.
    ///
    /// The whole call is one call on `comm` for its one-call-at-a-time
    /// guard: another thread's call on it meanwhile is refused.
    pub fn run(
        comm: &'a Comm,
        schedule: &'static Schedule,
        body: impl FnOnce(&mut Exec<'a, T>) -> Result<()>,
    ) -> Result<()> {
        comm.call(&schedule.name, || Exec::run_now(comm, schedule, body))
    }

    /// [`Exec::run`] inside the call already taken.
    fn run_now(
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
            record: (comm.inner.backend.capabilities().issue == Issue::Plans).then(Vec::new),
            scalars: RefCell::new(None),
            lens: RefCell::new(SmallVec::new()),
            counts: None,
            seq: comm.traffic.is_none().then(|| comm.next_schedule_call()),
            entered: Cell::new(false),
            proven: Cell::new(false),
            batch_ops: SmallVec::new(),
            batch_xfer: Xfer::p2p(comm),
            _buffers: PhantomData,
        };
        let mut out = body(&mut exec);
        if out.is_ok() && !exec.inflight.is_empty() {
            exec.cancel_inflight();
            out = Err(Error::Schedule {
                schedule: schedule.name.clone(),
                message: "unwaited request: a non-blocking operation was still pending at the end".into(),
            });
        }
        if out.is_ok() {
            if let Some(record) = exec.record.take() {
                out = exec.run_plan(&record);
            }
        }
        exec.settle(out)
    }

    /// The result of the call, as the entry check sees it: a rank that
    /// failed before announcing its call tells the others, and the result of
    /// a call whose ranks disagreed (known here) is that disagreement, even
    /// where this rank's operations completed.
    #[inline]
    fn settle(&self, out: Result<()>) -> Result<()> {
        let Some(seq) = self.seq else {
            return out;
        };
        let Err(e) = out else {
            return entry::disagreement(self.comm.entry_site(), seq).map_or(Ok(()), Err);
        };
        self.settle_failure(seq, e)
    }

    #[cold]
    fn settle_failure(&self, seq: u64, e: Error) -> Result<()> {
        if !self.entered.get() {
            entry::fail_before_entry(self.comm.entry_site(), self.schedule, seq, &e);
            return Err(e);
        }
        Err(entry::disagreement(self.comm.entry_site(), seq).unwrap_or(e))
    }

    /// Issues the recorded calls in the order of the plan of this world
    /// size and these scalars.
    fn run_plan(&mut self, record: &[Rec]) -> Result<()> {
        let announced = self.scalars.borrow().clone();
        let scalars: SmallVec<[i64; 4]> = match announced {
            Some(s) => s,
            None if self.schedule.scalars.is_empty() => SmallVec::new(),
            None => return Err(self.internal("the body never announced its scalars (`Exec::verify`)")),
        };
        let world = self.world();
        let plan = {
            let span = tracing::debug_span!("plan", schedule = self.schedule.name.as_str(), world);
            let _e = span.enter();
            plan_cache(self.schedule)
                .get(self.schedule, world, &scalars)
                .map_err(|message| Error::Schedule {
                    schedule: self.schedule.name.clone(),
                    message,
                })?
        };
        let mine = plan
            .ranks
            .get(self.comm.rank())
            .ok_or_else(|| self.internal("the plan has no steps for this rank"))?;
        super::replay::run(self, mine, record)
    }

    /// An internal error of the executor (the body and the checker disagree).
    pub(super) fn internal(&self, what: impl std::fmt::Display) -> Error {
        Error::Schedule {
            schedule: self.schedule.name.clone(),
            message: format!("internal error: {what}; please report it"),
        }
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
    #[inline]
    pub fn solve_len(
        &self,
        buffer: &'static str,
        actual: usize,
        coef: i64,
        constant: i64,
        var: &'static str,
    ) -> Result<i64> {
        // the values of `var`: its range in `#[verify]`, else `1..`
        let declared = self.schedule.verify.lengths.iter().find(|r| r.name.name == var);
        let (lo, hi) = declared.map_or((1, None), |r| (r.lo, r.hi));
        if let Ok(actual_i) = i64::try_from(actual) {
            let rest = actual_i.checked_sub(constant);
            if let Some(value) = rest.filter(|r| coef != 0 && r % coef == 0).map(|r| r / coef) {
                if value >= lo && hi.is_none_or(|hi| value <= hi) {
                    self.lens.borrow_mut().push(value);
                    return Ok(value);
                }
                if let Some(r) = declared.filter(|_| value >= 0) {
                    return Err(Error::precondition(format!(
                        "`{}`: length variable `{var}` = {value} (from buffer `{buffer}` of {actual} elements) is \
                         outside its range {} (world = {})",
                        self.schedule.name,
                        r.text(),
                        self.comm.world()
                    )));
                }
            }
        }
        Err(Self::unsolved_len(buffer, actual, coef, constant, var, lo))
    }

    /// Why [`Exec::solve_len`] has no solution.
    #[cold]
    fn unsolved_len(
        buffer: &'static str,
        actual: usize,
        coef: i64,
        constant: i64,
        var: &'static str,
        lo: i64,
    ) -> Error {
        if let Err(e) = int(actual) {
            return e;
        }
        let shape = match (coef, constant) {
            (1, 0) => var.to_owned(),
            (c, 0) => format!("{c} * {var}"),
            (1, k) => format!("{var} + {k}"),
            (c, k) => format!("{c} * {var} + {k}"),
        };
        Error::buffer_length(buffer, actual, format_args!("`{shape}` with `{var}` >= {lo}"))
    }

    /// Registers the count parameter `name`: `world` entries, or `world *
    /// world` in row-major order when `matrix` (entry `[i][j]` is what rank
    /// `i` sends to rank `j`). The entries are part of the call the ranks
    /// agree on ([`Exec::verify`]).
    pub fn counts(&mut self, name: &'static str, values: &[usize], matrix: bool) -> Result<()> {
        let world = self.comm.world();
        let counts = self.counts.get_or_insert_with(|| Rc::new(Counts::new(world)));
        Rc::make_mut(counts).register(name, values, matrix)
    }

    /// The count parameters registered so far, for the body's lengths and
    /// parts (a shared handle: the body reads it while a `batch` borrows the
    /// executor).
    pub fn count_table(&self) -> Rc<Counts> {
        match &self.counts {
            Some(c) => Rc::clone(c),
            None => Rc::new(Counts::new(self.comm.world())),
        }
    }

    /// `Err(BufferLength)` unless `actual == expected`.
    #[inline]
    pub fn check_len(&self, buffer: &'static str, actual: usize, expected: i64) -> Result<()> {
        if i64::try_from(actual).is_ok_and(|a| a == expected) {
            return Ok(());
        }
        Err(Self::wrong_len(buffer, actual, expected))
    }

    #[cold]
    fn wrong_len(buffer: &'static str, actual: usize, expected: i64) -> Error {
        match int(actual) {
            Err(e) => e,
            Ok(_) => Error::buffer_length(buffer, actual, expected),
        }
    }

    /// Announces this rank's call (schedule, element type, world size,
    /// `scalars` and the lengths solved so far) to the other ranks, failing
    /// with `Err(Mismatch)` when they disagree; then runs the schedule checker
    /// for this world size (and these scalars) when it lies outside the
    /// compile-time verify set; once per (schedule, size, scalars), cached.
    pub fn verify(&self, scalars: &[i64]) -> Result<()> {
        if self.record.is_some() {
            // only a plan needs them
            *self.scalars.borrow_mut() = Some(scalars.iter().copied().collect());
        }
        if let Some(seq) = self.seq {
            let lens = self.lens.borrow();
            entry::enter(
                self.comm.entry_site(),
                self.schedule,
                &Entry {
                    seq,
                    dtype: T::DTYPE,
                    scalars,
                    lens: &lens,
                    counts: self.counts.as_deref().map_or(&[], Counts::entries),
                },
            )?;
        }
        self.entered.set(true);
        let world = self.world();
        if !self.schedule.verify_set_contains(world) {
            let span = tracing::debug_span!("verify", schedule = self.schedule.name.as_str(), world);
            let _e = span.enter();
            verify_cache(self.schedule)
                .check(self.schedule, world, scalars)
                .map_err(|message| Error::Schedule {
                    schedule: self.schedule.name.clone(),
                    message,
                })?;
        }
        // the checker ran on this world size and these scalars (at compile
        // time for the verify set): no hazard is left to check
        self.proven.set(true);
        Ok(())
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

    #[inline]
    pub(super) fn view(&self, r: Region, write: bool) -> Result<RawBuf<T>> {
        match self.host_view(r, write) {
            Some(v) => Ok(v),
            None => self.view_checked(r, write),
        }
    }

    /// The view of `r` where it is in bounds of a buffer in host memory
    /// (and writable where written); else `None`.
    #[inline]
    fn host_view(&self, r: Region, write: bool) -> Option<RawBuf<T>> {
        let slot = self.slots.get(r.buf)?;
        // `0 <= start <= end <= len`
        let ok = r.start >= 0
            && r.start <= r.end
            && r.end as u64 <= slot.len as u64
            && (slot.writable || !write)
            && slot.memory == Memory::Host;
        ok.then(|| RawBuf {
            ptr: slot.ptr.wrapping_add(r.start as usize),
            len: (r.end - r.start) as usize,
        })
    }

    /// [`Exec::view`] of a region that is out of bounds, of a read-only
    /// buffer written, or not in host memory.
    #[cold]
    #[inline(never)]
    fn view_checked(&self, r: Region, write: bool) -> Result<RawBuf<T>> {
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

    /// `Err` when `r` (written where `writes`) touches a region an
    /// in-flight operation writes, or one it reads where `r` is written;
    /// nothing to check in a call the checker proved free of hazards.
    #[inline]
    fn hazard(&self, r: Region, writes: bool, what: &str) -> Result<()> {
        if self.inflight.is_empty() || self.proven.get() {
            return Ok(());
        }
        self.hazard_inflight(r, writes, what)
    }

    #[inline(never)]
    fn hazard_inflight(&self, r: Region, writes: bool, what: &str) -> Result<()> {
        for f in &self.inflight {
            if f.region.overlaps(&r) && (writes || f.writes) {
                return Err(Error::precondition(format!(
                    "buffer hazard: {what} touches a region a pending non-blocking operation uses"
                )));
            }
        }
        Ok(())
    }

    #[inline]
    pub(super) fn peer(peer: i64, group: &Comm) -> Result<usize> {
        match usize::try_from(peer) {
            Ok(p) if p < group.world() => Ok(p),
            _ => Err(peer_out_of_range(peer, group.world())),
        }
    }

    /// The peer of a blocking `send` (`what == "send"`) or `recv`. To self,
    /// it needs the opposite operation to self in flight (an `irecv` for a
    /// `send`, an `isend` for a `recv`), else it would never complete.
    fn blocking_peer(&self, peer: i64, what: &str) -> Result<usize> {
        let p = Self::peer(peer, self.comm)?;
        let receives = what == "send";
        if p == self.comm.rank() && !self.inflight.iter().any(|f| f.to_self && f.writes == receives) {
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
        if let Some(record) = &mut self.record {
            record.push(Rec::Blocking(RecOp::send(r, p, tag)));
            return Ok(());
        }
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
        if let Some(record) = &mut self.record {
            record.push(Rec::Blocking(RecOp::recv(r, p, tag, reduce)));
            return Ok(());
        }
        let mut x = Xfer::p2p(self.comm);
        x.recv_with(v, p, tag, reduce);
        // SAFETY: the region is in bounds of a writable buffer borrowed for
        // `'a` and no in-flight operation uses it.
        unsafe { x.run("recv") }
    }

    fn post(&mut self, op: RecOp) -> Result<Handle> {
        let writes = !op.send;
        let id = if let Some(record) = &mut self.record {
            record.push(Rec::Post(op));
            None
        } else {
            let v = self.view(op.region, writes)?;
            let mut x = Xfer::p2p(self.comm);
            if op.send {
                x.send(v, op.peer, op.tag);
            } else {
                x.recv_with(v, op.peer, op.tag, op.reduce);
            }
            let mut ids = OpIds::new();
            // SAFETY: the region is in bounds of a buffer borrowed for `'a`;
            // the op stays in `inflight` until waited, and `Exec::run` and
            // `Drop` cancel it before the borrow ends.
            unsafe { self.comm.post_ops(x.ops(), &mut ids)? };
            Some(ids[0])
        };
        let handle = self.next_handle;
        self.next_handle += 1;
        self.inflight.push(InFlight {
            handle,
            id,
            region: op.region,
            writes,
            to_self: op.peer == self.comm.rank(),
        });
        Ok(Handle(handle))
    }

    /// Non-blocking send.
    pub fn isend(&mut self, r: Region, peer: i64, tag: i64) -> Result<Handle> {
        let p = Self::peer(peer, self.comm)?;
        self.view(r, false)?;
        self.hazard(r, false, "`isend`")?;
        self.post(RecOp::send(r, p, tag))
    }

    /// Non-blocking receive, optionally combining with `reduce`.
    pub fn irecv(&mut self, r: Region, peer: i64, tag: i64, reduce: Option<ReduceOp>) -> Result<Handle> {
        let p = Self::peer(peer, self.comm)?;
        self.view(r, true)?;
        self.hazard(r, true, "`irecv`")?;
        self.post(RecOp::recv(r, p, tag, reduce))
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
            ids.extend(self.inflight.swap_remove(i).id);
        }
        if let Some(record) = &mut self.record {
            record.push(Rec::Wait(handles.len()));
            return Ok(());
        }
        self.comm.wait_ids(&ids, "wait")
    }

    /// `wait all`: waits for every request in flight, in posting order
    /// (what the checker's `wait all` completes).
    pub fn wait_all(&mut self) -> Result<()> {
        let n = self.inflight.len();
        let ids: SmallVec<[OpId; 8]> = self.inflight.drain(..).filter_map(|f| f.id).collect();
        if let Some(record) = &mut self.record {
            record.push(Rec::Wait(n));
            return Ok(());
        }
        self.comm.wait_ids(&ids, "wait all")
    }

    /// Posts `ops` as one group call and waits for all of them (checked by
    /// the caller: in bounds, receives disjoint from every other region of
    /// the call and from in-flight operations).
    pub(super) fn group_call(&self, ops: &[RecOp], what: &str) -> Result<()> {
        let mut x = Xfer::p2p(self.comm);
        for op in ops {
            add_op(&mut x, op, self.view(op.region, !op.send)?);
        }
        // SAFETY: every region is in bounds of a buffer borrowed for `'a`;
        // receives are disjoint from every other region of the call and from
        // in-flight operations (the caller's contract).
        unsafe { x.run(what) }
    }

    /// Starts a batch; see [`Batch`].
    #[inline]
    pub fn batch(&mut self) -> Batch<'_, 'a, T> {
        if !self.batch_xfer.is_empty() || !self.batch_ops.is_empty() {
            // what a batch that failed half-way left
            self.batch_xfer = Xfer::p2p(self.comm);
            self.batch_ops.clear();
        }
        Batch {
            keep: self.record.is_some() || !self.proven.get(),
            exec: self,
        }
    }

    /// `dst = src` (a local copy).
    #[inline]
    pub fn copy(&mut self, src: Region, dst: Region) -> Result<()> {
        if self.record.is_none() && self.proven.get() {
            if let (Some(s), Some(d)) = (self.host_view(src, false), self.host_view(dst, true)) {
                if s.len == d.len {
                    // SAFETY: in bounds of borrowed host buffers, the
                    // destination writable; `copy_to` allows overlap.
                    unsafe { s.copy_to(d) };
                    return Ok(());
                }
            }
        }
        self.copy_checked(src, dst)
    }

    /// [`Exec::copy`] with every check, recorded for a plan, or through
    /// the backend for device memory.
    #[inline(never)]
    fn copy_checked(&mut self, src: Region, dst: Region) -> Result<()> {
        let (s, d) = (self.view(src, false)?, self.view(dst, true)?);
        self.hazard(src, false, "`copy`")?;
        self.hazard(dst, true, "`copy`")?;
        same_len(s.len, d.len, "copy")?;
        if let Some(record) = &mut self.record {
            record.push(Rec::Copy { src, dst, op: None });
            return Ok(());
        }
        self.copy_views(src, dst, s, d)
    }

    /// Issues `dst = src` (checked by the caller).
    pub(super) fn copy_now(&self, src: Region, dst: Region) -> Result<()> {
        let (s, d) = (self.view(src, false)?, self.view(dst, true)?);
        same_len(s.len, d.len, "copy")?;
        self.copy_views(src, dst, s, d)
    }

    /// Copies view `s` of `src` to view `d` of `dst` (checked views of
    /// equal length).
    fn copy_views(&self, src: Region, dst: Region, s: RawBuf<T>, d: RawBuf<T>) -> Result<()> {
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
        if let Some(record) = &mut self.record {
            record.push(Rec::Copy { src, dst, op: Some(op) });
            return Ok(());
        }
        self.accumulate_views(src, dst, op, s, d)
    }

    /// Issues `dst = dst op src` (checked by the caller).
    pub(super) fn accumulate_now(&self, src: Region, dst: Region, op: ReduceOp) -> Result<()> {
        let (s, d) = (self.view(src, false)?, self.view(dst, true)?);
        same_len(s.len, d.len, "accumulate")?;
        if src.overlaps(&dst) {
            return Err(Error::precondition(
                "buffer hazard: `accumulate` source and destination overlap",
            ));
        }
        self.accumulate_views(src, dst, op, s, d)
    }

    /// Combines view `s` of `src` into view `d` of `dst` (checked views of
    /// equal length, disjoint).
    fn accumulate_views(&self, src: Region, dst: Region, op: ReduceOp, s: RawBuf<T>, d: RawBuf<T>) -> Result<()> {
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
        // Groups are their member sets (language reference, section 4): every `over` clause
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

    /// All-reduce (`src == dst` for in place).
    pub fn all_reduce(&mut self, src: Region, dst: Region, op: ReduceOp, group: Option<Group>) -> Result<()> {
        self.collective(CollCall::AllReduce { src, dst, op }, group)
    }

    /// All-gather.
    pub fn all_gather(&mut self, src: Region, dst: Region, group: Option<Group>) -> Result<()> {
        self.collective(CollCall::AllGather { src, dst }, group)
    }

    /// Reduce-scatter.
    pub fn reduce_scatter(&mut self, src: Region, dst: Region, op: ReduceOp, group: Option<Group>) -> Result<()> {
        self.collective(CollCall::ReduceScatter { src, dst, op }, group)
    }

    /// All-to-all.
    pub fn all_to_all(&mut self, src: Region, dst: Region, group: Option<Group>) -> Result<()> {
        self.collective(CollCall::AllToAll { src, dst }, group)
    }

    /// Broadcast from `root` (a rank of the group).
    pub fn broadcast(&mut self, r: Region, root: i64, group: Option<Group>) -> Result<()> {
        let root = Self::peer(root, &self.group_comm(group)?)?;
        self.collective(CollCall::Broadcast { r, root }, group)
    }

    /// Reduce to `root` (a rank of the group); `dst` is only used there.
    pub fn reduce(&mut self, src: Region, dst: Region, op: ReduceOp, root: i64, group: Option<Group>) -> Result<()> {
        let root = Self::peer(root, &self.group_comm(group)?)?;
        self.collective(CollCall::Reduce { src, dst, op, root }, group)
    }

    /// All-gather with per-rank counts: count vector `counts` (an index
    /// of [`Exec::counts`]), over the whole communicator.
    pub fn all_gatherv(&mut self, src: Region, dst: Region, counts: usize) -> Result<()> {
        self.collective(CollCall::AllGatherV { src, dst, counts }, None)
    }

    /// All-to-all with per-pair counts: count matrix `sizes` (an index of
    /// [`Exec::counts`]), over the whole communicator; `src` is laid out by
    /// this rank's row, `dst` by its column.
    pub fn all_to_allv(&mut self, src: Region, dst: Region, sizes: usize) -> Result<()> {
        self.collective(CollCall::AllToAllV { src, dst, sizes }, None)
    }

    /// Barrier.
    pub fn barrier(&mut self, group: Option<Group>) -> Result<()> {
        self.collective(CollCall::Barrier, group)
    }

    /// Checks a collective against the in-flight operations, then issues it
    /// (or records it for the plan).
    fn collective(&mut self, call: CollCall, group: Option<Group>) -> Result<()> {
        let what = call.what();
        match call {
            CollCall::Broadcast { r, .. } => {
                self.view(r, true)?;
                self.hazard(r, true, what)?;
            }
            CollCall::Barrier => {}
            CollCall::Reduce { src, dst, root, .. } => {
                self.hazard(src, false, what)?;
                // Off the root the output is neither read nor written (on
                // every backend), so operations in flight may use it.
                if self.group_comm(group)?.rank() == root {
                    self.hazard(dst, true, what)?;
                }
            }
            CollCall::AllReduce { src, dst, .. }
            | CollCall::AllGather { src, dst }
            | CollCall::ReduceScatter { src, dst, .. }
            | CollCall::AllToAll { src, dst }
            | CollCall::AllGatherV { src, dst, .. }
            | CollCall::AllToAllV { src, dst, .. } => {
                self.hazard(src, false, what)?;
                self.hazard(dst, true, what)?;
            }
        }
        if self.record.is_some() {
            // shapes are checked now, so errors come at the statement
            let g = self.group_comm(group)?;
            self.coll_shapes(call, &g)?;
            if let Some(record) = &mut self.record {
                record.push(Rec::Coll { call, group });
            }
            return Ok(());
        }
        self.collective_now(call, group)
    }

    /// The views of a collective's regions, after checking their lengths.
    fn coll_shapes(&self, call: CollCall, g: &Comm) -> Result<(RawBuf<T>, RawBuf<T>)> {
        let what = call.what();
        let (src, dst) = match call {
            CollCall::Barrier => {
                let none = RawBuf {
                    ptr: std::ptr::NonNull::dangling().as_ptr(),
                    len: 0,
                };
                return Ok((none, none));
            }
            CollCall::Broadcast { r, .. } => {
                let v = self.view(r, true)?;
                return Ok((v, v));
            }
            CollCall::AllReduce { src, dst, .. }
            | CollCall::AllGather { src, dst }
            | CollCall::ReduceScatter { src, dst, .. }
            | CollCall::AllToAll { src, dst }
            | CollCall::AllGatherV { src, dst, .. }
            | CollCall::AllToAllV { src, dst, .. }
            | CollCall::Reduce { src, dst, .. } => (src, dst),
        };
        let (s, d) = (self.view(src, false)?, self.view(dst, true)?);
        if src != dst && src.overlaps(&dst) {
            return Err(Error::precondition(format!(
                "buffer hazard: {what} input and output overlap"
            )));
        }
        let name = what.trim_matches('`');
        match call {
            CollCall::AllGather { .. } => same_len(s.len * g.world(), d.len, name)?,
            CollCall::ReduceScatter { .. } => same_len(s.len, d.len * g.world(), name)?,
            CollCall::AllToAll { .. } => {
                same_len(s.len, d.len, name)?;
                if !s.len.is_multiple_of(g.world()) {
                    return Err(Error::buffer_length(
                        "all_to_all input",
                        s.len,
                        format_args!("a multiple of {}", g.world()),
                    ));
                }
            }
            CollCall::AllGatherV { counts, .. } => {
                let (c, me) = (self.count_table(), int(g.rank())?);
                same_len(
                    int_len(c.count(CountLine::Vector(counts), me)?),
                    s.len,
                    "all_gatherv input",
                )?;
                same_len(
                    int_len(c.count_sum(CountLine::Vector(counts))?),
                    d.len,
                    "all_gatherv output",
                )?;
            }
            CollCall::AllToAllV { sizes, .. } => {
                let (c, me) = (self.count_table(), int(g.rank())?);
                same_len(
                    int_len(c.count_sum(CountLine::Row(sizes, me))?),
                    s.len,
                    "all_to_allv input",
                )?;
                same_len(
                    int_len(c.count_sum(CountLine::Col(sizes, me))?),
                    d.len,
                    "all_to_allv output",
                )?;
            }
            _ => same_len(s.len, d.len, name)?,
        }
        Ok((s, d))
    }

    /// Issues a collective (checked against in-flight operations by the
    /// caller).
    pub(super) fn collective_now(&self, call: CollCall, group: Option<Group>) -> Result<()> {
        let g = self.group_comm(group)?;
        let (s, d) = self.coll_shapes(call, &g)?;
        // SAFETY (every arm): the views are in bounds of buffers borrowed for
        // `'a`, input and output equal or disjoint, and no in-flight
        // operation uses them.
        match call {
            CollCall::AllReduce { op, .. } => unsafe { g.all_reduce_raw(s, d, op) },
            CollCall::AllGather { .. } => unsafe { g.all_gather_raw(s, d) },
            CollCall::ReduceScatter { op, .. } => unsafe { g.reduce_scatter_raw(s, d, op) },
            CollCall::AllToAll { .. } => unsafe { g.all_to_all_raw(s, d) },
            CollCall::Broadcast { root, .. } => unsafe { g.broadcast_raw(d, root) },
            CollCall::Reduce { op, root, .. } => unsafe { g.reduce_raw(s, d, op, root) },
            CollCall::AllGatherV { counts, .. } => {
                let counts = self.count_table().line(CountLine::Vector(counts))?;
                // SAFETY: as above; the lengths are checked by the callee.
                unsafe { g.all_gatherv_raw(s, d, &counts) }
            }
            CollCall::AllToAllV { sizes, .. } => {
                let me = int(g.rank())?;
                let c = self.count_table();
                let (row, col) = (c.line(CountLine::Row(sizes, me))?, c.line(CountLine::Col(sizes, me))?);
                // SAFETY: as above; the lengths are checked by the callee.
                unsafe { g.all_to_allv_raw(s, &row, d, &col) }
            }
            CollCall::Barrier => g.barrier(),
        }
    }

    #[inline]
    fn cancel_inflight(&mut self) {
        if !self.inflight.is_empty() {
            self.cancel_inflight_now();
        }
    }

    #[cold]
    fn cancel_inflight_now(&mut self) {
        let ids: SmallVec<[OpId; 8]> = self.inflight.drain(..).filter_map(|f| f.id).collect();
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

/// The plan cache of `schedule` (one per schedule, kept for the life of the
/// process like the schedule itself).
fn plan_cache(schedule: &'static Schedule) -> &'static PlanCache {
    static CACHES: OnceLock<Mutex<HashMap<usize, &'static PlanCache>>> = OnceLock::new();
    let mut caches = CACHES
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    caches
        .entry(std::ptr::from_ref(schedule) as usize)
        .or_insert_with(|| Box::leak(Box::new(PlanCache::new())))
}

/// Adds `op` on its checked view `v` to `x`.
fn add_op<T: Element>(x: &mut Xfer<'_>, op: &RecOp, v: RawBuf<T>) {
    if op.send {
        x.send(v, op.peer, op.tag);
    } else {
        x.recv_with(v, op.peer, op.tag, op.reduce);
    }
}

#[cold]
fn peer_out_of_range(peer: i64, world: usize) -> Error {
    Error::precondition(format!("rank out of range: {peer} with world = {world}"))
}

/// A count the executor computed (never negative) as a length.
fn int_len(v: i64) -> usize {
    usize::try_from(v).unwrap_or(usize::MAX)
}

#[inline]
fn same_len(a: usize, b: usize, what: &str) -> Result<()> {
    if a == b {
        Ok(())
    } else {
        Err(different_len(a, b, what))
    }
}

#[cold]
fn different_len(a: usize, b: usize, what: &str) -> Error {
    Error::buffer_length(what, b, a)
}

/// The operations of one `batch { .. }`: posted together by [`Batch::finish`].
pub struct Batch<'x, 'a, T: Element> {
    exec: &'x mut Exec<'a, T>,
    /// Whether the operations are kept: to record them for a plan, or to
    /// check them for hazards where the checker did not prove their absence.
    keep: bool,
}

impl<T: Element> Batch<'_, '_, T> {
    /// Adds a send (to self is fine in a batch).
    #[inline]
    pub fn send(&mut self, r: Region, peer: i64, tag: i64) -> Result<()> {
        let p = Exec::<T>::peer(peer, self.exec.comm)?;
        let v = self.exec.view(r, false)?;
        if self.keep {
            self.exec.batch_ops.push(RecOp::send(r, p, tag));
        }
        if self.exec.record.is_none() {
            self.exec.batch_xfer.send(v, p, tag);
        }
        Ok(())
    }

    /// Adds a receive, optionally combining with `reduce`.
    #[inline]
    pub fn recv(&mut self, r: Region, peer: i64, tag: i64, reduce: Option<ReduceOp>) -> Result<()> {
        let p = Exec::<T>::peer(peer, self.exec.comm)?;
        let v = self.exec.view(r, true)?;
        if self.keep {
            self.exec.batch_ops.push(RecOp::recv(r, p, tag, reduce));
        }
        if self.exec.record.is_none() {
            self.exec.batch_xfer.recv_with(v, p, tag, reduce);
        }
        Ok(())
    }

    /// Posts every operation and waits for all of them.
    pub fn finish(self) -> Result<()> {
        let exec = self.exec;
        if self.keep {
            let ops = &exec.batch_ops;
            for (i, op) in ops.iter().enumerate() {
                exec.hazard(op.region, !op.send, "a `batch` operation")?;
                for other in &ops[..i] {
                    if op.region.overlaps(&other.region) && (!op.send || !other.send) {
                        return Err(Error::precondition(
                            "buffer hazard: two operations of one `batch` overlap and one writes",
                        ));
                    }
                }
            }
        }
        if let Some(record) = &mut exec.record {
            record.push(Rec::Batch(exec.batch_ops.to_vec()));
            exec.batch_ops.clear();
            return Ok(());
        }
        exec.batch_ops.clear();
        // SAFETY: every view is of a region checked in bounds of a buffer
        // borrowed for `'a` (the batch borrows the executor, so no buffer is
        // registered or released meanwhile); receives are disjoint from
        // every other region of the batch and from in-flight operations
        // (checked above, or proven by the checker for this world size and
        // these scalars).
        unsafe { exec.batch_xfer.run("batch") }
    }
}
