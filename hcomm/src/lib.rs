//! # hcomm
//!
//! The communication layer of distributed training: communicators,
//! point-to-point and collective operations, non-blocking requests whose
//! buffers the borrow checker protects, timeouts and peer-failure errors
//! instead of hangs, and several algorithms per collective chosen by topology
//! and message size.
//!
//! The default backend, [`host`], runs ranks as threads of one process, so
//! everything runs on any machine:
//!
//! ```
//! use hcomm::ReduceOp;
//!
//! let out = hcomm::host::run(4, |comm| {
//!     let mine = vec![comm.rank() as i64; 3];
//!     let mut all = vec![0; 3 * comm.world()];
//!     comm.all_gather(&mine, &mut all)?;
//!     let mut sum = [comm.rank() as i64];
//!     comm.all_reduce_in_place(&mut sum, ReduceOp::Sum)?;
//!     Ok((all, sum[0]))
//! })
//! .unwrap();
//! assert_eq!(out[2].0, vec![0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3]);
//! assert_eq!(out[2].1, 6);
//! ```
//!
//! ## Schedules checked at compile time
//!
//! [`comm_schedule!`] writes a communication schedule once for every rank;
//! the macro checks it for every world size of its `#[verify]` set (matched
//! sends and receives, deadlock freedom, collective order, buffer hazards of
//! non-blocking operations, and that it computes what its
//! `#[postcondition]` claims) and expands it into calls on a [`Comm`]:
//!
//! ```
//! hcomm::comm_schedule! {
//!     /// Every rank passes its block to the right neighbour.
//!     #[verify(world in 1..=32)]
//!     fn shift_right(mine: &[T; n], from_left: &mut [T; n]) {
//!         batch {
//!             send mine to (rank + 1) % world;
//!             recv from_left from (rank - 1) % world;
//!         }
//!     }
//! }
//!
//! let got = hcomm::host::run(3, |comm| {
//!     let mut left = [0u8; 2];
//!     shift_right(comm, &[comm.rank() as u8; 2], &mut left)?;
//!     Ok(left[0])
//! })
//! .unwrap();
//! assert_eq!(got, vec![2, 0, 1]);
//! ```
//!
//! The runtime's own ring, recursive-doubling and Bruck all-gathers, ring
//! all-reduce, pairwise all-to-all and binomial broadcast are such schedules
//! ([`schedules`]).
//!
//! ## Model parallelism
//!
//! [`parallel::Context`] lays ranks out in tensor-, pipeline-, data- and
//! expert-parallel groups as Megatron-LM does; [`tp`], [`pp`] and [`moe`]
//! are the operations on those groups, on [`ndarray`] arrays (contiguous
//! arrays and views are buffers like slices). Non-blocking collectives
//! ([`Comm::iall_reduce`], [`Comm::iall_gather`], [`Comm::ireduce_scatter`])
//! let gradient buckets be summed while the backward pass goes on.
//!
//! ## Environment
//!
//! | variable | meaning |
//! |---|---|
//! | `HCOMM_TIMEOUT` | seconds any wait may block (default 300), read when a communicator is created |
//! | `HCOMM_ALGO` | forced algorithms, e.g. `all_reduce=ring,all_gather=bruck` |
//! | `HCOMM_TOPOLOGY` | `detect` (default: the cost model chooses for the machine the launcher finds), `full_mesh` (tuned thresholds), `ring`, `custom:<group size>` or `preset:<name>` |
//! | `HCOMM_SEGMENT_BYTES` | segment size of pipelined ring transfers (default 1 MiB) |
//! | `HCOMM_BACKEND` | `host` (default), `hccl` or `nccl`: the backend [`run`] starts ranks on |
//! | `HCOMM_BIND` | `core` (default): the rank threads [`run`] starts each run on cores of their own (the process's cores split into one block per rank; ranks that outnumber the cores share them evenly, consecutive ranks on one core), and so does the thread that calls [`init_from_env`] on the host backend (one block per process of the host, in rank order) unless a launcher placed the processes already; `none`: left to the scheduler |
//! | `HCOMM_TRACE` | a file: in a program that calls `trace::init_from_env` (feature `trace`; the library installs no subscriber by itself), every rank's operations as Chrome/Perfetto trace JSON (`{pid}` and `{rank}` in the name become the process id and the job rank) |
//! | `HCOMM_JOB_SECRET` | the job's secret, which every connection of [`init_from_env`] proves knowledge of ([`auth::JobSecret`]); unset: an unauthenticated job, told apart from others by `HCOMM_JOB_ID`, else `TORCHELASTIC_RUN_ID` |
//! | `HCOMM_HCCL_LIB`, `HCOMM_ACL_LIB` | `libhccl.so` / `libascendcl.so` to load (file or directory); else `ASCEND_HOME_PATH`, `ASCEND_TOOLKIT_HOME`, the default install directories and the system path |
//! | `HCOMM_NCCL_LIB`, `HCOMM_CUDART_LIB` | `libnccl.so.2` / `libcudart.so` to load; else `CUDA_HOME`, `CUDA_PATH`, `/usr/local/cuda/lib64` and the system path |
//!
//! ## Backends
//!
//! The same program runs on every backend: [`run`] starts `world` ranks on
//! the backend `HCOMM_BACKEND` names ([`host::run`], [`hccl::run`],
//! [`nccl::run`]). The device backends call their library's own collectives,
//! group in-flight point-to-point operations into batch calls, and accept
//! host memory (staged through device memory) as well as
//! [`DeviceBuffer`]s, which avoid the copies.
//!
//! A forced algorithm that does not support the communicator's world size
//! (recursive doubling on 6 ranks) falls back to the policy's choice with a
//! `tracing` warning; [`Comm::last_algorithm`] tells which was chosen, and
//! [`Comm::last_algorithms`] every algorithm that ran a part of the call.

#[doc(hidden)]
#[path = "private/mod.rs"]
pub mod __private;
extern crate self as hcomm;

pub mod auth;
mod backend;
mod batch;
mod buffer;
pub mod checker;
mod collective;
mod comm;
mod device;
pub mod docs;
mod element;
mod entry;
mod error;
mod external;
mod fnv;
mod header;
mod launch;
mod memcopy;
#[cfg(feature = "ndarray")]
pub mod moe;
mod options;
mod p2p;
pub mod parallel;
pub mod pp;
mod raw;
mod request;
mod select;
mod topology;
#[cfg(feature = "ndarray")]
pub mod tp;
#[cfg(feature = "trace")]
pub mod trace;
mod wire;

pub use batch::Batch;
pub use buffer::{Buffer, BufferMut, Memory};
pub use collective::schedules;
pub use comm::Comm;
pub use device::{take_device_teardown_errors, DeviceBuffer};
pub use element::{DataType, Element, ReduceOp};
pub use error::{Error, Report, Result};
pub use external::ExternalDeviceBuffer;
pub use half::{bf16, f16};
pub use hcomm_macros::comm_schedule;
pub use header::Collective;
pub use launch::{
    hccl, host, init_from_env, init_job, init_job_with, nccl, run, run_on, store, BackendKind, JobEnv, StorePlace,
    Transport,
};
#[cfg(feature = "ndarray")]
pub use ndarray;
pub use options::{CommOptions, DEFAULT_SEGMENT_BYTES, DEFAULT_TIMEOUT, MAX_TIMEOUT};
pub use p2p::Tag;
pub use request::{scope, wait_all, Progress, Request, Scope};
pub use select::{Algorithm, AlgorithmTable};
pub use topology::{ModelTopology, Topology};
