//! The host backend: ranks are threads of this process and a message is one
//! `memcpy` from the sender's buffer into the receiver's.

mod board;
mod fabric;
pub(crate) mod proc;
pub(crate) mod slab;
pub(crate) mod wait;
mod world;

use std::sync::Arc;
use std::time::Duration;

use board::BOARD_BYTES;
pub(crate) use fabric::Fabric;
pub(crate) use world::HostWorld;

use super::liveness::Presence;
use super::{Backend, Board, Capabilities, EntryRoute, Issue, OpId, OpIds, P2pOp};
use crate::buffer::Memory;
use crate::error::{Error, Result};
use crate::header::CollHeader;
use crate::topology::Topology;

/// One rank's view of a host group.
pub(crate) struct HostBackend {
    fabric: Arc<Fabric>,
    /// The fabric again, as the state the group's ranks share.
    group: Arc<dyn std::any::Any + Send + Sync>,
    rank: usize,
    topology: Topology,
    presence: Arc<Presence>,
}

impl HostBackend {
    pub(crate) fn new(fabric: Arc<Fabric>, rank: usize, topology: Topology, presence: Arc<Presence>) -> Self {
        HostBackend {
            group: fabric.clone(),
            fabric,
            rank,
            topology,
            presence,
        }
    }
}

impl Backend for HostBackend {
    fn name(&self) -> &'static str {
        "host"
    }

    fn rank(&self) -> usize {
        self.rank
    }

    fn world(&self) -> usize {
        self.fabric.size()
    }

    fn accepts(&self, memory: Memory) -> bool {
        memory == Memory::Host
    }

    fn topology(&self) -> Topology {
        self.topology.clone()
    }

    unsafe fn post(&self, ops: &[P2pOp], ids: &mut OpIds) -> Result<()> {
        // SAFETY: the caller upholds the buffer contract of `Backend::post`.
        unsafe { self.fabric.post(self.rank, ops, ids, false) }
    }

    unsafe fn post_to_wait(&self, ops: &[P2pOp], ids: &mut OpIds) -> Result<()> {
        // SAFETY: the caller upholds the buffer contract of `Backend::post`.
        unsafe { self.fabric.post(self.rank, ops, ids, true) }
    }

    fn wait(&self, ids: &[OpId], timeout: Duration, what: &str) -> Result<()> {
        let deadline = crate::options::deadline_after(timeout);
        self.fabric.wait(self.rank, ids, deadline, what, timeout)
    }

    fn test(&self, id: OpId) -> Result<bool> {
        self.fabric.test(id)
    }

    fn cancel(&self, ids: &[OpId]) {
        self.fabric.cancel(ids);
    }

    fn enter_collective(&self, header: &CollHeader) -> Result<()> {
        self.fabric.enter_collective(self.rank, header)
    }

    fn confirm_collective(&self, header: &CollHeader, timeout: Duration) -> Result<()> {
        self.fabric.confirm_collective(self.rank, header, timeout)
    }

    fn subgroup(&self, key: &str, members: &[usize]) -> Result<Arc<dyn Backend>> {
        let (rank, global) = subgroup_of(self.rank, &self.fabric.members, members)?;
        let world = Arc::clone(&self.fabric.world);
        let fabric = self
            .fabric
            .world
            .subgroup_fabric(self.fabric.id, key, global, |g| Fabric::new(&world, g));
        let topology = subgroup_topology(&self.topology);
        Ok(Arc::new(HostBackend::new(
            fabric,
            rank,
            topology,
            Arc::clone(&self.presence),
        )))
    }

    fn abort(&self, reason: &str) {
        self.fabric.abort(reason);
    }

    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities {
            board: Some(self),
            entries: EntryRoute::Shared(&self.group),
            issue: Issue::AsWritten,
            presence: Some(&self.presence),
        }
    }
}

/// The group's board: memory every rank of an in-process group reads, for
/// the one-shot collectives.
impl Board for HostBackend {
    fn capacity(&self) -> usize {
        BOARD_BYTES
    }

    fn exchange(
        &self,
        header: &CollHeader,
        len: usize,
        timeout: Duration,
        fill: &mut dyn FnMut(&mut [u8]),
        take: &mut dyn FnMut(usize, &[u8]),
    ) -> Result<()> {
        self.fabric.board_exchange(self.rank, header, len, timeout, fill, take)
    }
}

/// This rank's place in the subgroup `members` (ranks of a group whose
/// ranks are the global ranks `global`): its rank there and the members'
/// global ranks.
pub(crate) fn subgroup_of(rank: usize, global: &[usize], members: &[usize]) -> Result<(usize, Vec<usize>)> {
    crate::backend::check_members(rank, global.len(), members)?;
    let new_rank = members
        .iter()
        .position(|&m| m == rank)
        .ok_or_else(|| Error::precondition(format!("rank {rank} is not a member of the subgroup {members:?}")))?;
    Ok((new_rank, members.iter().map(|&m| global[m]).collect()))
}

/// The topology a subgroup's algorithms assume.
pub(crate) fn subgroup_topology(parent: &Topology) -> Topology {
    match parent {
        Topology::Custom { .. } => Topology::FullMesh,
        t => t.clone(),
    }
}

/// One rank's backend and the guard that marks it finished.
pub(crate) type RankBackend = (Arc<HostBackend>, Arc<Presence>);

/// A new in-process world of `size` ranks: one backend per rank.
pub(crate) fn world(size: usize, topology: &Topology) -> (Arc<HostWorld>, Vec<RankBackend>) {
    let world = HostWorld::new(size);
    let fabric = Fabric::new(&world, (0..size).collect());
    let ranks = (0..size)
        .map(|r| {
            let presence = Presence::new(&world.liveness, r);
            let backend = Arc::new(HostBackend::new(
                Arc::clone(&fabric),
                r,
                topology.clone(),
                Arc::clone(&presence),
            ));
            (backend, presence)
        })
        .collect();
    (world, ranks)
}
