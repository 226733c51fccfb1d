//! Step 3: point-to-point matching on channels `(source, destination, tag)`
//! (the k-th send matches the k-th receive), equal lengths of matched pairs,
//! and the shapes of collective regions.

use crate::compile::CollKind;
use crate::diag::{stmt_key, DiagKind, Diagnostic, Sink};
use crate::lin::Lin;
use crate::situation::{ordinal, tag_text};
use crate::trace::{Mode, Unrolled, NONE};
use rustc_hash::FxHashMap;

/// Above this world size channels are found by hashing only (the dense
/// table has `world^2` entries of 8 bytes, 128 MiB at 4096, of which only
/// the pages of channels in use are ever touched: less than the unrolled
/// schedule itself, and far less than a hash table of that many channels).
const DENSE_LIMIT: usize = 4096;

/// Pairs every message and sets each op's `partner`; returns the step-3
/// diagnostics (empty when everything matches).
///
/// All sends of a channel come from its source rank and all receives from
/// its destination, so each rank's operations, in order, number the
/// messages of its channels: the k-th send pairs with the k-th receive.
/// One pass pairs them through a FIFO per channel (the operations waiting
/// for a partner are all of one kind, so FIFO order pairs the k-th with the
/// k-th); only when something is unmatched or of unequal length are the
/// messages' counts gathered for the diagnostics.
pub(crate) fn check(un: &mut Unrolled<'_, '_>) -> Vec<Diagnostic> {
    if pair(un) {
        return diagnose(un);
    }
    collective_shapes(un)
}

/// Marks, in a channel's word, that its queued operations are sends.
const SENDS: u32 = 1 << 31;

/// An operation waiting in a channel's queue, with what its partner needs
/// of it and, once paired, its partner.
#[derive(Clone, Copy)]
struct Node {
    rank: u32,
    index: u32,
    /// The next node of the queue plus one (0: none).
    next: u32,
    reg: u32,
    ev: u32,
    partner: (u32, u32),
    partner_ev: u32,
}

/// Sets every op's `partner`; whether any op is unmatched or any pair has
/// unequal lengths.
///
/// A channel is one `u64`: the first queued node plus one in the low half
/// (0: nothing queued), the last plus one in the high half with [`SENDS`]
/// when the queued operations are sends. Zero is an empty channel, so the
/// dense table is zeroed memory that the system hands out lazily. A queued
/// node keeps what its partner needs (region, event), and the partner it
/// gets is written back to the operations at the end, in rank order: the
/// pass then reads each operation once, in order, instead of touching the
/// partner's operation on another rank's trace at each pairing (a cache
/// miss each; this pass was a fifth of checking a direct all-gatherv, whose
/// `world^2` channels each carry one message).
fn pair(un: &mut Unrolled<'_, '_>) -> bool {
    let w = un.ranks.len();
    let mut dense: Vec<u64> = if w <= DENSE_LIMIT { vec![0; w * w] } else { Vec::new() };
    let mut sparse: FxHashMap<(u32, u32, i64), u64> = FxHashMap::default();
    let mut nodes: Vec<Node> = Vec::new();
    let reg_len: Vec<crate::lin::Lin> = un.regs.iter().map(crate::trace::Reg::len).collect();
    let mut bad = false;
    // operations queued and not yet paired
    let mut waiting = 0_usize;
    for r in 0..w {
        let ru = r as u32;
        for i in 0..un.ranks[r].ops.len() {
            let op = &un.ranks[r].ops[i];
            let (send, peer, tag, reg, ev) = (op.send, op.peer, op.tag, op.reg, op.ev);
            let key = if send { (ru, peer, tag) } else { (peer, ru, tag) };
            let slot = match (tag, (key.0 as usize).checked_mul(w)) {
                (0, Some(row)) if (key.1 as usize) < w => dense.get_mut(row + key.1 as usize),
                _ => None,
            };
            let slot = match slot {
                Some(s) => s,
                None => sparse.entry(key).or_insert(0),
            };
            let (head, tail) = (*slot as u32, (*slot >> 32) as u32);
            if head != 0 && (tail & SENDS != 0) != send {
                let other = &mut nodes[head as usize - 1];
                *slot = if other.next == 0 {
                    0
                } else {
                    u64::from(other.next) | (u64::from(tail) << 32)
                };
                waiting -= 1;
                other.partner = (ru, i as u32);
                other.partner_ev = ev;
                if other.reg != reg && reg_len.get(other.reg as usize) != reg_len.get(reg as usize) {
                    bad = true;
                }
                let (qr, qi, oev) = (other.rank, other.index, other.ev);
                let op = &mut un.ranks[r].ops[i];
                op.partner = (qr, qi);
                op.partner_ev = oev;
            } else {
                nodes.push(Node {
                    rank: ru,
                    index: i as u32,
                    next: 0,
                    reg,
                    ev,
                    partner: (NONE, NONE),
                    partner_ev: 0,
                });
                let node = nodes.len() as u32;
                let last = u64::from(node | if send { SENDS } else { 0 }) << 32;
                if head == 0 {
                    *slot = u64::from(node) | last;
                } else {
                    nodes[(tail & !SENDS) as usize - 1].next = node;
                    *slot = u64::from(head) | last;
                }
                waiting += 1;
            }
        }
    }
    // nodes were queued in rank order, operation by operation
    for n in nodes.iter().filter(|n| n.partner.0 != NONE) {
        let op = &mut un.ranks[n.rank as usize].ops[n.index as usize];
        op.partner = n.partner;
        op.partner_ev = n.partner_ev;
    }
    bad || waiting != 0
}

