//! The tensor- and expert-parallel cases of `tp_moe.rs` on hcomm's HCCL
//! backend, driven through the ABI-faithful stand-in library; plus
//! `all_gatherv` there.

mod parallel_cases;

use std::sync::OnceLock;
use std::time::Duration;

use hcomm::hccl::Hccl;
use hcomm::{Comm, CommOptions};

fn hccl() -> &'static Hccl {
    static HCCL: OnceLock<Hccl> = OnceLock::new();
    HCCL.get_or_init(|| {
        let path = hcomm_hccl_standin::cdylib_path().expect("the stand-in cdylib is built next to the tests");
        Hccl::load_from(path).unwrap_or_else(|e| panic!("{e}"))
    })
}

fn run<R: Send>(world: usize, f: impl Fn(&Comm) -> hcomm::Result<R> + Sync) -> hcomm::Result<Vec<R>> {
    hccl().run(world, &CommOptions::default().with_timeout(Duration::from_secs(20)), f)
}

#[test]
fn tensor_parallel_ops_on_hccl() {
    for w in [1, 2, 3, 4] {
        run(w, |comm| {
            assert_eq!(comm.backend_name(), "hccl");
            parallel_cases::tensor_parallel(comm)
        })
        .unwrap();
    }
}

#[test]
fn moe_dispatch_and_combine_on_hccl() {
    for w in [1, 2, 4] {
        run(w, parallel_cases::expert_parallel).unwrap();
    }
}

#[test]
fn all_gatherv_on_hccl() {
    for w in 1..=4 {
        run(w, parallel_cases::all_gatherv).unwrap();
    }
}

#[test]
fn nonblocking_collectives_on_hccl() {
    for w in [1, 2, 3] {
        run(w, parallel_cases::nonblocking_buckets).unwrap();
    }
}

/// Device memory allocated behind hcomm's back (as a framework allocates a
/// tensor), wrapped with `ExternalDeviceBuffer` and all-reduced in place.
#[test]
fn external_device_memory_is_used_in_place() {
    use std::ffi::c_void;

    type Malloc = unsafe extern "C" fn(*mut *mut c_void, usize, i32) -> i32;
    type Memcpy = unsafe extern "C" fn(*mut c_void, usize, *const c_void, usize, i32) -> i32;
    type Free = unsafe extern "C" fn(*mut c_void) -> i32;
    type SetDevice = extern "C" fn(i32) -> i32;
    const TO_DEVICE: i32 = 1;
    const TO_HOST: i32 = 2;

    let path = hcomm_hccl_standin::cdylib_path().unwrap();
    // SAFETY: the stand-in library is the one hcomm loaded (same path, so the
    // same instance); its constructors have no preconditions.
    let lib = unsafe { libloading::Library::new(&path) }.unwrap();
    // SAFETY: the symbols have these C signatures (ACL's).
    let (malloc, memcpy, free, set_device) = unsafe {
        (
            *lib.get::<Malloc>(b"aclrtMalloc").unwrap(),
            *lib.get::<Memcpy>(b"aclrtMemcpy").unwrap(),
            *lib.get::<Free>(b"aclrtFree").unwrap(),
            *lib.get::<SetDevice>(b"aclrtSetDevice").unwrap(),
        )
    };
    let got = run(2, |comm| {
        let r = comm.rank();
        assert_eq!(set_device(r as i32), 0);
        let host = [r as f32 + 1.0; 4];
        let bytes = std::mem::size_of_val(&host);
        let mut ptr = std::ptr::null_mut();
        // SAFETY: ACL calls with valid out-pointer, sizes and host ranges.
        unsafe {
            assert_eq!(malloc(&raw mut ptr, bytes, 0), 0);
            assert_eq!(memcpy(ptr, bytes, host.as_ptr().cast(), bytes, TO_DEVICE), 0);
        }
        // SAFETY: `ptr` holds 4 f32 on this rank's device, untouched by
        // anything else until `ext` is dropped.
        let mut ext = unsafe { hcomm::ExternalDeviceBuffer::from_raw_parts(comm, ptr.cast::<f32>(), 4)? };
        assert_eq!(ext.len(), 4);
        comm.all_reduce_in_place(&mut ext, hcomm::ReduceOp::Sum)?;
        drop(ext);
        let mut back = [0.0f32; 4];
        // SAFETY: as above; the allocation is freed once, after the copy.
        unsafe {
            assert_eq!(memcpy(back.as_mut_ptr().cast(), bytes, ptr, bytes, TO_HOST), 0);
            assert_eq!(free(ptr), 0);
        }
        // Memory that already belongs to a DeviceBuffer is refused.
        let mut owned = hcomm::DeviceBuffer::<f32>::zeros(comm, 2)?;
        let (p, _) = hcomm::BufferMut::raw_parts_mut(&mut owned);
        // SAFETY: the call fails before the range is used.
        let refused = unsafe { hcomm::ExternalDeviceBuffer::from_raw_parts(comm, p, 2) };
        assert!(matches!(refused, Err(hcomm::Error::Precondition { .. })));
        Ok(back)
    })
    .unwrap();
    assert_eq!(got, vec![[3.0f32; 4]; 2]);
}

#[test]
fn external_device_memory_needs_a_device_communicator() {
    hcomm::host::run(1, |comm| {
        let mut x = [0.0f32; 2];
        // SAFETY: the call fails before the pointer is used.
        let e = unsafe { hcomm::ExternalDeviceBuffer::from_raw_parts(comm, x.as_mut_ptr(), 2) }.unwrap_err();
        assert!(e.to_string().contains("device communicator"), "{e}");
        Ok(())
    })
    .unwrap();
}

#[test]
fn pipeline_pairs_and_mismatches_on_hccl() {
    for w in [2, 3, 4] {
        run(w, parallel_cases::pipeline_pairs).unwrap();
    }
}
