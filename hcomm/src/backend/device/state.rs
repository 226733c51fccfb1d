//! The bookkeeping of one device communicator: a slot per posted
//! operation, the host-side queue of operations not yet handed to the
//! library, what the stream holds, and the failure that ends the group.

use super::driver::Raw;
use super::memory::DevMem;
use super::staging::Finish;
use crate::backend::{Dir, OpId};
use crate::element::DataType;
use crate::error::Error;

#[derive(Clone, Debug)]
pub(super) enum SlotState {
    Free,
    Queued,
    Submitted,
    Done,
    Failed(Error),
}

pub(super) struct Slot {
    generation: u32,
    pub(super) state: SlotState,
    pub(super) staging: Option<DevMem>,
    pub(super) finish: Option<Finish>,
    pub(super) count: usize,
    pub(super) dtype: DataType,
}

/// A posted operation not yet handed to the library.
#[derive(Clone, Copy)]
pub(super) struct Queued {
    pub(super) slot: u32,
    pub(super) dir: Dir,
    pub(super) peer: usize,
    /// Device address of the data (the user's, or the staging buffer).
    pub(super) dev: *mut u8,
    pub(super) count: usize,
    pub(super) dtype: DataType,
    pub(super) tag: i64,
}

pub(super) struct State {
    pub(super) stream: Option<Raw>,
    pub(super) slots: Vec<Slot>,
    free: Vec<u32>,
    pub(super) queue: Vec<Queued>,
    /// Slots whose work is on the stream.
    pub(super) submitted: Vec<u32>,
    /// Ranks the stream's unfinished work waits on.
    pub(super) deps: Vec<bool>,
    /// Set once device work was abandoned or the group aborted.
    pub(super) sticky: Option<Error>,
    pub(super) abandoned: bool,
    /// Staging memory the device may still use.
    pub(super) graveyard: Vec<DevMem>,
    /// One element of scratch for barriers built from an all-reduce.
    pub(super) barrier: Option<DevMem>,
}

// SAFETY: the raw pointers in `Queued` and `Finish` are addresses of buffers
// that, per the `Backend::post` contract, stay valid and untouched until
// their operations are released; only the thread holding the state lock uses them.
unsafe impl Send for State {}

impl State {
    /// The state of a communicator of `world` ranks working on `stream`.
    pub(super) fn new(stream: Raw, world: usize) -> State {
        State {
            stream: Some(stream),
            slots: Vec::new(),
            free: Vec::new(),
            queue: Vec::new(),
            submitted: Vec::new(),
            deps: vec![false; world],
            sticky: None,
            abandoned: false,
            graveyard: Vec::new(),
            barrier: None,
        }
    }

    /// Frees the slots of `ids` (stale ids are ignored); staging memory of
    /// work still on the stream goes to the graveyard.
    pub(super) fn release(&mut self, ids: &[OpId]) {
        for id in ids {
            let Some(slot) = self.slots.get_mut(id.slot as usize) else {
                continue;
            };
            if slot.generation != id.generation || matches!(slot.state, SlotState::Free) {
                continue;
            }
            match slot.state {
                SlotState::Queued => self.queue.retain(|q| q.slot != id.slot),
                SlotState::Submitted => {
                    // Only after abandonment: the device may still use it.
                    if let Some(m) = slot.staging.take() {
                        self.graveyard.push(m);
                    }
                    self.submitted.retain(|&s| s != id.slot);
                }
                _ => {}
            }
            let slot = &mut self.slots[id.slot as usize];
            slot.state = SlotState::Free;
            slot.staging = None;
            slot.finish = None;
            self.free.push(id.slot);
        }
    }

    /// A queued slot for an operation of `count` elements of `dtype`.
    pub(super) fn alloc_slot(&mut self, count: usize, dtype: DataType) -> OpId {
        let fresh = Slot {
            generation: 0,
            state: SlotState::Queued,
            staging: None,
            finish: None,
            count,
            dtype,
        };
        if let Some(i) = self.free.pop() {
            let slot = &mut self.slots[i as usize];
            let generation = slot.generation.wrapping_add(1);
            *slot = Slot { generation, ..fresh };
            OpId { slot: i, generation }
        } else {
            self.slots.push(fresh);
            OpId {
                slot: (self.slots.len() - 1) as u32,
                generation: 0,
            }
        }
    }

    /// The state of `id`; `None` once its slot was reused.
    pub(super) fn slot_state(&self, id: OpId) -> Option<SlotState> {
        let slot = self.slots.get(id.slot as usize)?;
        (slot.generation == id.generation).then(|| slot.state.clone())
    }

    pub(super) fn set_state(&mut self, slot: u32, state: SlotState) {
        self.slots[slot as usize].state = state;
    }

    /// Every slot of `slots` fails with `e`.
    pub(super) fn fail_slots(&mut self, slots: impl IntoIterator<Item = u32>, e: &Error) {
        for slot in slots {
            self.set_state(slot, SlotState::Failed(e.clone()));
        }
    }

    /// Every queued operation fails with `e` and leaves the queue.
    pub(super) fn fail_queued(&mut self, e: &Error) {
        let queued = std::mem::take(&mut self.queue);
        self.fail_slots(queued.iter().map(|q| q.slot), e);
    }

    /// Every submitted operation fails with `e`. Their staging memory is
    /// freed, or kept in the graveyard when the device `may_still_use` it.
    pub(super) fn fail_submitted(&mut self, e: &Error, may_still_use: bool) {
        for slot in std::mem::take(&mut self.submitted) {
            let s = &mut self.slots[slot as usize];
            if matches!(s.state, SlotState::Submitted) {
                s.state = SlotState::Failed(e.clone());
                s.finish = None;
                let staging = s.staging.take();
                if may_still_use {
                    self.graveyard.extend(staging);
                }
            }
        }
        self.clear_deps();
    }

    /// The stream waits on no rank.
    pub(super) fn clear_deps(&mut self) {
        self.deps.iter_mut().for_each(|d| *d = false);
    }

    /// The stream's work waits on every rank.
    pub(super) fn depend_on_all(&mut self) {
        self.deps.iter_mut().for_each(|d| *d = true);
    }
}
