//! What the ranks of one in-process device world share: their liveness
//! (the same as the host backend's, read by polling waits), a rendezvous for
//! ids that must reach every member of a new communicator, and per-group
//! state (abort, the point-to-point order ledger).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::lock;
use crate::backend::liveness::Liveness;
use crate::element::DataType;
use crate::error::{Error, Result};

/// Shared by every rank and communicator of one in-process device world.
pub(crate) struct DeviceWorld {
    pub(crate) liveness: Arc<Liveness>,
    /// Groups some of whose members have not taken their state yet, with
    /// how many have.
    groups: Mutex<HashMap<String, (Arc<GroupShared>, usize)>>,
    ids: Mutex<HashMap<String, (Vec<u8>, usize)>>,
    ids_cv: Condvar,
}

impl DeviceWorld {
    pub(crate) fn new(size: usize) -> Arc<DeviceWorld> {
        Arc::new(DeviceWorld {
            liveness: Liveness::new(size),
            groups: Mutex::new(HashMap::new()),
            ids: Mutex::new(HashMap::new()),
            ids_cv: Condvar::new(),
        })
    }

    /// The shared state of group `key`, one for its `members` ranks: the
    /// first creates it and the world keeps it until every member has taken
    /// it, so a member that finishes (and drops its handle) before another
    /// has even started does not leave that one with a state of its own.
    pub(crate) fn group(&self, key: &str, members: usize) -> Arc<GroupShared> {
        let mut groups = lock(&self.groups);
        let (g, taken) = groups
            .entry(key.to_owned())
            .or_insert_with(|| (Arc::new(GroupShared::default()), 0));
        *taken += 1;
        let g = Arc::clone(g);
        if *taken >= members {
            groups.remove(key);
        }
        g
    }

    /// Hands the bytes `make` produces (on the first of `members` callers) to
    /// every caller with the same `key`; fails after `timeout` or when `make`
    /// fails.
    pub(crate) fn exchange(
        &self,
        key: &str,
        members: usize,
        timeout: Duration,
        make: impl FnOnce() -> Result<Vec<u8>>,
    ) -> Result<Vec<u8>> {
        let mut ids = lock(&self.ids);
        if !ids.contains_key(key) {
            drop(ids);
            let bytes = make()?;
            ids = lock(&self.ids);
            ids.entry(key.to_owned()).or_insert((bytes, 0));
            self.ids_cv.notify_all();
        }
        let deadline = crate::options::deadline_after(timeout);
        loop {
            if let Some((bytes, taken)) = ids.get_mut(key) {
                *taken += 1;
                let out = bytes.clone();
                if *taken == members {
                    ids.remove(key);
                }
                return Ok(out);
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::Timeout {
                    operation: format!("exchanging the id of communicator `{key}`"),
                    rank: 0,
                    waited: timeout,
                    limit: timeout,
                });
            }
            ids = self
                .ids_cv
                .wait_timeout(ids, deadline - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }
}

/// What one message looked like to one end of a channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Envelope {
    pub(crate) tag: i64,
    pub(crate) count: usize,
    pub(crate) dtype: DataType,
}

#[derive(Default)]
struct Channel {
    sends: VecDeque<Envelope>,
    recvs: VecDeque<Envelope>,
    failed: Option<Error>,
}

/// State every member of one communicator shares in-process.
#[derive(Default)]
pub(crate) struct GroupShared {
    aborted: Mutex<Option<String>>,
    /// `(src, dst)` → the messages each end handed to the library, in order.
    ledger: Mutex<HashMap<(usize, usize), Channel>>,
}

impl GroupShared {
    pub(crate) fn abort(&self, reason: &str) {
        lock(&self.aborted).get_or_insert_with(|| reason.to_owned());
    }

    pub(crate) fn aborted(&self) -> Option<String> {
        lock(&self.aborted).clone()
    }

