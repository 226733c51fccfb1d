//! What running an algorithm as a `comm_schedule!` costs over writing it by
//! hand: the built-in ring all-gather schedule against the same sends and
//! receives issued directly on the runtime API, on in-process ranks.
//!
//! `cargo bench -p hcomm-bench --bench schedule_overhead`

// `criterion_group!` defines an undocumented function.
#![allow(missing_docs)]

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use hcomm::{schedules, Comm, CommOptions};

/// The ring all-gather of `hcomm::schedules::ring_all_gather`, by hand: copy
/// the own block into place, then `world - 1` steps that each send block
/// `rank - s` to the right (the input itself in the first) and receive
/// block `rank - s - 1` from the left.
fn ring_all_gather_by_hand(comm: &Comm, input: &[f32], output: &mut [f32]) -> hcomm::Result<()> {
    let (w, r, n) = (comm.world(), comm.rank(), input.len());
    output[r * n..(r + 1) * n].copy_from_slice(input);
    if w > 1 {
        let left = (r + w - 1) % w;
        comm.send_recv(input, (r + 1) % w, &mut output[left * n..(left + 1) * n], left)?;
    }
    for s in 1..w - 1 {
        let send = (r + w - s) % w;
        let recv = (r + 2 * w - s - 1) % w;
        let (send, recv) = two_blocks(output, n, send, recv);
        comm.send_recv(send, (r + 1) % w, recv, (r + w - 1) % w)?;
    }
    Ok(())
}

/// Blocks `a` (shared) and `b` (mutable) of `n` elements of `buf`; `a != b`.
fn two_blocks(buf: &mut [f32], n: usize, a: usize, b: usize) -> (&[f32], &mut [f32]) {
    if a < b {
        let (lo, hi) = buf.split_at_mut(b * n);
        (&lo[a * n..(a + 1) * n], &mut hi[..n])
    } else {
        let (lo, hi) = buf.split_at_mut(a * n);
        (&hi[..n], &mut lo[b * n..(b + 1) * n])
    }
}

type AllGather = fn(&Comm, &[f32], &mut [f32]) -> hcomm::Result<()>;

/// `iters` calls of `f` on every rank of a fresh world of `world` threads,
/// after a warm-up call and a barrier; the slowest rank's time.
fn time(world: usize, n: usize, iters: u64, f: AllGather) -> Duration {
    let options = CommOptions::default().with_timeout(Duration::from_secs(60));
    let times = hcomm::host::run_with(world, &options, |comm| {
        let input = vec![comm.rank() as f32; n];
        let mut output = vec![0.0f32; n * world];
        f(comm, &input, &mut output)?;
        comm.barrier()?;
        let t0 = Instant::now();
        for _ in 0..iters {
            f(comm, &input, &mut output)?;
        }
        let elapsed = t0.elapsed();
        let expected = (0..n * world).map(|k| (k / n) as f32);
        assert!(output.iter().copied().eq(expected), "wrong all-gather result");
        Ok(elapsed)
    })
    .expect("all-gather");
    times.into_iter().max().unwrap_or_default()
}

fn ring_all_gather(c: &mut Criterion) {
    let world = 2;
    let mut group = c.benchmark_group("ring_all_gather");
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(3));
    for bytes in [1usize << 10, 64 << 10, 1 << 20] {
        let n = bytes / size_of::<f32>() / world;
        group.throughput(Throughput::Bytes(bytes as u64));
        let variants: [(&str, AllGather); 2] = [
            ("schedule", |c, i, o| schedules::ring_all_gather(c, i, o)),
            ("by_hand", ring_all_gather_by_hand),
        ];
        for (name, f) in variants {
            group.bench_with_input(BenchmarkId::new(name, bytes), &n, |b, &n| {
                b.iter_custom(|iters| time(world, n, iters, f));
            });
        }
    }
    group.finish();
}

criterion_group!(benches, ring_all_gather);
criterion_main!(benches);
