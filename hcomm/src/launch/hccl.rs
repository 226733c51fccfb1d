//! The HCCL backend: Huawei Ascend NPUs through `libhccl.so` and the ACL
//! runtime (`libascendcl.so`), loaded at run time by `hcomm-sys`.
//!
//! * In one process, [`run`] starts one thread per rank, each on its own
//!   device (rank `r` on device `r`), like [`crate::host::run`].
//! * With one process per rank, rank 0 calls [`root_info`] and hands the
//!   [`RootInfo`] bytes ([`RootInfo::as_bytes`], 4108 of them) to the other
//!   ranks (e.g. through a TCP store); every rank then calls [`init_rank`].
//! * [`init_all`] creates one communicator per listed device of this process
//!   (`HcclCommInitAll`), to be driven by threads of the caller's own.
//!
//! Operations take host memory (staged through device buffers) and
//! [`crate::DeviceBuffer`]s. The library is searched as `hcomm-sys` documents
//! (`HCOMM_HCCL_LIB`, `HCOMM_ACL_LIB`, `ASCEND_HOME_PATH`, ...); [`Hccl`]
//! loads it from explicit paths instead. The communicator's timeout is also
//! HCCL's execution timeout (`hcclExecTimeOut`).

use std::path::Path;
use std::sync::Arc;

use hcomm_sys::{HcclRootInfo, HCCL_ROOT_INFO_BYTES};

use super::{check_devices, run_ranks};
use crate::backend::device::memory::DeviceCtx;
use crate::backend::device::world::{DeviceWorld, Presence};
use crate::backend::device::{CommHandle, DeviceBackend, Driver, Parts};
use crate::backend::hccl::HcclDriver;
use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::options::CommOptions;

/// The bootstrap id of an HCCL communicator: 4108 opaque bytes made by
/// `HcclGetRootInfo` on rank 0 and given unchanged to every rank.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct RootInfo(HcclRootInfo);

impl RootInfo {
    /// Size of the bytes in [`RootInfo::as_bytes`].
    pub const BYTES: usize = HCCL_ROOT_INFO_BYTES;

    /// The bytes, to send to the other ranks.
    pub fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    /// Root info received from rank 0; `None` unless exactly
    /// [`RootInfo::BYTES`] bytes.
    pub fn from_bytes(bytes: &[u8]) -> Option<RootInfo> {
        HcclRootInfo::from_bytes(bytes).map(RootInfo)
    }
}

impl std::fmt::Debug for RootInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RootInfo({} bytes)", Self::BYTES)
    }
}

/// A loaded HCCL and ACL runtime. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Hccl {
    driver: Arc<HcclDriver>,
}

impl Hccl {
    /// The libraries found by `hcomm-sys`'s search (`HCOMM_HCCL_LIB`,
    /// `HCOMM_ACL_LIB`, the Ascend install directories, the system path),
    /// loaded once per process.
    pub fn load() -> Result<Hccl> {
        Ok(Hccl {
            driver: HcclDriver::system()?,
        })
    }

    /// HCCL and the ACL runtime from one file that exports both (a stand-in
    /// library for tests), without consulting the environment.
    pub fn load_from(path: impl AsRef<Path>) -> Result<Hccl> {
        Self::load_pair(path.as_ref(), path.as_ref())
    }

    /// HCCL from `hccl` and the ACL runtime from `acl`.
    pub fn load_pair(hccl: impl AsRef<Path>, acl: impl AsRef<Path>) -> Result<Hccl> {
        Ok(Hccl {
            driver: HcclDriver::load(hccl.as_ref(), acl.as_ref())?,
        })
    }

    /// The number of visible devices.
    #[doc(alias = "aclrtGetDeviceCount")]
    pub fn device_count(&self) -> Result<usize> {
        self.driver.device_count()
    }

    /// A new root info, made on `device` (call on rank 0 only).
    #[doc(alias = "HcclGetRootInfo")]
    pub fn root_info(&self, device: i32) -> Result<RootInfo> {
        self.driver.root_info(device).map(RootInfo)
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

    /// Joins the communicator of `root` as `rank` of `world` on `device`.
    /// Collective and blocking: every rank calls it with the same root info.
    #[doc(alias = "HcclCommInitRootInfoConfig")]
    pub fn init_rank(
        &self,
        world: usize,
        rank: usize,
        root: &RootInfo,
        device: i32,
        options: &CommOptions,
    ) -> Result<Comm> {
        if rank >= world {
            return Err(Error::precondition(format!(
                "rank {rank} is out of range for a world of {world}"
            )));
        }
        let raw = self.driver.init_rank(world, &root.0, rank, device, options.timeout)?;
        self.comm(raw, world, rank, device, options, None, None)
    }

    /// One communicator per device of `devices` (rank `i` on `devices[i]`),
    /// for threads of the caller's own (one communicator per thread). A rank
    /// counts as finished for its peers when its last handle is dropped.
    #[doc(alias = "HcclCommInitAll")]
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
        check_devices("hccl", world, self.device_count()?)?;
        if world == 0 {
            return Err(Error::precondition("a world needs at least one rank"));
        }
        let root = self.root_info(0)?;
        let make = |rank: usize, dw: &Arc<DeviceWorld>, presence: Arc<Presence>| -> Result<Comm> {
            let device = rank as i32;
            let raw = self.driver.init_rank(world, &root.0, rank, device, options.timeout)?;
            self.comm(raw, world, rank, device, options, Some(dw), Some(presence))
        };
        run_ranks(world, &make, f)
    }
}

/// Runs `f` on `world` in-process ranks on the HCCL backend (one device per
/// rank), with options from the environment; see [`Hccl::run`].
pub fn run<R, F>(world: usize, f: F) -> Result<Vec<R>>
where
    R: Send,
    F: Fn(&Comm) -> Result<R> + Sync,
{
    Hccl::load()?.run(world, &CommOptions::from_env()?, f)
}

/// A new root info made on `device`; see [`Hccl::root_info`].
pub fn root_info(device: i32) -> Result<RootInfo> {
    Hccl::load()?.root_info(device)
}

/// Joins an HCCL communicator; see [`Hccl::init_rank`].
pub fn init_rank(world: usize, rank: usize, root: &RootInfo, device: i32, options: &CommOptions) -> Result<Comm> {
    Hccl::load()?.init_rank(world, rank, root, device, options)
}

/// One communicator per device of this process; see [`Hccl::init_all`].
pub fn init_all(devices: &[i32], options: &CommOptions) -> Result<Vec<Comm>> {
    Hccl::load()?.init_all(devices, options)
}
