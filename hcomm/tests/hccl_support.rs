//! Reductions HCCL rejects (`hcomm_sys::support`'s matrix; the stand-in
//! plays an Atlas A2 chip and returns `HCCL_E_NOT_SUPPORT` for them, as
//! HCCL does) run anyway on the HCCL backend, with the serial reference's
//! result, including on sub-communicators whose library ranks are ordered
//! differently; each such call is a `tracing` event naming the data
//! movement used instead.

#![allow(
    clippy::float_cmp,
    reason = "results are compared exactly: small integers, or a serial fold the backend reproduces bit for bit"
)]

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use hcomm::hccl::Hccl;
use hcomm::{bf16, Algorithm, Collective, CommOptions, ReduceOp};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};

#[derive(Clone, Default)]
struct Events(Arc<Mutex<Vec<String>>>);

struct Line(String);

impl Visit for Line {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, "{}={value:?} ", field.name());
    }
}

impl<S: Subscriber> Layer<S> for Events {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let mut line = Line(String::new());
        event.record(&mut line);
        if line.0.contains("rejects this reduction") {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(line.0);
        }
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
fn rejected_reductions_run_as_data_movement_and_a_host_fold() {
    let events = Events::default();
    let subscriber = tracing_subscriber::registry()
        .with(events.clone())
        .with(tracing_subscriber::filter::LevelFilter::DEBUG);
    tracing::subscriber::set_global_default(subscriber).unwrap_or_else(|e| panic!("{e}"));
    let options = CommOptions::default().with_timeout(Duration::from_secs(20));
    let w = 4;
    hccl()
        .run(w, &options, |comm| {
            let r = comm.rank();
            // u8 sum wraps as on the host: 250 + 3 r over four ranks
            let mine: Vec<u8> = (0..5).map(|i| 250u8.wrapping_add((3 * r + i) as u8)).collect();
            let mut out = vec![0u8; 5];
            comm.all_reduce(&mine, &mut out, ReduceOp::Sum)?;
            let want: Vec<u8> = (0..5)
                .map(|i| (0..w).fold(0u8, |a, q| a.wrapping_add(250u8.wrapping_add((3 * q + i) as u8))))
                .collect();
            assert_eq!(out, want, "u8 all_reduce sum");
            // the call says how it ran; a reduction HCCL runs is the library's alone
            assert_eq!(comm.last_algorithm(Collective::AllReduce), Some(Algorithm::Library));
            assert_eq!(comm.last_algorithms(Collective::AllReduce), [Algorithm::LibraryFold]);
            let mut f = [r as f32 + 0.5; 3];
            comm.all_reduce_in_place(&mut f, ReduceOp::Sum)?;
            assert_eq!(f, [(w * w) as f32 / 2.0; 3]);
            assert_eq!(comm.last_algorithms(Collective::AllReduce), [Algorithm::Library]);
            // u32 max in place; u64 and f64 all-reduce (not on A2/A3)
            let mut m = [r as u32 * 1_000_000_007 % 97, u32::MAX - r as u32];
            comm.all_reduce_in_place(&mut m, ReduceOp::Max)?;
            let mx = (0..w).map(|q| q as u32 * 1_000_000_007 % 97).max().unwrap_or(0);
            assert_eq!(m, [mx, u32::MAX]);
            let mut big = [u64::MAX - r as u64, 1 << (r + 40)];
            comm.all_reduce_in_place(&mut big, ReduceOp::Min)?;
            assert_eq!(big, [u64::MAX - (w as u64 - 1), 1 << 40]);
            let mut f = [0.1f64 * (r as f64 + 1.0)];
            comm.all_reduce_in_place(&mut f, ReduceOp::Sum)?;
            let serial = (0..w).fold(0.0f64, |a, q| a + 0.1 * (q as f64 + 1.0));
            assert_eq!(f, [serial], "f64 sum folded in rank order");
            // bf16 prod (HCCL: prod not for bf16)
            let mut p = [bf16::from_f32([1.0, 2.0, -1.5, 0.5][r])];
            comm.all_reduce_in_place(&mut p, ReduceOp::Prod)?;
            assert_eq!(p, [bf16::from_f32(-1.5)]);
            // reduce to rank 2 and reduce-scatter of u32
            let mine: Vec<u32> = (0..8).map(|i| (r * 8 + i) as u32).collect();
            let mut red = if r == 2 { vec![0u32; 8] } else { Vec::new() };
            comm.reduce(&mine, &mut red, ReduceOp::Sum, 2)?;
            if r == 2 {
                assert_eq!(
                    red,
                    (0..8)
                        .map(|i| (0..w).map(|q| (q * 8 + i) as u32).sum())
                        .collect::<Vec<u32>>()
                );
            }
            let mut block = vec![0u32; 2];
            comm.reduce_scatter(&mine, &mut block, ReduceOp::Min)?;
            assert_eq!(block, vec![(2 * r) as u32, (2 * r + 1) as u32]);
            // a sub-communicator whose ranks run backwards (library ranks differ)
            let sub = comm
                .split(Some(0), -(r as i64))?
                .ok_or_else(|| hcomm::Error::Precondition {
                    message: "a member".into(),
                })?;
            let s = sub.rank();
            let send: Vec<u8> = (0..w * 2).map(|k| (10 * s + k) as u8).collect();
            let mut got = vec![0u8; 2];
            sub.reduce_scatter(&send, &mut got, ReduceOp::Max)?;
            assert_eq!(
                got,
                vec![(10 * (w - 1) + 2 * s) as u8, (10 * (w - 1) + 2 * s + 1) as u8]
            );
            let mut x = [s as u8 + 1];
            sub.all_reduce_in_place(&mut x, ReduceOp::Prod)?;
            assert_eq!(x, [24]);
            let dev = hcomm::DeviceBuffer::from_host(&sub, &[s as u32; 3])?;
            let mut dout = hcomm::DeviceBuffer::<u32>::zeros(&sub, 3)?;
            sub.all_reduce(&dev, &mut dout, ReduceOp::Sum)?;
            assert_eq!(dout.to_host()?, vec![6; 3], "device buffers");
            // what HCCL runs is still HCCL's own
            let mut y = [r as i32];
            comm.all_reduce_in_place(&mut y, ReduceOp::Sum)?;
            assert_eq!(y, [6]);
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    let seen = events
        .0
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    // 10 emulated calls on each of 4 ranks; the i32 all-reduce is not one
    assert_eq!(seen.len(), 40, "{seen:#?}");
    assert!(seen
        .iter()
        .any(|e| e.contains("collective=\"reduce_scatter\"") && e.contains("via=\"all_to_all\"")));
    assert!(seen.iter().all(|e| !e.contains("dtype=i32")), "{seen:#?}");
}

/// Timed-out `aclrtSynchronizeStreamWithTimeout` calls so far in the loaded
/// stand-in (each one an ERROR line in the real runtime's log).
fn sync_timeouts() -> u64 {
    let path = hcomm_hccl_standin::cdylib_path().expect("the stand-in cdylib is built next to the tests");
    // SAFETY: the stand-in's own library, already loaded by `hccl()` (this
    // opens the same copy); the symbol takes nothing and returns a u64.
    unsafe {
        let lib = libloading::Library::new(path).unwrap_or_else(|e| panic!("{e}"));
        let f: libloading::Symbol<'_, unsafe extern "C" fn() -> u64> = lib
            .get(b"hcomm_standin_sync_timeouts")
            .unwrap_or_else(|e| panic!("{e}"));
        f()
    }
}

#[test]
fn long_waits_poll_quietly() {
    let options = CommOptions::default().with_timeout(Duration::from_secs(20));
    let before = sync_timeouts();
    let start = std::time::Instant::now();
    hccl()
        .run(2, &options, |comm| {
            // rank 0 waits about 400 ms (20 poll slices) for a late sender
            if comm.rank() == 1 {
                std::thread::sleep(Duration::from_millis(400));
                comm.send(&[7u32; 4], 0)
            } else {
                let mut got = [0u32; 4];
                comm.recv(&mut got, 1)?;
                assert_eq!(got, [7; 4]);
                Ok(())
            }
        })
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(start.elapsed() >= Duration::from_millis(400));
    assert_eq!(sync_timeouts(), before, "a wait used timed-out synchronisations");
}
