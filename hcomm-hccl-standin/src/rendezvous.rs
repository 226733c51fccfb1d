//! Where the ranks of one communicator meet for a collective: each rank's
//! n-th collective joins meeting n, which blocks until every rank joined;
//! the last to join runs the collective for all, and each returns its
//! outcome. A rank that gives up (execution timeout) withdraws its call, so
//! its buffers are never touched afterwards.

use std::collections::HashMap;
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use crate::op::Desc;
use crate::runtime::{lock, wait_until};

/// Why a rank left a meeting without a result.
#[derive(Debug)]
pub(crate) enum Missed {
    /// The collective ran and failed (on every rank).
    Failed(String),
    /// The deadline passed before these ranks joined collective `seq`.
    TimedOut { seq: u64, missing: Vec<usize> },
}

struct Meeting {
    /// Each rank's call, until the collective runs.
    calls: Vec<Option<Desc>>,
    outcome: Option<Result<(), String>>,
    /// How many ranks took the outcome.
    collected: usize,
}

struct Meetings {
    /// How many collectives each rank joined.
    joined: Vec<u64>,
    open: HashMap<u64, Meeting>,
    /// Ranks whose handle was destroyed: their waits end at once.
    stopped: Vec<bool>,
}

/// The collective meetings of one communicator of `size` ranks.
pub(crate) struct Rendezvous {
    size: usize,
    meetings: Mutex<Meetings>,
    cv: Condvar,
}

impl Rendezvous {
    pub(crate) fn new(size: usize) -> Rendezvous {
        Rendezvous {
            size,
            meetings: Mutex::new(Meetings {
                joined: vec![0; size],
                open: HashMap::new(),
                stopped: vec![false; size],
            }),
            cv: Condvar::new(),
        }
    }

    /// Ends the waits of `rank` (its handle was destroyed): they fail at once.
    pub(crate) fn stop(&self, rank: usize) {
        lock(&self.meetings).stopped[rank] = true;
        self.cv.notify_all();
    }

    /// Joins `rank`'s next collective with `call`; blocks until every rank
    /// joined (then the last one runs `run` on all calls, in rank order) or
    /// `deadline` passed.
    pub(crate) fn meet(
        &self,
        rank: usize,
        call: Desc,
        deadline: Option<Instant>,
        run: impl FnOnce(&[Desc]) -> Result<(), String>,
    ) -> Result<(), Missed> {
        let size = self.size;
        let mut m = lock(&self.meetings);
        let seq = m.joined[rank];
        m.joined[rank] += 1;
        let meeting = m.open.entry(seq).or_insert_with(|| Meeting {
            calls: vec![None; size],
            outcome: None,
            collected: 0,
        });
        meeting.calls[rank] = Some(call);
        if meeting.calls.iter().all(Option::is_some) {
            let calls: Vec<Desc> = meeting.calls.iter_mut().filter_map(Option::take).collect();
            meeting.outcome = Some(run(&calls));
            self.cv.notify_all();
        }
        loop {
            let stopped = m.stopped[rank];
            let Some(meeting) = m.open.get_mut(&seq) else {
                return Err(Missed::Failed(format!("collective #{seq} vanished")));
            };
            if let Some(outcome) = meeting.outcome.clone() {
                meeting.collected += 1;
                if meeting.collected == size {
                    m.open.remove(&seq);
                }
                return outcome.map_err(Missed::Failed);
            }
            if stopped || deadline.is_some_and(|d| Instant::now() >= d) {
                let missing: Vec<usize> = (0..size).filter(|&r| meeting.calls[r].is_none()).collect();
                meeting.calls[rank] = None;
                if meeting.calls.iter().all(Option::is_none) {
                    m.open.remove(&seq);
                }
                if stopped {
                    return Err(Missed::Failed(format!(
                        "the communicator was destroyed while collective #{seq} waited for ranks {missing:?}"
                    )));
                }
                return Err(Missed::TimedOut { seq, missing });
            }
            m = wait_until(&self.cv, m, deadline);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use hcomm_sys::HcclDataType;

    use super::*;
    use crate::op::Kind;

    fn barrier() -> Desc {
        Desc::new(Kind::Barrier, HcclDataType::HCCL_DATA_TYPE_INT8)
    }

    #[test]
    fn the_collective_runs_once_when_every_rank_joined() {
        let r = Rendezvous::new(3);
        let runs = AtomicUsize::new(0);
        let run = |calls: &[Desc]| {
            assert_eq!(calls.len(), 3);
            runs.fetch_add(1, Ordering::SeqCst);
            Ok(())
        };
        std::thread::scope(|s| {
            for rank in 0..3 {
                let (r, run) = (&r, &run);
                s.spawn(move || r.meet(rank, barrier(), None, run).unwrap());
            }
        });
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_rank_that_gives_up_names_the_missing_ranks_and_leaves_nothing_behind() {
        let r = Rendezvous::new(3);
        let deadline = Instant::now() + Duration::from_millis(30);
        let missed = r.meet(1, barrier(), Some(deadline), |_| Ok(()));
        assert!(
            matches!(&missed, Err(Missed::TimedOut { seq: 0, missing }) if *missing == [0, 2]),
            "{missed:?}"
        );
        assert!(lock(&r.meetings).open.is_empty());
    }
}
