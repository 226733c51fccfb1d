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

use super::{check_devices, run_ranks};
use crate::backend::device::memory::DeviceCtx;
use crate::backend::device::world::{DeviceWorld, Presence};
use crate::backend::device::{CommHandle, DeviceBackend, Driver, Parts};
use crate::backend::nccl::NcclDriver;
use crate::comm::Comm;
use crate::error::{Error, Result};
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

    fn comm(
        &self,
        raw: crate::backend::device::Raw,
        world: usize,
        rank: usize,
        device: i32,
        options: &CommOptions,
        env: Option<&Arc<DeviceWorld>>,
        presence: Option<Arc<Presence>>,
    ) -> Result<Comm> {
        let driver: Arc<dyn Driver> = self.driver.clone();
        let ctx = DeviceCtx::get(&driver, device);
        let comm = CommHandle::new(Arc::clone(&ctx), raw);
        let backend = DeviceBackend::new(Parts {
            ctx,
            world_comm: Arc::clone(&comm),
            comm,
            lib_rank: (0..world as u32).collect(),
            global: (0..world).collect(),
            rank,
            key: "world".to_owned(),
            topology: options.topology.clone(),
            timeout: options.timeout,
            env: env.cloned(),
            presence,
        })?;
        Ok(Comm::from_backend(Arc::new(backend), options))
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
        if rank >= world {
            return Err(Error::precondition(format!(
                "rank {rank} is out of range for a world of {world}"
            )));
        }
        let raw = self.driver.init_rank(world, &id.0, rank, device)?;
        self.comm(raw, world, rank, device, options, None, None)
    }

    /// One communicator per device of `devices` (rank `i` on `devices[i]`),
    /// for threads of the caller's own (one communicator per thread). A rank
    /// counts as finished for its peers when its last handle is dropped.
    #[doc(alias = "ncclCommInitAll")]
    pub fn init_all(&self, devices: &[i32], options: &CommOptions) -> Result<Vec<Comm>> {
        let raws = self.driver.init_all(devices)?;
        let world = devices.len();
        let dw = DeviceWorld::new(world);
        raws.into_iter()
            .enumerate()
            .map(|(rank, raw)| {
                let presence = Presence::new(&dw, rank);
                self.comm(raw, world, rank, devices[rank], options, Some(&dw), Some(presence))
            })
            .collect()
    }

    /// Runs `f` on `world` ranks (threads of this process, rank `r` on device
    /// `r`) and returns their results in rank order; failure semantics as
    /// [`crate::host::run`].
    pub fn run<R, F>(&self, world: usize, options: &CommOptions, f: F) -> Result<Vec<R>>
    where
        R: Send,
        F: Fn(&Comm) -> Result<R> + Sync,
    {
        check_devices("nccl", world, self.device_count()?)?;
        if world == 0 {
            return Err(Error::precondition("a world needs at least one rank"));
        }
        let id = self.unique_id()?;
        let make = |rank: usize, dw: &Arc<DeviceWorld>, presence: Arc<Presence>| -> Result<Comm> {
            let device = rank as i32;
            let raw = self.driver.init_rank(world, &id.0, rank, device)?;
            self.comm(raw, world, rank, device, options, Some(dw), Some(presence))
        };
        run_ranks(world, &make, f)
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
