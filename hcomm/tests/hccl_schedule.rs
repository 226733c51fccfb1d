//! `comm_schedule!` programs (the built-in ring all-gather and a two-level
//! all-gather written here), written for host slices, run unchanged on the
//! HCCL backend (through the stand-in library): their batches become
//! `HcclBatchSendRecv` calls, their copies stay on the host, and their
//! collectives are HCCL's.

use std::sync::OnceLock;
use std::time::Duration;

use hcomm::hccl::Hccl;
use hcomm::schedules::ring_all_gather;
use hcomm::{comm_schedule, CommOptions, ReduceOp};

comm_schedule! {
    /// Two-level all-gather over subgroups (`over` clauses are sub-communicators).
    #[verify(world in 1..=8, local in 1..=world)]
    #[requires(world % local == 0)]
    #[postcondition(all_gather(input -> output))]
    fn two_level_all_gather(input: &[T; n], output: &mut [T; n * world], local: usize) {
        let node = scratch[T; n * local];
        all_gather(input -> node) over rank / local;
        all_gather(node -> output) over rank % local;
    }
}

fn hccl() -> &'static Hccl {
    static HCCL: OnceLock<Hccl> = OnceLock::new();
    HCCL.get_or_init(|| {
        let path = hcomm_hccl_standin::cdylib_path().expect("the stand-in cdylib is built next to the tests");
        Hccl::load_from(path).unwrap_or_else(|e| panic!("{e}"))
    })
}

#[test]
fn schedules_written_for_host_slices_run_on_hccl() {
    let options = CommOptions::default().with_timeout(Duration::from_secs(20));
    for w in 1..=6usize {
        hccl()
            .run(w, &options, |comm| {
                let r = comm.rank();
                let input: Vec<i32> = (0..3).map(|i| (r * 10 + i) as i32).collect();
                let want: Vec<i32> = (0..w).flat_map(|q| (0..3).map(move |i| (q * 10 + i) as i32)).collect();
                let mut output = vec![0i32; 3 * w];
                ring_all_gather(comm, &input, &mut output)?;
                assert_eq!(output, want, "ring, world {w}");
                // the built-in collective agrees
                let mut builtin = vec![0i32; 3 * w];
                comm.all_gather(&input, &mut builtin)?;
                assert_eq!(builtin, want);
                if w % 2 == 0 {
                    let mut output = vec![0i32; 3 * w];
                    two_level_all_gather(comm, &input, &mut output, 2)?;
                    assert_eq!(output, want, "two-level, world {w}");
                }
                let mut x = [r as f64];
                comm.all_reduce_in_place(&mut x, ReduceOp::Sum)?;
                // HCCL chooses its own algorithm, and says so.
                assert_eq!(
                    comm.last_algorithm(hcomm::Collective::AllReduce),
                    Some(hcomm::Algorithm::Library)
                );
                Ok(())
            })
            .unwrap_or_else(|e| panic!("world {w}: {e}"));
    }
}

#[test]
fn schedules_take_device_buffers_on_hccl() {
    let options = CommOptions::default().with_timeout(Duration::from_secs(20));
    for w in [1usize, 2, 3, 4] {
        hccl()
            .run(w, &options, |comm| {
                let r = comm.rank();
                let host: Vec<i64> = (0..4).map(|i| (r * 100 + i) as i64).collect();
                let input = hcomm::DeviceBuffer::from_host(comm, &host)?;
                let mut output = hcomm::DeviceBuffer::<i64>::zeros(comm, 4 * w)?;
                ring_all_gather(comm, &input, &mut output)?;
                let want: Vec<i64> = (0..w).flat_map(|q| (0..4).map(move |i| (q * 100 + i) as i64)).collect();
                assert_eq!(output.to_host()?, want, "device ring all-gather, world {w}");
                Ok(())
            })
            .unwrap_or_else(|e| panic!("world {w}: {e}"));
    }
}
