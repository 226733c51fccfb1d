//! Time of all-reduce and all-gather at 1 MiB and 64 MiB per rank, for
//! comparing transports: in-process threads (run directly) against one
//! process per rank (run under a launcher).
//!
//! `cargo run --release --example transport_bench` (two threads), or
//! `hcomm-run -n 2 -- target/release/examples/transport_bench`.

use std::time::{Duration, Instant};

use hcomm::{Comm, ReduceOp};

fn main() -> Result<(), hcomm::Report> {
    // HCOMM_TRACE=path records this run (the library installs no subscriber)
    let _trace = hcomm::trace::init_from_env();
    if ["HCOMM_RANK", "RANK"].iter().any(|v| std::env::var_os(v).is_some()) {
        let comm = hcomm::init_from_env()?;
        for line in bench(&comm)? {
            if comm.rank() == 0 {
                println!("processes: {line}");
            }
        }
        return Ok(());
    }
    let lines = hcomm::run(2, bench)?;
    for line in &lines[0] {
        println!("threads:   {line}");
    }
    Ok(())
}

/// Median time of `reps` calls of `f` after one warm-up call.
fn median(comm: &Comm, reps: usize, mut f: impl FnMut() -> hcomm::Result<()>) -> hcomm::Result<Duration> {
    f()?;
    let mut times = Vec::with_capacity(reps);
    for _ in 0..reps {
        comm.barrier()?;
        let t = Instant::now();
        f()?;
        times.push(t.elapsed());
    }
    times.sort();
    Ok(times[reps / 2])
}

fn bench(comm: &Comm) -> hcomm::Result<Vec<String>> {
    let mut lines = Vec::new();
    for (label, bytes, reps) in [("1 MiB", 1usize << 20, 50), ("64 MiB", 64 << 20, 5)] {
        let n = bytes / 4;
        let mut buf = vec![1.0f32; n];
        let t = median(comm, reps, || comm.all_reduce_in_place(&mut buf, ReduceOp::Sum))?;
        lines.push(format!("all_reduce {label}: {:>9.3} ms", t.as_secs_f64() * 1e3));
        let send = vec![1.0f32; n];
        let mut recv = vec![0.0f32; n * comm.world()];
        let t = median(comm, reps, || comm.all_gather(&send, &mut recv))?;
        lines.push(format!("all_gather {label}: {:>9.3} ms", t.as_secs_f64() * 1e3));
    }
    Ok(lines)
}
