//! What a backend offers the layers above it besides its operations: the
//! one-shot collectives' shared memory, how the ranks of a group compare
//! their `comm_schedule!` calls, whether schedules run through plans, and
//! what keeps a rank running for its peers. A backend states all of it in
//! one [`Capabilities`] value ([`super::Backend::capabilities`]); the layers
//! above read it and never name a backend's own types.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use super::entries::EntryNote;
use super::liveness::Presence;
use crate::error::{Error, Result};
use crate::header::CollHeader;

/// What one backend (one rank of one group) offers the layers above.
#[derive(Clone, Copy)]
pub(crate) struct Capabilities<'a> {
    /// Memory every rank of the group reads, for the one-shot collectives;
    /// `None` where ranks share none.
    pub(crate) board: Option<&'a dyn Board>,
    /// How the ranks compare their `comm_schedule!` calls at entry.
    pub(crate) entries: EntryRoute<'a>,
    /// How this backend runs a schedule's statements.
    pub(crate) issue: Issue,
    /// What keeps this rank running for its peers, where the backend holds
    /// it: a handle dropped by a panicking thread notes the panic there.
    pub(crate) presence: Option<&'a Presence>,
}

/// How a backend runs the statements of a `comm_schedule!` call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Issue {
    /// Each statement as it runs: the backend has tagged channels and
    /// progresses non-blocking operations during collectives.
    AsWritten,
    /// Recorded, then issued in the order of the schedule's plan: the
    /// backend has no tags and issues each rank's calls in order (device
    /// libraries).
    Plans,
}

/// How the ranks of a group tell each other which `comm_schedule!` call
/// they entered (the check itself is `crate::entry`).
#[derive(Clone, Copy)]
pub(crate) enum EntryRoute<'a> {
    /// The ranks share memory: the state the group's ranks share, whose
    /// identity names the group (and whose life is the group's).
    Shared(&'a Arc<dyn Any + Send + Sync>),
    /// The backend carries each rank's note to its ring neighbours ahead of
    /// the call's data.
    Carried(&'a dyn EntryCarrier),
    /// Neither: the ranks exchange their notes with an all-gather on the
    /// backend itself.
    Exchanged,
}

/// A backend that carries entry notes between ranks that share no memory
/// (see [`super::entries`]).
pub(crate) trait EntryCarrier: Sync {
    /// Tells the ranks that compare it (ring neighbours) of this rank's call
    /// `note` and compares it with theirs: `Err(Mismatch)` naming both calls
    /// on a disagreement.
    fn announce(&self, note: &EntryNote) -> Result<()>;

    /// The disagreement found for call `seq`, by this rank or another.
    fn failure(&self, seq: u64) -> Option<Error>;
}

/// Memory every rank of a group reads: a one-shot collective is one
/// [`Board::exchange`] per rank.
pub(crate) trait Board: Sync {
    /// Bytes a rank may contribute to one exchange.
    fn capacity(&self) -> usize;

    /// One exchange of the collective `header`: `fill` writes this rank's
    /// `len` bytes (at most [`Board::capacity`]), then `take(rank, bytes)`
    /// is called with every rank's, in rank order (8-aligned, as every
    /// element type needs). Ranks that called
    /// different collectives get `Err(Mismatch)`.
    fn exchange(
        &self,
        header: &CollHeader,
        len: usize,
        timeout: Duration,
        fill: &mut dyn FnMut(&mut [u8]),
        take: &mut dyn FnMut(usize, &[u8]),
    ) -> Result<()>;
}
