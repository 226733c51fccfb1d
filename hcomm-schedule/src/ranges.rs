//! Step 2: peers and roots inside the communicator (or group), no blocking
//! message to self, regions inside their buffers, chunks that divide evenly.
//! The unroller calls these as it evaluates each statement.

use crate::compile::{CRegion, P2pStmt};
use crate::diag::{DiagKind, Diagnostic};
use crate::ir::{BinOp, Expr, ExprKind, Func, NameKind, SpanId};
use crate::lin::Lin;
use crate::situation::Situation;

/// A peer outside `0..world`; `written` is the peer as the statement
/// writes it (for the hint).
pub(crate) fn peer_out_of_range(
    sit: &Situation<'_>,
    rank: u32,
    p: &P2pStmt<'_>,
    peer: i64,
    written: Option<&Expr>,
) -> Diagnostic {
    let verb = if p.send { "sends to" } else { "receives from" };
    let d = Diagnostic::new(
        DiagKind::RankOutOfRange,
        p.peer.span,
        format!("{sit}, rank {rank} {verb} {peer}, which is not in `0..world`"),
    );
    d.with_hint(peer_hint(sit, rank, written))
}

/// How a peer is formed, for the hint of [`peer_out_of_range`].
#[derive(PartialEq)]
enum PeerShape {
    /// `rank ± k` and the like: a ring's neighbour, which `% world` wraps.
    Ring,
    /// `rank ^ d`, `rank + pow2(k)`, `.. % m`: a partner that only some
    /// world sizes have (or one already wrapped).
    Partner,
    /// A name: either.
    Unknown,
}

fn peer_shape(e: &Expr) -> PeerShape {
    fn doubling(e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Binary(op, a, b) => {
                matches!(op, BinOp::BitXor | BinOp::Shl | BinOp::Mul | BinOp::Rem) || doubling(a) || doubling(b)
            }
            ExprKind::Unary(_, a) => doubling(a),
            ExprKind::Call(f, args) => matches!(f, Func::Pow2) || args.iter().any(doubling),
            ExprKind::Int(_) | ExprKind::Name(_) | ExprKind::Count(_) => false,
        }
    }
    fn reads_rank(e: &Expr) -> bool {
        match &e.kind {
            ExprKind::Binary(_, a, b) => reads_rank(a) || reads_rank(b),
            ExprKind::Unary(_, a) => reads_rank(a),
            ExprKind::Call(_, args) => args.iter().any(reads_rank),
            ExprKind::Name(n) => n.kind == NameKind::Rank,
            ExprKind::Int(_) | ExprKind::Count(_) => false,
        }
    }
    if doubling(e) {
        PeerShape::Partner
    } else if reads_rank(e) {
        PeerShape::Ring
    } else {
        PeerShape::Unknown
    }
}

/// `% world` for a ring's neighbour; a guard or a `#[requires]` for a
/// partner that the world size does not provide (the schedule's own
/// `#[requires]` named when it lets this size through).
fn peer_hint(sit: &Situation<'_>, rank: u32, written: Option<&Expr>) -> String {
    const WRAP: &str = "wrap the peer with `% world` (`%` is Euclidean, so `(rank - 1) % world` wraps too)";
    let w = sit.world;
    let requires = if sit.prog.s.requires.is_empty() {
        "limit the world sizes with `#[requires(..)]` (e.g. `#[requires(is_pow2(world))]`)".to_owned()
    } else {
        format!("tighten the schedule's `#[requires]`, which lets world = {w} through")
    };
    match written.map(peer_shape) {
        Some(PeerShape::Ring) | None => WRAP.to_owned(),
        Some(PeerShape::Partner) => {
            let e = written.map(ToString::to_string).unwrap_or_default();
            format!(
                "rank {rank} has no partner `{e}` at world = {w}: guard the statement (`if {e} < world {{ .. }}`), or {requires}"
            )
        }
        Some(PeerShape::Unknown) => {
            let e = written.map(ToString::to_string).unwrap_or_default();
            format!(
                "{WRAP}; if rank {rank} has no partner at world = {w}, guard the statement (`if {e} < world {{ .. }}`), or {requires}"
            )
        }
    }
}

