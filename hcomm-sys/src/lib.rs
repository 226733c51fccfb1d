//! Raw C ABI of HCCL, the ACL runtime, NCCL and the CUDA runtime, loaded at run time.
//!
//! Nothing here links against a vendor library: each library is opened with
//! `dlopen` (through [`libloading`]) into a table of function pointers with the C
//! names ([`HcclApi`], [`AclApi`], [`NcclApi`], [`CudaApi`]). The workspace builds
//! and tests on machines without Ascend or NVIDIA software; a missing library or
//! symbol is a [`LoadError`] naming the library, the symbol and every path tried.
//!
//! * [`types`]: opaque handles and `#[repr(C)]` structs with checked layouts.
//! * [`codes`]: C enums as integer newtypes, and the safe error enums.
//! * [`load`]: the library search and [`LoadError`].
//!
//! ```no_run
//! use hcomm_sys::{HcclApi, HcclRootInfo};
//!
//! let api = HcclApi::get()?; // searched once per process; see `load` for the order
//! let mut root = HcclRootInfo::zeroed();
//! // SAFETY: `root` is a valid, writable HcclRootInfo.
//! unsafe { (api.HcclGetRootInfo)(&mut root) }.result()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Optional (version-dependent) entries are `Option`s; [`require_fn!`] turns a
//! missing one into a [`LoadError::MissingSymbol`] at the point of use.

pub mod codes;
pub mod load;
pub mod support;
pub mod types;

mod acl;
mod cuda;
mod hccl;
mod nccl;

pub use acl::{AclApi, ACL_STREAM_STATUS_COMPLETE, ACL_STREAM_STATUS_NOT_READY};
pub use codes::*;
pub use cuda::CudaApi;
pub use hccl::HcclApi;
pub use load::{Attempt, LoadError};
pub use nccl::NcclApi;
pub use support::{hccl_reduction_supported, HcclChip, HcclReduction};
pub use types::*;

/// Whether HCCL can be loaded (loads and caches the process-wide table). Never panics.
pub fn hccl_available() -> bool {
    HcclApi::get().is_ok()
}

/// Whether the ACL runtime can be loaded (loads and caches the table). Never panics.
pub fn acl_available() -> bool {
    AclApi::get().is_ok()
}

/// Whether NCCL can be loaded (loads and caches the table). Never panics.
pub fn nccl_available() -> bool {
    NcclApi::get().is_ok()
}

/// Whether the CUDA runtime can be loaded (loads and caches the table). Never panics.
pub fn cuda_available() -> bool {
    CudaApi::get().is_ok()
}

/// Whether both HCCL and the ACL runtime can be loaded (what the Ascend backend needs).
pub fn ascend_available() -> bool {
    hccl_available() && acl_available()
}

/// Whether both NCCL and the CUDA runtime can be loaded (what the NVIDIA backend needs).
pub fn nvidia_available() -> bool {
    nccl_available() && cuda_available()
}
