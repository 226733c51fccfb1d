//! Step 5: buffer hazards of non-blocking and batched operations, local
//! copies and out-of-place collectives, and the batch rule (at most one send
//! and one receive per peer in a `batch`).
//!
//! Each rank is walked on its own, keeping the `isend`/`irecv` requests in
//! flight (posted, not yet waited): every access of a later event is checked
//! against them. Regions overlap when they share an element for some value of
//! the length variables ([`crate::lin::overlaps`]).

use smallvec::SmallVec;

use crate::compile::CollKind;
use crate::diag::{stmt_key, DiagKind, Diagnostic, Sink};
use crate::lin::overlaps;
use crate::situation::{tag_text, Situation};
use crate::trace::{EvKind, P2p, RankTrace, Reg, Unrolled};
use rustc_hash::FxHashMap;

fn overlap(a: &Reg, b: &Reg) -> bool {
    a.buf == b.buf && overlaps(&a.start, &a.end, &b.start, &b.end)
}

/// " when n = 1" for overlapping regions that are disjoint for large values
/// of the length variables, else "".
fn when(un: &Unrolled<'_, '_>, a: &Reg, b: &Reg) -> String {
    crate::lin::overlap_only_at(&a.start, &a.end, &b.start, &b.end).map_or(String::new(), |p| {
        format!(" when {}", crate::lin::point_text(&p, &un.prog.len_names))
    })
}

/// Overlap of interned regions, memoized: operations reuse few regions.
struct Overlaps<'u> {
    regs: &'u [Reg],
    /// Dense `regs × regs` table (0: unknown, 1: disjoint, 2: overlap)
    /// when there are few regions, else the map.
    dense: Vec<u8>,
    map: FxHashMap<(u32, u32), bool>,
}

/// Up to this many interned regions use the dense table.
const DENSE_REGIONS: usize = 2048;

impl<'u> Overlaps<'u> {
    fn new(regs: &'u [Reg]) -> Self {
        let n = regs.len();
        Self {
            regs,
            dense: if n <= DENSE_REGIONS { vec![0; n * n] } else { Vec::new() },
            map: FxHashMap::default(),
        }
    }

    #[inline]
    fn get(&mut self, a: u32, b: u32) -> bool {
        let (Some(ra), Some(rb)) = (self.regs.get(a as usize), self.regs.get(b as usize)) else {
            return true;
        };
        if self.dense.is_empty() {
            return *self.map.entry((a, b)).or_insert_with(|| overlap(ra, rb));
        }
        let cell = &mut self.dense[a as usize * self.regs.len() + b as usize];
        if *cell == 0 {
            *cell = if overlap(ra, rb) { 2 } else { 1 };
        }
        *cell == 2
    }
}

/// `output[n..2 * n]`.
pub(crate) fn reg_text(un: &Unrolled<'_, '_>, r: u32, reg: &Reg) -> String {
    let names = &un.prog.len_names;
    let t = &un.ranks[r as usize];
    let b = t.bufs.get(reg.buf as usize);
    let name = b.map_or("?", |b| b.name.as_str());
    if b.is_some_and(|b| reg.start.as_const() == Some(0) && reg.end == b.len) {
        format!("`{name}`")
    } else {
        format!("`{name}[{}..{}]`", reg.start.display(names), reg.end.display(names))
    }
}

/// Returns the step-5 diagnostics.
pub(crate) fn check(un: &Unrolled<'_, '_>) -> Vec<Diagnostic> {
    let mut sink = Sink::default();
    let mut memo = Overlaps::new(&un.regs);
    for r in 0..un.ranks.len() as u32 {
        rank(un, r, &mut sink, &mut memo);
        if sink.is_full() {
            break;
        }
    }
    sink.into_vec()
}

struct Access<'a> {
    reg: &'a Reg,
    /// The interned id, for operations.
    id: Option<u32>,
    read: bool,
    write: bool,
    what: &'static str,
}