/// The diagnostics of unmatched operations and unequal lengths (the ops'
/// partners are set).
fn diagnose(un: &Unrolled<'_, '_>) -> Vec<Diagnostic> {
    // (sends, receives) on each channel
    let mut counts: FxHashMap<(u32, u32, i64), (usize, usize)> = FxHashMap::default();
    for (r, t) in un.ranks.iter().enumerate() {
        let r = r as u32;
        for op in &t.ops {
            if op.send {
                counts.entry((r, op.peer, op.tag)).or_default().0 += 1;
            } else {
                counts.entry((op.peer, r, op.tag)).or_default().1 += 1;
            }
        }
    }
    counts.retain(|_, (s, r)| s != r);

    let mut sink = Sink::default();
    for (r, t) in un.ranks.iter().enumerate() {
        let r = r as u32;
        for (i, op) in t.ops.iter().enumerate() {
            if sink.is_full() {
                break;
            }
            if op.partner.0 == NONE {
                let key = if op.send {
                    (r, op.peer, op.tag)
                } else {
                    (op.peer, r, op.tag)
                };
                let (ns, nr) = counts.get(&key).copied().unwrap_or((0, 0));
                sink.push(stmt_key(op.stmt), unmatched(un, r, i, ns, nr));
            } else if op.send {
                let other = &un.ranks[op.partner.0 as usize].ops[op.partner.1 as usize];
                let a = un.regs[op.reg as usize].len();
                let b = un.regs[other.reg as usize].len();
                if a != b {
                    let names = &un.prog.len_names;
                    let msg = format!(
                        "{}, rank {r} sends {} elements to rank {}{} but rank {} receives {} elements",
                        un.at(r, op.stmt, op.ctx),
                        a.display(names),
                        op.peer,
                        tag_text(op.tag),
                        op.peer,
                        b.display(names),
                    );
                    let d = Diagnostic::new(DiagKind::LengthMismatch, un.span(op.stmt), msg).with_note(
                        un.span(other.stmt),
                        format!("the matching `recv` of {} elements is here", b.display(names)),
                    );
                    sink.push(stmt_key(op.stmt), d);
                }
            }
        }
    }
    if !sink.is_empty() {
        return sink.into_vec();
    }
    collective_shapes(un)
}

