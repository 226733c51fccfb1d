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

use super::device::{self, DeviceLibrary};
use crate::backend::device::Raw;
use crate::backend::hccl::HcclDriver;
use crate::comm::Comm;
use crate::error::Result;
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
        device::init_rank(&self.driver, world, rank, &root.0, device, options)
    }

    /// One communicator per device of `devices` (rank `i` on `devices[i]`),
    /// for threads of the caller's own (one communicator per thread). A rank
    /// counts as finished for its peers when its last handle is dropped.
    #[doc(alias = "HcclCommInitAll")]
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

/// HCCL joins with a root info made on device 0, and takes the
/// communicator's timeout as its execution timeout.
impl DeviceLibrary for HcclDriver {
    type Id = HcclRootInfo;

    fn devices(&self) -> Result<usize> {
        self.device_count()
    }

    fn new_id(&self) -> Result<HcclRootInfo> {
        self.root_info(0)
    }

    fn join(&self, world: usize, root: &HcclRootInfo, rank: usize, device: i32, options: &CommOptions) -> Result<Raw> {
        self.init_rank(world, root, rank, device, options.timeout)
    }

    fn join_all(&self, devices: &[i32]) -> Result<Vec<Raw>> {
        self.init_all(devices)
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
