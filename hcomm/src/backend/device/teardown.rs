//! Dropping a [`DeviceBackend`]: the stream drains (bounded), then stream,
//! staging memory and communicator are released in that order; after
//! abandoned work this runs on a thread of its own, so that the drop does
//! not block on the device.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::driver::Poll;
use super::memory::{record_teardown_error, DevMem};
use super::wait::POLL_SLICE;
use super::DeviceBackend;
use crate::error::Error;

impl Drop for DeviceBackend {
    fn drop(&mut self) {
        let st = self.state.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        let stream = st.stream.take();
        let mut keep: Vec<DevMem> = std::mem::take(&mut st.graveyard);
        keep.extend(st.slots.iter_mut().filter_map(|s| s.staging.take()));
        keep.extend(st.barrier.take());
        let abandoned = st.abandoned;
        let ctx = Arc::clone(&self.ctx);
        let comm = Arc::clone(&self.comm);
        let world_comm = Arc::clone(&self.world_comm);
        let limit = self.timeout;
        let teardown = move || {
            if let Some(stream) = stream {
                if ctx.bind().is_ok() {
                    // Let the device finish (its own execution timeout ends
                    // abandoned work), then release in dependency order.
                    let deadline =
                        crate::options::deadline_after(limit.saturating_mul(2).saturating_add(Duration::from_secs(5)));
                    loop {
                        match ctx.driver.poll(comm.raw, stream, POLL_SLICE) {
                            Poll::Pending if Instant::now() < deadline => {}
                            _ => break,
                        }
                    }
                    // SAFETY: the stream is live, drained (or given up on),
                    // and destroyed once.
                    if let Err(e) = unsafe { ctx.driver.stream_destroy(stream) } {
                        record_teardown_error(e.into_error(ctx.driver.name()));
                    }
                }
            }
            drop(keep);
            drop(comm);
            drop(world_comm);
            if abandoned {
                ctx.unmark_stuck();
            }
        };
        if abandoned {
            let spawned = std::thread::Builder::new()
                .name("hcomm-device-reaper".into())
                .spawn(teardown);
            if let Err(e) = spawned {
                record_teardown_error(Error::Backend {
                    backend: self.ctx.driver.name(),
                    message: format!("cannot start the thread that releases an abandoned communicator: {e}"),
                });
            }
        } else {
            teardown();
        }
    }
}