fn rank(un: &Unrolled<'_, '_>, r: u32, sink: &mut Sink, memo: &mut Overlaps<'_>) {
    let t = &un.ranks[r as usize];
    let mut in_flight: Vec<u32> = Vec::new();
    for ev in &t.events {
        let key = stmt_key(ev.stmt);
        // the most common events, without requests in flight, first
        match ev.kind {
            EvKind::Blocking(_) if in_flight.is_empty() => continue,
            EvKind::Batch(a, b) if in_flight.is_empty() => {
                if let Some(d) = batch(un, r, t, a, b, memo) {
                    sink.push(key, d);
                }
                continue;
            }
            _ => {}
        }
        let sit = un.at(r, ev.stmt, ev.ctx);
        let span = un.span(ev.stmt);
        let mut accesses: SmallVec<[Access<'_>; 4]> = SmallVec::new();
        match ev.kind {
            EvKind::Blocking(i) => accesses.push(op_access(un, t, i)),
            EvKind::Post(i) => {
                if let Some(d) = conflict(un, r, &sit, span, &op_access(un, t, i), &in_flight, memo) {
                    sink.push(key, d);
                }
                in_flight.push(i);
                continue;
            }
            EvKind::Wait(a, b) => {
                let waited = &t.wait_ops[a as usize..b as usize];
                in_flight.retain(|o| !waited.contains(o));
                continue;
            }
            EvKind::Batch(a, b) => {
                if let Some(d) = batch(un, r, t, a, b, memo) {
                    sink.push(key, d);
                }
                for i in a..b {
                    accesses.push(op_access(un, t, i));
                }
            }
            EvKind::Copy(ci) => {
                let c = &t.copies[ci as usize];
                let what = if c.op.is_some() { "`accumulate`" } else { "`copy`" };
                if overlap(&c.src, &c.dst) {
                    let d = Diagnostic::new(
                        DiagKind::BufferHazard,
                        span,
                        format!(
                            "{sit}, rank {r}'s {what} reads {} and writes {}, which overlap{}",
                            reg_text(un, r, &c.src),
                            reg_text(un, r, &c.dst),
                            when(un, &c.src, &c.dst)
                        ),
                    )
                    .with_hint("source and destination must be disjoint; go through a `scratch` buffer");
                    sink.push(key, d);
                }
                accesses.push(Access {
                    reg: &c.src,
                    id: None,
                    read: true,
                    write: false,
                    what,
                });
                accesses.push(Access {
                    reg: &c.dst,
                    id: None,
                    read: c.op.is_some(),
                    write: true,
                    what,
                });
            }
            EvKind::Coll(ci) => {
                let c = &t.colls[ci as usize];
                let g = &un.groups[c.group as usize];
                let me = g.iter().position(|&m| m == r).map(|p| p as i64);
                let is_root = c.root.is_some() && me == c.root;
                let name = c.kind.name();
                let what = match c.kind {
                    CollKind::AllReduce => "`all_reduce`",
                    CollKind::AllGather => "`all_gather`",
                    CollKind::ReduceScatter => "`reduce_scatter`",
                    CollKind::AllToAll => "`all_to_all`",
                    CollKind::Broadcast => "`broadcast`",
                    CollKind::Reduce => "`reduce`",
                    CollKind::AllGatherV => "`all_gatherv`",
                    CollKind::AllToAllV => "`all_to_allv`",
                    CollKind::Barrier => "`barrier`",
                };
                let dst_used = c.kind != CollKind::Reduce || is_root;
                if let (Some(s), Some(d)) = (&c.src, &c.dst) {
                    if dst_used && overlap(s, d) {
                        let mut diag = Diagnostic::new(
                            DiagKind::BufferHazard,
                            span,
                            format!(
                                "{sit}, rank {r}'s `{name}` reads {} and writes {}, which overlap{}",
                                reg_text(un, r, s),
                                reg_text(un, r, d),
                                when(un, s, d)
                            ),
                        );
                        diag = diag.with_hint(if c.kind == CollKind::AllReduce {
                            "use the in-place form `all_reduce(region, op)` or disjoint regions"
                        } else {
                            "the input and output of an out-of-place collective must be disjoint"
                        });
                        sink.push(key, diag);
                    }
                }
                if c.kind == CollKind::Broadcast {
                    if let Some(s) = &c.src {
                        accesses.push(Access {
                            reg: s,
                            id: None,
                            read: is_root,
                            write: !is_root,
                            what,
                        });
                    }
                } else {
                    if let Some(s) = &c.src {
                        accesses.push(Access {
                            reg: s,
                            id: None,
                            read: true,
                            write: c.dst.is_none(),
                            what,
                        });
                    }
                    if let Some(d) = c.dst.as_ref().filter(|_| dst_used) {
                        accesses.push(Access {
                            reg: d,
                            id: None,
                            read: false,
                            write: true,
                            what,
                        });
                    }
                }
            }
        }
        if in_flight.is_empty() {
            continue;
        }
        for a in &accesses {
            if let Some(d) = conflict(un, r, &sit, span, a, &in_flight, memo) {
                sink.push(key, d);
                break;
            }
        }
    }
}

fn op_access<'a>(un: &'a Unrolled<'_, '_>, t: &RankTrace, i: u32) -> Access<'a> {
    let o = &t.ops[i as usize];
    Access {
        reg: &un.regs[o.reg as usize],
        id: Some(o.reg),
        read: o.send || o.reduce.is_some(),
        write: !o.send,
        what: match (o.send, o.mode) {
            (true, crate::trace::Mode::Nonblocking) => "`isend`",
            (false, crate::trace::Mode::Nonblocking) => "`irecv`",
            (true, _) => "`send`",
            (false, _) => "`recv`",
        },
    }
}

