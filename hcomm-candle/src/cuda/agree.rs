//! Agreement before a collective on CUDA tensors: every rank's own checks
//! passed, and every rank passes the same element type and shape. NCCL
//! checks neither, and ranks that pass different shapes would exchange the
//! wrong elements, while a rank that failed alone would leave the others
//! waiting in the collective until the timeout. One small all-gather of
//! each rank's claim ([`crate::claim`]) on the device, as hcomm's `tp`
//! compares shapes on the device backends.

use candle_core::CudaDevice;
use hcomm::Comm;

use super::{lend, precondition, CudaElement};
use crate::claim::{verdict, words, WORDS};
use crate::to_candle;

/// Fails on every rank of `group` unless every rank's own checks passed
/// (`local_ok`) and every rank passes a tensor of `T` and `dims`. A rank
/// whose checks failed gets `Ok` and reports its own error; the others get
/// the verdict's error. In a group of one nothing is exchanged.
pub(super) fn all_agree<T: CudaElement>(
    group: &Comm,
    what: &str,
    device: &CudaDevice,
    dims: &[usize],
    local_ok: bool,
) -> candle_core::Result<()> {
    let mine = words(local_ok, <T as hcomm::Element>::DTYPE, dims);
    let w = group.world();
    let all = if w > 1 {
        let send = device.clone_htod(&mine)?;
        let mut all = device.alloc_zeros::<i64>(WORDS * w)?;
        let stream = device.cuda_stream();
        {
            let send = lend::readable(group, device, &send, &stream, 0, WORDS)?;
            let mut recv = lend::writable(group, device, &mut all, &stream, 0, WORDS * w)?;
            group.all_gather(send.buffer(), recv.buffer_mut()).map_err(to_candle)?;
        }
        device.clone_dtoh(&all)?
    } else {
        mine.to_vec()
    };
    if !local_ok {
        return Ok(());
    }
    verdict(what, &all).map_err(precondition)
}