/// Op `i` of rank `r` has no partner; `ns` / `nr` count the sends and
/// receives of its channel.
fn unmatched(un: &Unrolled<'_, '_>, r: u32, i: usize, ns: usize, nr: usize) -> Diagnostic {
    let ops = &un.ranks[r as usize].ops;
    let op = &ops[i];
    let sit = un.at(r, op.stmt, op.ctx);
    let p = op.peer;
    let tag = op.tag;
    // which message of this rank on the channel it is
    let nth = 1 + ops[..i]
        .iter()
        .filter(|o| o.send == op.send && o.peer == p && o.tag == tag)
        .count();
    let nth = ordinal(nth as u64);
    let kw = match (op.send, op.mode) {
        (true, Mode::Nonblocking) => "isend",
        (false, Mode::Nonblocking) => "irecv",
        (true, _) => "send",
        (false, _) => "recv",
    };
    let peer_ops = &un.ranks[p as usize].ops;
    // a candidate on the other side: an unmatched operation of the opposite
    // direction between the same two ranks, else any unmatched one
    let candidate = peer_ops
        .iter()
        .filter(|o| o.send != op.send && o.partner.0 == NONE)
        .min_by_key(|o| u8::from(o.peer != r));
    let (kind, msg, note) = if op.send {
        let detail = if nr == 0 {
            format!("rank {p} never receives from rank {r} on tag {tag}")
        } else {
            format!("rank {p} posts only {nr} matching `recv` for the {ns} messages on this channel")
        };
        (
            DiagKind::UnmatchedSend,
            format!("{sit}, rank {r}'s {nth} `{kw}` on tag {tag} to rank {p} has no matching `recv`: {detail}"),
            "receive expected here",
        )
    } else {
        let detail = if ns == 0 {
            format!("rank {p} never sends to rank {r} on tag {tag}")
        } else {
            format!("rank {p} posts only {ns} matching `send` for the {nr} receives on this channel")
        };
        (
            DiagKind::UnmatchedRecv,
            format!("{sit}, rank {r}'s {nth} `{kw}` on tag {tag} from rank {p} has no matching `send`: {detail}"),
            "send expected here",
        )
    };
    let mut d = Diagnostic::new(kind, un.span(op.stmt), msg).with_hint(
        "every `send` needs a `recv` on the same channel (source, destination, tag), posted in the same order",
    );
    if let Some(c) = candidate {
        let extra = if c.peer == r && c.tag != op.tag {
            format!(
                " (rank {p}'s `{}` here uses tag {})",
                if c.send { "send" } else { "recv" },
                c.tag
            )
        } else {
            String::new()
        };
        d = d.with_note(un.span(c.stmt), format!("{note}{extra}"));
    }
    d
}

/// The input and output lengths a v-collective over count parameter
/// `counts` needs on rank `r`: `all_gatherv` takes `counts[r]` and gives
/// `sum(counts)`, `all_to_allv` takes `sum(sizes[r])` and gives
/// `sum(col(sizes, r))`.
pub(crate) fn v_shapes(un: &Unrolled<'_, '_>, kind: CollKind, counts: Option<u32>, r: u32) -> Option<(Lin, Lin)> {
    let p = counts?;
    let w = u64::try_from(un.world).ok()?;
    let r = u64::from(r);
    let part = |line, from, to| Lin::count(crate::counts::line_part(p, line, from, to));
    match kind {
        CollKind::AllGatherV => Some((
            part(crate::counts::Line::Vector, r, r + 1),
            part(crate::counts::Line::Vector, 0, w),
        )),
        CollKind::AllToAllV => Some((
            part(crate::counts::Line::Row(r), 0, w),
            part(crate::counts::Line::Col(r), 0, w),
        )),
        _ => None,
    }
}

