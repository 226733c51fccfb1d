//! Worlds and communicators over hcomm's host backend.
//!
//! Every HCCL world is one world of in-process host ranks (`hcomm::host::comms`),
//! created when its first rank joins; the stream workers of each rank drive that
//! rank's host communicator. Sub-communicators are host subgroups.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use hcomm::{Comm, CommOptions};

use crate::runtime::lock;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A fresh process-unique id (worlds).
pub(crate) fn fresh_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// What the ranks of one communicator share besides their host communicators.
pub(crate) struct Group {
    pub(crate) size: usize,
    pub(crate) is_sub: bool,
    /// How many collectives each rank entered: names the ranks a timed-out
    /// collective waited for.
    entered: Mutex<Vec<u64>>,
}

impl Group {
    fn new(size: usize, is_sub: bool) -> Arc<Group> {
        Arc::new(Group {
            size,
            is_sub,
            entered: Mutex::new(vec![0; size]),
        })
    }

    /// Records that `rank` enters its next collective; returns its number.
    pub(crate) fn enter(&self, rank: usize) -> u64 {
        let mut entered = lock(&self.entered);
        entered[rank] += 1;
        entered[rank] - 1
    }

    /// The ranks that have not entered collective `seq`.
    pub(crate) fn missing(&self, seq: u64) -> Vec<usize> {
        let entered = lock(&self.entered);
        (0..self.size).filter(|&r| entered[r] <= seq).collect()
    }
}

/// (sub-communicator id, member ranks, how many times the members made it before).
type SubKey = (u64, Vec<u32>, u64);

/// (world rank, sub-communicator id, member ranks).
type MadeKey = (usize, u64, Vec<u32>);

/// One HCCL world.
///
/// Every HCCL communicator, the world's own included, is a host subgroup of
/// one host world: a subgroup is a communicator of its own (own collective
/// order, own channels), as an HCCL sub-communicator of every rank is.
///
/// The world keeps every rank's host communicator until its last handle is
/// gone, so a rank that destroyed its `HcclComm` stays present: peers waiting on
/// it time out, as under HCCL, instead of seeing it finish.
pub(crate) struct World {
    /// `roots[r]`: rank `r`'s communicator of the host world.
    roots: Vec<Comm>,
    /// `members[r]`: rank `r`'s communicator of the HCCL world.
    members: Vec<Comm>,
    group: Arc<Group>,
    /// Sub-communicators being created: their group and how many members took it.
    subs: Mutex<HashMap<SubKey, (Arc<Group>, usize)>>,
    /// How many sub-communicators each rank made, per (rank, id, members).
    made: Mutex<HashMap<MadeKey, u64>>,
}

impl World {
    /// A world of `size` ranks.
    pub(crate) fn new(size: usize) -> hcomm::Result<Arc<World>> {
        let roots = hcomm::host::comms(size, &CommOptions::default())?;
        let all: Vec<usize> = (0..size).collect();
        let members = roots
            .iter()
            .map(|root| root.subgroup("hccl-world", &all))
            .collect::<hcomm::Result<Vec<_>>>()?;
        Ok(Arc::new(World {
            roots,
            members,
            group: Group::new(size, false),
            subs: Mutex::new(HashMap::new()),
            made: Mutex::new(HashMap::new()),
        }))
    }

    /// Rank `rank`'s communicator of the world and the world's group.
    pub(crate) fn member(&self, rank: usize) -> (Comm, Arc<Group>) {
        (self.members[rank].clone(), Arc::clone(&self.group))
    }

    /// The sub-communicator `id` of world ranks `ids` (sorted), for world rank
    /// `rank`: every member that makes it gets the same group.
    pub(crate) fn sub(&self, rank: usize, id: u64, ids: &[u32]) -> hcomm::Result<(Comm, Arc<Group>)> {
        let made = {
            let mut made = lock(&self.made);
            let n = made.entry((rank, id, ids.to_vec())).or_insert(0);
            *n += 1;
            *n - 1
        };
        let members: Vec<usize> = ids.iter().map(|&r| r as usize).collect();
        let comm = self.roots[rank].subgroup(&format!("hccl-sub-{id}#{made}"), &members)?;
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
        Ok((comm, group))
    }
}

/// One rank's handle (what `HcclComm` points to).
pub(crate) struct CommHandle {
    pub(crate) world: Arc<World>,
    pub(crate) group: Arc<Group>,
    /// This rank's host communicator of the group.
    pub(crate) comm: Comm,
    /// Rank in the group.
    pub(crate) rank: usize,
    /// Rank in the world.
    pub(crate) world_rank: usize,
    pub(crate) device: i32,
    pub(crate) exec_timeout: Option<Duration>,
    pub(crate) name: String,
    /// Operations enqueued and not finished (destroy is `HCCL_E_AGAIN` meanwhile).
    pub(crate) in_flight: AtomicUsize,
}

fn wait_until<'a, T>(cv: &Condvar, guard: MutexGuard<'a, T>, deadline: Option<Instant>) -> (MutexGuard<'a, T>, bool) {
    match deadline {
        None => (cv.wait(guard).unwrap_or_else(std::sync::PoisonError::into_inner), false),
        Some(d) => {
            let now = Instant::now();
            if now >= d {
                return (guard, true);
            }
            let (g, _) = cv
                .wait_timeout(guard, d - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            (g, Instant::now() >= d)
        }
    }
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

/// Why joining a world failed.
pub(crate) enum JoinError {
    /// Disagreeing `nRanks` or a rank joining twice.
    Para(String),
    /// Not every rank joined in time.
    Timeout(String),
    /// The host world could not be made.
    Comm(hcomm::Error),
}

/// Joins world `world` as `rank` of `size`; blocks until all ranks joined. The
/// first rank to join creates the host world.
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
                world: World::new(size as usize).map_err(JoinError::Comm)?,
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
        let (g, timed_out) = wait_until(&PENDING_CV, guard, deadline);
        guard = g;
        if timed_out {
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
