//! Communicators and ranks: which ranks share a communicator, its mailboxes
//! and its collective meetings.
//!
//! A world is the communicator every rank got from one `HcclCommInitAll` or
//! one root info; its sub-communicators are communicators of their own
//! (own mailboxes, own collective order), as HCCL's are. A rank that
//! destroyed its handle stays a member: peers waiting on it time out, as
//! under HCCL, instead of seeing it finish.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::link::JoinError;
use crate::mailbox::Mailbox;
use crate::rendezvous::Rendezvous;
use crate::runtime::{lock, wait_until};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh process-unique id (worlds).
pub(crate) fn fresh_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// What the ranks of one communicator share.
pub(crate) struct Group {
    pub(crate) size: usize,
    pub(crate) is_sub: bool,
    pub(crate) mailbox: Mailbox,
    pub(crate) rendezvous: Rendezvous,
}

impl Group {
    /// A group of `size` ranks (a remote rank's handle holds one for its
    /// size only: its operations run at the hub).
    pub(crate) fn new(size: usize, is_sub: bool) -> Arc<Group> {
        Arc::new(Group {
            size,
            is_sub,
            mailbox: Mailbox::default(),
            rendezvous: Rendezvous::new(size),
        })
    }
}

/// (sub-communicator id, member ranks, how many times the members made it before).
type SubKey = (u64, Vec<u32>, u64);

/// (world rank, sub-communicator id, member ranks).
type MadeKey = (usize, u64, Vec<u32>);

/// One world and the sub-communicators made from it.
pub(crate) struct World {
    pub(crate) group: Arc<Group>,
    /// Sub-communicators being created: their group and how many members took it.
    subs: Mutex<HashMap<SubKey, (Arc<Group>, usize)>>,
    /// How many sub-communicators each rank made, per (rank, id, members).
    made: Mutex<HashMap<MadeKey, u64>>,
}

impl World {
    /// A world of `size` ranks.
    pub(crate) fn new(size: usize) -> Arc<World> {
        Arc::new(World {
            group: Group::new(size, false),
            subs: Mutex::new(HashMap::new()),
            made: Mutex::new(HashMap::new()),
        })
    }

    /// The sub-communicator `id` of world ranks `ids` (sorted), for world rank
    /// `rank`: the members that make it for the k-th time share one group.
    pub(crate) fn sub(&self, rank: usize, id: u64, ids: &[u32]) -> Arc<Group> {
        let made = {
            let mut made = lock(&self.made);
            let n = made.entry((rank, id, ids.to_vec())).or_insert(0);
            *n += 1;
            *n - 1
        };
        let mut subs = lock(&self.subs);
        let key = (id, ids.to_vec(), made);
        let entry = subs
            .entry(key.clone())
            .or_insert_with(|| (Group::new(ids.len(), true), 0));
        entry.1 += 1;
        let group = Arc::clone(&entry.0);
        if entry.1 == ids.len() {
            subs.remove(&key);
        }
        group
    }
}

/// One rank's handle (what `HcclComm` points to).
pub(crate) struct CommHandle {
    pub(crate) world: Arc<World>,
    pub(crate) group: Arc<Group>,
    /// Rank in the group.
    pub(crate) rank: usize,
    /// Rank in the world.
    pub(crate) world_rank: usize,
    pub(crate) device: i32,
    pub(crate) exec_timeout: Option<Duration>,
    pub(crate) name: String,
    /// Operations enqueued and not finished (destroy is `HCCL_E_AGAIN` meanwhile).
    pub(crate) in_flight: AtomicUsize,
    /// Where a rank of another process than its world's runs its operations.
    pub(crate) remote: Option<crate::link::Remote>,
}

// --- worlds being joined through HcclCommInitRootInfo -----------------------

struct Pending {
    size: u32,
    joined: Vec<bool>,
    count: u32,
    world: Arc<World>,
    complete: bool,
    taken: u32,
}

static PENDING: Mutex<Option<HashMap<u64, Pending>>> = Mutex::new(None);
static PENDING_CV: Condvar = Condvar::new();

/// Joins world `world` as `rank` of `size`; blocks until all ranks joined. The
/// first rank to join creates the world.
pub(crate) fn join_world(world: u64, size: u32, rank: u32, timeout: Duration) -> Result<Arc<World>, JoinError> {
    let deadline = Instant::now().checked_add(timeout);
    let mut guard = lock(&PENDING);
    {
        let map = guard.get_or_insert_with(HashMap::new);
        let p = match map.entry(world) {
            Entry::Occupied(e) => e.into_mut(),
            Entry::Vacant(e) => e.insert(Pending {
                size,
                joined: vec![false; size as usize],
                count: 0,
                world: World::new(size as usize),
                complete: false,
                taken: 0,
            }),
        };
        if p.size != size {
            return Err(JoinError::Para(format!(
                "HcclCommInitRootInfo: rank {rank} passes nRanks = {size}, another rank passed {}",
                p.size
            )));
        }
        if p.joined[rank as usize] || p.complete {
            return Err(JoinError::Para(format!(
                "HcclCommInitRootInfo: rank {rank} of this root info joined twice"
            )));
        }
        p.joined[rank as usize] = true;
        p.count += 1;
        if p.count == size {
            p.complete = true;
        }
    }
    PENDING_CV.notify_all();
    loop {
        let map = guard.get_or_insert_with(HashMap::new);
        let Some(p) = map.get_mut(&world) else {
            return Err(JoinError::Para(
                "HcclCommInitRootInfo: internal error: world vanished".to_owned(),
            ));
        };
        if p.complete {
            let w = Arc::clone(&p.world);
            p.taken += 1;
            if p.taken == p.size {
                map.remove(&world);
            }
            return Ok(w);
        }
        guard = wait_until(&PENDING_CV, guard, deadline);
        if deadline.is_some_and(|d| Instant::now() >= d) {
            let map = guard.get_or_insert_with(HashMap::new);
            if let Some(p) = map.get_mut(&world) {
                if !p.complete {
                    p.joined[rank as usize] = false;
                    p.count -= 1;
                    let missing: Vec<usize> = (0..p.size as usize).filter(|&r| !p.joined[r]).collect();
                    if p.count == 0 {
                        map.remove(&world);
                    }
                    return Err(JoinError::Timeout(format!(
                        "HcclCommInitRootInfo: rank {rank}: ranks {missing:?} did not join within {timeout:?} (HCCL_CONNECT_TIMEOUT)"
                    )));
                }
            }
        }
    }
}
