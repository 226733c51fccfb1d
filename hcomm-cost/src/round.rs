//! The cost of one round: messages that run at the same time, sharing the
//! links they cross.
//!
//! A message between ranks `a` and `b` crosses the first level whose group
//! holds both. On that level it uses resources: on a switch, its sender's
//! endpoint out and its receiver's endpoint in; on a mesh, the link of its
//! pair of endpoints; on a ring, each hop the shorter way round. The bytes of
//! a round's messages on one resource share its bandwidth, so a message
//! takes `alpha + (bytes on its busiest resource) / bandwidth` (or, when
//! the level has a shared bandwidth, the bytes of every message crossing it
//! in the group over that, if slower); the round
//! takes its slowest message, plus `gamma` times the bytes its busiest
//! receiver reduces.
//!
//! Symmetric rounds (every block of ranks does what the first does) are
//! costed from the first block's messages: resources are named up to that
//! symmetry ([`Block`]), so loads come out as the full round's.

use rustc_hash::FxHashMap;

use crate::topology::{Link, Machine};

/// One message of a round.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Msg {
    /// Sending rank.
    pub(crate) from: usize,
    /// Receiving rank.
    pub(crate) to: usize,
    /// Its size in bytes.
    pub(crate) bytes: f64,
    /// Whether the receiver reduces it into its buffer.
    pub(crate) reduce: bool,
}

/// Which resource a message uses: level, kind, and two indices.
type Key = (u16, u8, usize, usize);

const OUT: u8 = 0;
const IN: u8 = 1;
const PAIR: u8 = 2;
const HOP_UP: u8 = 3;
const HOP_DOWN: u8 = 4;

/// The resources of a message from `a` to `b` at level `i`, with ranks
/// named modulo `block` (the symmetry: `block == world` names them all).
fn resources(m: &Machine, world: usize, block: usize, msg: &Msg, out: &mut Vec<Key>) {
    let i = m.meet(msg.from, msg.to, world);
    let ep = m.endpoint(i, world);
    let group = m.group(i, world);
    let lvl = i as u16;
    let canon = |r: usize| r % block;
    match m.levels[i].link {
        Link::Switch => {
            out.push((lvl, OUT, canon(msg.from) / ep, 0));
            out.push((lvl, IN, canon(msg.to) / ep, 0));
        }
        Link::Mesh => {
            // A pair's load comes from its sender's messages alone, and
            // senders are always of the first block.
            out.push((lvl, PAIR, msg.from / ep, msg.to / ep));
        }
        Link::Ring => {
            let n = group / ep;
            let base = msg.from / group * n;
            let pa = msg.from / ep % n;
            let pb = msg.to / ep % n;
            let up = (pb + n - pa) % n;
            let per_block = (block / ep).max(1);
            if up <= n - up {
                for j in 0..up {
                    out.push((lvl, HOP_UP, (base + (pa + j) % n) % per_block, 0));
                }
            } else {
                for j in 0..n - up {
                    out.push((lvl, HOP_DOWN, (base + (pa + n - j) % n) % per_block, 0));
                }
            }
        }
    }
}

/// Microseconds to move `bytes` at `gbs` GB/s.
pub(crate) fn transfer_us(bytes: f64, gbs: f64) -> f64 {
    bytes / (gbs * 1e3)
}

/// The time of one round in microseconds. Every message of the round is
/// like one of `sends` (their times are taken), and `recvs` are the
/// messages received by the ranks of the first block (their loads on
/// receiving endpoints and reductions count); `block` ranks form that
/// block (`world` when the lists hold every message).
pub(crate) fn round_us(m: &Machine, world: usize, block: usize, sends: &[Msg], recvs: &[Msg]) -> f64 {
    let mut load: FxHashMap<Key, f64> = FxHashMap::default();
    let mut keys = Vec::new();
    let mut per_msg = Vec::with_capacity(sends.len());
    let mut shared: FxHashMap<(usize, usize), f64> = FxHashMap::default();
    for s in sends.iter().filter(|s| s.from != s.to) {
        keys.clear();
        resources(m, world, block, s, &mut keys);
        let i = m.meet(s.from, s.to, world);
        let group = m.group(i, world);
        // A group larger than the block holds `group / block` blocks alike.
        *shared.entry((i, s.from / group)).or_insert(0.0) += s.bytes * (group / block).max(1) as f64;
        // The receiving endpoint's load comes from `recvs`.
        for &k in keys.iter().filter(|k| k.1 != IN) {
            *load.entry(k).or_insert(0.0) += s.bytes;
        }
        per_msg.push((i, s.from / group, s.bytes, keys.clone()));
    }
    let mut reduced: FxHashMap<usize, f64> = FxHashMap::default();
    for r in recvs.iter().filter(|r| r.from != r.to) {
        keys.clear();
        resources(m, world, block, r, &mut keys);
        for &k in keys.iter().filter(|k| k.1 == IN) {
            *load.entry(k).or_insert(0.0) += r.bytes;
        }
        if r.reduce {
            *reduced.entry(r.to).or_insert(0.0) += r.bytes;
        }
    }
    let slowest = per_msg
        .iter()
        .map(|(i, g, bytes, keys)| {
            let l = &m.levels[*i];
            let busiest = keys
                .iter()
                .map(|k| load.get(k).copied().unwrap_or(0.0))
                .fold(0.0, f64::max);
            let own = transfer_us(busiest, l.bandwidth_for(*bytes));
            let group = l
                .shared_for(*bytes)
                .map_or(0.0, |bw| transfer_us(shared.get(&(*i, *g)).copied().unwrap_or(0.0), bw));
            l.latency_us + own.max(group)
        })
        .fold(0.0, f64::max);
    let reduce = reduced.values().copied().fold(0.0, f64::max);
    slowest + transfer_us(reduce, m.reduce_gbs)
}
