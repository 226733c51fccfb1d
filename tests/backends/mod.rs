//! Runs a test body on the host backend and on the HCCL backend (through the
//! stand-in library): both must give the same per-rank results.

use std::fmt::Debug;
use std::sync::OnceLock;

use hcomm::hccl::Hccl;
use hcomm::{Comm, CommOptions};

fn hccl() -> &'static Hccl {
    static HCCL: OnceLock<Hccl> = OnceLock::new();
    HCCL.get_or_init(|| {
        let path = hcomm_hccl_standin::cdylib_path().expect("the stand-in cdylib is built next to the tests");
        Hccl::load_from(path).unwrap_or_else(|e| panic!("{e}"))
    })
}

/// Devices the stand-in shows: larger worlds run on the host backend only.
const STANDIN_DEVICES: usize = 8;

/// [`hcomm::host::run_with`], then the same on the HCCL stand-in; the two
/// backends' results (values or the error's text) must be equal.
pub(crate) fn on_both<R: Send + PartialEq + Debug>(
    world: usize,
    options: &CommOptions,
    f: impl Fn(&Comm) -> hcomm::Result<R> + Sync,
) -> hcomm::Result<Vec<R>> {
    let host = hcomm::host::run_with(world, options, &f);
    if world > STANDIN_DEVICES {
        return host;
    }
    let device = hccl().run(world, options, &f);
    match (&host, &device) {
        (Ok(h), Ok(d)) => assert_eq!(h, d, "host and hccl results differ at world {world}"),
        (h, d) => assert_eq!(
            h.as_ref().err().map(ToString::to_string),
            d.as_ref().err().map(ToString::to_string),
            "host and hccl differ at world {world}"
        ),
    }
    host
}