/// An access that touches a region of an in-flight request illegally.
fn conflict(
    un: &Unrolled<'_, '_>,
    r: u32,
    sit: &Situation<'_>,
    span: crate::ir::SpanId,
    a: &Access<'_>,
    in_flight: &[u32],
    memo: &mut Overlaps<'_>,
) -> Option<Diagnostic> {
    let t = &un.ranks[r as usize];
    for &i in in_flight {
        let o = &t.ops[i as usize];
        let bad = if o.send { a.write } else { a.read || a.write };
        let oreg = &un.regs[o.reg as usize];
        let hit = match a.id {
            Some(id) => memo.get(id, o.reg),
            None => overlap(a.reg, oreg),
        };
        if !bad || !hit {
            continue;
        }
        let h = un.prog.handle_names.get(o.handle as usize).copied().unwrap_or("?");
        let verb = if a.write { "writes" } else { "reads" };
        let (req, dir) = if o.send {
            ("isend", format!("to rank {}", o.peer))
        } else {
            ("irecv", format!("from rank {}", o.peer))
        };
        let d = Diagnostic::new(
            DiagKind::BufferHazard,
            span,
            format!(
                "{sit}, rank {r}'s {} {verb} {} while `{h}` (`{req}` of {} {dir}{}) is in flight{}",
                a.what,
                reg_text(un, r, a.reg),
                reg_text(un, r, oreg),
                tag_text(o.tag),
                when(un, a.reg, oreg)
            ),
        )
        .with_note(un.span(o.stmt), format!("`{h}` is posted here"))
        .with_hint(format!("`wait {h}` (or `wait all`) before touching its region"));
        return Some(d);
    }
    None
}

/// The batch rule and overlaps inside one `batch`.
#[inline]
fn batch(
    un: &Unrolled<'_, '_>,
    r: u32,
    t: &RankTrace,
    first: u32,
    end: u32,
    memo: &mut Overlaps<'_>,
) -> Option<Diagnostic> {
    // the common batch of two operations, decided without building a
    // message: no repeated (peer, direction), and no receive overlapping
    // the other operation (a send after a send has nothing to check)
    if let Some([a, b]) = t.ops.get(first as usize..end as usize) {
        let dup = a.peer == b.peer && a.send == b.send;
        let clash = match (a.send, b.send) {
            (true, true) => false,
            (false, _) => memo.get(a.reg, b.reg),
            (true, false) => memo.get(b.reg, a.reg),
        };
        if !dup && !clash {
            return None;
        }
    }
    batch_slow(un, r, t, first, end, memo)
}

/// [`batch`], every case.
#[inline(never)]
fn batch_slow(
    un: &Unrolled<'_, '_>,
    r: u32,
    t: &RankTrace,
    first: u32,
    end: u32,
    memo: &mut Overlaps<'_>,
) -> Option<Diagnostic> {
    let ops: &[P2p] = &t.ops[first as usize..end as usize];
    // batch rule: at most one send and one receive per peer; report the
    // earliest operation repeating an earlier one (and the latest of those)
    let dup: Option<(usize, usize)> = if ops.len() <= 16 {
        (1..ops.len()).find_map(|j| {
            (0..j)
                .rev()
                .find(|&i| ops[i].peer == ops[j].peer && ops[i].send == ops[j].send)
                .map(|i| (i, j))
        })
    } else {
        let mut keys: Vec<(u32, bool, usize)> = ops.iter().enumerate().map(|(i, o)| (o.peer, o.send, i)).collect();
        keys.sort_unstable();
        keys.windows(2)
            .filter(|w| w[0].0 == w[1].0 && w[0].1 == w[1].1)
            .min_by_key(|w| w[1].2)
            .map(|w| (w[0].2, w[1].2))
    };
    if let Some((i, j)) = dup {
        {
            let first = &ops[i];
            let second = &ops[j];
            let (peer, send) = (first.peer, first.send);
            let (what, dir) = if send { ("sends", "to") } else { ("receives", "from") };
            let mut d = Diagnostic::new(
                DiagKind::BatchRule,
                un.span(second.stmt),
                format!(
                    "{}, rank {r}'s `batch` {what} twice {dir} rank {peer}",
                    un.at(r, second.stmt, second.ctx)
                ),
            )
            .with_hint("one `batch` holds at most one send and one receive per peer; split it into two `batch`es");
            let fs = un.span(first.stmt);
            if fs != d.span {
                let kw = if send { "send" } else { "recv" };
                d = d.with_note(fs, format!("previous `{kw}` {dir} rank {peer} here"));
            }
            return Some(d);
        }
    }
    // no two receives overlap, no receive overlaps a send
    for (i, a) in ops.iter().enumerate() {
        if a.send {
            continue;
        }
        for (j, b) in ops.iter().enumerate() {
            if i == j || (!b.send && j < i) || !memo.get(a.reg, b.reg) {
                continue;
            }
            let areg = &un.regs[a.reg as usize];
            let breg = &un.regs[b.reg as usize];
            let what = if b.send {
                format!(
                    "receives into {} and sends from {}, which overlap{}",
                    reg_text(un, r, areg),
                    reg_text(un, r, breg),
                    when(un, areg, breg)
                )
            } else {
                format!(
                    "receives into {} and {}, which overlap{}",
                    reg_text(un, r, areg),
                    reg_text(un, r, breg),
                    when(un, areg, breg)
                )
            };
            return Some(
                Diagnostic::new(
                    DiagKind::BufferHazard,
                    un.span(a.stmt),
                    format!("{}, rank {r}'s `batch` {what}", un.at(r, a.stmt, a.ctx)),
                )
                .with_hint("the operations of one `batch` run concurrently: use disjoint regions"),
            );
        }
    }
    None
}
