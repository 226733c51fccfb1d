//! The process-wide tables read the real environment. This binary holds a single
//! test, so setting a variable cannot race with another test.

use hcomm_sys::{HcclApi, LoadError};

#[test]
fn global_table_honours_the_override_variable_and_caches_the_error() {
    let missing = std::env::temp_dir().join(format!("hcomm-sys-{}-none/libhccl.so", std::process::id()));
    std::env::set_var("HCOMM_HCCL_LIB", &missing);

    assert!(!hcomm_sys::hccl_available());
    let err = HcclApi::get().unwrap_err();
    println!("{err}");
    let LoadError::NotFound { tried, .. } = &err else {
        panic!("expected NotFound, got {err:?}");
    };
    assert_eq!(tried[0].path, missing);
    assert!(HcclApi::get_loaded().is_none());

    // Cached: changing the variable afterwards does not reload.
    std::env::set_var("HCOMM_HCCL_LIB", "/somewhere/else/libhccl.so");
    assert_eq!(HcclApi::get().unwrap_err(), err);

    // The other probes never panic, whatever is installed.
    let _ = hcomm_sys::acl_available();
    let _ = hcomm_sys::nccl_available();
    let _ = hcomm_sys::cuda_available();
    let _ = hcomm_sys::ascend_available();
    let _ = hcomm_sys::nvidia_available();
}
