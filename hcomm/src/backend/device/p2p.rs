//! Point-to-point operations: posting (with staging), and the flush that
//! hands every queued operation to the library at once, split by channel
//! position into batch calls ([`super::plan`]); messages of a rank to itself
//! are device copies.

use super::driver::{Item, Raw};
use super::memory::CopyKind;
use super::state::{Queued, SlotState, State};
use super::world::Envelope;
use super::{lock, plan, staging, DeviceBackend};
use crate::backend::{Dir, OpId, OpIds, P2pOp};
use crate::error::{Error, Result};

impl DeviceBackend {
    /// Stages and queues `ops` (see [`crate::backend::Backend::post`]).
    ///
    /// # Safety
    ///
    /// As [`crate::backend::Backend::post`].
    pub(super) unsafe fn post_ops(&self, ops: &[P2pOp], ids: &mut OpIds) -> Result<()> {
        let world = self.lib_rank.len();
        if let Some(op) = ops.iter().find(|op| op.peer >= world) {
            return Err(Error::precondition(format!(
                "peer rank {} is out of range for a communicator of {world} ranks",
                op.peer
            )));
        }
        let mut st = lock(&self.state);
        if let Some(e) = self.unusable(&st) {
            return Err(e);
        }
        let first = ids.len();
        for op in ops {
            // SAFETY: the op's buffer is valid for its elements (post contract).
            let (staging, finish) = match unsafe { staging::stage_p2p(&self.ctx, op) } {
                Ok(x) => x,
                Err(e) => {
                    let posted: Vec<OpId> = ids.drain(first..).collect();
                    st.release(&posted);
                    return Err(e);
                }
            };
            let id = st.alloc_slot(op.count, op.dtype);
            let dev = staging.as_ref().map_or(op.ptr, |m| m.ptr);
            let slot = &mut st.slots[id.slot as usize];
            slot.staging = staging;
            slot.finish = finish;
            st.queue.push(Queued {
                slot: id.slot,
                dir: op.dir,
                peer: op.peer,
                dev,
                count: op.count,
                dtype: op.dtype,
                tag: op.tag,
            });
            ids.push(id);
        }
        Ok(())
    }

    /// Hands every queued operation to the library. Failures land in the
    /// operations' slots.
    pub(super) fn flush(&self, st: &mut State) {
        if st.queue.is_empty() {
            return;
        }
        if let Some(e) = self.unusable(st) {
            st.fail_queued(&e);
            return;
        }
        self.match_self_messages(st);
        let ops: Vec<Queued> = st.queue.iter().filter(|q| q.peer != self.rank).copied().collect();
        if ops.is_empty() {
            return;
        }
        st.queue.retain(|q| q.peer == self.rank);
        if let Err(e) = self.record_in_ledger(&ops) {
            st.fail_slots(ops.iter().map(|q| q.slot), &e);
            return;
        }
        let Some(stream) = st.stream else { return };
        let channels: Vec<(usize, Dir)> = ops.iter().map(|q| (q.peer, q.dir)).collect();
        let mut failure: Option<Error> = None;
        for call in plan::split_by_channel_position(&channels) {
            let slots = call.iter().map(|&i| ops[i].slot);
            if let Some(e) = &failure {
                st.fail_slots(slots, e);
                continue;
            }
            let items: Vec<Item> = call
                .iter()
                .map(|&i| {
                    let q = &ops[i];
                    Item {
                        send: q.dir == Dir::Send,
                        ptr: q.dev,
                        count: q.count,
                        dtype: q.dtype,
                        peer: self.lib_rank[q.peer],
                    }
                })
                .collect();
            tracing::trace!(comm.rank = self.rank, items = items.len(), "batch send/recv");
            // SAFETY: every item's buffer stays valid until its op is
            // released, which waits for the stream (or keeps the staging
            // memory alive after abandonment).
            match unsafe { self.submit_batch(stream, &items) } {
                Ok(()) => {
                    for &i in &call {
                        st.set_state(ops[i].slot, SlotState::Submitted);
                        st.submitted.push(ops[i].slot);
                        st.deps[ops[i].peer] = true;
                    }
                }
                Err(e) => {
                    st.fail_slots(slots, &e);
                    failure = Some(e);
                }
            }
        }
    }

    /// Enqueues one batch call of `items` on `stream`.
    ///
    /// # Safety
    ///
    /// `stream` is this communicator's; every item's device range valid until
    /// the stream drained (or kept alive after abandonment).
    pub(super) unsafe fn submit_batch(&self, stream: Raw, items: &[Item]) -> Result<()> {
        self.ctx.bind()?;
        // SAFETY: live handles; the ranges per the caller.
        unsafe { self.ctx.driver.batch(self.comm.raw, stream, items) }.map_err(|e| self.dev_err(e))
    }

    /// In an in-process world, records `ops` in the group's ledger, which
    /// finds ends of a channel that disagree on a message.
    fn record_in_ledger(&self, ops: &[Queued]) -> Result<()> {
        if self.env.is_none() {
            return Ok(());
        }
        for q in ops {
            let env = Envelope {
                tag: q.tag,
                count: q.count,
                dtype: q.dtype,
            };
            let (src, dst) = match q.dir {
                Dir::Send => (self.rank, q.peer),
                Dir::Recv => (q.peer, self.rank),
            };
            self.shared.record(src, dst, q.dir == Dir::Send, env)?;
        }
        Ok(())
    }

    /// Completes messages this rank sends to itself, matched per tag in
    /// posting order, with device copies.
    fn match_self_messages(&self, st: &mut State) {
        loop {
            let mut pair = None;
            'find: for (ri, r) in st.queue.iter().enumerate() {
                if r.peer != self.rank || r.dir != Dir::Recv {
                    continue;
                }
                for (si, s) in st.queue.iter().enumerate() {
                    if s.peer == self.rank && s.dir == Dir::Send && s.tag == r.tag {
                        pair = Some((si, ri));
                        break 'find;
                    }
                }
                // The oldest receive of this tag has no send yet: later
                // receives of the same tag must not overtake it.
            }
            let Some((si, ri)) = pair else { return };
            let (s, r) = (st.queue[si], st.queue[ri]);
            st.queue.retain(|q| q.slot != s.slot && q.slot != r.slot);
            let result = if s.count != r.count || s.dtype != r.dtype {
                Err(Error::mismatch(format!(
                    "rank {0} sends {1} elements of {2} to itself (tag {3}), which receives {4} elements of {5}",
                    self.rank, s.count, s.dtype, s.tag, r.count, r.dtype
                )))
            } else {
                let finish = st.slots[r.slot as usize].finish;
                // SAFETY: both device ranges hold `count` elements and belong
                // to these two posted operations.
                unsafe {
                    self.ctx
                        .copy(r.dev, s.dev, s.count * s.dtype.size(), CopyKind::DeviceToDevice)
                        .and_then(|()| match finish {
                            Some(f) => f.apply(&self.ctx, r.dev, r.count, r.dtype),
                            None => Ok(()),
                        })
                }
            };
            let state = match result {
                Ok(()) => SlotState::Done,
                Err(e) => SlotState::Failed(e),
            };
            st.set_state(s.slot, state.clone());
            st.set_state(r.slot, state);
            st.slots[s.slot as usize].staging = None;
            st.slots[r.slot as usize].staging = None;
        }
    }
}
