//! Steps 1 to 7 on one rank, for a schedule that is the same on every rank
//! up to a rotation of the ranks.
//!
//! Rotation by `r` maps a peer `p` to `(p + r) mod world`, and a region of
//! buffer `B` to the same region moved cyclically by `r * u_B` elements,
//! where `u_B` is `len(B) / world` for a buffer the schedule addresses in
//! chunks that turn with the rank (a ring's output) and 0 for one it does
//! not (an input read whole). The schedule is rotation-symmetric at a world
//! size when every rank's unrolled events are the images of rank 0's under
//! the rotation by its rank: same kinds, statements, tags, lengths,
//! request handles and batches, with peers and regions turned. When the
//! program's shape proves it ([`super::rotation`]: branches and bounds that
//! read no `rank`, peers `(rank + e) % world`, chunks that turn with the
//! rank), rank 0 alone is unrolled; otherwise each rank is unrolled and
//! compared with rank 0 as it comes, and only rank 0's events are kept.
//!
//! Every check of a symmetric schedule is then a check of rank 0:
//!
//! * steps 1 and 2 ran on every rank while unrolling;
//! * step 3: the channel `a -> b` is the image of `0 -> b - a`, so every
//!   channel matches when those out of rank 0 do: the k-th send of rank 0
//!   to `d` meets the k-th receive of rank `d` from 0, the image of rank
//!   0's k-th receive from `-d`; a local move's two regions have the same
//!   lengths on every rank;
//! * step 4: the lockstep proof's condition on a rank is the same on its
//!   images (partners keep their event indices);
//! * step 5: a rotation is a bijection of a buffer's elements, so overlaps
//!   (and equal peers) are the same on every rank;
//! * step 6: no rank may have a request problem;
//! * step 7: in the lockstep execution, rank `q`'s state after `k` events
//!   is the image of rank 0's (by induction on `k`: what rank `q` receives
//!   from `q + p` is the image of what rank 0 receives from `p`; a receive
//!   that reduces combines its element with the image of the partner's,
//!   and the image of a reduction is the reduction of the images). Rank 0
//!   is replayed alone, a message from `p` being rank 0's own snapshot of
//!   the partner's index turned by `p`, and every rank's output (rank 0's
//!   turned) is compared with the postcondition. For an `all_reduce` whose
//!   input and output turn alike, rank `q`'s element `i` is rank 0's
//!   element `i - q u` turned, so rank 0's output being right at every
//!   element makes every rank's right; each element's contributions are
//!   read through their turns (O(world) per element). A scratch buffer
//!   starts uninitialized on every rank, the image of rank 0's under any
//!   turn, so the induction holds for it as for a parameter.
//!
//! Only schedules simple to argue are tried: no collectives, no count
//! parameters, no local `accumulate`, no request
//! problems, and a postcondition that is an `all_gather`, an `all_to_all`
//! or an `all_reduce` (or none).
//! Anything else, or anything found wrong other than a wrong `all_gather`
//! or `all_to_all` output on rank 0, gives no verdict: the caller then runs
//! the full check, whose verdict and diagnostics are the answer.

use crate::compile::Prog;
use crate::ir::PostKind;
use crate::lin::Lin;
use crate::trace::{RankTrace, Reg, Unrolled};
use crate::unroll::unroll_each;
use rustc_hash::FxHashMap;

use super::postcondition::Rotated;
use super::{deadlock, hazards, matching, postcondition, rotation};

/// Whether one buffer turns with the rank (by `len / world` per rank), or
/// `None` when not decided yet.
pub(crate) type Unit = Option<bool>;

/// Whether `prog` at `world` with `scalars` is rotation-symmetric and
/// passes every check (steps 1 to 7). `false` says nothing: the full check
/// decides.
#[cfg(test)]
pub(crate) fn passes(prog: &Prog<'_>, world: i64, scalars: &[i64]) -> bool {
    reduced(prog, world, scalars, true).is_some()
}

/// [`passes`], with the units of the buffers it turned when it passes.
/// `prove`: let [`rotation::units`] spare the unrolling of ranks other
/// than 0 when the program's shape proves them rank 0's images (else every
/// rank is unrolled and compared; the two agree).
#[cfg(test)]
pub(crate) fn reduced(prog: &Prog<'_>, world: i64, scalars: &[i64], prove: bool) -> Option<Vec<Unit>> {
    let (units, rotated) = verdict(prog, world, scalars, prove)?;
    matches!(rotated, Rotated::Holds).then_some(units)
}

/// Steps 1 to 7 on rank 0 alone: `Holds` when they pass, `Violated` with
/// the full check's diagnostic when the postcondition fails on rank 0 in a
/// way rank 0 decides (see `postcondition::rotated_verdict`), `None` when
/// the full check decides.
pub(crate) fn check(prog: &Prog<'_>, world: i64, scalars: &[i64]) -> Option<Rotated> {
    verdict(prog, world, scalars, true).map(|(_, rotated)| rotated)
}

