//! The point-to-point channels of one communicator: a mailbox per (source,
//! destination) pair. A send posts an offer of its buffer; a receive takes
//! the oldest offer of its channel and copies it, so a pair's messages match
//! in the order the sender's stream posted them, as HCCL's do. A send
//! completes when its offer was taken: sends are synchronous.

use std::collections::{HashMap, VecDeque};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

use crate::memory;
use crate::runtime::{lock, wait_until};

/// One send or receive of a rank: `bytes` bytes at `addr` to or from `peer`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Transfer {
    pub(crate) send: bool,
    pub(crate) peer: usize,
    pub(crate) addr: usize,
    pub(crate) bytes: usize,
}

/// Why an exchange did not complete.
#[derive(Debug)]
pub(crate) enum Stall {
    /// A message did not fit its receive (both ends fail).
    Failed(String),
    /// The deadline passed; these transfers were still pending.
    TimedOut(Vec<Transfer>),
}

/// A posted send.
struct Offer {
    addr: usize,
    bytes: usize,
    /// Set by the receive that took it.
    taken: Option<Result<(), String>>,
}

#[derive(Default)]
struct Boxes {
    /// Offers not yet taken, per (source, destination), oldest first.
    queues: HashMap<(usize, usize), VecDeque<u64>>,
    offers: HashMap<u64, Offer>,
    next: u64,
    /// Ranks whose handle was destroyed: their waits end at once.
    stopped: std::collections::HashSet<usize>,
}

impl Boxes {
    fn post(&mut self, src: usize, t: &Transfer) -> u64 {
        let id = self.next;
        self.next += 1;
        self.offers.insert(
            id,
            Offer {
                addr: t.addr,
                bytes: t.bytes,
                taken: None,
            },
        );
        self.queues.entry((src, t.peer)).or_default().push_back(id);
        id
    }

    /// Receives into `t` (of rank `dst`) the oldest offer of its channel, if
    /// there is one.
    fn take(&mut self, dst: usize, t: &Transfer) -> Option<Result<(), String>> {
        let id = self.queues.get_mut(&(t.peer, dst))?.pop_front()?;
        let offer = self.offers.get_mut(&id)?;
        let result = if offer.bytes == t.bytes {
            memory::copy(t.addr, offer.addr, t.bytes)
        } else {
            Err(format!(
                "rank {dst} receives {} bytes from rank {}, which sends {} bytes",
                t.bytes, t.peer, offer.bytes
            ))
        };
        offer.taken = Some(result.clone());
        Some(result)
    }

    /// What became of offer `id`, once taken (then it is forgotten).
    fn outcome(&mut self, id: u64) -> Option<Result<(), String>> {
        self.offers.get(&id)?.taken.as_ref()?;
        self.offers.remove(&id)?.taken
    }

    /// Withdraws offer `id` of `src` to `dst`: no receive reads its buffer
    /// after this.
    fn withdraw(&mut self, src: usize, dst: usize, id: u64) {
        if let Some(q) = self.queues.get_mut(&(src, dst)) {
            q.retain(|&o| o != id);
        }
        self.offers.remove(&id);
    }
}

/// The mailboxes of one communicator.
#[derive(Default)]
pub(crate) struct Mailbox {
    boxes: Mutex<Boxes>,
    cv: Condvar,
}

impl Mailbox {
    /// Ends the waits of rank `me` (its handle was destroyed): they fail at once.
    pub(crate) fn stop(&self, me: usize) {
        lock(&self.boxes).stopped.insert(me);
        self.cv.notify_all();
    }

