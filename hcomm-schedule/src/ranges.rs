//! Step 2: peers and roots inside the communicator (or group), no blocking
//! message to self, regions inside their buffers, chunks that divide evenly.
//! The unroller calls these as it evaluates each statement.

use crate::compile::{CRegion, P2pStmt};
use crate::diag::{DiagKind, Diagnostic};
use crate::ir::{Expr, SpanId};
use crate::lin::Lin;
use crate::peer_hint::peer_hint;
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
    d.with_hint(peer_hint(sit, rank, p.send, peer, written))
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
