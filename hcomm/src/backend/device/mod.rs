//! What the HCCL and NCCL backends share: one [`DeviceBackend`] implements
//! [`crate::backend::Backend`] over a [`Driver`] (the library pair: HCCL +
//! ACL runtime, or NCCL + CUDA runtime).
//!
//! * **Streams.** Each communicator owns one stream; every library call is
//!   enqueued there, and a wait is a stream synchronisation polled in short
//!   slices up to the communicator's timeout, checking meanwhile for failed
//!   peers (in-process worlds), aborts and the library's asynchronous error
//!   (`wait.rs`).
//! * **Point-to-point.** Posted operations stay queued on the host until some
//!   operation of the communicator blocks (a wait, a test, a blocking call, a
//!   batch, a collective); then every queued operation is handed to the
//!   library at once, split by channel position into batch calls (see
//!   [`plan`]), so in-flight operations progress together (`p2p.rs`).
//!   `comm_schedule!` calls do not post statement by statement: the
//!   executor issues their plan, one group call or collective at a time
//!   (`hcomm::__private`'s `replay.rs`).
//! * **Collectives** run as the library's own; those it lacks (gather on
//!   HCCL; all-to-all-v on NCCL) are built from one batch call. Nothing falls
//!   back to the host algorithms, which would dereference device addresses
//!   (`collective.rs`).
//! * **Reductions the library rejects** (HCCL's support matrix) run as its
//!   data movement plus a fold on the host, with the host backend's result
//!   (`emulate.rs`).
//! * **Host memory** is accepted everywhere: it is staged through device
//!   buffers (copy in, operate, copy out), so programs written for host
//!   slices run unchanged; [`crate::DeviceBuffer`]s avoid the copies
//!   (`staging.rs`).
//! * **Failures.** A wait that times out or sees a failed peer abandons the
//!   device work it cannot cancel: the communicator fails every later
//!   operation with the same error, its staging memory and (per device) every
//!   freed device buffer are kept until the stream drained, and its last drop
//!   hands stream and communicator to a thread that destroys them once idle
//!   (`wait.rs`, `teardown.rs`).
//!
//! The rest: `driver.rs` (the [`Driver`] contract), `handle.rs` (the
//! communicator handle), `state.rs` (per-operation slots), `subgroup.rs`,
//! [`memory`] (device allocations), [`world`] (what in-process ranks share).

mod backend;
mod collective;
pub(crate) mod driver;
mod emulate;
mod handle;
pub(crate) mod memory;
mod p2p;
pub(crate) mod plan;
mod staging;
mod state;
mod subgroup;
mod teardown;
mod wait;
pub(crate) mod world;

use std::sync::{Mutex, MutexGuard};

pub(crate) use backend::{DeviceBackend, Parts};
pub(crate) use driver::{Driver, Raw};
pub(crate) use handle::CommHandle;

/// Locks, recovering from poisoning (state is updated in single steps).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
