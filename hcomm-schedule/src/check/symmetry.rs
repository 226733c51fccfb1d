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
//! Count vectors (`counts: &[usize; world]`) take part in the rotation
//! with their entries renamed: rank `r` is rank 0 turned by `r`, with entry
//! `counts[i]` read as `counts[i + r]` (mod `world`). A buffer of one
//! entry (`x: &[T; counts[rank]]`) keeps its regions, entries renamed; a
//! buffer laid out by a whole vector (`out: &mut [T; sum(counts)]`) is
//! turned part by part: rank 0's part `j` (`.part(counts, j)`) is rank
//! `r`'s part `j + r`, and the whole buffer the whole buffer. Each rank's
//! trace is compared with rank 0's under this map (the shape proof of
//! [`super::rotation`] does not cover counts), and the steps then hold for
//! every value of the counts as they do for fixed lengths: the map is a
//! bijection of the count entries and of each buffer's elements, so a
//! length equality, an overlap or a bound on rank 0 is the same on its
//! images; a matched length is compared with the partner's renamed. With
//! every region a whole part (or a buffer of one entry read whole), the
//! postcondition is decided by the run with every entry 1 (see
//! `postcondition::first_cut`), where a part is one element and the
//! part-wise turn is a turn by one element: rank 0's replay decides it as
//! for fixed lengths.
//!
//! Only schedules simple to argue are tried: no collectives, no count
//! matrices, no local `accumulate`, no request problems, and a
//! postcondition that is an `all_gather`, an `all_to_all` or an
//! `all_reduce` (or none; with counts, an `all_gatherv` or none).
//! Anything else, or anything found wrong other than a wrong `all_gather`
//! or `all_to_all` output on rank 0, gives no verdict: the caller then runs
//! the full check, whose verdict and diagnostics are the answer.