/// A blocking `send` to (or `recv` from) the caller itself whose matching
/// operation the rank has not posted before it.
pub(crate) fn self_message(sit: &Situation<'_>, rank: u32, send: bool, span: SpanId) -> Diagnostic {
    let (kind, what) = if send {
        (DiagKind::SendToSelf, "sends to itself")
    } else {
        (DiagKind::RecvFromSelf, "receives from itself")
    };
    Diagnostic::new(
        kind,
        span,
        format!(
            "{sit}, rank {rank} {what} with a blocking `{}` before posting the matching `{}`, which can never complete",
            if send { "send" } else { "recv" },
            if send { "irecv" } else { "isend" }
        ),
    )
    .with_hint("use `copy` for a local move, post the matching operation first with `isend`/`irecv`, or put the matching `send` and `recv` in one `batch`")
}

/// A slice outside its base region.
pub(crate) fn slice_out_of_bounds(
    sit: &Situation<'_>,
    rank: u32,
    r: &CRegion<'_>,
    start: &Lin,
    end: &Lin,
    base_len: &Lin,
) -> Diagnostic {
    let names = &sit.prog.len_names;
    let zero = Lin::constant(0);
    let when = crate::lin::first_violation(&[(&zero, start), (start, end), (end, base_len)])
        .filter(|p| !p.is_empty())
        .map_or(String::new(), |p| {
            format!(", which fails when {}", crate::lin::point_text(&p, names))
        });
    Diagnostic::new(
        DiagKind::RegionOutOfBounds,
        r.ir.span,
        format!(
            "{sit}, rank {rank} uses `{}` = elements {}..{} of a region of length {}{when}",
            r.ir,
            start.display(names),
            end.display(names),
            base_len.display(names)
        ),
    )
}

/// A chunk index outside `0..parts`.
pub(crate) fn chunk_out_of_bounds(
    sit: &Situation<'_>,
    rank: u32,
    r: &CRegion<'_>,
    idx: &Lin,
    parts: i64,
    span: SpanId,
) -> Diagnostic {
    Diagnostic::new(
        DiagKind::RegionOutOfBounds,
        span,
        format!(
            "{sit}, rank {rank} uses `{}` with chunk index {}, which is not in `0..{parts}`",
            r.ir,
            idx.display(&sit.prog.len_names)
        ),
    )
}

/// A part index outside `0..world`.
pub(crate) fn part_out_of_range(
    sit: &Situation<'_>,
    rank: u32,
    r: &CRegion<'_>,
    index: i64,
    world: i64,
    span: SpanId,
) -> Diagnostic {
    Diagnostic::new(
        DiagKind::RegionOutOfBounds,
        span,
        format!(
            "{sit}, rank {rank} uses `{}` with part index {index}, which is not in `0..{world}`",
            r.ir
        ),
    )
    .with_hint("a line of counts has one part per rank: wrap the index with `% world`")
}

/// A chunk of a region whose length the part count does not divide.
pub(crate) fn uneven_chunk(sit: &Situation<'_>, rank: u32, r: &CRegion<'_>, len: &Lin, parts: i64) -> Diagnostic {
    Diagnostic::new(
        DiagKind::UnevenChunk,
        r.ir.span,
        format!(
            "{sit}, rank {rank} divides a region of length {} into {parts} chunks in `{}`",
            len.display(&sit.prog.len_names),
            r.ir
        ),
    )
    .with_hint("a region's length must be a multiple of its chunk count for every value of the length variables")
}

/// A collective root outside the group.
pub(crate) fn root_out_of_range(
    sit: &Situation<'_>,
    rank: u32,
    root: i64,
    group_size: i64,
    subgroup: bool,
    span: SpanId,
) -> Diagnostic {
    let of = if subgroup {
        format!("`0..{group_size}` (the ranks of its `over` group)")
    } else {
        "`0..world`".to_owned()
    };
    Diagnostic::new(
        DiagKind::RankOutOfRange,
        span,
        format!("{sit}, rank {rank} names root {root}, which is not in {of}"),
    )
}
