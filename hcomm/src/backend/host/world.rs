//! What the ranks of one in-process world share: their liveness and the
//! registry through which members of a subgroup find the one shared fabric.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use super::fabric::Fabric;
use super::wait::RankThreads;
use crate::backend::liveness::{lock, Liveness, Watcher};

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
    pub(crate) liveness: Arc<Liveness>,
    registry: Mutex<Registry>,
    _threads: RankThreads,
}

impl HostWorld {
    pub(crate) fn new(size: usize) -> Arc<HostWorld> {
        Arc::new(HostWorld {
            liveness: Liveness::new(size),
            registry: Mutex::new(Registry::default()),
            _threads: RankThreads::new(size),
        })
    }

    /// Has `fabric` woken whenever a rank's state changes.
    pub(crate) fn register(&self, fabric: &Arc<Fabric>) {
        let watcher: Weak<dyn Watcher> = Arc::downgrade(&(Arc::clone(fabric) as Arc<dyn Watcher>));
        self.liveness.watch(watcher);
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
