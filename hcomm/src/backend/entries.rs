//! The entry agreement check of `comm_schedule!` calls between ranks that
//! share no memory (one process per rank): what a rank tells its ring
//! neighbours about its k-th schedule call, and the book a process keeps of
//! its own calls and its neighbours' to compare them.
//!
//! A rank sends its [`EntryNote`] to its two ring neighbours, in front of its
//! first message to each (in the same write) or when it next waits, and
//! compares it with the neighbours' notes that already arrived; a note that
//! arrives later is compared with the rank's own when it arrives. Messages on
//! a connection arrive in order, so a neighbour's note is compared before any
//! of that neighbour's data for the call is taken; a rank that blocks has
//! sent its notes, so a disagreement never leaves ranks waiting.
//! Agreement of neighbours is agreement of all; a pair that disagrees is seen
//! by both of its ranks, which fail the call with `Err(Mismatch)` naming both
//! calls, tell every member, and abort the group so no rank keeps waiting.
//! The transport (`host/proc`) carries the messages; the rules are here.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::liveness::lock;
use crate::error::Error;

/// One rank's announced schedule call, as its neighbours compare it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct EntryNote {
    /// The call's place among the communicator's schedule calls.
    pub(crate) seq: u64,
    /// Equal for equal calls in every process of the job; every failure
    /// before entry has the same one.
    pub(crate) fingerprint: u64,
    /// The schedule's name.
    pub(crate) schedule: String,
    /// The call as a message shows it: `with T = f32, root = 0, n = 4`, or
    /// `failed before entering it: ...`.
    pub(crate) call: String,
}

/// What an entry message says.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) enum EntryMsg {
    /// The sender's call.
    Call(EntryNote),
    /// The sender found ranks disagreeing on call `seq`: every member
    /// reports `message` as the call's `Mismatch`.
    Disagreement { seq: u64, message: String },
}

/// Calls per group whose own notes are kept for late neighbours' notes.
const KEPT: u64 = 64;

/// The message naming two disagreeing calls (`a` of rank `ra`, `b` of
/// rank `rb`), ranks in increasing order.
pub(crate) fn describe(ra: usize, a: &EntryNote, rb: usize, b: &EntryNote) -> String {
    let (lo, a, hi, b) = if ra < rb { (ra, a, rb, b) } else { (rb, b, ra, a) };
    if a.schedule == b.schedule {
        format!(
            "ranks {lo} and {hi} disagree on their call of `{}` (every rank must pass the same scalars and lengths): rank {lo} {}; rank {hi} {}",
            a.schedule, a.call, b.call
        )
    } else {
        format!(
            "ranks {lo} and {hi} disagree on which schedule they call (every rank must call the same schedules in the same order): rank {lo} called `{}` {}; rank {hi} called `{}` {}",
            a.schedule, a.call, b.schedule, b.call
        )
    }
}

/// One group's notes in this process.
#[derive(Default)]
struct Book {
    /// Global rank of each member, in group order; this rank's place.
    members: Vec<usize>,
    me: usize,
    /// This rank's last notes, oldest first.
    mine: VecDeque<EntryNote>,
    /// Neighbours' notes, by (global rank, seq).
    theirs: HashMap<(usize, u64), EntryNote>,
    /// The disagreement of each call found to have one.
    failures: Vec<(u64, Error)>,
}

impl Book {
    fn rank_of(&self, global: usize) -> usize {
        self.members.iter().position(|&m| m == global).unwrap_or(global)
    }

    /// The first disagreement recorded for `seq`, else `e` (now recorded).
    fn settle(&mut self, seq: u64, e: Error) -> Error {
        if let Some((_, first)) = self.failures.iter().find(|(s, _)| *s == seq) {
            return first.clone();
        }
        self.failures.push((seq, e.clone()));
        e
    }

    /// The disagreement on call `seq` that `message` describes, as found
    /// (the first recorded for the call, if another was).
    fn found(&mut self, seq: u64, message: String) -> Found {
        Found {
            seq,
            members: self.members.clone(),
            error: self.settle(seq, Error::mismatch(message)),
        }
    }
}

/// A disagreement this process found, to be told to the group's members.
pub(crate) struct Found {
    /// The call's sequence number.
    pub(crate) seq: u64,
    /// Global ranks of the group's members.
    pub(crate) members: Vec<usize>,
    /// The call's `Mismatch` (the first found for it).
    pub(crate) error: Error,
}

/// The notes of every group of this process's rank, by group id.
#[derive(Default)]
pub(crate) struct EntryBook {
    groups: Mutex<HashMap<u64, Book>>,
}

/// The global ranks of the ring neighbours of place `me` among `members`.
pub(crate) fn neighbours(members: &[usize], me: usize) -> impl Iterator<Item = usize> + '_ {
    let n = members.len();
    let next = members[(me + 1) % n];
    let prev = members[(me + n - 1) % n];
    std::iter::once(next).chain((prev != next).then_some(prev))
}

