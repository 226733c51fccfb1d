//! The stream contract on a real GPU, world 1 (one GPU holds one NCCL
//! rank): a producer stream that is still busy writing a device buffer when
//! the collective is called, then `device_buffer` + NCCL. The result must be
//! the producer's final data, exactly. Without a GPU or NCCL the test says
//! why and passes, unless `HCOMM_DEVICE_CHECK=1` (set by
//! scripts/device-python.sh), where that is a failure.

use std::ffi::c_void;

use hcomm::nccl::Nccl;
use hcomm::{CommOptions, ReduceOp};
use hcomm_candle::device::{device_buffer, ProducerStream};
use hcomm_sys::{cudaError_t, cudaMemcpyKind, cudaStream_t, CudaApi};

fn check(code: cudaError_t, what: &str) -> hcomm::Result<()> {
    if code.is_success() {
        return Ok(());
    }
    Err(hcomm::Error::Backend {
        backend: "cuda",
        message: format!("{what} failed with cuda error {}", code.0),
    })
}

/// Device memory of `bytes`, freed on drop.
struct Mem<'a> {
    cuda: &'a CudaApi,
    ptr: *mut c_void,
}

impl<'a> Mem<'a> {
    fn new(cuda: &'a CudaApi, bytes: usize) -> hcomm::Result<Mem<'a>> {
        let mut ptr = std::ptr::null_mut();
        // SAFETY: an out-pointer to a local.
        check(unsafe { (cuda.cudaMalloc)(&raw mut ptr, bytes) }, "cudaMalloc")?;
        Ok(Mem { cuda, ptr })
    }
}

impl Drop for Mem<'_> {
    fn drop(&mut self) {
        // SAFETY: allocated by `cudaMalloc`, freed once; the device is idle
        // (every test step synchronises before it returns). A failed free in
        // a test's teardown changes no result.
        let _ = unsafe { (self.cuda.cudaFree)(self.ptr) };
    }
}

const N: usize = 1 << 20;
const SCRATCH: usize = 256 << 20;
const BUSY_COPIES: usize = 40;

fn contract_on(comm: &hcomm::Comm, cuda: &CudaApi) -> hcomm::Result<()> {
    let copy = cuda.cudaMemcpyAsync.ok_or_else(|| hcomm::Error::Backend {
        backend: "cuda",
        message: "cudaMemcpyAsync missing".into(),
    })?;
    let pattern: Vec<f32> = (0..N).map(|i| (i % 1000) as f32 * 0.5 + 1.0).collect();
    let bytes = N * size_of::<f32>();
    let (src, dst, staged) = (Mem::new(cuda, bytes)?, Mem::new(cuda, bytes)?, Mem::new(cuda, bytes)?);
    let (scratch_a, scratch_b) = (Mem::new(cuda, SCRATCH)?, Mem::new(cuda, SCRATCH)?);
    // SAFETY: live allocations of the sizes passed; synchronous calls.
    unsafe {
        check((cuda.cudaMemset)(src.ptr, 0, bytes), "cudaMemset")?;
        check((cuda.cudaMemset)(dst.ptr, 0, bytes), "cudaMemset")?;
        check(
            (cuda.cudaMemcpy)(
                staged.ptr,
                pattern.as_ptr().cast(),
                bytes,
                cudaMemcpyKind::cudaMemcpyHostToDevice,
            ),
            "cudaMemcpy",
        )?;
    }
    let mut stream: cudaStream_t = std::ptr::null_mut();
    // SAFETY: an out-pointer to a local.
    check(unsafe { (cuda.cudaStreamCreate)(&raw mut stream) }, "cudaStreamCreate")?;
    // The producer: long copies first, then the write of `src`, all queued
    // on its stream and not waited for here.
    for _ in 0..BUSY_COPIES {
        // SAFETY: live device allocations of SCRATCH bytes; a live stream.
        check(
            unsafe {
                copy(
                    scratch_b.ptr,
                    scratch_a.ptr,
                    SCRATCH,
                    cudaMemcpyKind::cudaMemcpyDeviceToDevice,
                    stream,
                )
            },
            "cudaMemcpyAsync",
        )?;
    }
    // SAFETY: as above, `bytes` long.
    check(
        unsafe {
            copy(
                src.ptr,
                staged.ptr,
                bytes,
                cudaMemcpyKind::cudaMemcpyDeviceToDevice,
                stream,
            )
        },
        "cudaMemcpyAsync",
    )?;
    // SAFETY: a stream this test created and destroys below.
    let producer = unsafe { ProducerStream::from_raw(stream) };
    let result = (|| {
        // SAFETY: `src` and `dst` hold N f32 on this rank's device; only the
        // producer (drained by `device_buffer`) and hcomm touch them.
        let (send, mut recv) = unsafe {
            (
                device_buffer(comm, src.ptr.cast::<f32>(), N, producer)?,
                device_buffer(comm, dst.ptr.cast::<f32>(), N, producer)?,
            )
        };
        comm.all_gather(&send, &mut recv)?;
        drop(send);
        // SAFETY: as above.
        let mut inplace = unsafe { device_buffer(comm, src.ptr.cast::<f32>(), N, producer)? };
        comm.all_reduce_in_place(&mut inplace, ReduceOp::Max)
    })();
    // SAFETY: the stream was created above; its work is done (synchronised).
    check(unsafe { (cuda.cudaStreamDestroy)(stream) }, "cudaStreamDestroy")?;
    result?;
    for (name, mem) in [("all_gather output", &dst), ("all_reduce in place", &src)] {
        let mut got = vec![0f32; N];
        // SAFETY: `got` holds `bytes`; `mem` is a live device allocation.
        check(
            unsafe {
                (cuda.cudaMemcpy)(
                    got.as_mut_ptr().cast(),
                    mem.ptr,
                    bytes,
                    cudaMemcpyKind::cudaMemcpyDeviceToHost,
                )
            },
            "cudaMemcpy",
        )?;
        let wrong = got.iter().zip(&pattern).position(|(g, p)| g.to_bits() != p.to_bits());
        assert_eq!(
            wrong, None,
            "{name}: first wrong element (the producer's write was not awaited)"
        );
        eprintln!("device-check case candle stream contract, {name}: ok");
    }
    Ok(())
}

#[test]
fn a_busy_producer_stream_is_awaited_before_nccl_reads() {
    let required = std::env::var("HCOMM_DEVICE_CHECK").is_ok_and(|v| v == "1");
    let setup = Nccl::load().and_then(|n| n.device_count().map(|g| (n, g)));
    let nccl = match setup {
        Ok((nccl, gpus)) if gpus > 0 => nccl,
        Ok(_) | Err(_) if !required => {
            eprintln!("hcomm-candle device test skipped: no NCCL device");
            return;
        }
        Ok(_) => panic!("HCOMM_DEVICE_CHECK=1 but no CUDA device"),
        Err(e) => panic!("HCOMM_DEVICE_CHECK=1 but NCCL cannot run: {e}"),
    };
    let cuda = CudaApi::get().expect("NCCL loaded, so the CUDA runtime did");
    nccl.run(1, &CommOptions::default(), |comm| contract_on(comm, cuda))
        .unwrap_or_else(|e| panic!("{e}"));
}
