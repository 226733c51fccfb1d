//! The unrolled schedule: each rank's events (point-to-point operations,
//! local copies, collectives, waits) at one world size and scalar
//! combination, as unrolling produces them and the checks of
//! `check/` read them.

use crate::compile::{CollKind, Prog};
use crate::ir::{Op, SpanId};
use crate::lin::Lin;
use crate::situation::Situation;

/// "No event" / "never".
pub(crate) const NONE: u32 = u32::MAX;

/// A region of one rank's buffer: elements `[start, end)`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Reg {
    pub(crate) buf: u32,
    pub(crate) start: Lin,
    pub(crate) end: Lin,
}

impl Reg {
    /// Its length.
    pub(crate) fn len(&self) -> Lin {
        self.end.sub(&self.start).unwrap_or_else(|_| Lin::constant(0))
    }
}

/// How a point-to-point operation is issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `send` / `recv` outside a batch.
    Blocking,
    /// `send` / `recv` inside a `batch`.
    Batch,
    /// `isend` / `irecv`.
    Nonblocking,
}

/// One point-to-point operation of a rank.
#[derive(Clone, Debug)]
pub(crate) struct P2p {
    pub(crate) send: bool,
    pub(crate) mode: Mode,
    pub(crate) peer: u32,
    pub(crate) tag: i64,
    /// Index into [`Unrolled::regs`].
    pub(crate) reg: u32,
    pub(crate) reduce: Option<Op>,
    pub(crate) stmt: u32,
    pub(crate) ctx: u32,
    /// The event that posts it.
    pub(crate) ev: u32,
    /// For `isend`/`irecv`: the `wait` event that completes it, or [`NONE`].
    pub(crate) done: u32,
    /// For `isend`/`irecv`: the handle slot.
    pub(crate) handle: u32,
    /// The matching operation `(rank, index)` (set by the matching check).
    pub(crate) partner: (u32, u32),
    /// The event of the partner's rank that posts the partner.
    pub(crate) partner_ev: u32,
}

/// A local `copy` (`op == None`) or `accumulate`.
#[derive(Clone, Debug)]
pub(crate) struct LocalCopy {
    pub(crate) src: Reg,
    pub(crate) dst: Reg,
    pub(crate) op: Option<Op>,
}

/// One collective call of a rank.
#[derive(Clone, Debug)]
pub(crate) struct CollCall {
    pub(crate) kind: CollKind,
    pub(crate) op: Option<Op>,
    /// Input region (the region of `broadcast` and in-place `all_reduce`).
    pub(crate) src: Option<Reg>,
    /// Output region when distinct from `src`.
    pub(crate) dst: Option<Reg>,
    /// Root, as a rank of the group.
    pub(crate) root: Option<i64>,
    /// Index into [`Unrolled::groups`].
    pub(crate) group: u32,
    /// The count parameter of `all_gatherv` and `all_to_allv`.
    pub(crate) counts: Option<u32>,
    /// This is the rank's `seq`-th collective on `group` (from 0).
    pub(crate) seq: u32,
}

/// What an event does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum EvKind {
    /// A blocking `send`/`recv`: index into [`RankTrace::ops`].
    Blocking(u32),
    /// A `batch`: ops `[first, end)`.
    Batch(u32, u32),
    /// `isend`/`irecv` posting op `i`.
    Post(u32),
    /// `wait`: ops `wait_ops[first..end]`.
    Wait(u32, u32),
    /// `copy`/`accumulate`: index into [`RankTrace::copies`].
    Copy(u32),
    /// A collective: index into [`RankTrace::colls`].
    Coll(u32),
}

/// One step of a rank, with the statement and loop context it came from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Event {
    pub(crate) kind: EvKind,
    pub(crate) stmt: u32,
    pub(crate) ctx: u32,
}

/// A buffer of one rank (parameters first, then one per executed `scratch`).
#[derive(Clone, Debug)]
pub(crate) struct BufInfo {
    pub(crate) len: Lin,
    /// The parameter index, for parameters.
    pub(crate) param: Option<u32>,
    pub(crate) name: String,
}

/// A request problem found while unrolling (reported by step 6).
#[derive(Clone, Debug)]
pub(crate) enum RequestIssue {
    /// `wait` of a handle that is not pending.
    Unknown {
        stmt: u32,
        ctx: u32,
        name: String,
        /// Whether the handle was defined and already waited.
        waited: bool,
    },
    /// Op `index` of the rank was never waited.
    Unwaited { op: u32 },
}

/// Everything one rank does.
#[derive(Clone, Debug, Default)]
pub(crate) struct RankTrace {
    pub(crate) events: Vec<Event>,
    pub(crate) ops: Vec<P2p>,
    pub(crate) copies: Vec<LocalCopy>,
    pub(crate) colls: Vec<CollCall>,
    pub(crate) wait_ops: Vec<u32>,
    pub(crate) bufs: Vec<BufInfo>,
    /// Loop variable values: an event's `ctx` is an offset here, followed
    /// by one value per enclosing loop of its statement.
    pub(crate) ctx: Vec<i64>,
    pub(crate) issues: Vec<RequestIssue>,
}

/// The unrolled schedule at one world size and scalar combination.
#[derive(Debug)]
pub(crate) struct Unrolled<'p, 's> {
    pub(crate) prog: &'p Prog<'s>,
    pub(crate) world: i64,
    pub(crate) scalars: Vec<i64>,
    pub(crate) ranks: Vec<RankTrace>,
    /// Member sets (sorted) of every group used; group 0 is the whole
    /// communicator.
    pub(crate) groups: Vec<Vec<u32>>,
    /// The distinct regions of point-to-point operations (ops refer to them
    /// by index: a schedule uses few distinct regions, and the passes then
    /// read 4 bytes per op instead of a whole region).
    pub(crate) regs: Vec<Reg>,
}

impl Unrolled<'_, '_> {
    /// The message context of an event of `rank`.
    pub(crate) fn at(&self, rank: u32, stmt: u32, ctx: u32) -> Situation<'_> {
        let trace = &self.ranks[rank as usize];
        let loops = self.prog.stmts.get(stmt as usize).map_or(&[][..], |i| &i.loops[..]);
        let start = ctx as usize;
        let vals = trace.ctx.get(start..start + loops.len()).unwrap_or(&[]);
        Situation {
            prog: self.prog,
            world: self.world,
            scalars: &self.scalars,
            loops,
            vals,
        }
    }

    /// The span of a statement.
    pub(crate) fn span(&self, stmt: u32) -> SpanId {
        self.prog
            .stmts
            .get(stmt as usize)
            .map_or(self.prog.s.span, |i| i.stmt.span)
    }
}