    /// Runs the transfers of rank `me` together, as one `HcclBatchSendRecv`:
    /// posts every send, then takes each receive's message when it arrives.
    /// Returns when all completed, one failed, or `deadline` passed; sends
    /// that were not taken by then are withdrawn.
    pub(crate) fn exchange(&self, me: usize, transfers: &[Transfer], deadline: Option<Instant>) -> Result<(), Stall> {
        let mut boxes = lock(&self.boxes);
        let mut sends: Vec<(Transfer, u64)> = transfers
            .iter()
            .filter(|t| t.send)
            .map(|t| (*t, boxes.post(me, t)))
            .collect();
        let mut recvs: Vec<Transfer> = transfers.iter().filter(|t| !t.send).copied().collect();
        self.cv.notify_all();
        loop {
            let mut failure = None;
            let mut progress = false;
            recvs.retain(|t| match boxes.take(me, t) {
                None => true,
                Some(r) => {
                    progress = true;
                    failure = failure.take().or(r.err());
                    false
                }
            });
            sends.retain(|(_, id)| match boxes.outcome(*id) {
                None => true,
                Some(r) => {
                    failure = failure.take().or(r.err());
                    false
                }
            });
            if progress {
                self.cv.notify_all();
            }
            if let Some(message) = failure {
                Self::withdraw(&mut boxes, me, &sends);
                return Err(Stall::Failed(message));
            }
            if recvs.is_empty() && sends.is_empty() {
                return Ok(());
            }
            if boxes.stopped.contains(&me) {
                Self::withdraw(&mut boxes, me, &sends);
                return Err(Stall::Failed(
                    "the communicator was destroyed while its transfers waited for their peers".into(),
                ));
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                Self::withdraw(&mut boxes, me, &sends);
                let pending = sends.iter().map(|(t, _)| *t).chain(recvs).collect();
                return Err(Stall::TimedOut(pending));
            }
            boxes = wait_until(&self.cv, boxes, deadline);
        }
    }

    fn withdraw(boxes: &mut MutexGuard<'_, Boxes>, me: usize, sends: &[(Transfer, u64)]) {
        for (t, id) in sends {
            boxes.withdraw(me, t.peer, *id);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn buf(bytes: &[u8]) -> usize {
        let p = memory::alloc(bytes.len(), 0).unwrap() as usize;
        memory::write_all(&[(p, bytes.to_vec())]).unwrap();
        p
    }

    fn t(send: bool, peer: usize, addr: usize, bytes: usize) -> Transfer {
        Transfer {
            send,
            peer,
            addr,
            bytes,
        }
    }

    #[test]
    fn a_pair_matches_in_posting_order_and_a_batch_to_itself_completes() {
        let mb = Mailbox::default();
        let (a, b) = (buf(&[1, 2]), buf(&[3, 4]));
        let (x, y) = (buf(&[0, 0]), buf(&[0, 0]));
        std::thread::scope(|s| {
            s.spawn(|| {
                for addr in [a, b] {
                    mb.exchange(1, &[t(true, 0, addr, 2)], None).unwrap();
                }
            });
            for addr in [x, y] {
                mb.exchange(0, &[t(false, 1, addr, 2)], None).unwrap();
            }
        });
        assert_eq!(
            (memory::read(x, 2).unwrap(), memory::read(y, 2).unwrap()),
            (vec![1, 2], vec![3, 4])
        );
        let z = buf(&[0, 0]);
        mb.exchange(0, &[t(false, 0, z, 2), t(true, 0, a, 2)], None).unwrap();
        assert_eq!(memory::read(z, 2).unwrap(), [1, 2]);
    }

    #[test]
    fn an_unmatched_send_is_withdrawn_at_the_deadline() {
        let mb = Mailbox::default();
        let a = buf(&[9]);
        let deadline = Instant::now() + Duration::from_millis(30);
        let Err(Stall::TimedOut(pending)) = mb.exchange(0, &[t(true, 1, a, 1)], Some(deadline)) else {
            panic!("nobody receives");
        };
        assert_eq!((pending.len(), pending[0].peer), (1, 1));
        // A later receive does not see the withdrawn offer.
        let x = buf(&[0]);
        let deadline = Instant::now() + Duration::from_millis(30);
        assert!(matches!(
            mb.exchange(1, &[t(false, 0, x, 1)], Some(deadline)),
            Err(Stall::TimedOut(_))
        ));
        assert_eq!(memory::read(x, 1).unwrap(), [0]);
    }
}
