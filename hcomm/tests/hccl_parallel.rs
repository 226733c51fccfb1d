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