/// Collective regions must have the collective's shape, and the two
/// regions of a `copy`/`accumulate` equal lengths.
pub(crate) fn collective_shapes(un: &Unrolled<'_, '_>) -> Vec<Diagnostic> {
    let mut sink = Sink::default();
    let names = &un.prog.len_names;
    for (r, t) in un.ranks.iter().enumerate() {
        let r = r as u32;
        for ev in &t.events {
            if let crate::trace::EvKind::Copy(ci) = ev.kind {
                let c = &t.copies[ci as usize];
                let (ls, ld) = (c.src.len(), c.dst.len());
                if ls != ld {
                    let kw = if c.op.is_some() { "accumulate" } else { "copy" };
                    let msg = format!(
                        "{}, rank {r}'s `{kw}` reads {} elements but writes {}",
                        un.at(r, ev.stmt, ev.ctx),
                        ls.display(names),
                        ld.display(names)
                    );
                    sink.push(
                        stmt_key(ev.stmt),
                        Diagnostic::new(DiagKind::LengthMismatch, un.span(ev.stmt), msg)
                            .with_hint("the source and destination regions of a local move must have equal lengths"),
                    );
                }
                continue;
            }
            let crate::trace::EvKind::Coll(ci) = ev.kind else {
                continue;
            };
            let c = &t.colls[ci as usize];
            let g = un.groups.get(c.group as usize).map_or(1, Vec::len) as i64;
            let (Some(src), Some(dst)) = (&c.src, &c.dst) else {
                continue;
            };
            let (li, lo) = (src.len(), dst.len());
            let problem = match c.kind {
                CollKind::AllGather => (li.scale(g).ok() != Some(lo)).then(|| {
                    format!(
                        "an output of {} elements, but {g} ranks times an input of {} need {}",
                        lo.display(names),
                        li.display(names),
                        li.scale(g).unwrap_or(li).display(names)
                    )
                }),
                CollKind::ReduceScatter => (lo.scale(g).ok() != Some(li)).then(|| {
                    format!(
                        "an input of {} elements, but {g} ranks times an output of {} need {}",
                        li.display(names),
                        lo.display(names),
                        lo.scale(g).unwrap_or(lo).display(names)
                    )
                }),
                CollKind::AllToAll => {
                    if li == lo {
                        (!li.divisible_by(g)).then(|| {
                            format!(
                                "regions of {} elements, which {g} ranks cannot divide evenly",
                                li.display(names)
                            )
                        })
                    } else {
                        Some(format!(
                            "an input of {} elements and an output of {}",
                            li.display(names),
                            lo.display(names)
                        ))
                    }
                }
                CollKind::AllReduce => (li != lo).then(|| {
                    format!(
                        "an input of {} elements and an output of {}",
                        li.display(names),
                        lo.display(names)
                    )
                }),
                CollKind::Reduce => {
                    let is_root = un
                        .groups
                        .get(c.group as usize)
                        .and_then(|m| m.iter().position(|&x| x == r))
                        .map(|p| p as i64)
                        == c.root;
                    (is_root && li != lo).then(|| {
                        format!(
                            "an input of {} elements and an output of {}",
                            li.display(names),
                            lo.display(names)
                        )
                    })
                }
                CollKind::AllGatherV | CollKind::AllToAllV => {
                    let (want_in, want_out) = v_shapes(un, c.kind, c.counts, r).unwrap_or((li, lo));
                    if li != want_in {
                        Some(format!(
                            "an input of {} elements, but its counts give rank {r} {}",
                            li.display(names),
                            want_in.display(names)
                        ))
                    } else if lo != want_out {
                        Some(format!(
                            "an output of {} elements, but its counts give rank {r} {}",
                            lo.display(names),
                            want_out.display(names)
                        ))
                    } else {
                        None
                    }
                }
                CollKind::Broadcast | CollKind::Barrier => None,
            };
            if let Some(p) = problem {
                let msg = format!(
                    "{}, rank {r} calls `{}` with {p}",
                    un.at(r, ev.stmt, ev.ctx),
                    c.kind.name()
                );
                sink.push(
                    stmt_key(ev.stmt),
                    Diagnostic::new(DiagKind::LengthMismatch, un.span(ev.stmt), msg),
                );
            }
        }
    }
    sink.into_vec()
}
