//! One collective, run once for all its ranks: their calls are checked for
//! agreement, then every rank's inputs are read, the results computed
//! serially (reductions in rank order) and every rank's outputs written.
//!
//! All inputs are read before any output is written, so in-place calls and
//! overlapping buffers need no care; gaps between the blocks of V-operations
//! keep what they held.

use hcomm_sys::HcclDataType;

use crate::memory;
use crate::op::{Desc, Kind};
use crate::reduce::fold;

/// Runs the collective that `calls` (one per rank, in rank order) describe.
/// A disagreement fails every rank and moves nothing.
pub(crate) fn run(calls: &[Desc]) -> Result<(), String> {
    for rank in 0..calls.len() {
        check_agree(calls, rank)?;
        check_counts(calls, rank)?;
    }
    memory::write_all(&outputs(calls)?)
}

fn check_agree(calls: &[Desc], rank: usize) -> Result<(), String> {
    let mine = &calls[rank];
    for (r, d) in calls.iter().enumerate() {
        let same = d.kind == mine.kind
            && d.dtype == mine.dtype
            && d.op == mine.op
            && d.root == mine.root
            && (d.kind.is_v() || d.count == mine.count);
        if !same {
            return Err(format!(
                "collective mismatch: rank {rank} called {}({:?} x {}, op {:?}, root {}) but rank {r} called {}({:?} x {}, op {:?}, root {})",
                mine.kind.symbol(), mine.dtype, mine.count, mine.op, mine.root,
                d.kind.symbol(), d.dtype, d.count, d.op, d.root
            ));
        }
    }
    Ok(())
}

/// Per-peer counts of V-operations: what `rank` expects from each rank is
/// what that rank sends it.
fn check_counts(calls: &[Desc], rank: usize) -> Result<(), String> {
    let me = &calls[rank];
    for (j, d) in calls.iter().enumerate() {
        let (expects, sends) = match me.kind {
            Kind::AlltoAllV => (me.recv_counts[j], d.send_counts[rank]),
            Kind::AllGatherV => (me.recv_counts[j], d.count),
            Kind::ReduceScatterV => (me.count, d.send_counts[rank]),
            _ => return Ok(()),
        };
        if expects != sends {
            return Err(format!(
                "collective mismatch: {}: rank {rank} expects {expects} elements from rank {j}, which sends {sends}",
                me.kind.symbol()
            ));
        }
    }
    Ok(())
}

/// The bytes of elements: counts and displacements of one call are in
/// elements of its data type.
struct Bytes(usize);

impl Bytes {
    fn of(dtype: HcclDataType) -> Bytes {
        // Validated at call time: every data type that gets here has a size.
        Bytes(dtype.size().unwrap_or(1))
    }

    fn n(&self, elements: u64) -> usize {
        elements as usize * self.0
    }
}

/// Reads `elements` elements at `addr` plus `offset` elements.
fn read(b: &Bytes, addr: usize, offset: u64, elements: u64) -> Result<Vec<u8>, String> {
    memory::read(addr + b.n(offset), b.n(elements))
}

/// Every (address, bytes) the collective writes, computed from what every
/// rank's call reads.
fn outputs(calls: &[Desc]) -> Result<Vec<(usize, Vec<u8>)>, String> {
    let first = &calls[0];
    let b = Bytes::of(first.dtype);
    let k = first.count;
    let root = &calls[first.root as usize];
    let reduce = |blocks: &[Vec<u8>]| {
        let refs: Vec<&[u8]> = blocks.iter().map(Vec::as_slice).collect();
        fold(first.dtype, first.op, &refs)
    };
    // Block `j` (of `k` elements) of every rank's send buffer.
    let blocks_of = |j: usize| -> Result<Vec<Vec<u8>>, String> {
        calls.iter().map(|c| read(&b, c.send, j as u64 * k, k)).collect()
    };
    let mut out = Vec::new();
    match first.kind {
        Kind::Barrier => {}
        Kind::AllReduce => {
            let sum = reduce(&blocks_of(0)?);
            out.extend(calls.iter().map(|c| (c.recv, sum.clone())));
        }
        Kind::Reduce => out.push((root.recv, reduce(&blocks_of(0)?))),
        Kind::ReduceScatter => {
            for (j, c) in calls.iter().enumerate() {
                out.push((c.recv, reduce(&blocks_of(j)?)));
            }
        }
        Kind::Broadcast => {
            let data = read(&b, root.send, 0, k)?;
            out.extend(calls.iter().map(|c| (c.recv, data.clone())));
        }
        Kind::Scatter => {
            for (j, c) in calls.iter().enumerate() {
                out.push((c.recv, read(&b, root.send, j as u64 * k, k)?));
            }
        }
        Kind::AllGather => {
            let all = blocks_of(0)?.concat();
            out.extend(calls.iter().map(|c| (c.recv, all.clone())));
        }
        Kind::AlltoAll => {
            for (j, c) in calls.iter().enumerate() {
                out.push((c.recv, blocks_of(j)?.concat()));
            }
        }
        Kind::AlltoAllV => {
            for (j, dst) in calls.iter().enumerate() {
                for (i, src) in calls.iter().enumerate() {
                    let data = read(&b, src.send, src.send_displs[j], src.send_counts[j])?;
                    out.push((dst.recv + b.n(dst.recv_displs[i]), data));
                }
            }
        }
        Kind::AllGatherV => {
            for dst in calls {
                for (i, src) in calls.iter().enumerate() {
                    let data = read(&b, src.send, 0, src.count)?;
                    out.push((dst.recv + b.n(dst.recv_displs[i]), data));
                }
            }
        }
        Kind::ReduceScatterV => {
            for (j, dst) in calls.iter().enumerate() {
                let blocks = calls
                    .iter()
                    .map(|src| read(&b, src.send, src.send_displs[j], src.send_counts[j]))
                    .collect::<Result<Vec<_>, _>>()?;
                out.push((dst.recv, reduce(&blocks)));
            }
        }
    }
    Ok(out)
}
