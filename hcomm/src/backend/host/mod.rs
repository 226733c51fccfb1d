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

pub(crate) use board::BOARD_BYTES;
pub(crate) use fabric::Fabric;
pub(crate) use world::HostWorld;

use super::liveness::Presence;
use super::{Backend, OpId, OpIds, P2pOp};
use crate::buffer::Memory;
use crate::collective::CollHeader;
use crate::error::{Error, Result};
use crate::topology::Topology;

/// One rank's view of a host group.
pub(crate) struct HostBackend {
    fabric: Arc<Fabric>,
    rank: usize,
    topology: Topology,
    presence: Arc<Presence>,
}

impl HostBackend {
    pub(crate) fn new(fabric: Arc<Fabric>, rank: usize, topology: Topology, presence: Arc<Presence>) -> Self {
        HostBackend {
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

    fn presence(&self) -> Option<&Presence> {
        Some(&self.presence)
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

    fn group_token(&self) -> Option<std::sync::Weak<dyn std::any::Any + Send + Sync>> {
        let token: Arc<dyn std::any::Any + Send + Sync> = self.fabric.clone();
        Some(Arc::downgrade(&token))
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

    fn board(&self) -> Option<HostBoard<'_>> {
        Some(HostBoard(Place::Threads {
            fabric: &self.fabric,
            rank: self.rank,
        }))
    }
}

/// A rank's handle on its group's board: memory every rank of the group
/// reads (an in-process group's, or the shared mapping of a job's
/// processes on one host), for the one-shot collectives.
pub(crate) struct HostBoard<'a>(Place<'a>);

/// Where a group's board lives.
enum Place<'a> {
    /// In this process: the ranks are its threads.
    Threads { fabric: &'a Fabric, rank: usize },
    /// In memory the processes of one host share.
    Processes(proc::ProcBoard<'a>),
}

impl<'a> HostBoard<'a> {
    /// The board of a group of processes.
    pub(crate) fn processes(board: proc::ProcBoard<'a>) -> Self {
        HostBoard(Place::Processes(board))
    }
}

impl HostBoard<'_> {
    /// One exchange of the collective `header`: `fill` writes this rank's
    /// `len` bytes (at most [`BOARD_BYTES`]), then `take(rank, bytes)` is
    /// called with every rank's, in rank order.
    pub(crate) fn exchange(
        &self,
        header: &CollHeader,
        len: usize,
        timeout: Duration,
        fill: impl FnOnce(&mut [u8]),
        take: impl FnMut(usize, &[u8]),
    ) -> Result<()> {
        match &self.0 {
            Place::Threads { fabric, rank } => fabric.board_exchange(*rank, header, len, timeout, fill, take),
            Place::Processes(board) => board.exchange(header, len, timeout, fill, take),
        }
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
