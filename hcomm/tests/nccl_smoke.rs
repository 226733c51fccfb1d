//! NCCL smoke test: runs only where `libnccl.so.2`, the CUDA runtime and a
//! GPU exist (`HCOMM_NCCL_LIB` / `HCOMM_CUDART_LIB` or the usual search);
//! elsewhere it prints why it was skipped and passes.

use std::time::Duration;

use hcomm::nccl::Nccl;
use hcomm::{CommOptions, DeviceBuffer, ReduceOp};

/// The loaded libraries and the number of ranks to run, or why not.
fn setup() -> Result<(Nccl, usize), String> {
    if !hcomm_sys::nvidia_available() {
        return Err("libnccl.so.2 or libcudart.so not found".into());
    }
    let nccl = Nccl::load().map_err(|e| e.to_string())?;
    let gpus = nccl.device_count().map_err(|e| e.to_string())?;
    if gpus == 0 {
        return Err("no CUDA device".into());
    }
    Ok((nccl, gpus.min(4)))
}

#[test]
fn nccl_collectives_p2p_and_device_buffers() {
    let (nccl, world) = match setup() {
        Ok(x) => x,
        Err(why) => {
            eprintln!("nccl_smoke skipped: {why}");
            return;
        }
    };
    let options = CommOptions::default().with_timeout(Duration::from_secs(60));
    let out = nccl
        .run(world, &options, |comm| {
            let (r, w) = (comm.rank(), comm.world());
            assert_eq!(comm.backend_name(), "nccl");
            // host memory, staged
            let mut x = vec![r as f32 + 1.0; 1000];
            comm.all_reduce_in_place(&mut x, ReduceOp::Sum)?;
            assert_eq!(x, vec![(w * (w + 1) / 2) as f32; 1000]);
            // device buffers
            let mut d = DeviceBuffer::from_host(comm, &[r as i64; 64])?;
            comm.all_reduce_in_place(&mut d, ReduceOp::Max)?;
            assert_eq!(d.to_host()?, vec![(w - 1) as i64; 64]);
            let mut all = vec![0i32; 2 * w];
            comm.all_gather(&[r as i32, -(r as i32)], &mut all)?;
            assert_eq!(all, (0..w).flat_map(|q| [q as i32, -(q as i32)]).collect::<Vec<_>>());
            // all-to-all-v and gather are built from grouped send/recv
            let counts = vec![2usize; w];
            let send: Vec<u8> = (0..w).flat_map(|j| [r as u8, j as u8]).collect();
            let mut recv = vec![0u8; 2 * w];
            comm.all_to_allv(&send, &counts, &mut recv, &counts)?;
            assert_eq!(recv, (0..w).flat_map(|q| [q as u8, r as u8]).collect::<Vec<_>>());
            let mut g = if r == 0 { vec![0f64; w] } else { Vec::new() };
            comm.gather(&[r as f64], &mut g, 0)?;
            if r == 0 {
                assert_eq!(g, (0..w).map(|q| q as f64).collect::<Vec<_>>());
            }
            // non-blocking ring, waited out of order
            let mine = [r as u32; 8];
            let mut left = [0u32; 8];
            hcomm::scope(|s| {
                let a = comm.irecv(s, &mut left, (r + w - 1) % w)?;
                let b = comm.isend(s, &mine, (r + 1) % w)?;
                b.wait()?;
                a.wait()
            })?;
            assert_eq!(left, [((r + w - 1) % w) as u32; 8]);
            // split (in-process unique-id exchange)
            let sub = comm.split(Some((r % 2) as u32), 0)?.expect("a member");
            let mut y = [1i32];
            sub.all_reduce_in_place(&mut y, ReduceOp::Sum)?;
            assert_eq!(y, [sub.world() as i32]);
            comm.barrier()?;
            Ok(r)
        })
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out, (0..world).collect::<Vec<_>>());
}
