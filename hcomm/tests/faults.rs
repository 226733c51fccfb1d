//! Fault injection: a rank that panics or fails turns every wait on it into
//! an error on the other ranks, well within the (short) timeout; mismatched
//! collective arguments fail on every rank; nothing hangs.

mod common;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use hcomm::{CommOptions, Error, ReduceOp};

/// The timeout every test here runs under: long enough that an error coming
/// back is a detected failure, not an expired wait.
const LIMIT: Duration = Duration::from_secs(10);

fn opts() -> CommOptions {
    CommOptions::default().with_timeout(LIMIT)
}

/// Runs `f` on `world` ranks and returns `run`'s result plus what each
/// surviving rank's operation returned.
fn faulty<F>(world: usize, f: F) -> (hcomm::Result<Vec<()>>, Vec<(usize, Error)>, Duration)
where
    F: Fn(&hcomm::Comm) -> hcomm::Result<()> + Sync,
{
    let seen = Mutex::new(Vec::new());
    let start = Instant::now();
    let res = hcomm::host::run_with(world, &opts(), |comm| {
        let r = f(comm);
        if let Err(e) = &r {
            seen.lock().unwrap().push((comm.rank(), e.clone()));
        }
        r
    });
    let mut seen = seen.into_inner().unwrap();
    seen.sort_by_key(|(r, _)| *r);
    (res, seen, start.elapsed())
}

fn assert_peer_failures(seen: &[(usize, Error)], failed: usize, survivors: &[usize], elapsed: Duration) {
    assert!(elapsed < LIMIT / 2, "detection took {elapsed:?}, as long as a timeout");
    for &r in survivors {
        let (_, e) = seen
            .iter()
            .find(|(q, _)| *q == r)
            .unwrap_or_else(|| panic!("rank {r} saw no error: {seen:?}"));
        assert!(matches!(e, Error::PeerFailed { .. }), "rank {r}: {e}");
    }
    assert!(seen
        .iter()
        .any(|(r, e)| *r == failed || matches!(e, Error::PeerFailed { rank, .. } if *rank == failed)));
}

#[test]
fn a_rank_that_panics_before_a_collective_fails_the_others() {
    let (res, seen, elapsed) = faulty(4, |comm| {
        assert!(comm.rank() != 2, "injected failure on rank 2");
        let mut x = [1.0f32; 64];
        comm.all_reduce_in_place(&mut x, ReduceOp::Sum)
    });
    assert!(
        matches!(&res, Err(Error::Panicked { rank: 2, message }) if message.contains("injected failure")),
        "{res:?}"
    );
    assert_peer_failures(&seen, 2, &[0, 1, 3], elapsed);
}

#[test]
fn a_rank_that_panics_in_the_middle_of_a_ring_fails_the_others() {
    let (res, seen, elapsed) = faulty(5, |comm| {
        let (r, w) = (comm.rank(), comm.world());
        let mut token = [r as i32; 8];
        for step in 0..w {
            assert!(!(r == 1 && step == 2), "injected failure at step 2");
            let send = token;
            comm.send_recv(&send, (r + 1) % w, &mut token, (r + w - 1) % w)?;
        }
        Ok(())
    });
    assert!(matches!(&res, Err(Error::Panicked { rank: 1, .. })), "{res:?}");
    assert_peer_failures(&seen, 1, &[0, 2, 3, 4], elapsed);
}

#[test]
fn a_rank_that_panics_inside_a_batch_fails_the_others() {
    let (res, seen, elapsed) = faulty(3, |comm| {
        let r = comm.rank();
        let out = [r as u8; 4];
        let mut ins = [[0u8; 4]; 3];
        let [a, b, c] = &mut ins;
        comm.batch(|x| {
            for (p, buf) in [a, b, c].into_iter().enumerate() {
                if p != r {
                    x.send(&out, p)?;
                    x.recv(buf, p)?;
                }
            }
            assert!(r != 0, "injected failure inside a batch");
            Ok(())
        })
    });
    assert!(matches!(&res, Err(Error::Panicked { rank: 0, .. })), "{res:?}");
    assert_peer_failures(&seen, 0, &[1, 2], elapsed);
}

#[test]
fn a_rank_that_returns_an_error_is_the_root_cause() {
    let (res, seen, elapsed) = faulty(3, |comm| {
        if comm.rank() == 1 {
            return Err(Error::Config {
                message: "injected".into(),
            });
        }
        comm.barrier()
    });
    assert!(
        matches!(&res, Err(Error::Config { message }) if message == "injected"),
        "{res:?}"
    );
    assert_peer_failures(&seen, 1, &[0, 2], elapsed);
}

