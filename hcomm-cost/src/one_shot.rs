//! hcomm's one-shot collectives on the shared board: every rank copies its
//! contribution onto its own page, the ranks synchronise once (each bumps
//! its counter and waits for the others'), then every rank reads what it
//! needs from each peer's page, reducing where the collective does.
//!
//! The model: one publish copy (every rank's copies together share the
//! level's bandwidth, as a round's messages do), one synchronisation
//! ([`crate::Board::sync_us`], or the level's latency without a board),
//! and `world - 1` reads of a peer's page at the bandwidth of a page's
//! size, shared the same way, plus the reduction of those reads. A part
//! only its own rank reads (its block of an all-to-all, its part of a
//! reduce-scatter) stays off the board.

use crate::coll::Coll;
use crate::round::transfer_us;
use crate::schedule::Prediction;
use crate::topology::{Level, Machine};

/// What one rank moves: bytes it publishes, bytes of each page it reads,
/// how many ranks publish and read, and whether it reduces what it reads.
struct Traffic {
    publish: f64,
    publishers: f64,
    read: f64,
    readers: f64,
    reduce: bool,
}

fn traffic(coll: Coll, world: usize, bytes: usize) -> Traffic {
    let (b, p) = (bytes as f64, world as f64);
    let all = |publish, read, reduce| Traffic {
        publish,
        publishers: p,
        read,
        readers: p,
        reduce,
    };
    match coll {
        Coll::AllReduce | Coll::Reduce => all(b, b, true),
        Coll::AllGather => all(b / p, b / p, false),
        Coll::ReduceScatter => all(b - b / p, b / p, true),
        Coll::AllToAll => all(b - b / p, b / p, false),
        // Only the root publishes; each of the others reads its page.
        Coll::Broadcast => Traffic {
            publish: b,
            publishers: 1.0,
            read: b,
            readers: p - 1.0,
            reduce: false,
        },
    }
}

/// `count` copies of `bytes` each by `ranks` ranks at once on level `l`:
/// a rank's own copies at the bandwidth of their size, or all of them on
/// the level's shared bandwidth, whichever is slower.
fn copies_us(l: &Level, bytes: f64, count: f64, ranks: f64) -> f64 {
    let own = transfer_us(bytes * count, l.bandwidth_for(bytes));
    l.shared_for(bytes)
        .map_or(own, |bw| own.max(transfer_us(bytes * count * ranks, bw)))
}

/// The one-shot `coll` on `world` ranks of `m`, a call of `bytes`
/// (nccl-tests' size).
pub(crate) fn predict(m: &Machine, coll: Coll, world: usize, bytes: usize) -> Prediction {
    if world < 2 {
        return Prediction { us: 0.0, rounds: 0 };
    }
    let l = &m.levels[m.meet(0, world - 1, world)];
    let t = traffic(coll, world, bytes);
    let peers = if coll == Coll::Broadcast {
        1.0
    } else {
        world as f64 - 1.0
    };
    let sync = m.board.as_ref().map_or(l.latency_us, |b| b.sync_us(world));
    let publish = copies_us(l, t.publish, 1.0, t.publishers);
    let read = copies_us(l, t.read, peers, t.readers);
    let reduce = if t.reduce {
        transfer_us(t.read * peers, m.reduce_gbs)
    } else {
        0.0
    };
    Prediction {
        us: sync + publish + read + reduce,
        rounds: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topology::{Board, Link};

    /// A host of one level: 1 us latency, 10 GB/s per copy and 40 GB/s
    /// shared, reduction at 4 GB/s, a board of 0.5 us and 3 us more past
    /// 2 cores; sizes chosen so that the numbers are exact.
    fn host() -> Machine {
        let mut m = Machine::flat("t", Link::Switch, 10.0, 1.0, 4.0);
        m.levels[0].shared_gbs = Some(40.0);
        m.board = Some(Board {
            latency_us: 0.5,
            cores: Some(2),
            oversubscribed_us: Some(3.0),
        });
        m
    }

    #[test]
    fn one_shot_times_match_a_hand_computation() {
        let m = host();
        let us = |coll, world, bytes| predict(&m, coll, world, bytes).us;
        // All-reduce of 40 KB on 2 ranks: 0.5 us sync; publish 40 KB per
        // rank, 80 KB shared: max(4, 2) = 4 us; one read of 40 KB:
        // max(4, 2) = 4 us; reduce 40 KB at 4 GB/s = 10 us.
        assert!((us(Coll::AllReduce, 2, 40_000) - 18.5).abs() < 1e-9);
        // On 4 ranks (past 2 cores): sync 3.5 us; publish max(4, 160 KB /
        // 40 = 4) = 4 us; three reads of 40 KB: max(12, 480 KB / 40 = 12)
        // = 12 us; reduce 120 KB = 30 us.
        assert!((us(Coll::AllReduce, 4, 40_000) - 49.5).abs() < 1e-9);
        // All-gather of 160 KB on 8 ranks: 20 KB each; sync 3.5; publish
        // max(2, 160 KB / 40 = 4) = 4 us; seven reads of 20 KB: max(14,
        // 1120 KB / 40 = 28) = 28 us; no reduction.
        assert!((us(Coll::AllGather, 8, 160_000) - 35.5).abs() < 1e-9);
        // Reduce-scatter of 80 KB on 2 ranks: the own half stays off the
        // board: publish 40 KB (4 us), read 40 KB (4 us), reduce 10 us.
        assert!((us(Coll::ReduceScatter, 2, 80_000) - 18.5).abs() < 1e-9);
        // All-to-all, the same without the reduction.
        assert!((us(Coll::AllToAll, 2, 80_000) - 8.5).abs() < 1e-9);
        // Broadcast of 40 KB on 4 ranks: the root publishes 40 KB (4 us),
        // three ranks read it once (max(4, 120 KB / 40 = 3) = 4 us).
        assert!((us(Coll::Broadcast, 4, 40_000) - 11.5).abs() < 1e-9);
        // Without a board, the level's latency is the synchronisation.
        let mut plain = host();
        plain.board = None;
        assert!((predict(&plain, Coll::AllToAll, 2, 80_000).us - 9.0).abs() < 1e-9);
        assert!(predict(&m, Coll::AllReduce, 1, 40_000).us.abs() < 1e-12);
    }
}