/// [`reduced`], with the postcondition's verdict.
fn verdict(prog: &Prog<'_>, world: i64, scalars: &[i64], prove: bool) -> Option<(Vec<Unit>, Rotated)> {
    let w = u32::try_from(world).ok()?;
    if w < 2 || prog.rank_lens || !prog.s.counts.is_empty() {
        return None;
    }
    if let Some(post) = &prog.post {
        if !matches!(
            post.kind,
            PostKind::AllGather { .. } | PostKind::AllToAll { .. } | PostKind::AllReduce { .. }
        ) {
            return None;
        }
    }
    // proven from the program: rank 0 alone is unrolled
    let proven = if prove {
        rotation::units(prog, world, scalars)
    } else {
        None
    };
    let mut units: Vec<Unit> = Vec::new();
    let mut seen: Vec<(u32, u32)> = Vec::new();
    let mut same = true;
    let unrolled = unroll_each(prog, world, scalars, |regs, r, trace, kept| {
        if r == 0 {
            same = simple(&trace);
            units = match &proven {
                Some(p) => touched(&trace, regs, p),
                None => vec![None; trace.bufs.len()],
            };
            kept.push(trace);
            return same && proven.is_none();
        } else if let Some(t0) = kept.first() {
            same = image(t0, &trace, regs, (r, w), &mut units, &mut seen);
        } else {
            same = false;
        }
        same
    });
    let mut un = unrolled.ok()?;
    if !same || un.ranks.len() != 1 || !pair(&mut un, w) || !matching::collective_shapes(&un).is_empty() {
        return None;
    }
    let order = deadlock::lockstep(&un)?;
    if !hazards::check(&un).is_empty() {
        return None;
    }
    let t0 = un.ranks.first()?;
    let mut unit = Vec::with_capacity(units.len());
    for (b, turns) in t0.bufs.iter().zip(&units) {
        unit.push(match turns {
            Some(true) => Some(b.len.div_exact(i64::from(w))?),
            _ => None,
        });
    }
    let rotated = postcondition::rotated_verdict(&un, &order, &unit)?;
    Some((units, rotated))
}

/// The units [`rotation::units`] proved, for the buffers rank 0's trace
/// names (the others are left undecided, as comparing ranks leaves them).
fn touched(t0: &RankTrace, regs: &[Reg], proven: &[Unit]) -> Vec<Unit> {
    let mut units = vec![None; t0.bufs.len()];
    let mut mark = |buf: u32| {
        if let (Some(u), Some(&p)) = (units.get_mut(buf as usize), proven.get(buf as usize)) {
            *u = p;
        }
    };
    for o in &t0.ops {
        if let Some(reg) = regs.get(o.reg as usize) {
            mark(reg.buf);
        }
    }
    for c in &t0.copies {
        mark(c.src.buf);
        mark(c.dst.buf);
    }
    units
}

/// Whether rank 0's trace is of the kind this reduction handles.
fn simple(t: &RankTrace) -> bool {
    t.colls.is_empty()
        && t.issues.is_empty()
        && t.copies.iter().all(|c| c.op.is_none())
        && t.bufs
            .iter()
            .enumerate()
            .all(|(i, b)| b.param.is_none_or(|p| p == i as u32))
}

/// Whether `t` (rank `r`'s trace) is the image of `t0` (rank 0's) under the
/// rotation by `r` (`rw`: `r` and the world size); decides the units of
/// buffers not decided yet. `seen[i] == (r, j)` records that region `j`
/// was found the image of rank 0's region `i` on this rank (most regions
/// serve two operations).
fn image(
    t0: &RankTrace,
    t: &RankTrace,
    regs: &[Reg],
    (r, w): (u32, u32),
    units: &mut [Unit],
    seen: &mut Vec<(u32, u32)>,
) -> bool {
    if t.events.len() != t0.events.len()
        || t.ops.len() != t0.ops.len()
        || t.copies.len() != t0.copies.len()
        || !t.colls.is_empty()
        || !t.issues.is_empty()
        || t.wait_ops != t0.wait_ops
        || t.bufs.len() != t0.bufs.len()
        || t.bufs
            .iter()
            .zip(&t0.bufs)
            .any(|(a, b)| a.len != b.len || a.param != b.param)
    {
        return false;
    }
    // plain loops: the checker also runs unoptimized, in the compiler
    for i in 0..t.events.len() {
        let (a, b) = (&t.events[i], &t0.events[i]);
        if a.kind != b.kind || a.stmt != b.stmt {
            return false;
        }
    }
    // per buffer: the two shifts a region can move by, `r * u` and
    // `r * u - len` (`u = len / world`), when `world` divides its length
    let shifts: Vec<Option<[Lin; 2]>> = t0
        .bufs
        .iter()
        .map(|b| {
            let ru = b.len.div_exact(i64::from(w))?.scale(i64::from(r)).ok()?;
            Some([ru, ru.sub(&b.len).ok()?])
        })
        .collect();
    let mut turn = |a: &Reg, b: &Reg| turned(a, b, &shifts, units);
    let (peer_shift, w64) = (u64::from(r), u64::from(w));
    for i in 0..t.ops.len() {
        let (a, b) = (&t.ops[i], &t0.ops[i]);
        let same = a.send == b.send
            && a.mode == b.mode
            && a.tag == b.tag
            && a.reduce == b.reduce
            && a.stmt == b.stmt
            && a.ev == b.ev
            && a.done == b.done
            && a.handle == b.handle
            && u64::from(a.peer) == (u64::from(b.peer) + peer_shift) % w64;
        if !same {
            return false;
        }
        if seen.get(b.reg as usize) == Some(&(r, a.reg)) {
            continue;
        }
        let (Some(ra), Some(rb)) = (regs.get(a.reg as usize), regs.get(b.reg as usize)) else {
            return false;
        };
        if !turn(rb, ra) {
            return false;
        }
        if seen.len() <= b.reg as usize {
            seen.resize(b.reg as usize + 1, (0, 0));
        }
        seen[b.reg as usize] = (r, a.reg);
    }
    t.copies
        .iter()
        .zip(&t0.copies)
        .all(|(a, b)| a.op == b.op && turn(&b.src, &a.src) && turn(&b.dst, &a.dst))
}

