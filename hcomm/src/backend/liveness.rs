//! Rank liveness, shared by every transport: which ranks of a world are
//! running, finished or failed, the first failure that is a root cause, and
//! who to tell when that changes.
//!
//! A rank is *running* until every handle of its communicators is gone
//! ([`Presence`] dropped: *finished*) or it fails (its closure panicked or
//! returned an error, or its process went away: *failed*; the first failure
//! of a rank sticks). A rank any of whose threads panicked while holding one
//! of its communicator handles ([`Presence::note_panic`]) fails when its last
//! handle goes, whichever thread drops it: a helper thread that outlives the
//! panicking main thread does not make the rank look finished. Operations waiting on a rank that is no longer running
//! fail with [`Error::PeerFailed`] instead of hanging. Transports that block
//! on condition variables register a [`Watcher`] and are told of every
//! change; transports that poll (the device backends) just read
//! [`Liveness::state`].

use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use crate::error::Error;

/// What is known about one rank of the world.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum RankState {
    Running,
    /// Every handle of the rank is gone (its closure returned).
    Finished,
    /// The rank panicked or returned an error (`secondary`: itself the
    /// consequence of another rank's failure), or its process is gone.
    Failed {
        reason: String,
        secondary: bool,
    },
}

impl RankState {
    /// The error of an operation that waits on this rank (`rank` in the
    /// waiter's group); `unfinished` says what a finished rank left undone.
    /// `None` while the rank runs.
    pub(crate) fn blocking_error(&self, rank: usize, unfinished: impl FnOnce() -> String) -> Option<Error> {
        match self {
            RankState::Running => None,
            RankState::Failed { reason, .. } => Some(Error::PeerFailed {
                rank,
                reason: reason.clone(),
            }),
            RankState::Finished => Some(Error::PeerFailed {
                rank,
                reason: unfinished(),
            }),
        }
    }
}

/// What a finished peer left undone for a point-to-point operation that
/// waits on it (`dir`: the waiting operation's direction).
pub(crate) fn unmatched(dir: crate::backend::Dir, tag: i64) -> String {
    let missing = match dir {
        crate::backend::Dir::Send => "receive",
        crate::backend::Dir::Recv => "send",
    };
    format!("it finished without posting the matching {missing} (tag {tag})")
}

/// Told of every change of a rank's state.
pub(crate) trait Watcher: Send + Sync {
    /// Global rank `rank` changed to `state`.
    fn rank_changed(&self, rank: usize, state: &RankState);
}

/// The liveness of every rank of one world.
pub(crate) struct Liveness {
    states: Mutex<Vec<RankState>>,
    first_failure: Mutex<Option<(usize, Error)>>,
    watchers: Mutex<Vec<Weak<dyn Watcher>>>,
}

/// Locks a mutex, recovering the data if a panicking thread poisoned it: the
/// state guarded here is updated in single steps and stays consistent.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Liveness {
    /// A world of `size` running ranks.
    pub(crate) fn new(size: usize) -> Arc<Liveness> {
        Arc::new(Liveness {
            states: Mutex::new(vec![RankState::Running; size]),
            first_failure: Mutex::new(None),
            watchers: Mutex::new(Vec::new()),
        })
    }

    /// The state of global rank `rank` (running if out of range).
    pub(crate) fn state(&self, rank: usize) -> RankState {
        lock(&self.states).get(rank).cloned().unwrap_or(RankState::Running)
    }

    /// Tells `watcher` of every later change, as long as it lives.
    pub(crate) fn watch(&self, watcher: Weak<dyn Watcher>) {
        let mut watchers = lock(&self.watchers);
        watchers.retain(|w| w.strong_count() > 0);
        watchers.push(watcher);
    }

    /// Marks `rank` failed with `error` (its first failure sticks); the first
    /// root cause (an error that is not itself a consequence of another
    /// failure) is kept for [`Liveness::first_failure`].
    pub(crate) fn fail(&self, rank: usize, error: &Error) {
        if self.set_failed(rank, error.to_string(), error.is_secondary()) {
            let mut first = lock(&self.first_failure);
            if first
                .as_ref()
                .is_none_or(|(_, e)| e.is_secondary() && !error.is_secondary())
            {
                *first = Some((rank, error.clone()));
            }
        }
    }

    /// Marks `rank` failed for `reason` known only as text (a rank of another
    /// process); returns whether this changed its state.
    pub(crate) fn set_failed(&self, rank: usize, reason: String, secondary: bool) -> bool {
        self.set(rank, |s| {
            (!matches!(s, RankState::Failed { .. })).then_some(RankState::Failed { reason, secondary })
        })
    }

    /// Marks `rank` finished unless it failed.
    pub(crate) fn finish(&self, rank: usize) {
        self.set(rank, |s| (*s == RankState::Running).then_some(RankState::Finished));
    }

    /// Applies `change` to the state of `rank` and tells the watchers when it
    /// made one.
    fn set(&self, rank: usize, change: impl FnOnce(&RankState) -> Option<RankState>) -> bool {
        let new = {
            let mut states = lock(&self.states);
            let Some(state) = states.get_mut(rank) else {
                return false;
            };
            let Some(new) = change(state) else {
                return false;
            };
            *state = new.clone();
            new
        };
        let watchers: Vec<Arc<dyn Watcher>> = lock(&self.watchers).iter().filter_map(Weak::upgrade).collect();
        for w in watchers {
            w.rank_changed(rank, &new);
        }
        true
    }

    /// The first of `members` (global ranks) that failed as a root cause
    /// (not because of another rank), as the error of an operation waiting
    /// on the group: [`Error::PeerFailed`] with its index in `members`.
    pub(crate) fn root_failure(&self, members: &[usize]) -> Option<Error> {
        let states = lock(&self.states);
        members.iter().enumerate().find_map(|(i, &m)| match states.get(m) {
            Some(RankState::Failed {
                reason,
                secondary: false,
            }) => Some(Error::PeerFailed {
                rank: i,
                reason: reason.clone(),
            }),
            _ => None,
        })
    }

    /// Every rank that failed as a root cause, with its reason.
    pub(crate) fn root_failures(&self) -> Vec<(usize, String)> {
        lock(&self.states)
            .iter()
            .enumerate()
            .filter_map(|(i, s)| match s {
                RankState::Failed {
                    reason,
                    secondary: false,
                } => Some((i, reason.clone())),
                _ => None,
            })
            .collect()
    }

    /// The first failure that is a root cause (not itself a consequence of
    /// another rank's failure), else the first failure, with its rank.
    pub(crate) fn first_failure(&self) -> Option<(usize, Error)> {
        lock(&self.first_failure).clone()
    }
}

