//! Runs: the coarsest cutting of every rank's buffers into intervals that
//! every data move carries whole (language reference, section 10, "Runs").
//!
//! Each buffer of each rank is cut at its ends, at the bounds of every
//! region a statement of that rank names in it, and (for the
//! postcondition's output) at the bounds of the blocks the postcondition
//! expects. A move of `src[a..b]` to `dst[c..d]` (a copy, an `accumulate`,
//! a message from the send's region to the receive's, a collective's
//! blocks; see [`collective_moves`]) then carries each
//! cut strictly inside one region to the same offset in the other, both
//! ways, until no move adds a cut. At that fixed point every move maps the
//! intervals of its source onto the intervals of its destination one to
//! one, so an interval that starts as one run of consecutive symbols
//! (`rank`, `buffer`, `i..i + len`) holds one run of the same length after
//! every move, and the symbolic run can move one symbol per interval: its
//! verdict is the element-by-element run's, whatever the block size.

use std::collections::{BTreeSet, HashMap};

use crate::compile::CollKind;
use crate::ir::PostKind;
use crate::lin::Lin;
use crate::trace::{Reg, Unrolled};

/// Per buffer of each rank (rank by rank, buffers in order, as the
/// symbolic run lays them out): the sorted element offsets where its
/// intervals start, then its length.
pub(crate) type Cuts = Vec<Vec<usize>>;

/// A region at a point: (buffer slot, first element, end).
type Span = (usize, usize, usize);

/// The cuts at `point`, or `Err(count)` when they pass `limit` in all
/// (`count` then counts them so far). `None` when the schedule has
/// `all_gatherv` or `all_to_allv` (their parts follow the counts), or a
/// buffer of 2^32 elements or more (the caller keeps one symbol per
/// element group then).
pub(crate) fn cuts(un: &Unrolled<'_, '_>, point: &[i64], limit: usize) -> Option<Result<Cuts, usize>> {
    let at = |l: &Lin| usize::try_from(l.eval_at(point)?).ok();
    let mut first = Vec::with_capacity(un.ranks.len() + 1);
    let mut sets: Vec<BTreeSet<usize>> = Vec::new();
    let mut lens = Vec::new();
    for t in &un.ranks {
        first.push(sets.len());
        for b in &t.bufs {
            // runs are named by their first element's offset, a `u32`
            let len = at(&b.len).filter(|&l| u32::try_from(l).is_ok())?;
            sets.push(BTreeSet::from([0, len]));
            lens.push(len);
        }
    }
    first.push(sets.len());
    let slot = |r: usize, b: u32| -> Option<usize> {
        let s = first.get(r)? + b as usize;
        (s < *first.get(r + 1)?).then_some(s)
    };
    let span = |r: usize, reg: &Reg| -> Option<Span> {
        let s = slot(r, reg.buf)?;
        let (a, e) = (at(&reg.start)?, at(&reg.end)?);
        (a <= e && e <= lens[s]).then_some((s, a, e))
    };
    // every move, as (slot, start, end) of its source and of its destination
    let mut moves: Vec<[Span; 2]> = Vec::new();
    for (r, t) in un.ranks.iter().enumerate() {
        for c in &t.copies {
            moves.push([span(r, &c.src)?, span(r, &c.dst)?]);
        }
        for o in t.ops.iter().filter(|o| !o.send) {
            let (q, j) = o.partner;
            let sent = un.ranks.get(q as usize)?.ops.get(j as usize)?;
            let src = span(q as usize, un.regs.get(sent.reg as usize)?)?;
            moves.push([src, span(r, un.regs.get(o.reg as usize)?)?]);
        }
    }
    collective_moves(un, &span, &mut moves)?;
    for [(s1, a1, e1), (s2, a2, e2)] in &moves {
        sets[*s1].extend([*a1, *e1]);
        sets[*s2].extend([*a2, *e2]);
    }
    expected_blocks(un, point, &first, &lens, &mut sets)?;
    let mut total: usize = sets.iter().map(BTreeSet::len).sum();
    if total > limit {
        return Some(Err(total));
    }
    loop {
        let mut changed = false;
        for &[src, dst] in &moves {
            for (from, to) in [(src, dst), (dst, src)] {
                let (fs, fa, fe) = from;
                let (ts, ta, _) = to;
                if fe <= fa + 1 {
                    continue;
                }
                let inner: Vec<usize> = sets[fs].range(fa + 1..fe).copied().collect();
                for c in inner {
                    if sets[ts].insert(c - fa + ta) {
                        changed = true;
                        total += 1;
                        if total > limit {
                            return Some(Err(total));
                        }
                    }
                }
            }
        }
        if !changed {
            break;
        }
    }
    Some(Ok(sets.into_iter().map(|s| s.into_iter().collect()).collect()))
}

