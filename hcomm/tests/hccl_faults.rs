//! Failures on the HCCL backend, driven through the stand-in library: error
//! codes injected into its symbols, timeouts, failed peers and aborts, each
//! surfacing as the matching `hcomm::Error`. The tests run one at a time
//! (injections are process-wide).

use std::ffi::{c_char, c_int, CString};
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use hcomm::hccl::Hccl;
use hcomm::{Comm, CommOptions, DeviceBuffer, Error, ReduceOp};

struct StandIn {
    hccl: Hccl,
    lib: libloading::Library,
}

fn standin() -> &'static StandIn {
    static S: OnceLock<StandIn> = OnceLock::new();
    S.get_or_init(|| {
        let path = hcomm_hccl_standin::cdylib_path().expect("the stand-in cdylib is built next to the tests");
        let hccl = Hccl::load_from(&path).unwrap_or_else(|e| panic!("{e}"));
        // SAFETY: loading the stand-in runs no initialisers with preconditions.
        let lib = unsafe { libloading::Library::new(&path) }.unwrap();
        StandIn { hccl, lib }
    })
}

/// Makes the next call of `symbol` in the stand-in return `code`.
fn inject(symbol: &str, code: i32) {
    let name = CString::new(symbol).unwrap();
    // SAFETY: the stand-in's documented hook: `int(const char*, int)`.
    unsafe {
        let f = standin()
            .lib
            .get::<unsafe extern "C" fn(*const c_char, c_int) -> c_int>(b"hcomm_standin_inject_error\0")
            .unwrap();
        assert_eq!(f(name.as_ptr(), code), 0);
    }
}

fn clear_injections() {
    // SAFETY: the stand-in's documented hook: `void(void)`.
    unsafe {
        let f = standin()
            .lib
            .get::<unsafe extern "C" fn()>(b"hcomm_standin_clear_injections\0")
            .unwrap();
        f();
    }
}

fn serial() -> MutexGuard<'static, ()> {
    static M: Mutex<()> = Mutex::new(());
    let g = M.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    clear_injections();
    g
}

fn run<R: Send>(world: usize, timeout_s: f64, f: impl Fn(&Comm) -> hcomm::Result<R> + Sync) -> hcomm::Result<Vec<R>> {
    let options = CommOptions::default().with_timeout(Duration::from_secs_f64(timeout_s));
    standin().hccl.run(world, &options, f)
}

/// Runs `op` on every rank of a world of `world`, recording each rank's
/// outcome, and returns (what `run` returned, per-rank errors).
fn outcomes(world: usize, op: impl Fn(&Comm) -> hcomm::Result<()> + Sync) -> (Error, Vec<Option<Error>>) {
    let seen: Mutex<Vec<Option<Error>>> = Mutex::new(vec![None; world]);
    let err = run(world, 20.0, |comm| {
        let r = op(comm);
        if let Err(e) = &r {
            seen.lock().unwrap()[comm.rank()] = Some(e.clone());
        }
        r
    })
    .unwrap_err();
    (err, seen.into_inner().unwrap())
}

#[test]
fn an_injected_parameter_error_is_a_backend_error_and_peers_see_peer_failed() {
    let _g = serial();
    inject("HcclAllReduce", 1); // HCCL_E_PARA, consumed by whichever rank calls first
    let (err, seen) = outcomes(3, |comm| {
        let mut x = [1.0f32; 4];
        comm.all_reduce_in_place(&mut x, ReduceOp::Sum)
    });
    match &err {
        Error::Backend {
            backend: "hccl",
            message,
        } => {
            assert!(message.contains("HcclAllReduce"), "{message}");
            assert!(message.contains("HCCL_E_PARA"), "{message}");
            assert!(message.contains("injected"), "{message}");
        }
        other => panic!("expected a backend error, got {other}"),
    }
    let root_causes = seen
        .iter()
        .flatten()
        .filter(|e| matches!(e, Error::Backend { .. }))
        .count();
    assert_eq!(root_causes, 1, "{seen:?}");
    for e in seen.iter().flatten() {
        assert!(matches!(e, Error::Backend { .. } | Error::PeerFailed { .. }), "{e}");
    }
}

#[test]
fn an_injected_hccl_timeout_is_a_timeout() {
    let _g = serial();
    inject("HcclBroadcast", 9); // HCCL_E_TIMEOUT
    let (err, _) = outcomes(2, |comm| {
        let mut x = [comm.rank() as i64; 2];
        comm.broadcast(&mut x, 0)
    });
    match &err {
        Error::Timeout { operation, .. } => assert!(operation.contains("HCCL_E_TIMEOUT"), "{operation}"),
        other => panic!("expected a timeout, got {other}"),
    }
}

#[test]
fn injected_acl_and_batch_errors_name_the_failing_call() {
    let _g = serial();
    run(2, 20.0, |comm| {
        if comm.rank() == 0 {
            inject("aclrtMalloc", 200_000); // ACL_ERROR_BAD_ALLOC
            let err = DeviceBuffer::<f32>::zeros(comm, 16).unwrap_err();
            assert!(
                matches!(&err, Error::Backend { backend: "hccl", message }
                    if message.contains("aclrtMalloc") && message.contains("ACL_ERROR_BAD_ALLOC")),
                "{err}"
            );
        }
        Ok(())
    })
    .unwrap();
    inject("HcclBatchSendRecv", 4); // HCCL_E_INTERNAL
    let (err, _) = outcomes(2, |comm| {
        let r = comm.rank();
        let mut got = [0i32; 3];
        comm.send_recv(&[r as i32; 3], 1 - r, &mut got, 1 - r)
    });
    assert!(
        matches!(&err, Error::Backend { message, .. } if message.contains("HcclBatchSendRecv") && message.contains("HCCL_E_INTERNAL")),
        "{err}"
    );
}