/// Marks a rank finished when its last handle is gone (failed, if one of
/// its threads panicked holding a handle).
pub(crate) struct Presence {
    liveness: Arc<Liveness>,
    rank: usize,
    /// Set when a thread dropped a handle of this rank while panicking.
    panicked: OnceLock<&'static str>,
}

/// Why a rank whose program panicked with a communicator alive failed.
const DROPPED_PANICKING: &str = "its communicator was dropped while the program panicked";
/// The same, where another thread dropped the last handle afterwards.
const HELD_PANICKING: &str =
    "a thread of it panicked holding its communicator (another thread dropped the last handle)";

impl Presence {
    pub(crate) fn new(liveness: &Arc<Liveness>, rank: usize) -> Arc<Presence> {
        Arc::new(Presence {
            liveness: Arc::clone(liveness),
            rank,
            panicked: OnceLock::new(),
        })
    }

    /// Records that this rank failed with `error`.
    pub(crate) fn fail(&self, error: &Error) {
        self.liveness.fail(self.rank, error);
    }

    /// Records that a thread dropped a handle of this rank while panicking,
    /// so the rank fails (rather than finishes) when its last handle goes.
    pub(crate) fn note_panic(&self) {
        let _ = self.panicked.set(HELD_PANICKING);
    }
}

impl Drop for Presence {
    fn drop(&mut self) {
        let message = if std::thread::panicking() {
            // The rank's program panicked with its communicator alive (a
            // launcher that catches the panic has recorded it already).
            Some(DROPPED_PANICKING)
        } else {
            self.panicked.get().copied()
        };
        match message {
            Some(message) => self.liveness.fail(
                self.rank,
                &Error::Panicked {
                    rank: self.rank,
                    message: message.to_owned(),
                },
            ),
            None => self.liveness.finish(self.rank),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    struct Count(AtomicUsize);

    impl Watcher for Count {
        fn rank_changed(&self, _rank: usize, _state: &RankState) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn first_root_cause_wins_and_watchers_hear_each_change() {
        let l = Liveness::new(3);
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let weak: Weak<dyn Watcher> = Arc::downgrade(&(Arc::clone(&count) as Arc<dyn Watcher>));
        l.watch(weak);
        let p0 = Presence::new(&l, 0);
        l.fail(
            1,
            &Error::PeerFailed {
                rank: 2,
                reason: "x".into(),
            },
        );
        p0.fail(&Error::Config { message: "root".into() });
        // a second failure of rank 0 and finishing a failed rank change nothing
        p0.fail(&Error::Config {
            message: "later".into(),
        });
        drop(p0);
        assert!(matches!(l.first_failure(), Some((0, Error::Config { message })) if message == "root"));
        assert!(matches!(l.state(1), RankState::Failed { secondary: true, .. }));
        drop(Presence::new(&l, 2));
        assert_eq!(l.state(2), RankState::Finished);
        assert_eq!(count.0.load(Ordering::Relaxed), 3);
        assert_eq!(
            l.state(2).blocking_error(5, || "gone".into()),
            Some(Error::PeerFailed {
                rank: 5,
                reason: "gone".into()
            })
        );
        assert_eq!(l.state(7), RankState::Running);
        // rank 0 failed as a root cause, rank 1 only because of rank 2
        assert!(matches!(
            l.root_failure(&[2, 1, 0]),
            Some(Error::PeerFailed { rank: 2, .. })
        ));
        assert_eq!(l.root_failure(&[1, 2]), None);
        assert_eq!(
            l.root_failures(),
            vec![(0, Error::Config { message: "root".into() }.to_string())]
        );
    }

    #[test]
    fn a_panic_noted_on_one_thread_fails_the_rank_when_another_drops_the_last_handle() {
        let l = Liveness::new(2);
        let p = Presence::new(&l, 1);
        let helper = Arc::clone(&p);
        let panicking = std::thread::spawn(move || {
            struct Handle(Arc<Presence>);
            impl Drop for Handle {
                fn drop(&mut self) {
                    if std::thread::panicking() {
                        self.0.note_panic();
                    }
                }
            }
            let _h = Handle(p);
            panic!("the rank's main thread");
        });
        assert!(panicking.join().is_err());
        assert_eq!(l.state(1), RankState::Running, "the helper still holds a handle");
        drop(helper);
        assert_eq!(
            l.state(1).blocking_error(1, || "finished".into()),
            Some(Error::PeerFailed {
                rank: 1,
                reason: Error::Panicked {
                    rank: 1,
                    message: HELD_PANICKING.into()
                }
                .to_string()
            })
        );
        // without a panic, the last drop is a finish
        drop(Presence::new(&l, 0));
        assert_eq!(l.state(0), RankState::Finished);
    }
}
