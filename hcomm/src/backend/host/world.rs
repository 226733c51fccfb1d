//! The ranks of one in-process world: who is running, who finished, who
//! failed, and the registry through which members of a subgroup find the one
//! shared fabric.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::fabric::Fabric;
use crate::error::Error;

/// What is known about one global rank.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RankState {
    Running,
    /// Every handle of the rank is gone (its closure returned).
    Finished,
    /// The rank panicked or returned an error.
    Failed(String),
}

struct PendingGroup {
    fabric: Arc<Fabric>,
    fetched: usize,
}

#[derive(Default)]
struct Registry {
    /// Subgroup fabrics handed to some but not yet all of their members.
    pending: HashMap<(u64, String, Vec<usize>), PendingGroup>,
}

/// Shared by every rank and every communicator of one in-process world.
pub(crate) struct HostWorld {
    states: Mutex<Vec<RankState>>,
    first_failure: Mutex<Option<(usize, Error)>>,
    fabrics: Mutex<Vec<Weak<Fabric>>>,
    registry: Mutex<Registry>,
}

/// Locks a mutex, recovering the data if a panicking thread poisoned it: the
/// state guarded here is updated in single steps and stays consistent.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl HostWorld {
    pub(crate) fn new(size: usize) -> Arc<HostWorld> {
        Arc::new(HostWorld {
            states: Mutex::new(vec![RankState::Running; size]),
            first_failure: Mutex::new(None),
            fabrics: Mutex::new(Vec::new()),
            registry: Mutex::new(Registry::default()),
        })
    }

    pub(crate) fn state(&self, global_rank: usize) -> RankState {
        lock(&self.states)
            .get(global_rank)
            .cloned()
            .unwrap_or(RankState::Running)
    }

    pub(crate) fn register(&self, fabric: &Arc<Fabric>) {
        let mut fabrics = lock(&self.fabrics);
        fabrics.retain(|f| f.strong_count() > 0);
        fabrics.push(Arc::downgrade(fabric));
    }

    /// Marks a rank failed (first cause wins) and wakes every waiter.
    pub(crate) fn fail(&self, global_rank: usize, error: &Error) {
        {
            let mut states = lock(&self.states);
            if let Some(state) = states.get_mut(global_rank) {
                if matches!(state, RankState::Failed(_)) {
                    return;
                }
                *state = RankState::Failed(error.to_string());
            }
        }
        {
            let mut first = lock(&self.first_failure);
            if first.is_none() || (first.as_ref().is_some_and(|(_, e)| e.is_secondary()) && !error.is_secondary()) {
                *first = Some((global_rank, error.clone()));
            }
        }
        self.wake_all();
    }

    /// Marks a rank finished (unless it failed) and wakes every waiter.
    pub(crate) fn finish(&self, global_rank: usize) {
        {
            let mut states = lock(&self.states);
            if let Some(state @ RankState::Running) = states.get_mut(global_rank) {
                *state = RankState::Finished;
            }
        }
        self.wake_all();
    }

    /// The first failure that is a root cause (not itself a consequence of
    /// another rank's failure), else the first failure.
    pub(crate) fn first_failure(&self) -> Option<(usize, Error)> {
        lock(&self.first_failure).clone()
    }

    fn wake_all(&self) {
        let fabrics: Vec<Arc<Fabric>> = lock(&self.fabrics).iter().filter_map(Weak::upgrade).collect();
        for fabric in fabrics {
            fabric.wake_all();
        }
    }

    /// The fabric of subgroup `members` of `parent`, creating it on the first
    /// member's call; every member gets the same one.
    pub(crate) fn subgroup_fabric(
        self: &Arc<Self>,
        parent: u64,
        key: &str,
        members: Vec<usize>,
        make: impl FnOnce(Vec<usize>) -> Arc<Fabric>,
    ) -> Arc<Fabric> {
        let mut registry = lock(&self.registry);
        let id = (parent, key.to_owned(), members);
        let count = id.2.len();
        let entry = registry.pending.entry(id.clone()).or_insert_with(|| PendingGroup {
            fabric: make(id.2.clone()),
            fetched: 0,
        });
        entry.fetched += 1;
        let fabric = Arc::clone(&entry.fabric);
        if entry.fetched == count {
            registry.pending.remove(&id);
        }
        fabric
    }
}
