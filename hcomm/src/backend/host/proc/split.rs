//! Boards for the subgroups a split makes (`Comm::split`): the members of
//! a subgroup whose parent has a shared board (every rank on this host)
//! get a board of their own, so that the one-shot collectives of a
//! tensor-parallel or data-parallel group of processes run on it as the
//! world's do.
//!
//! A subgroup cannot share its parent's regions: a rank's region counts
//! every call it published, and the calls of two groups interleave
//! differently on different ranks. So each member creates a region
//! (`shm.rs`) and the members tell each other its descriptor in messages
//! of the new group (a split is called by every member at once); each maps
//! its peers' regions through `/proc/<pid>/fd`, and in a second round all
//! tell whether they mapped every one, so that the members decide alike
//! (a member on the board and one off it would run different algorithms).
//! Both rounds wait at most the split's timeout and fail like any message
//! of the group when a member dies.

use std::time::Duration;

use super::shm::{Region, ShmBoard};
use super::ProcBackend;
use crate::backend::{Backend, Context, Dir, OpIds, P2pOp};
use crate::element::DataType;
use crate::error::Result;

/// The tag of the board's handshake messages on the new group's
/// collective channels: they are the group's first messages, and every
/// one completes before the split returns.
const BOARD_TAG: i64 = -0x000b_0a4d;

/// Sent in place of a descriptor by a member that has no region.
const NO_REGION: u64 = u64::MAX;

/// The board of this member of the new subgroup `sub` (whose parent has a
/// board), or `None` when some member could not create or map a region.
pub(super) fn split_board(sub: &ProcBackend, timeout: Duration) -> Result<Option<ShmBoard>> {
    let own = Region::create()
        .map_err(|e| tracing::debug!(rank = sub.rank, %e, "no board region for a split"))
        .ok();
    let mine = own
        .as_ref()
        .and_then(|r| u64::try_from(r.fd()).ok())
        .unwrap_or(NO_REGION);
    let fds = exchange(sub, mine, timeout)?;
    let mut regions = Vec::with_capacity(fds.len());
    let mut mapped = own.is_some();
    for (peer, &fd) in fds.iter().enumerate() {
        if peer == sub.rank || !mapped {
            continue;
        }
        let global = sub.members[peer];
        let pid = sub.engine().links.get(global).and_then(Option::as_ref).map(|l| l.pid);
        let opened = match (pid, i32::try_from(fd)) {
            (Some(pid), Ok(fd)) => Region::open(pid, fd)
                .map_err(|e| tracing::debug!(rank = sub.rank, peer, %e, "cannot map a split's board region"))
                .ok(),
            _ => None,
        };
        mapped &= opened.is_some();
        regions.extend(opened.map(|r| (peer, r)));
    }
    let all = exchange(sub, u64::from(mapped), timeout)?;
    let Some(own) = own.filter(|_| all.iter().all(|&ok| ok == 1)) else {
        return Ok(None);
    };
    regions.push((sub.rank, own));
    regions.sort_by_key(|(r, _)| *r);
    Ok(Some(ShmBoard::new(
        sub.rank,
        regions.into_iter().map(|(_, r)| r).collect(),
    )))
}

/// Every member's `mine`, in group order: one word sent to and received
/// from each other member.
fn exchange(sub: &ProcBackend, mine: u64, timeout: Duration) -> Result<Vec<u64>> {
    let n = sub.members.len();
    let mut all = vec![0u64; n];
    all[sub.rank] = mine;
    let base = all.as_mut_ptr();
    let op = |dir, ptr: *mut u8, peer| P2pOp {
        dir,
        ptr,
        count: 1,
        dtype: DataType::U64,
        peer,
        tag: BOARD_TAG,
        reduce: None,
        context: Context::Coll,
        header: None,
    };
    let send = std::ptr::from_ref(&mine).cast_mut().cast::<u8>();
    let mut ops = Vec::with_capacity(2 * n);
    for peer in (0..n).filter(|&p| p != sub.rank) {
        ops.push(op(Dir::Send, send, peer));
        // SAFETY: `peer < n`, inside `all`.
        ops.push(op(Dir::Recv, unsafe { base.add(peer) }.cast::<u8>(), peer));
    }
    let mut ids = OpIds::new();
    // SAFETY: `mine` is only read and every receive word is a distinct
    // element of `all`, untouched by this thread until `wait` returns;
    // `wait` releases every op, whatever it returns, and both outlive it.
    unsafe { sub.post(&ops, &mut ids)? };
    sub.wait(&ids, timeout, "agreeing on a split's shared board")?;
    Ok(all)
}
