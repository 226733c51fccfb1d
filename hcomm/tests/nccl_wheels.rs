//! hcomm over the real NCCL and CUDA runtime from the package registry (`scripts/nccl-wheels.sh`)
//! on a machine without a GPU: the versions are reported, and every first CUDA
//! call fails with an error naming the cause (no driver) and the versions,
//! never the runtime's misleading "driver too old".
//!
//! Runs where `HCOMM_NCCL_WHEELS` names the environment the script made (CI
//! sets it); elsewhere it says why it was skipped and passes.

use std::path::PathBuf;

use hcomm::nccl::Nccl;
use hcomm::{CommOptions, Error};

/// The wheel environment's NCCL and CUDA runtime, as `hcomm-sys`'s search
/// finds them in a virtual environment (`VIRTUAL_ENV`), or why the test is
/// skipped.
fn wheels() -> Option<(PathBuf, PathBuf)> {
    let Some(root) = std::env::var_os("HCOMM_NCCL_WHEELS").filter(|v| !v.is_empty()) else {
        eprintln!("skipped: HCOMM_NCCL_WHEELS is not set (scripts/nccl-wheels.sh makes the environment)");
        return None;
    };
    let env = |name: &str| (name == "VIRTUAL_ENV").then(|| root.clone());
    let nccl = hcomm_sys::NcclApi::search_with(&env).unwrap_or_else(|e| panic!("{e}"));
    let cuda = hcomm_sys::CudaApi::search_with(&env).unwrap_or_else(|e| panic!("{e}"));
    Some((nccl.path().to_path_buf(), cuda.path().to_path_buf()))
}

#[test]
fn without_a_driver_every_first_cuda_call_names_the_cause_and_the_versions() {
    let Some((nccl, cudart)) = wheels() else { return };
    let nccl = Nccl::load_pair(nccl, &cudart).unwrap_or_else(|e| panic!("{e}"));
    let versions = nccl.versions();
    println!("{versions}");
    assert_eq!(versions.nccl, Some(23203));
    assert_eq!(versions.cuda_runtime, Some(12090));
    if versions.cuda_driver != Some(0) {
        eprintln!("skipped: this machine has an NVIDIA driver ({versions})");
        return;
    }
    assert_eq!(
        versions.to_string(),
        "nccl 2.32.3, cuda runtime 12.9, driver supports cuda none"
    );
    let cause = format!(
        "no NVIDIA driver is installed (cudaDriverGetVersion reports 0, so libcuda.so.1 did not load); the CUDA \
         runtime {} is CUDA 12.9. hint: install the NVIDIA driver, or run on a machine with a GPU",
        cudart.display()
    );
    let backend_message = |err: Error| match err {
        Error::Backend {
            backend: "nccl",
            message,
        } => message,
        other => panic!("{other:?}"),
    };
    // The runtime calls a missing driver "too old": the message leads with the real cause.
    assert_eq!(
        backend_message(nccl.device_count().unwrap_err()),
        format!("cudaGetDeviceCount failed: {cause} (the runtime's code: cudaErrorInsufficientDriver, 35)")
    );
    // ncclGetUniqueId needs no GPU.
    nccl.unique_id().unwrap_or_else(|e| panic!("{e}"));
    // NCCL's "unhandled cuda error" carries its own last error and the cause.
    let message = backend_message(nccl.init_all(&[0], &CommOptions::default()).unwrap_err());
    assert!(
        message.starts_with("ncclCommInitAll failed: nccl unhandled cuda error (ncclUnhandledCudaError, code 1)")
            && message.contains("; nccl's last error: Cuda failure")
            && message.ends_with(&format!("; cause: {cause}")),
        "{message}"
    );
    let message = backend_message(nccl.run(1, &CommOptions::default(), |c| Ok(c.rank())).unwrap_err());
    assert_eq!(
        message,
        format!("cudaGetDeviceCount failed: {cause} (the runtime's code: cudaErrorInsufficientDriver, 35)")
    );
}
