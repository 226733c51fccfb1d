//! A schedule's calls as the executor records them on a backend that runs
//! plans, and their issue in plan order.
//!
//! The body of a schedule does not depend on what it receives, so on such a
//! backend it runs to the end recording each call with its concrete regions
//! (after the same checks as on the host). The plan of the schedule at this
//! world size and these scalars lists, per rank, the events of the checker's
//! unrolling and the steps to issue; the recorded calls must be those events
//! (same count, kinds, peers and directions), else the call fails with an
//! internal error before anything is issued. Then every step is issued and
//! completed before the next: a group call of point-to-point operations, a
//! collective, a local copy, or a message of the rank to itself.

use hcomm_schedule::plan::{EventShape, Msg, OpRef, RankPlan, Step};
use smallvec::SmallVec;

use super::exec::{Exec, Group, Region};
use crate::element::{Element, ReduceOp};
use crate::error::Result;

/// One point-to-point operation of a schedule.
#[derive(Clone, Copy, Debug)]
pub(super) struct RecOp {
    pub(super) region: Region,
    pub(super) send: bool,
    pub(super) peer: usize,
    pub(super) tag: i64,
    /// For receives: combine instead of overwrite.
    pub(super) reduce: Option<ReduceOp>,
}

impl RecOp {
    pub(super) fn send(region: Region, peer: usize, tag: i64) -> Self {
        RecOp {
            region,
            send: true,
            peer,
            tag,
            reduce: None,
        }
    }

    pub(super) fn recv(region: Region, peer: usize, tag: i64, reduce: Option<ReduceOp>) -> Self {
        RecOp {
            region,
            send: false,
            peer,
            tag,
            reduce,
        }
    }

    fn agrees(&self, m: Msg) -> bool {
        self.send == m.send && u32::try_from(self.peer).is_ok_and(|p| p == m.peer)
    }
}

/// A collective statement, its root a rank of its group.
#[derive(Clone, Copy, Debug)]
pub(super) enum CollCall {
    AllReduce {
        src: Region,
        dst: Region,
        op: ReduceOp,
    },
    AllGather {
        src: Region,
        dst: Region,
    },
    ReduceScatter {
        src: Region,
        dst: Region,
        op: ReduceOp,
    },
    AllToAll {
        src: Region,
        dst: Region,
    },
    Broadcast {
        r: Region,
        root: usize,
    },
    Reduce {
        src: Region,
        dst: Region,
        op: ReduceOp,
        root: usize,
    },
    /// `counts` and `sizes` index the executor's count parameters.
    AllGatherV {
        src: Region,
        dst: Region,
        counts: usize,
    },
    AllToAllV {
        src: Region,
        dst: Region,
        sizes: usize,
    },
    Barrier,
}

impl CollCall {
    /// The statement, as errors name it.
    pub(super) fn what(&self) -> &'static str {
        match self {
            CollCall::AllReduce { .. } => "`all_reduce`",
            CollCall::AllGather { .. } => "`all_gather`",
            CollCall::ReduceScatter { .. } => "`reduce_scatter`",
            CollCall::AllToAll { .. } => "`all_to_all`",
            CollCall::Broadcast { .. } => "`broadcast`",
            CollCall::Reduce { .. } => "`reduce`",
            CollCall::AllGatherV { .. } => "`all_gatherv`",
            CollCall::AllToAllV { .. } => "`all_to_allv`",
            CollCall::Barrier => "`barrier`",
        }
    }
}

/// One recorded call of a schedule's body: one event of the checker.
#[derive(Clone, Debug)]
pub(super) enum Rec {
    Blocking(RecOp),
    Batch(Vec<RecOp>),
    Post(RecOp),
    Wait(usize),
    Copy {
        src: Region,
        dst: Region,
        op: Option<ReduceOp>,
    },
    Coll {
        call: CollCall,
        group: Option<Group>,
    },
}

/// Whether a recorded call is the event the plan was made from.
fn agrees(rec: &Rec, shape: &EventShape) -> bool {
    match (rec, shape) {
        (Rec::Blocking(op), EventShape::Blocking(m)) | (Rec::Post(op), EventShape::Post(m)) => op.agrees(*m),
        (Rec::Batch(ops), EventShape::Batch(ms)) => {
            ops.len() == ms.len() && ops.iter().zip(ms).all(|(op, m)| op.agrees(*m))
        }
        (Rec::Wait(n), EventShape::Wait(m)) => u32::try_from(*n).is_ok_and(|n| n == *m),
        (Rec::Copy { .. }, EventShape::Copy) | (Rec::Coll { .. }, EventShape::Collective) => true,
        _ => false,
    }
}

/// Issues `record` (the body's calls on this rank) in the order of `plan`.
pub(super) fn run<T: Element>(exec: &Exec<'_, T>, plan: &RankPlan, record: &[Rec]) -> Result<()> {
    if record.len() != plan.events.len() {
        return Err(exec.internal(format_args!(
            "the body made {} calls where the checker unrolled {} events",
            record.len(),
            plan.events.len()
        )));
    }
    if let Some(e) = record.iter().zip(&plan.events).position(|(r, s)| !agrees(r, s)) {
        return Err(exec.internal(format_args!(
            "call {e} of the body is {:?} where the checker unrolled {:?}",
            record[e], plan.events[e]
        )));
    }
    let op = |r: OpRef| -> Result<RecOp> {
        let found = match record.get(r.event as usize) {
            Some(Rec::Blocking(op) | Rec::Post(op)) if r.index == 0 => Some(*op),
            Some(Rec::Batch(ops)) => ops.get(r.index as usize).copied(),
            _ => None,
        };
        found.ok_or_else(|| exec.internal(format_args!("the plan names a missing operation {r:?}")))
    };
    for step in &plan.steps {
        match step {
            Step::Group(refs) => {
                let ops = refs.iter().map(|&r| op(r)).collect::<Result<SmallVec<[RecOp; 8]>>>()?;
                disjoint(exec, &ops)?;
                exec.group_call(&ops, "schedule step")?;
            }
            Step::SelfMessage { send, recv } => {
                let (s, r) = (op(*send)?, op(*recv)?);
                match r.reduce {
                    Some(o) => exec.accumulate_now(s.region, r.region, o)?,
                    None => exec.copy_now(s.region, r.region)?,
                }
            }
            Step::Local(e) => match record.get(*e as usize) {
                Some(&Rec::Copy { src, dst, op: None }) => exec.copy_now(src, dst)?,
                Some(&Rec::Copy { src, dst, op: Some(o) }) => exec.accumulate_now(src, dst, o)?,
                other => return Err(exec.internal(format_args!("the plan copies at {other:?}"))),
            },
            Step::Collective(e) => match record.get(*e as usize) {
                Some(&Rec::Coll { call, group }) => exec.collective_now(call, group)?,
                other => return Err(exec.internal(format_args!("the plan calls a collective at {other:?}"))),
            },
        }
    }
    Ok(())
}

/// The plan keeps operations that touch a common element in different
/// calls; checked here on the concrete regions, so that a group call never
/// writes memory another of its operations uses.
fn disjoint<T: Element>(exec: &Exec<'_, T>, ops: &[RecOp]) -> Result<()> {
    for (i, a) in ops.iter().enumerate() {
        for b in &ops[..i] {
            if (!a.send || !b.send) && a.region.overlaps(&b.region) {
                return Err(exec.internal(format_args!(
                    "a plan step holds two operations on overlapping regions, {:?} and {:?}",
                    a.region, b.region
                )));
            }
        }
    }
    Ok(())
}
