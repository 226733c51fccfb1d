//! What a stream runs for an enqueued HCCL operation: a collective meets the
//! other ranks of its communicator and runs once for all of them; sends and
//! receives go through the communicator's mailboxes. Each waits for its
//! peers at most the communicator's execution timeout.

use std::time::Instant;

use crate::codes::{failed, timed_out};
use crate::collective;
use crate::mailbox::{Stall, Transfer};
use crate::op::{Desc, Item};
use crate::rendezvous::Missed;
use crate::runtime::deadline;
use crate::stream::AsyncError;
use crate::world::CommHandle;

/// Runs collective `d` of `h`'s rank: blocks until every rank of the
/// communicator called its collective of the same position, then checks
/// that the calls agree and moves the data of all ranks. A rank of another
/// process runs it at its world's hub, shipping its device ranges `used`.
pub(crate) fn collective(h: &CommHandle, d: &Desc, used: &[(usize, usize)]) -> Result<(), AsyncError> {
    if let Some(remote) = &h.remote {
        return remote.collective(d, used);
    }
    let symbol = d.kind.symbol();
    let start = Instant::now();
    let met = h
        .group
        .rendezvous
        .meet(h.rank, d.clone(), deadline(h.exec_timeout), collective::run);
    met.map_err(|missed| match missed {
        Missed::Failed(message) => failed(symbol, &message),
        Missed::TimedOut { seq, missing } => timed_out(
            symbol,
            &format!("collective #{seq}: ranks {missing:?} did not call it"),
            h.rank,
            start.elapsed(),
            h.exec_timeout.unwrap_or_default(),
        ),
    })
}

/// Runs sends and receives of `h`'s rank that progress together (one item:
/// `HcclSend` or `HcclRecv`); `symbol` names the call in errors.
pub(crate) fn point_to_point(
    h: &CommHandle,
    symbol: &str,
    items: &[Item],
    used: &[(usize, usize)],
) -> Result<(), AsyncError> {
    if let Some(remote) = &h.remote {
        return remote.point_to_point(symbol, items, used);
    }
    let start = Instant::now();
    let transfers: Vec<Transfer> = items
        .iter()
        .map(|it| Transfer {
            send: it.send,
            peer: it.peer,
            addr: it.addr,
            // Validated at call time: the type has a size and the product fits.
            bytes: it.count as usize * it.dtype.size().unwrap_or(1),
        })
        .collect();
    let exchanged = h.group.mailbox.exchange(h.rank, &transfers, deadline(h.exec_timeout));
    exchanged.map_err(|stall| match stall {
        Stall::Failed(message) => failed(symbol, &message),
        Stall::TimedOut(pending) => {
            let what: Vec<String> = pending
                .iter()
                .map(|t| {
                    let (dir, prep) = if t.send { ("send", "to") } else { ("receive", "from") };
                    format!("{dir} of {} bytes {prep} rank {}", t.bytes, t.peer)
                })
                .collect();
            timed_out(
                symbol,
                &format!("{} never matched", what.join(", ")),
                h.rank,
                start.elapsed(),
                h.exec_timeout.unwrap_or_default(),
            )
        }
    })
}
