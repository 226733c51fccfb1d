//! Agreement before a collective on CUDA tensors: every rank's own checks
//! passed, and every rank passes the same element type and shape. NCCL
//! checks neither, and ranks that pass different shapes would exchange the
//! wrong elements, while a rank that failed alone would leave the others
//! waiting in the collective until the timeout. One small all-gather on the
//! device (skipped in a group of one), as hcomm's `tp` compares shapes on
//! the device backends.

use candle_core::CudaDevice;
use hcomm::{Comm, DataType};

use super::{lend, precondition, CudaElement};
use crate::to_candle;

/// Dimensions compared one by one; a tensor of more is refused (after the
/// exchange, so every rank fails alike or names the difference).
const DIMS: usize = 16;

/// The words one rank sends: whether its own checks passed (1 or 0), its
/// element type, its number of dimensions, then its dimensions (the first
/// [`DIMS`], zero-padded).
fn words<T: hcomm::Element>(ok: bool, dims: &[usize]) -> [i64; 3 + DIMS] {
    let mut w = [0i64; 3 + DIMS];
    w[0] = i64::from(ok);
    w[1] = DataType::ALL
        .iter()
        .position(|&d| d == T::DTYPE)
        .map_or(-1, |i| i as i64);
    w[2] = dims.len() as i64;
    for (slot, &d) in w[3..].iter_mut().zip(dims) {
        *slot = d as i64;
    }
    w
}

/// A rank's words as text: `f32 [4, 8]`.
fn shown(w: &[i64]) -> String {
    let dtype = usize::try_from(w[1])
        .ok()
        .and_then(|i| DataType::ALL.get(i))
        .map_or("an unknown type", |d| d.name());
    let n = usize::try_from(w[2]).unwrap_or(0);
    let dims = &w[3..3 + n.min(DIMS)];
    format!("{dtype} {dims:?}{}", if n > DIMS { " (and more)" } else { "" })
}

/// Fails on every rank of `group` unless every rank's own checks passed
/// (`local_ok`) and every rank passes a tensor of `T` and `dims`. A rank
/// whose checks failed gets `Ok` and reports its own error; the others get
/// one naming the first such rank; a difference names the first rank that
/// differs from rank 0.
pub(super) fn all_agree<T: CudaElement>(
    group: &Comm,
    what: &str,
    device: &CudaDevice,
    dims: &[usize],
    local_ok: bool,
) -> candle_core::Result<()> {
    let w = group.world();
    if w > 1 {
        let mine = words::<T>(local_ok, dims);
        let send = device.clone_htod(&mine)?;
        let mut all = device.alloc_zeros::<i64>(mine.len() * w)?;
        let stream = device.cuda_stream();
        {
            let send = lend::readable(group, device, &send, &stream, 0, mine.len())?;
            let mut recv = lend::writable(group, device, &mut all, &stream, 0, mine.len() * w)?;
            group.all_gather(send.buffer(), recv.buffer_mut()).map_err(to_candle)?;
        }
        let all = device.clone_dtoh(&all)?;
        let rows: Vec<&[i64]> = all.chunks(mine.len()).collect();
        if !local_ok {
            return Ok(());
        }
        if let Some(failed) = rows.iter().position(|r| r[0] != 1) {
            return Err(precondition(format!(
                "{what}: rank {failed} of the group refused its tensor (its own error says why); this rank's was fine"
            )));
        }
        if let Some(other) = rows.iter().position(|r| *r != rows[0]) {
            return Err(precondition(format!(
                "{what}: tensors disagree across the group: rank 0 passes {}, rank {other} passes {}",
                shown(rows[0]),
                shown(rows[other])
            )));
        }
    }
    if local_ok && dims.len() > DIMS {
        return Err(precondition(format!(
            "{what}: a CUDA tensor of {} dimensions; hcomm_candle takes at most {DIMS}. hint: reshape it first",
            dims.len()
        )));
    }
    Ok(())
}