#[test]
fn a_receive_nobody_sends_times_out_within_the_communicator_timeout() {
    let _g = serial();
    let started = Instant::now();
    let err = run(2, 1.0, |comm| {
        if comm.rank() == 0 {
            let mut x = [0f32; 8];
            let err = comm.recv(&mut x, 1).unwrap_err();
            // the timeout aborted the communicator: later operations fail
            // fast, naming this rank and the operation that timed out
            let again = comm.barrier().unwrap_err();
            assert!(
                matches!(&again, Error::Aborted { reason } if reason.starts_with("rank 0 timed out in ")),
                "{again}"
            );
            Err(err)
        } else {
            std::thread::sleep(Duration::from_millis(2500));
            Ok(())
        }
    })
    .unwrap_err();
    match &err {
        Error::Timeout {
            rank, waited, limit, ..
        } => {
            assert_eq!(*rank, 0);
            assert_eq!(*limit, Duration::from_secs(1));
            assert!(
                *waited >= Duration::from_secs(1) && *waited < Duration::from_secs(2),
                "{waited:?}"
            );
        }
        other => panic!("expected a timeout, got {other}"),
    }
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn a_failed_or_panicking_peer_turns_waits_into_peer_failed() {
    let _g = serial();
    let (err, seen) = outcomes(4, |comm| {
        if comm.rank() == 2 {
            return Err(Error::Config {
                message: "rank 2 gives up".into(),
            });
        }
        let mut x = [1u64; 4];
        comm.all_reduce_in_place(&mut x, ReduceOp::Sum)
    });
    assert!(
        matches!(&err, Error::Config { message } if message == "rank 2 gives up"),
        "{err}"
    );
    for r in [0, 1, 3] {
        assert!(
            matches!(&seen[r], Some(Error::PeerFailed { rank: 2, .. })),
            "rank {r}: {:?}",
            seen[r]
        );
    }
    let started = Instant::now();
    let err = run(3, 20.0, |comm| {
        assert!(comm.rank() != 1, "rank 1 panics");
        let mut x = [0i8; 2];
        comm.recv(&mut x, 1)
    })
    .unwrap_err();
    assert!(
        matches!(&err, Error::Panicked { rank: 1, message } if message.contains("rank 1 panics")),
        "{err}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "peer failure must not wait for the timeout"
    );
}

#[test]
fn a_peer_that_fails_before_a_rooted_or_all_to_all_collective_is_seen_at_once() {
    let _g = serial();
    for kind in ["gather", "scatter", "all_to_all"] {
        let started = Instant::now();
        let (err, seen) = outcomes(3, |comm| {
            if comm.rank() == 1 {
                return Err(Error::Config {
                    message: "rank 1 gives up".into(),
                });
            }
            let mine = [comm.rank() as i32; 6];
            let mut out = [0i32; 6];
            match kind {
                "gather" => comm.gather(&mine[..2], &mut out, 0),
                "scatter" => comm.scatter(&mine, &mut out[..2], 0),
                _ => comm.all_to_all(&mine, &mut out),
            }
        });
        assert!(matches!(&err, Error::Config { .. }), "{kind}: {err}");
        // The root waits on rank 1 in every case; rank 2 does only in the
        // all-to-all (its gather or scatter block moves with the root alone).
        let waiting_on_1: &[usize] = if kind == "all_to_all" { &[0, 2] } else { &[0] };
        for &r in waiting_on_1 {
            assert!(
                matches!(&seen[r], Some(Error::PeerFailed { rank: 1, .. })),
                "{kind}, rank {r}: {:?}",
                seen[r]
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{kind}: peer failure must not wait for the timeout"
        );
    }
}

#[test]
fn abort_fails_pending_operations_of_every_rank() {
    let _g = serial();
    let (err, seen) = outcomes(2, |comm| {
        if comm.rank() == 0 {
            std::thread::sleep(Duration::from_millis(100));
            comm.abort("stop the world");
            let mut x = [0u8; 1];
            comm.all_reduce_in_place(&mut x, ReduceOp::Max)
        } else {
            let mut x = [0u8; 4];
            comm.recv(&mut x, 0)
        }
    });
    assert!(
        matches!(&err, Error::Aborted { reason } if reason == "stop the world"),
        "{err}"
    );
    for e in &seen {
        assert!(matches!(e, Some(Error::Aborted { .. })), "{e:?}");
    }
}

#[test]
fn a_destroy_answered_with_e_again_is_retried_until_it_succeeds() {
    let _g = serial();
    let _ = hcomm::take_device_teardown_errors();
    // HCCL_E_AGAIN (20): the communicator is in use. Three answers for the
    // two ranks' destroys: each destroy is retried until one succeeds,
    // which leaves no injection behind.
    for _ in 0..3 {
        inject("HcclCommDestroy", 20);
    }
    let out = run(2, 20.0, |comm| {
        let mut x = [comm.rank() as i32 + 1; 3];
        comm.all_reduce_in_place(&mut x, ReduceOp::Sum)?;
        Ok(x)
    })
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out, [[3; 3], [3; 3]]);
    let errors = hcomm::take_device_teardown_errors();
    assert!(errors.is_empty(), "{errors:?}");
}