#[test]
fn mismatched_collectives_fail_on_every_rank() {
    // Different kinds.
    let (res, seen, _) = faulty(3, |comm| {
        let mut x = [1i32; 6];
        if comm.rank() == 1 {
            comm.all_gather(&[1i32, 2], &mut x)
        } else {
            comm.all_reduce_in_place(&mut x, ReduceOp::Sum)
        }
    });
    assert!(matches!(res, Err(Error::Mismatch { .. })), "{res:?}");
    assert_eq!(seen.len(), 3, "{seen:?}");
    for (r, e) in &seen {
        assert!(
            matches!(e, Error::Mismatch { message } if message.contains("`all_gather`") && message.contains("`all_reduce`"))
                || e.is_secondary(),
            "rank {r}: {e}"
        );
    }
    // Same kind, different counts, roots and ops.
    for case in 0..3 {
        let (res, seen, _) = faulty(4, |comm| {
            let r = comm.rank();
            match case {
                0 => comm.all_reduce_in_place(&mut vec![0u8; if r == 3 { 5 } else { 4 }], ReduceOp::Sum),
                1 => comm.broadcast(&mut [0u8; 4], usize::from(r == 2)),
                _ => comm.all_reduce_in_place(&mut [0u8; 4], if r == 0 { ReduceOp::Max } else { ReduceOp::Sum }),
            }
        });
        assert!(matches!(res, Err(Error::Mismatch { .. })), "case {case}: {res:?}");
        assert_eq!(seen.len(), 4, "case {case}: every rank gets an error: {seen:?}");
    }
}

#[test]
fn a_wait_that_nobody_answers_times_out() {
    let opts = CommOptions::default().with_timeout(Duration::from_millis(200));
    let res = hcomm::host::run_with(2, &opts, |comm| {
        if comm.rank() == 0 {
            let mut b = [0u8; 1];
            let start = Instant::now();
            let e = comm.recv(&mut b, 1).unwrap_err();
            assert!(start.elapsed() >= Duration::from_millis(200));
            assert!(matches!(&e, Error::Timeout { rank: 0, .. }), "{e}");
            assert!(e.to_string().contains("HCOMM_TIMEOUT"), "{e}");
        } else {
            std::thread::sleep(Duration::from_millis(600));
        }
        Ok(())
    });
    res.unwrap();
}

#[test]
fn a_rank_that_finished_cannot_answer() {
    let (res, seen, elapsed) = faulty(2, |comm| {
        if comm.rank() == 0 {
            let mut b = [0u8; 1];
            comm.recv(&mut b, 1)
        } else {
            Ok(())
        }
    });
    assert!(res.is_err());
    assert!(elapsed < LIMIT / 2);
    let (_, e) = &seen[0];
    assert!(
        matches!(e, Error::PeerFailed { rank: 1, reason } if reason.contains("finished without posting the matching send")),
        "{e}"
    );
}

#[test]
fn a_rank_whose_main_thread_panicked_is_reported_panicked_when_a_helper_drops_its_last_handle() {
    let comms = hcomm::host::comms(2, &opts()).unwrap();
    let mut comms = comms.into_iter();
    let (c0, c1) = (comms.next().unwrap(), comms.next().unwrap());
    let start = Instant::now();
    let survivor = std::thread::spawn(move || {
        let mut b = [0u8; 1];
        c1.recv(&mut b, 0)
    });
    // Rank 0: a helper thread holds a handle; the main thread panics.
    let (release, released) = std::sync::mpsc::channel::<()>();
    let helper_comm = c0.clone();
    let helper = std::thread::spawn(move || {
        released.recv().unwrap();
        // not panicking: drops the rank's last handle
        drop(helper_comm);
    });
    let main = std::thread::spawn(move || {
        let _comm = c0;
        panic!("injected failure on rank 0's main thread");
    });
    assert!(main.join().is_err());
    // the helper drops the last handle only after the main thread is gone
    release.send(()).unwrap();
    helper.join().unwrap();
    let e = survivor.join().unwrap().unwrap_err();
    assert!(start.elapsed() < LIMIT / 2, "detection took as long as a timeout");
    assert_eq!(
        e,
        Error::PeerFailed {
            rank: 0,
            reason: "rank 0 panicked: a thread of it panicked holding its communicator (another thread dropped the last handle)"
                .into()
        },
        "{e}"
    );
}

#[test]
fn abort_fails_every_pending_operation() {
    let (res, seen, elapsed) = faulty(3, |comm| {
        if comm.rank() == 0 {
            std::thread::sleep(Duration::from_millis(50));
            comm.abort("operator asked to stop");
            return Ok(());
        }
        let mut b = [0u8; 1];
        comm.recv(&mut b, 0)
    });
    assert!(res.is_err());
    assert!(elapsed < LIMIT / 2);
    for (_, e) in &seen {
        assert!(
            matches!(e, Error::Aborted { reason } if reason == "operator asked to stop") || e.is_secondary(),
            "{e}"
        );
    }
    assert_eq!(seen.len(), 2);
}

#[test]
fn hcomm_timeout_is_read_when_a_communicator_is_created() {
    // Only this test in this binary touches the variable.
    std::env::set_var("HCOMM_TIMEOUT", "1.5");
    let t = hcomm::host::run(1, |comm| Ok(comm.timeout())).unwrap();
    std::env::remove_var("HCOMM_TIMEOUT");
    assert_eq!(t, vec![Duration::from_millis(1500)]);
}