/// Whether `reg` (on rank `r`) is `reg0` (on rank 0) moved by `r` units of
/// its buffer, cyclically but without wrapping: by `r * u - m * len` for
/// `m` in 0 or 1 (`r * u < len`), one of `shifts`. The first region of a
/// buffer decides its unit: 0 when the two are equal, else `len / world`.
fn turned(reg0: &Reg, reg: &Reg, shifts: &[Option<[Lin; 2]>], units: &mut [Unit]) -> bool {
    let b = reg0.buf as usize;
    if reg.buf != reg0.buf || b >= units.len() {
        return false;
    }
    let moved = || match shifts.get(b) {
        Some(Some([d0, d1])) => {
            (reg.start.is_moved(&reg0.start, d0) && reg.end.is_moved(&reg0.end, d0))
                || (reg.start.is_moved(&reg0.start, d1) && reg.end.is_moved(&reg0.end, d1))
        }
        _ => false,
    };
    match units[b] {
        Some(false) => reg0 == reg,
        Some(true) => moved(),
        None if reg0 == reg => {
            units[b] = Some(false);
            true
        }
        None if moved() => {
            units[b] = Some(true);
            true
        }
        None => false,
    }
}

/// Step 3 for rank 0's channels, setting its ops' partners: the k-th send
/// to `d` pairs with op `j` of rank `d`, where `j` is rank 0's k-th receive
/// from `-d` (rank `d`'s ops are the images of rank 0's, index for index).
/// Whether every channel matches with equal lengths.
fn pair(un: &mut Unrolled<'_, '_>, w: u32) -> bool {
    let back = |p: u32| (w - p % w) % w;
    let Some(t0) = un.ranks.first_mut() else {
        return false;
    };
    let mut sends: FxHashMap<(u32, i64), Vec<u32>> = FxHashMap::default();
    let mut recvs: FxHashMap<(u32, i64), Vec<u32>> = FxHashMap::default();
    for (i, o) in t0.ops.iter().enumerate() {
        let side = if o.send { &mut sends } else { &mut recvs };
        side.entry((o.peer, o.tag)).or_default().push(i as u32);
    }
    let counterpart = |side: &FxHashMap<(u32, i64), Vec<u32>>, (p, tag): (u32, i64), n: usize| {
        side.get(&(back(p), tag)).is_some_and(|v| v.len() == n)
    };
    if sends.iter().any(|(&k, v)| !counterpart(&recvs, k, v.len()))
        || recvs.iter().any(|(&k, v)| !counterpart(&sends, k, v.len()))
    {
        return false;
    }
    for (&(d, tag), s) in &sends {
        let Some(rv) = recvs.get(&(back(d), tag)) else {
            return false;
        };
        for (&i, &j) in s.iter().zip(rv) {
            let (oi, oj) = (&t0.ops[i as usize], &t0.ops[j as usize]);
            let len = |reg: u32| un.regs.get(reg as usize).map(Reg::len);
            if oi.reg != oj.reg && len(oi.reg) != len(oj.reg) {
                return false;
            }
            let (evi, evj) = (oi.ev, oj.ev);
            let send = &mut t0.ops[i as usize];
            send.partner = (d, j);
            send.partner_ev = evj;
            let recv = &mut t0.ops[j as usize];
            recv.partner = (back(d), i);
            recv.partner_ev = evi;
        }
    }
    true
}