/// A collective as moves: every block of every member's regions (the
/// blocks the collective reads and writes whole: an `all_gather`'s input
/// and each of its output's group-size blocks, a `reduce_scatter`'s input
/// blocks and output, both sides' blocks of an `all_to_all`, the whole
/// regions of the others) is linked to the first block of the call, so
/// that at the fixed point they are all cut alike, each block into the
/// same runs: the collective then maps runs one to one, a reduction
/// combining runs at the same offsets. `None` for `all_gatherv` and
/// `all_to_allv`, or a region that does not evaluate or split evenly
/// (steps 2-3 rule that out).
fn collective_moves(
    un: &Unrolled<'_, '_>,
    span: &dyn Fn(usize, &Reg) -> Option<Span>,
    moves: &mut Vec<[Span; 2]>,
) -> Option<()> {
    let mut hubs: HashMap<(u32, u32), Span> = HashMap::new();
    for (r, t) in un.ranks.iter().enumerate() {
        for c in &t.colls {
            let g = un.groups.get(c.group as usize)?.len();
            let (src_parts, dst_parts) = match c.kind {
                CollKind::Barrier => continue,
                CollKind::AllGather => (1, g),
                CollKind::ReduceScatter => (g, 1),
                CollKind::AllToAll => (g, g),
                CollKind::AllReduce | CollKind::Broadcast | CollKind::Reduce => (1, 1),
                CollKind::AllGatherV | CollKind::AllToAllV => return None,
            };
            let sides = [(c.src.as_ref(), src_parts), (c.dst.as_ref(), dst_parts)];
            for (reg, parts) in sides {
                let Some(reg) = reg else { continue };
                let (s, a, e) = span(r, reg)?;
                let len = e - a;
                if parts == 0 || len % parts != 0 {
                    return None;
                }
                let b = len / parts;
                for k in 0..parts {
                    let block = (s, a + k * b, a + (k + 1) * b);
                    let hub = *hubs.entry((c.group, c.seq)).or_insert(block);
                    if hub != block {
                        moves.push([hub, block]);
                    }
                }
            }
        }
    }
    Some(())
}

/// Cuts the postcondition's output (and a `reduce_scatter`'s input) at
/// the blocks it expects, on every rank.
fn expected_blocks(
    un: &Unrolled<'_, '_>,
    point: &[i64],
    first: &[usize],
    lens: &[usize],
    sets: &mut [BTreeSet<usize>],
) -> Option<()> {
    let Some(post) = un.prog.post.as_ref() else {
        return Some(());
    };
    let w = usize::try_from(un.world).ok()?;
    let t0 = un.ranks.first()?;
    let len = |b: u32| usize::try_from(t0.bufs.get(b as usize)?.len.eval_at(point)?).ok();
    let (buf, block) = match post.kind {
        PostKind::AllGather { .. } => (post.output, len(post.input)?),
        PostKind::AllToAll { .. } => (post.output, len(post.output)? / w.max(1)),
        PostKind::ReduceScatter { .. } => (post.input, len(post.output)?),
        _ => return Some(()),
    };
    if block == 0 {
        return Some(());
    }
    for r in 0..un.ranks.len() {
        let s = first[r] + buf as usize;
        if s < first[r + 1] {
            sets[s].extend((0..=lens[s] / block).map(|k| (k * block).min(lens[s])));
        }
    }
    Some(())
}
