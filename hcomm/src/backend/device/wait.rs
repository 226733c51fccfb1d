//! Waiting for device work, and what happens when it cannot complete: a
//! wait is a stream synchronisation polled in short slices up to the
//! communicator's timeout, checking meanwhile for failed peers (in-process
//! worlds), aborts and the library's asynchronous error. Work that timed
//! out or waits on a failed peer is abandoned: the communicator fails every
//! later operation with the same error and keeps the memory the device may
//! still use.

use std::time::{Duration, Instant};

use super::driver::Poll;
use super::memory::DevMem;
use super::state::{SlotState, State};
use super::DeviceBackend;
use crate::backend::liveness::RankState;
use crate::backend::OpId;
use crate::error::{Error, Result};

/// How long one stream poll may block before failures are checked again.
pub(super) const POLL_SLICE: Duration = Duration::from_millis(20);

/// How long a wait goes on polling after the only peer it found gone had
/// finished (not failed): that peer's last messages may still be landing
/// (a finished sender has handed them to the library, which may not have
/// completed this rank's side yet), so its finish alone does not prove a
/// missing matching operation until the stream stays stuck this long.
const FINISHED_GRACE: Duration = Duration::from_millis(250);

impl DeviceBackend {
    /// Every submitted operation completed: finish receives, free staging.
    fn complete_submitted(&self, st: &mut State) {
        for slot in std::mem::take(&mut st.submitted) {
            let s = &mut st.slots[slot as usize];
            if !matches!(s.state, SlotState::Submitted) {
                continue;
            }
            let staging = s.staging.take();
            let result = match (s.finish.take(), &staging) {
                // SAFETY: the stream drained, so the staging buffer holds the
                // received data; the target is this op's own buffer.
                (Some(f), Some(m)) => unsafe { f.apply(&self.ctx, m.ptr, s.count, s.dtype) },
                _ => Ok(()),
            };
            drop(staging);
            st.slots[slot as usize].state = match result {
                Ok(()) => SlotState::Done,
                Err(e) => SlotState::Failed(e),
            };
        }
        st.clear_deps();
    }

    /// Gives up on the stream's work: it can be neither cancelled nor
    /// trusted, so the communicator fails every later operation with `e`.
    /// `local` staging memory is kept alive with the operations'.
    pub(super) fn abandon(&self, st: &mut State, e: &Error, local: &mut Vec<DevMem>) {
        st.fail_submitted(e, true);
        st.graveyard.append(local);
        if !st.abandoned {
            st.abandoned = true;
            self.ctx.mark_stuck();
        }
        st.sticky.get_or_insert_with(|| e.clone());
    }

    /// Why the stream's work can never complete, if that is already known,
    /// and whether the reason is only a peer that finished.
    fn blocking_failure(&self, st: &State) -> Option<(Error, bool)> {
        if let Some(reason) = self.shared.aborted() {
            return Some((Error::Aborted { reason }, false));
        }
        let peers = || (0..st.deps.len()).filter(|&r| st.deps[r] && r != self.rank);
        if let Some(e) = self.shared.channel_failure(self.rank, peers()) {
            return Some((e, false));
        }
        let world = self.env.as_ref()?;
        // Name a root cause where one is known, not a rank that failed
        // because of it.
        let mut found: Option<(u8, Error)> = None;
        for r in peers() {
            let state = world.liveness.state(self.global[r]);
            let rank_order = match &state {
                RankState::Running => continue,
                RankState::Failed { secondary, .. } => u8::from(*secondary),
                RankState::Finished => 2,
            };
            let Some(e) = state.blocking_error(r, || {
                "it finished while this rank waited on it (a missing matching operation?)".into()
            }) else {
                continue;
            };
            if found.as_ref().is_none_or(|(o, _)| rank_order < *o) {
                found = Some((rank_order, e));
            }
        }
        found.map(|(order, e)| (e, order == 2))
    }

    /// Drives the stream until its work completed, failed, or `limit` passed
    /// since `start`. On abandonment, `local` staging memory is kept alive.
    pub(super) fn drain(
        &self,
        st: &mut State,
        start: Instant,
        limit: Duration,
        what: &str,
        local: &mut Vec<DevMem>,
    ) -> Result<()> {
        let deadline = start.checked_add(limit);
        let Some(stream) = st.stream else {
            return Ok(());
        };
        if let Err(e) = self.ctx.bind() {
            self.abandon(st, &e, local);
            return Err(e);
        }
        let mut finished_since: Option<Instant> = None;
        loop {
            let now = Instant::now();
            let left = deadline.map_or(POLL_SLICE, |d| d.saturating_duration_since(now));
            match self.ctx.driver.poll(self.comm.raw, stream, left.min(POLL_SLICE)) {
                Poll::Done => {
                    self.complete_submitted(st);
                    return Ok(());
                }
                Poll::Failed(e) => {
                    let e = e.into_error_at(self.name(), self.rank, start.elapsed(), limit);
                    st.fail_submitted(&e, false);
                    if e.is_secondary() || matches!(e, Error::Timeout { .. }) {
                        // The stream may still hold work behind the failure.
                        self.abandon(st, &e, local);
                    }
                    return Err(e);
                }
                Poll::Pending => {}
            }
            if let Some((e, finished)) = self.blocking_failure(st) {
                let since = *finished_since.get_or_insert_with(Instant::now);
                if !finished || since.elapsed() >= FINISHED_GRACE {
                    self.abandon(st, &e, local);
                    return Err(e);
                }
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                let e = Error::Timeout {
                    operation: format!("{what} on the `{}` backend", self.name()),
                    rank: self.rank,
                    waited: start.elapsed(),
                    limit,
                };
                self.abandon(st, &e, local);
                return Err(e);
            }
        }
    }

