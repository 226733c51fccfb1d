//! Step 3: point-to-point matching on channels `(source, destination, tag)`
//! (the k-th send matches the k-th receive), equal lengths of matched pairs,
//! and the shapes of collective regions.

use crate::check::{ordinal, tag_text};
use crate::compile::CollKind;
use crate::diag::{stmt_key, DiagKind, Diagnostic, Sink};
use crate::fxhash::FxHashMap;
use crate::unroll::{Unrolled, NONE};

/// Above this world size channels are found by hashing only (the dense
/// table has `world^2` entries).
const DENSE_LIMIT: usize = 1024;

/// Pairs every message and sets each op's `partner`; returns the step-3
/// diagnostics (empty when everything matches).
///
/// All sends of a channel come from its source rank and all receives from
/// its destination, so each rank's operations, in order, number the
/// messages of its channels: the k-th send pairs with the k-th receive.
/// Channels are counted in flat arrays (no list per channel).
pub(crate) fn check(un: &mut Unrolled<'_, '_>) -> Vec<Diagnostic> {
    let w = un.ranks.len();
    // channel ids: tag-0 channels through a dense (source, destination)
    // table, others through a map
    let mut dense: Vec<u32> = if w <= DENSE_LIMIT {
        vec![NONE; w * w]
    } else {
        Vec::new()
    };
    let mut sparse: FxHashMap<(u32, u32, i64), u32> = FxHashMap::default();
    let mut keys: Vec<(u32, u32, i64)> = Vec::new();
    // per channel: sends, receives
    let mut nsend: Vec<u32> = Vec::new();
    let mut nrecv: Vec<u32> = Vec::new();
    let nops: usize = un.ranks.iter().map(|t| t.ops.len()).sum();
    let mut chan_of: Vec<u32> = Vec::with_capacity(nops);
    for (r, t) in un.ranks.iter().enumerate() {
        let r = r as u32;
        for op in &t.ops {
            let key = if op.send {
                (r, op.peer, op.tag)
            } else {
                (op.peer, r, op.tag)
            };
            let slot = if key.2 == 0 && !dense.is_empty() {
                dense.get_mut(key.0 as usize * w + key.1 as usize)
            } else {
                None
            };
            let mut fresh = || {
                keys.push(key);
                nsend.push(0);
                nrecv.push(0);
                keys.len() as u32 - 1
            };
            let id = match slot {
                Some(s) => {
                    if *s == NONE {
                        *s = fresh();
                    }
                    *s
                }
                None => *sparse.entry(key).or_insert_with(fresh),
            };
            chan_of.push(id);
            if op.send {
                nsend[id as usize] += 1;
            } else {
                nrecv[id as usize] += 1;
            }
        }
    }
    drop(dense);
    drop(sparse);
    // the sends of each channel, in order, at `send_off[c]..`
    let mut send_off: Vec<u32> = Vec::with_capacity(keys.len() + 1);
    let mut total = 0_u32;
    for &n in &nsend {
        send_off.push(total);
        total += n;
    }
    let mut sends: Vec<(u32, u32)> = vec![(NONE, NONE); total as usize];
    let mut cursor = send_off.clone();
    let mut f = 0_usize;
    for (r, t) in un.ranks.iter().enumerate() {
        for (i, op) in t.ops.iter().enumerate() {
            if op.send {
                let c = chan_of[f] as usize;
                sends[cursor[c] as usize] = (r as u32, i as u32);
                cursor[c] += 1;
            }
            f += 1;
        }
    }
    // the k-th receive of a channel takes its k-th send
    let mut seen = vec![0_u32; keys.len()];
    let mut f = 0_usize;
    for r in 0..w {
        for i in 0..un.ranks[r].ops.len() {
            let c = chan_of[f] as usize;
            f += 1;
            if un.ranks[r].ops[i].send {
                continue;
            }
            let k = seen[c];
            seen[c] += 1;
            if k >= nsend[c] {
                continue;
            }
            let (sr, si) = sends[(send_off[c] + k) as usize];
            let s_ev = un.ranks[sr as usize].ops[si as usize].ev;
            let ro = &mut un.ranks[r].ops[i];
            ro.partner = (sr, si);
            ro.partner_ev = s_ev;
            let r_ev = ro.ev;
            let so = &mut un.ranks[sr as usize].ops[si as usize];
            so.partner = (r as u32, i as u32);
            so.partner_ev = r_ev;
        }
    }
    drop(sends);
    // (sends, receives) on each unbalanced channel, for messages
    let counts: FxHashMap<(u32, u32, i64), (usize, usize)> = keys
        .iter()
        .zip(nsend.iter().zip(&nrecv))
        .filter(|(_, (s, r))| s != r)
        .map(|(k, (&s, &r))| (*k, (s as usize, r as usize)))
        .collect();

    let mut sink = Sink::default();
    for (r, t) in un.ranks.iter().enumerate() {
        let r = r as u32;
        for op in &t.ops {
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
                sink.push(stmt_key(op.stmt), unmatched(un, r, op, ns, nr));
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

fn unmatched(un: &Unrolled<'_, '_>, r: u32, op: &crate::unroll::P2p, ns: usize, nr: usize) -> Diagnostic {
    let sit = un.at(r, op.stmt, op.ctx);
    let p = op.peer;
    let tag = tag_text(op.tag);
    let peer_ops = &un.ranks[p as usize].ops;
    // a candidate on the other side: an unmatched operation of the opposite
    // direction between the same two ranks, else any unmatched one
    let candidate = peer_ops
        .iter()
        .filter(|o| o.send != op.send && o.partner.0 == NONE)
        .min_by_key(|o| u8::from(o.peer != r));
    let (kind, msg, note) = if op.send {
        let detail = if nr == 0 {
            format!("rank {p} never receives from rank {r}{tag}")
        } else {
            format!(
                "rank {p} posts only {nr} matching `recv` for the {ns} messages on this channel (this is the {})",
                ordinal(ns.min(nr + 1) as u64)
            )
        };
        (
            DiagKind::UnmatchedSend,
            format!("{sit}, rank {r} sends to rank {p}{tag} but {detail}"),
            "receive expected here",
        )
    } else {
        let detail = if ns == 0 {
            format!("rank {p} never sends to rank {r}{tag}")
        } else {
            format!("rank {p} posts only {ns} matching `send` for the {nr} receives on this channel")
        };
        (
            DiagKind::UnmatchedRecv,
            format!("{sit}, rank {r} receives from rank {p}{tag} but {detail}"),
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

/// Collective regions must have the collective's shape.
fn collective_shapes(un: &Unrolled<'_, '_>) -> Vec<Diagnostic> {
    let mut sink = Sink::default();
    let names = &un.prog.len_names;
    for (r, t) in un.ranks.iter().enumerate() {
        let r = r as u32;
        for ev in &t.events {
            let crate::unroll::EvKind::Coll(ci) = ev.kind else {
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