impl EntryBook {
    /// Records this rank's `note` in `group` (place `me` among `members`)
    /// and compares it with the neighbours' notes already here.
    pub(crate) fn mine(&self, group: u64, members: &[usize], me: usize, note: &EntryNote) -> Option<Found> {
        let mut groups = lock(&self.groups);
        let book = groups.entry(group).or_default();
        if book.members.is_empty() {
            book.members = members.to_vec();
            book.me = me;
        }
        let seq = note.seq;
        if book.theirs.len() as u64 > 4 * KEPT {
            book.theirs.retain(|&(_, s), _| s + KEPT >= seq);
        }
        while book.mine.len() as u64 >= KEPT {
            book.mine.pop_front();
        }
        book.mine.push_back(note.clone());
        let clash = neighbours(members, me).find_map(|q| {
            let theirs = book.theirs.get(&(q, seq))?;
            (theirs.fingerprint != note.fingerprint).then(|| describe(book.rank_of(q), theirs, me, note))
        });
        Some(book.found(seq, clash?))
    }

    /// Records the note of global rank `from` in `group` and compares it
    /// with this rank's note of the same call, if it made it already.
    pub(crate) fn theirs(&self, group: u64, from: usize, note: EntryNote) -> Option<Found> {
        let mut groups = lock(&self.groups);
        let book = groups.entry(group).or_default();
        let seq = note.seq;
        let clash = book
            .mine
            .iter()
            .find(|m| m.seq == seq)
            .filter(|m| m.fingerprint != note.fingerprint)
            .map(|m| describe(book.me, m, book.rank_of(from), &note));
        book.theirs.insert((from, seq), note);
        Some(book.found(seq, clash?))
    }

    /// Records a disagreement a member found for call `seq` of `group`.
    pub(crate) fn told(&self, group: u64, seq: u64, message: String) {
        let mut groups = lock(&self.groups);
        groups.entry(group).or_default().settle(seq, Error::mismatch(message));
    }

    /// The disagreement found for call `seq` of `group`, if any.
    pub(crate) fn failure(&self, group: u64, seq: u64) -> Option<Error> {
        let groups = lock(&self.groups);
        let book = groups.get(&group)?;
        book.failures.iter().find(|(s, _)| *s == seq).map(|(_, e)| e.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(seq: u64, fingerprint: u64, call: &str) -> EntryNote {
        EntryNote {
            seq,
            fingerprint,
            schedule: "bcast".into(),
            call: call.into(),
        }
    }

    const SAME: &str = "ranks 1 and 2 disagree on their call of `bcast` (every rank must pass the same scalars and lengths): rank 1 with root = 0; rank 2 with root = 1";

    #[test]
    fn a_disagreement_is_found_by_whichever_side_sees_both_notes() {
        let members = [10, 11, 12, 13];
        // rank 1's own call first, rank 2's note later
        let b = EntryBook::default();
        assert!(b.mine(7, &members, 1, &note(0, 5, "with root = 0")).is_none());
        let found = b.theirs(7, 12, note(0, 6, "with root = 1")).unwrap();
        assert_eq!(found.error, Error::mismatch(SAME));
        assert_eq!((found.seq, found.members), (0, members.to_vec()));
        assert_eq!(b.failure(7, 0), Some(Error::mismatch(SAME)));
        // rank 2's note first, then rank 1's own call
        let b = EntryBook::default();
        assert!(b.theirs(7, 12, note(0, 6, "with root = 1")).is_none());
        let found = b.mine(7, &members, 1, &note(0, 5, "with root = 0")).unwrap();
        assert_eq!(found.error, Error::mismatch(SAME));
        // agreeing calls, a later call, and a non-neighbour's note
        let b = EntryBook::default();
        assert!(b.theirs(7, 12, note(0, 5, "with root = 0")).is_none());
        assert!(b.theirs(7, 13, note(1, 9, "with root = 9")).is_none());
        assert!(b.mine(7, &members, 1, &note(0, 5, "with root = 0")).is_none());
        assert!(b.mine(7, &members, 1, &note(1, 5, "with root = 0")).is_none());
        assert_eq!(b.failure(7, 0), None);
    }

    #[test]
    fn the_first_disagreement_of_a_call_is_the_one_reported() {
        let b = EntryBook::default();
        b.told(3, 4, "first".into());
        assert!(b.mine(3, &[0, 1], 0, &note(4, 1, "x")).is_none());
        let found = b.theirs(3, 1, note(4, 2, "y")).unwrap();
        assert_eq!(found.error, Error::mismatch("first"));
        assert_eq!(b.failure(3, 4), Some(Error::mismatch("first")));
        assert_eq!(b.failure(3, 5), None);
    }

    #[test]
    fn different_schedules_are_named() {
        let mut other = note(0, 2, "with T = u8");
        other.schedule = "ring".into();
        assert_eq!(
            describe(1, &other, 0, &note(0, 1, "with T = u8")),
            "ranks 0 and 1 disagree on which schedule they call (every rank must call the same schedules in the same order): rank 0 called `bcast` with T = u8; rank 1 called `ring` with T = u8"
        );
    }

    #[test]
    fn neighbours_of_two_and_three() {
        assert_eq!(neighbours(&[4, 9], 0).collect::<Vec<_>>(), vec![9]);
        assert_eq!(neighbours(&[4, 9, 2], 0).collect::<Vec<_>>(), vec![9, 2]);
    }
}