    /// Waits for `ids` (see [`crate::backend::Backend::wait`]).
    pub(super) fn wait_ids(&self, st: &mut State, ids: &[OpId], limit: Duration, what: &str) -> Result<()> {
        let start = Instant::now();
        loop {
            self.flush(st);
            let mut submitted = false;
            let mut queued = false;
            let mut failure = None;
            for id in ids {
                match st.slot_state(*id) {
                    Some(SlotState::Submitted) => submitted = true,
                    Some(SlotState::Queued) => queued = true,
                    Some(SlotState::Failed(e)) => {
                        failure.get_or_insert(e);
                    }
                    _ => {}
                }
            }
            if let Some(e) = failure {
                if submitted {
                    // Finish the rest of the stream's work before releasing.
                    let _ = self.drain(st, start, limit, what, &mut Vec::new());
                }
                st.release(ids);
                return Err(e);
            }
            if submitted {
                if let Err(e) = self.drain(st, start, limit, what, &mut Vec::new()) {
                    st.release(ids);
                    return Err(e);
                }
                continue;
            }
            if !queued {
                st.release(ids);
                return Ok(());
            }
            // Only messages to self wait for their partner, which this rank
            // has not posted yet (another thread may).
            if start.elapsed() >= limit {
                st.release(ids);
                return Err(Error::Timeout {
                    operation: format!("{what}: a message to itself whose matching operation was never posted"),
                    rank: self.rank,
                    waited: start.elapsed(),
                    limit,
                });
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Whether `id` completed, without blocking (see
    /// [`crate::backend::Backend::test`]).
    pub(super) fn test_id(&self, st: &mut State, id: OpId) -> Result<bool> {
        self.flush(st);
        if matches!(st.slot_state(id), Some(SlotState::Submitted)) {
            if let Some(stream) = st.stream {
                let _ = self.ctx.bind();
                match self.ctx.driver.poll(self.comm.raw, stream, Duration::ZERO) {
                    Poll::Done => self.complete_submitted(st),
                    Poll::Failed(e) => {
                        let e = self.dev_err(e);
                        st.fail_submitted(&e, false);
                    }
                    Poll::Pending => {
                        // A peer that only finished may still complete this
                        // work; `drain` gives it its grace.
                        if let Some((e, false)) = self.blocking_failure(st) {
                            self.abandon(st, &e, &mut Vec::new());
                        }
                    }
                }
            }
        }
        match st.slot_state(id) {
            Some(SlotState::Queued | SlotState::Submitted) => Ok(false),
            Some(SlotState::Failed(e)) => {
                st.release(&[id]);
                Err(e)
            }
            _ => {
                st.release(&[id]);
                Ok(true)
            }
        }
    }

    /// Releases `ids`; device work cannot be cancelled, so submitted ones
    /// are waited for (or abandoned) first.
    pub(super) fn cancel_ids(&self, st: &mut State, ids: &[OpId]) {
        let submitted: Vec<OpId> = ids
            .iter()
            .copied()
            .filter(|&id| matches!(st.slot_state(id), Some(SlotState::Submitted)))
            .collect();
        let queued: Vec<OpId> = ids.iter().copied().filter(|id| !submitted.contains(id)).collect();
        st.release(&queued);
        if !submitted.is_empty() {
            let _ = self.wait_ids(st, &submitted, self.timeout, "cancel");
        }
    }

    /// Fails every pending and future operation of the group (see
    /// [`crate::backend::Backend::abort`]).
    pub(super) fn abort_group(&self, reason: &str) {
        self.shared.abort(reason);
        let mut st = super::lock(&self.state);
        let e = Error::Aborted {
            reason: reason.to_owned(),
        };
        st.fail_queued(&e);
        if !st.submitted.is_empty() {
            self.abandon(&mut st, &e, &mut Vec::new());
            let _ = self.ctx.bind();
            // SAFETY: a live communicator; after an abort the handle is
            // released (NCCL) and never destroyed again.
            if unsafe { self.ctx.driver.comm_abort(self.comm.raw) } {
                self.comm.mark_released();
            }
        }
        st.sticky.get_or_insert(e);
    }
}
