//! [`CommHandle`]: a library communicator, destroyed when its last owner
//! (a backend, a subgroup's parent link, the teardown thread) lets go.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::driver::Raw;
use super::memory::{record_teardown_error, DeviceCtx};

/// A communicator handle, destroyed on drop.
pub(crate) struct CommHandle {
    pub(crate) ctx: Arc<DeviceCtx>,
    pub(crate) raw: Raw,
    released: AtomicBool,
}

impl CommHandle {
    pub(crate) fn new(ctx: Arc<DeviceCtx>, raw: Raw) -> Arc<CommHandle> {
        Arc::new(CommHandle {
            ctx,
            raw,
            released: AtomicBool::new(false),
        })
    }

    /// Records that the library released the handle (an NCCL abort): it is
    /// never destroyed again.
    pub(super) fn mark_released(&self) {
        self.released.store(true, Ordering::SeqCst);
    }
}

impl Drop for CommHandle {
    fn drop(&mut self) {
        if self.released.load(Ordering::SeqCst) {
            return;
        }
        let driver = &self.ctx.driver;
        tracing::debug!(
            backend = driver.name(),
            device = self.ctx.device,
            "destroying communicator"
        );
        let result = self.ctx.bind().and_then(|()| {
            // SAFETY: the handle is live (never released) and this is its
            // last owner; every stream using it drained or was handed to the
            // reaper, which owns a clone of this handle.
            unsafe { driver.comm_destroy(self.raw) }.map_err(|e| e.into_error(driver.name()))
        });
        if let Err(e) = result {
            record_teardown_error(e);
        }
    }
}
