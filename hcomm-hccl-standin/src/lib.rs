//! **TEST ONLY.** An ABI-faithful stand-in for `libhccl.so` + `libascendcl.so`.
//!
//! Built as a `cdylib`, this crate exports the HCCL and ACL runtime symbols that
//! `hcomm-sys` binds, with the exact C signatures, enum values and struct layouts
//! of the CANN headers (`hccl.h`, `hccl_types.h`, `acl_rt.h`), so the HCCL code path of `hcomm` can be exercised end
//! to end — through `dlopen` — on a machine without Ascend hardware. It is not a
//! communication library: never ship it, never put it on a production
//! `LD_LIBRARY_PATH`.
//!
//! # Model
//!
//! * **Devices.** `aclrtGetDeviceCount` reports `HCOMM_STANDIN_DEVICE_COUNT`
//!   devices (default 8); `aclrtSetDevice` binds one to the calling thread. One
//!   device per rank, as on real hardware.
//! * **Memory.** `aclrtMalloc` allocates host memory and records it (size,
//!   device) in a registry; HCCL calls reject buffers that are not inside a live
//!   allocation with `HCCL_E_PTR`, or that belong to another device than the
//!   communicator with `HCCL_E_PARA`. `aclrtMemcpy` checks `count <= destMax` and
//!   the direction against the registry.
//! * **Streams.** Every stream has a worker thread that runs the enqueued
//!   operations in order. `aclrtSynchronizeStream` waits until the queue drained
//!   and returns the first error since the last synchronisation (then clears it);
//!   after an error the rest of the queue is discarded. `aclGetRecentErrMsg`
//!   returns the message of the calling thread's last failure.
//! * **Communicators.** `HcclGetRootInfo` encodes a process-unique world id and
//!   the loopback port of this process's hub into the 4108 bytes;
//!   `HcclCommInitRootInfo` joins that world and blocks until all `nRanks`
//!   joined (or `HCCL_CONNECT_TIMEOUT` seconds, default 120, passed). Ranks of
//!   other processes join through the hub (127.0.0.1 only) and run every
//!   operation there, with the same code and messages (`hub.rs`, `link.rs`), so one
//!   process per rank works as under HCCL; the hub's process waits at exit
//!   until its remote ranks disconnected.
//!   A rank that destroyed its communicator stays a member: peers waiting on
//!   it time out.
//! * **Operations** are checked synchronously for what real HCCL rejects at call
//!   time (null pointers: `HCCL_E_PTR`; bad data type, reduce op, rank or root,
//!   `recvBuf == sendBuf` for all-to-all(V), all-gather-V, reduce-scatter-V, two
//!   sends or two receives to one peer in one `HcclBatchSendRecv`: `HCCL_E_PARA`;
//!   reductions of int128/fp8/hif8: `HCCL_E_NOT_SUPPORT`), then enqueued.
//! * **Data path.** The stand-in moves and reduces data with its own code, so
//!   tests of a library built on HCCL check it against something independent
//!   of that library:
//!   * *Streams* are ordered queues, one worker thread each: an operation
//!     starts when the previous one on its stream ended.
//!   * *Point-to-point* (`HcclSend`, `HcclRecv`, `HcclBatchSendRecv`): every
//!     communicator has a mailbox per (source, destination) rank pair. A send
//!     posts an offer of its buffer; a receive takes the oldest offer of its
//!     channel and copies it (sizes must agree, else both ends fail), so a
//!     pair's messages match in stream order. A send completes when its offer
//!     was taken (synchronous, like HCCL's); the items of one batch are all
//!     posted first and progress together.
//!   * *Collectives*: a rank's n-th collective on a communicator blocks its
//!     stream until every rank of the communicator called its n-th one; then
//!     the calls are checked for agreement (ranks that disagree all fail, and
//!     the communicator stays usable) and the collective runs once, serially,
//!     for all ranks: every input is read, then every output written.
//!     Reductions fold in rank order; integers wrap; fp16 and bf16 accumulate
//!     in f32 and round once.
//!   * Buffers are read and written only while the memory registry confirms
//!     they are live; a buffer freed while its operation was pending fails
//!     the operation instead of being touched.
//!
//!   Execution waits for the peers at most the communicator's execution
//!   timeout (`HcclCommConfig.hcclExecTimeOut`, else `HCCL_EXEC_TIMEOUT`, else
//!   1836 s; 0 = never); a timeout or a cross-rank disagreement fails the stream
//!   (`ACL_ERROR_RT_TASK_TIMEOUT` / `ACL_ERROR_RT_FAILURE` from the synchronisation,
//!   details in `aclGetRecentErrMsg`). `HcclSend`/`HcclRecv` are synchronous and
//!   paired like HCCL's: two ranks that both send first time out.
//! * **Sub-communicators** (`HcclCreateSubCommConfig`) are one level deep, like
//!   HCCL's: splitting a sub-communicator is `HCCL_E_NOT_SUPPORT`.
//! * **Not exported**: `HcclGroupStart`/`HcclGroupEnd` (experimental in HCCL), so
//!   the "optional symbol missing" path is testable.
//!
//! # Error injection
//!
//! * `HCOMM_STANDIN_FAIL=<symbol>:<code>[,<symbol>:<code>...]`, read at every
//!   call: each call of `<symbol>` returns `<code>` without doing anything.
//! * `int hcomm_standin_inject_error(const char* symbol, int code)`: the next call
//!   of `symbol` (from any thread) returns `code`. Returns 0, or -1 for a null or
//!   non-UTF-8 name. `void hcomm_standin_clear_injections(void)` drops pending
//!   one-shot injections.
//! * `uint64_t hcomm_standin_freed_in_use(void)`: how many times `aclrtFree`
//!   freed memory an enqueued operation had not finished with. ACL lets that
//!   pass (the device then writes freed memory); the stand-in counts it, and
//!   the operation fails instead of touching the memory.
//!
//! # Using it in tests
//!
//! Depend on this crate (dev-dependency) so cargo builds the `cdylib`, then open
//! [`cdylib_path()`] with `hcomm_sys::HcclApi::load` and `hcomm_sys::AclApi::load`
//! (both tables may come from the same file).

/// The exported ACL runtime symbols (listed for documentation; call them through
/// `dlopen`, which is the point of this crate).
pub mod acl;
mod codes;
mod collective;
mod exec;
/// The exported HCCL symbols (listed for documentation; call them through `dlopen`).
pub mod hccl;
mod hub;
/// The exported error-injection hooks.
pub mod inject;
mod link;
mod mailbox;
mod memory;
mod op;
mod reduce;
mod rendezvous;
mod runtime;
mod stream;
mod world;

use std::path::PathBuf;

/// File name of the shared library cargo builds from this crate.
pub const CDYLIB_NAME: &str = "libhcomm_hccl_standin.so";

/// Where the built stand-in library is: `$HCOMM_STANDIN_LIB` if set, else next to
/// the running executable — `target/<profile>/deps/` (where cargo puts the
/// `cdylib` of a dependency) or `target/<profile>/` (where it puts the `cdylib`
/// of a package being built). `None` if neither exists.
pub fn cdylib_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("HCOMM_STANDIN_LIB") {
        return Some(PathBuf::from(p));
    }
    let exe = std::env::current_exe().ok()?;
    let mut dir = exe.parent()?.to_path_buf();
    for _ in 0..2 {
        let candidate = dir.join(CDYLIB_NAME);
        if candidate.exists() {
            return Some(candidate);
        }
        dir = dir.parent()?.to_path_buf();
    }
    None
}