    /// Records that `src` hands a message to `dst` (`send`) or `dst` expects
    /// one from `src`. Device libraries match the messages of a rank pair in
    /// order, whatever their tags; when the two ends disagree on the tag,
    /// length or type of the k-th message, both get [`Error::Mismatch`]
    /// instead of data in the wrong buffer.
    pub(crate) fn record(&self, src: usize, dst: usize, send: bool, env: Envelope) -> Result<()> {
        let mut ledger = lock(&self.ledger);
        let ch = ledger.entry((src, dst)).or_default();
        if let Some(e) = &ch.failed {
            return Err(e.clone());
        }
        if send {
            ch.sends.push_back(env);
        } else {
            ch.recvs.push_back(env);
        }
        while let (Some(s), Some(r)) = (ch.sends.front().copied(), ch.recvs.front().copied()) {
            ch.sends.pop_front();
            ch.recvs.pop_front();
            if s != r {
                let hint = if s.tag == r.tag {
                    String::new()
                } else {
                    "; hint: device backends deliver the messages between two ranks in posting order whatever \
                     their tags: post sends and receives of different tags in the same order on both ranks"
                        .to_owned()
                };
                let e = Error::mismatch(format!(
                    "rank {src} sends {} elements of {} (tag {}) to rank {dst} as the message that rank {dst} \
                     receives as {} elements of {} (tag {}){hint}",
                    s.count, s.dtype, s.tag, r.count, r.dtype, r.tag
                ));
                ch.failed = Some(e.clone());
                return Err(e);
            }
        }
        Ok(())
    }

    /// The failure of a channel this rank takes part in, if the other end
    /// found one.
    pub(crate) fn channel_failure(&self, me: usize, peers: impl Iterator<Item = usize>) -> Option<Error> {
        let ledger = lock(&self.ledger);
        for p in peers {
            for key in [(me, p), (p, me)] {
                if let Some(e) = ledger.get(&key).and_then(|c| c.failed.clone()) {
                    return Some(e);
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(tag: i64, count: usize) -> Envelope {
        Envelope {
            tag,
            count,
            dtype: DataType::F32,
        }
    }

    #[test]
    fn ledger_pairs_messages_in_order_and_reports_a_tag_swap_to_both_ends() {
        let g = GroupShared::default();
        g.record(0, 1, true, env(1, 4)).unwrap();
        g.record(0, 1, true, env(2, 4)).unwrap();
        g.record(0, 1, false, env(1, 4)).unwrap();
        let e = g.record(0, 1, false, env(3, 4)).unwrap_err();
        assert!(
            matches!(&e, Error::Mismatch { message } if message.contains("posting order")),
            "{e}"
        );
        // the sender finds out when it polls its channels
        assert_eq!(g.channel_failure(0, [1].into_iter()), Some(e.clone()));
        assert_eq!(g.channel_failure(2, [3].into_iter()), None);
        // and the channel stays failed
        assert_eq!(g.record(0, 1, true, env(1, 4)), Err(e));
        // other channels are unaffected; length disagreements are mismatches too
        g.record(1, 0, false, env(0, 2)).unwrap();
        assert!(g.record(1, 0, true, env(0, 3)).is_err());
    }

    #[test]
    fn a_group_has_one_state_even_when_a_member_is_gone_before_another_comes() {
        let w = DeviceWorld::new(3);
        let first = w.group("g", 3);
        let first_ptr = Arc::as_ptr(&first);
        // the first member finishes before the others take the state
        drop(first);
        let second = w.group("g", 3);
        let third = w.group("g", 3);
        assert_eq!(Arc::as_ptr(&second), first_ptr);
        assert!(Arc::ptr_eq(&second, &third));
        // a later group under the same key starts afresh
        let next = w.group("g", 3);
        assert!(!Arc::ptr_eq(&next, &third));
    }

    #[test]
    fn ids_reach_every_member() {
        let w = DeviceWorld::new(3);
        let ids: Vec<Vec<u8>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..3)
                .map(|i| {
                    let w = &w;
                    s.spawn(move || {
                        w.exchange("k", 3, Duration::from_secs(5), || Ok(vec![i as u8; 4]))
                            .unwrap()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        assert!(ids.iter().all(|b| *b == ids[0]));
    }
}
