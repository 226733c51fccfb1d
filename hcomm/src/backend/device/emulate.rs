//! Reductions the library rejects, run anyway with the host backend's
//! result: HCCL refuses some (collective, element type, operator)
//! combinations (`hcomm_sys::support`'s matrix: no unsigned 8- or 32-bit
//! reductions, `prod` of bf16, all-reduce of u64 and f64 on Atlas A2/A3).
//! For those the library moves the data (all-gather for all-reduce and
//! reduce, all-to-all for reduce-scatter, which take every type) and this
//! rank folds its contributions on the host in rank order, the order of the
//! serial reference, so integers match exactly and floats match a serial
//! fold. A `tracing` event (debug) names every such call.

use super::driver::LibColl;
use super::staging::{Fold, Staging};
use super::state::State;
use super::DeviceBackend;
use crate::element::DataType;
use crate::error::Result;

impl DeviceBackend {
    /// Enqueues the reduction `call` as the library's own where it runs
    /// it, else as data movement plus a host fold that
    /// [`Staging::copy_back`] performs once the stream drained.
    ///
    /// # Safety
    ///
    /// The call's device ranges valid until the stream drained (they are
    /// the staging's or the caller's).
    pub(super) unsafe fn reduction(
        &self,
        st: &mut State,
        call: &LibColl<'_>,
        dtype: DataType,
        staging: &mut Staging<'_>,
    ) -> Result<()> {
        if self.ctx.driver.runs(call, dtype) {
            return self.native(st, call, dtype);
        }
        let w = self.lib_rank.len();
        let es = dtype.size();
        // where rank q's block lies in what the library delivers
        let offsets = |block: usize| -> Vec<usize> { self.lib_rank.iter().map(|&l| l as usize * block).collect() };
        let me = self.lib_rank[self.rank];
        let (moved, fold) = match *call {
            LibColl::AllReduce { send, recv, count, op } => {
                let all = staging.keep(self.ctx.alloc(count * es * w)?);
                let fold = Fold::new(all, offsets(count * es), count, dtype, op, recv);
                (
                    LibColl::AllGather {
                        send,
                        recv: all,
                        send_count: count,
                    },
                    Some(fold),
                )
            }
            LibColl::Reduce {
                send,
                recv,
                count,
                op,
                root,
            } => {
                let all = staging.keep(self.ctx.alloc(count * es * w)?);
                let fold = (me == root).then(|| Fold::new(all, offsets(count * es), count, dtype, op, recv));
                (
                    LibColl::AllGather {
                        send,
                        recv: all,
                        send_count: count,
                    },
                    fold,
                )
            }
            LibColl::ReduceScatter {
                send,
                recv,
                recv_count,
                op,
            } => {
                let mine = staging.keep(self.ctx.alloc(recv_count * es * w)?);
                let fold = Fold::new(mine, offsets(recv_count * es), recv_count, dtype, op, recv);
                (
                    LibColl::AllToAll {
                        send,
                        recv: mine,
                        count: recv_count,
                    },
                    Some(fold),
                )
            }
            _ => return self.native(st, call, dtype),
        };
        tracing::debug!(
            backend = self.ctx.driver.name(),
            collective = call.name(),
            dtype = %dtype,
            via = moved.name(),
            "the library rejects this reduction: its data movement, then the reduction on the host in rank order"
        );
        if let Some(f) = fold {
            staging.fold(f);
        }
        self.native(st, &moved, dtype)
    }
}
