//! The NCCL backend: NVIDIA GPUs through `libnccl.so.2` and the CUDA runtime
//! (`libcudart.so`), loaded at run time by `hcomm-sys`.
//!
//! * In one process, [`run`] starts one thread per rank, each on its own
//!   GPU (rank `r` on device `r`), like [`crate::host::run`].
//! * With one process per rank, rank 0 calls [`unique_id`] and hands the
//!   [`UniqueId`] bytes ([`UniqueId::as_bytes`], 128 of them) to the other
//!   ranks (e.g. through a TCP store); every rank then calls [`init_rank`].
//! * [`init_all`] creates one communicator per listed GPU of this process
//!   (`ncclCommInitAll`), to be driven by threads of the caller's own.
//!
//! Operations take host memory (staged through device buffers) and
//! [`crate::DeviceBuffer`]s. The libraries are searched as `hcomm-sys`
//! documents (`HCOMM_NCCL_LIB`, `HCOMM_CUDART_LIB`, `CUDA_HOME`, ...);
//! [`Nccl`] loads them from explicit paths instead. NCCL has no execution
//! timeout: waits poll the stream up to the communicator's timeout and
//! `abort` calls `ncclCommAbort`. Subgroups (`split`) of communicators made
//! by [`run`] or [`init_all`] exchange a fresh unique id in-process.

use std::path::Path;
use std::sync::Arc;

use hcomm_sys::{ncclUniqueId, NCCL_UNIQUE_ID_BYTES};

use super::device::{self, DeviceLibrary};
use crate::backend::device::Raw;
use crate::backend::nccl::NcclDriver;
pub use crate::backend::nccl::NcclVersions;
use crate::comm::Comm;
use crate::error::Result;
use crate::options::CommOptions;

/// The bootstrap id of an NCCL communicator: 128 opaque bytes made by
/// `ncclGetUniqueId` on rank 0 and given unchanged to every rank.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct UniqueId(ncclUniqueId);

impl UniqueId {
    /// Size of the bytes in [`UniqueId::as_bytes`].
    pub const BYTES: usize = NCCL_UNIQUE_ID_BYTES;

    /// The bytes, to send to the other ranks.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0.internal
    }

    /// An id received from rank 0; `None` unless exactly
    /// [`UniqueId::BYTES`] bytes.
    pub fn from_bytes(bytes: &[u8]) -> Option<UniqueId> {
        ncclUniqueId::from_bytes(bytes).map(UniqueId)
    }
}

impl std::fmt::Debug for UniqueId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UniqueId({} bytes)", Self::BYTES)
    }
}

/// A loaded NCCL and CUDA runtime. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Nccl {
    driver: Arc<NcclDriver>,
}

impl Nccl {
    /// The libraries found by `hcomm-sys`'s search (`HCOMM_NCCL_LIB`,
    /// `HCOMM_CUDART_LIB`, the CUDA install directories, the system path),
    /// loaded once per process.
    pub fn load() -> Result<Nccl> {
        Ok(Nccl {
            driver: NcclDriver::system()?,
        })
    }

    /// NCCL from `nccl` and the CUDA runtime from `cudart`.
    pub fn load_pair(nccl: impl AsRef<Path>, cudart: impl AsRef<Path>) -> Result<Nccl> {
        Ok(Nccl {
            driver: NcclDriver::load(nccl.as_ref(), cudart.as_ref())?,
        })
    }

    /// The versions of the loaded NCCL, CUDA runtime and NVIDIA driver
    /// (also a `tracing` event at load).
    #[doc(alias = "ncclGetVersion")]
    #[doc(alias = "cudaRuntimeGetVersion")]
    #[doc(alias = "cudaDriverGetVersion")]
    pub fn versions(&self) -> NcclVersions {
        self.driver.versions()
    }

    /// The number of visible GPUs.
    #[doc(alias = "cudaGetDeviceCount")]
    pub fn device_count(&self) -> Result<usize> {
        self.driver.device_count()
    }

    /// A new unique id (call on rank 0 only).
    #[doc(alias = "ncclGetUniqueId")]
    pub fn unique_id(&self) -> Result<UniqueId> {
        self.driver.unique_id().map(UniqueId)
    }

    /// Joins the communicator of `id` as `rank` of `world` on `device`.
    /// Collective and blocking: every rank calls it with the same id.
    #[doc(alias = "ncclCommInitRank")]
    pub fn init_rank(
        &self,
        world: usize,
        rank: usize,
        id: &UniqueId,
        device: i32,
        options: &CommOptions,
    ) -> Result<Comm> {
        device::init_rank(&self.driver, world, rank, &id.0, device, options)
    }

    /// One communicator per device of `devices` (rank `i` on `devices[i]`),
    /// for threads of the caller's own (one communicator per thread). A rank
    /// counts as finished for its peers when its last handle is dropped.
    #[doc(alias = "ncclCommInitAll")]
    pub fn init_all(&self, devices: &[i32], options: &CommOptions) -> Result<Vec<Comm>> {
        device::init_all(&self.driver, devices, options)
    }

    /// Runs `f` on `world` ranks (threads of this process, rank `r` on device
    /// `r`) and returns their results in rank order; failure semantics as
    /// [`crate::host::run`].
    pub fn run<R, F>(&self, world: usize, options: &CommOptions, f: F) -> Result<Vec<R>>
    where
        R: Send,
        F: Fn(&Comm) -> Result<R> + Sync,
    {
        device::run(&self.driver, world, options, f)
    }
}

/// NCCL joins with a unique id and has no execution timeout (waits poll up
/// to the communicator's timeout instead).
impl DeviceLibrary for NcclDriver {
    type Id = ncclUniqueId;

    fn devices(&self) -> Result<usize> {
        self.device_count()
    }

    fn new_id(&self) -> Result<ncclUniqueId> {
        self.unique_id()
    }

    fn join(&self, world: usize, id: &ncclUniqueId, rank: usize, device: i32, _options: &CommOptions) -> Result<Raw> {
        self.init_rank(world, id, rank, device)
    }

    fn join_all(&self, devices: &[i32]) -> Result<Vec<Raw>> {
        self.init_all(devices)
    }
}

/// Runs `f` on `world` in-process ranks on the NCCL backend (one GPU per
/// rank), with options from the environment; see [`Nccl::run`].
pub fn run<R, F>(world: usize, f: F) -> Result<Vec<R>>
where
    R: Send,
    F: Fn(&Comm) -> Result<R> + Sync,
{
    Nccl::load()?.run(world, &CommOptions::from_env()?, f)
}

/// A new unique id; see [`Nccl::unique_id`].
pub fn unique_id() -> Result<UniqueId> {
    Nccl::load()?.unique_id()
}

/// Joins an NCCL communicator; see [`Nccl::init_rank`].
pub fn init_rank(world: usize, rank: usize, id: &UniqueId, device: i32, options: &CommOptions) -> Result<Comm> {
    Nccl::load()?.init_rank(world, rank, id, device, options)
}

/// One communicator per GPU of this process; see [`Nccl::init_all`].
pub fn init_all(devices: &[i32], options: &CommOptions) -> Result<Vec<Comm>> {
    Nccl::load()?.init_all(devices, options)
}