use crate::compile::Prog;
use crate::counts;
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
    let counted = !prog.s.counts.is_empty();
    if w < 2 || prog.rank_lens && !counted || prog.s.counts.iter().any(|c| c.matrix) {
        return None;
    }
    if let Some(post) = &prog.post {
        let fixed = matches!(
            post.kind,
            PostKind::AllGather { .. } | PostKind::AllToAll { .. } | PostKind::AllReduce { .. }
        );
        if fixed == counted || counted && !matches!(post.kind, PostKind::AllGatherV { .. }) {
            return None;
        }
    }
    let lines = Lines::new(prog.s.counts.len(), w);
    // proven from the program: rank 0 alone is unrolled
    let proven = if prove {
        rotation::units(prog, world, scalars)
    } else {
        None
    };
    let mut units: Vec<Unit> = Vec::new();
    let mut layouts: Vec<Layout> = Vec::new();
    let mut classes: Vec<Option<Class>> = Vec::new();
    let mut seen: Vec<(u32, u32)> = Vec::new();
    let mut same = true;
    let unrolled = unroll_each(prog, world, scalars, |regs, r, trace, kept| {
        if r == 0 {
            layouts = trace.bufs.iter().filter_map(|b| lines.layout(&b.len)).collect();
            same = simple(&trace) && layouts.len() == trace.bufs.len();
            units = match &proven {
                Some(p) => touched(&trace, regs, p),
                None => vec![None; trace.bufs.len()],
            };
            kept.push(trace);
            return same && proven.is_none();
        } else if let Some(t0) = kept.first() {
            let mut maps = Maps {
                layouts: &layouts,
                lines: &lines,
                classes: &mut classes,
                units: &mut units,
            };
            same = image(t0, &trace, regs, (r, w), &mut maps, &mut seen);
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
    for ((b, turns), layout) in t0.bufs.iter().zip(&units).zip(&layouts) {
        unit.push(match (layout, turns) {
            // a part is one element in the run with every count 1, the
            // only run `postcondition::rotated_verdict` makes with counts
            (Layout::Parts(_), Some(true)) => Some(Lin::constant(1)),
            (Layout::Plain, Some(true)) => Some(b.len.div_exact(i64::from(w))?),
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

/// How rank `r`'s regions of one buffer are found from rank 0's (rank 0's
/// length decides).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Layout {
    /// No count entry in the length: the region moved by 0 or by `r` times
    /// `len / world` elements (see [`turned`]); no count entry in its
    /// bounds either.
    Plain,
    /// Laid out by every entry of count vector `p` (`sum(counts)`): rank
    /// 0's part `j` is rank `r`'s part `j + r`, the whole buffer the whole
    /// buffer; no other region.
    Parts(usize),
    /// One count entry long (`counts[rank]`): the region with its entries
    /// renamed.
    Entry,
}

/// What a region of rank 0 in a [`Layout::Parts`] buffer is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// Part `j` of the vector.
    Part(usize),
    /// The whole buffer.
    Whole,
    /// Anything else: not handled.
    Other,
}

/// The count vectors' prefix sums at one world size.
struct Lines {
    w: usize,
    /// Per vector, `sum(counts[..j])` for `j` in `0..=world`.
    prefix: Vec<Vec<Lin>>,
    /// `j` of each of those forms but 0 (no two vectors share one).
    index: FxHashMap<Lin, usize>,
}

impl Lines {
    fn new(vectors: usize, w: u32) -> Self {
        let mut index = FxHashMap::default();
        let prefix = (0..vectors)
            .map(|p| {
                (0..=u64::from(w))
                    .map(|j| {
                        let l = Lin::count(counts::line_part(p as u32, counts::Line::Vector, 0, j));
                        index.insert(l, j as usize);
                        l
                    })
                    .collect()
            })
            .collect();
        Self {
            w: w as usize,
            prefix,
            index,
        }
    }

    /// The layout of a buffer of rank 0 of length `len`, or `None` when
    /// this reduction does not handle it.
    fn layout(&self, len: &Lin) -> Option<Layout> {
        if len.count_free() {
            return Some(Layout::Plain);
        }
        if len.is_one_entry() {
            return Some(Layout::Entry);
        }
        self.prefix
            .iter()
            .position(|p| p.get(self.w) == Some(len))
            .map(Layout::Parts)
    }

    /// `j` when `l` is `sum(counts[..j])` of vector `p` (0 for `j = 0`).
    fn prefix_index(&self, p: usize, l: &Lin) -> Option<usize> {
        let j = if *l == Lin::constant(0) { 0 } else { *self.index.get(l)? };
        (self.prefix.get(p)?.get(j)? == l).then_some(j)
    }

    /// What rank 0's region `reg` of a buffer laid out by vector `p` is.
    fn class(&self, p: usize, reg: &Reg) -> Class {
        match (self.prefix_index(p, &reg.start), self.prefix_index(p, &reg.end)) {
            (Some(0), Some(e)) if e == self.w => Class::Whole,
            (Some(s), Some(e)) if e == s + 1 => Class::Part(s),
            _ => Class::Other,
        }
    }

    /// Part `j` of vector `p` as bounds.
    fn part(&self, p: usize, j: usize) -> Option<(&Lin, &Lin)> {
        let v = self.prefix.get(p)?;
        Some((v.get(j)?, v.get(j + 1)?))
    }
}

/// What [`image`] reads and decides per buffer and region of rank 0.
struct Maps<'a> {
    layouts: &'a [Layout],
    lines: &'a Lines,
    /// Per region of rank 0 in a [`Layout::Parts`] buffer, its class once
    /// found.
    classes: &'a mut Vec<Option<Class>>,
    units: &'a mut [Unit],
}

impl Maps<'_> {
    /// The class of rank 0's region `reg0` (`id`: its index among the
    /// interned regions, `None` for a copy's) in a buffer laid out by
    /// vector `p`, found once per interned region.
    fn class(&mut self, p: usize, id: Option<u32>, reg0: &Reg) -> Class {
        let Some(i) = id.map(|i| i as usize) else {
            return self.lines.class(p, reg0);
        };
        if let Some(Some(c)) = self.classes.get(i) {
            return *c;
        }
        let c = self.lines.class(p, reg0);
        if self.classes.len() <= i {
            self.classes.resize(i + 1, None);
        }
        self.classes[i] = Some(c);
        c
    }
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
    maps: &mut Maps<'_>,
    seen: &mut Vec<(u32, u32)>,
) -> bool {
    let (r64, w64) = (u64::from(r), u64::from(w));
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
            .any(|(a, b)| a.param != b.param || b.len.renamed(r64, w64) != Some(a.len))
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
            && u64::from(a.peer) == (u64::from(b.peer) + r64) % w64;
        if !same {
            return false;
        }
        if seen.get(b.reg as usize) == Some(&(r, a.reg)) {
            continue;
        }
        let (Some(ra), Some(rb)) = (regs.get(a.reg as usize), regs.get(b.reg as usize)) else {
            return false;
        };
        if !region_image(rb, Some(b.reg), ra, (r, w), &shifts, maps) {
            return false;
        }
        if seen.len() <= b.reg as usize {
            seen.resize(b.reg as usize + 1, (0, 0));
        }
        seen[b.reg as usize] = (r, a.reg);
    }
    t.copies.iter().zip(&t0.copies).all(|(a, b)| {
        a.op == b.op
            && region_image(&b.src, None, &a.src, (r, w), &shifts, maps)
            && region_image(&b.dst, None, &a.dst, (r, w), &shifts, maps)
    })
}

/// Whether `reg` (on rank `r`) is the image of `reg0` (on rank 0; `id`:
/// its index among the interned regions, to remember its class), by the
/// layout of its buffer.
fn region_image(
    reg0: &Reg,
    id: Option<u32>,
    reg: &Reg,
    (r, w): (u32, u32),
    shifts: &[Option<[Lin; 2]>],
    maps: &mut Maps<'_>,
) -> bool {
    let b = reg0.buf as usize;
    if reg.buf != reg0.buf {
        return false;
    }
    match maps.layouts.get(b) {
        Some(Layout::Plain) => {
            reg0.start.count_free() && reg0.end.count_free() && turned(reg0, reg, shifts, maps.units)
        }
        Some(Layout::Entry) => {
            let (r, w) = (u64::from(r), u64::from(w));
            if let Some(u) = maps.units.get_mut(b) {
                *u = Some(false);
            }
            reg0.start.renamed(r, w) == Some(reg.start) && reg0.end.renamed(r, w) == Some(reg.end)
        }
        Some(&Layout::Parts(p)) => {
            let class = maps.class(p, id, reg0);
            if let Some(u) = maps.units.get_mut(b) {
                *u = Some(true);
            }
            match class {
                Class::Whole => reg == reg0,
                Class::Part(j) => maps
                    .lines
                    .part(p, (j + r as usize) % w as usize)
                    .is_some_and(|(s, e)| *s == reg.start && *e == reg.end),
                Class::Other => false,
            }
        }
        None => false,
    }
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
            // the receive is rank `d`'s op `j`, rank 0's turned by `d`: its
            // length has the count entries renamed
            let matched = match (len(oi.reg), len(oj.reg)) {
                (Some(li), Some(lj)) => lj.renamed(u64::from(d), u64::from(w)) == Some(li),
                _ => false,
            };
            if !matched {
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
