//! Misuse on in-process ranks (threads) and on the HCCL backend through
//! its stand-in library: two threads on one communicator, a library
//! exchange against a user's collective, a rank arriving after its peers'
//! timeout, bad subgroup members. The same scenarios run on processes in
//! `hcomm-run/tests/misuse.rs`.

mod misuse_cases;

use std::time::Duration;

use hcomm::{CommOptions, Error};

fn options() -> CommOptions {
    CommOptions::default().with_timeout(Duration::from_secs(20))
}

#[test]
fn two_threads_on_one_handle_get_right_data_or_the_in_use_error() {
    for world in [2, 3] {
        let refused = hcomm::host::run_with(world, &options(), |c| Ok(misuse_cases::hammer(c, false))).unwrap();
        println!("{world} ranks, one shared handle: calls refused per rank {refused:?}");
    }
}

#[test]
fn two_threads_on_two_clones_get_right_data_or_the_in_use_error() {
    let refused = hcomm::host::run_with(2, &options(), |c| Ok(misuse_cases::hammer(c, true))).unwrap();
    println!("2 ranks, a clone per thread: calls refused per rank {refused:?}");
}

#[test]
fn a_split_against_an_all_gather_is_a_mismatch_on_every_rank() {
    for world in [2, 3] {
        hcomm::host::run_with(world, &options(), |c| {
            misuse_cases::split_versus_all_gather(c);
            Ok(())
        })
        .unwrap();
    }
}

#[test]
fn a_rank_arriving_after_its_peers_timed_out_gets_an_error() {
    hcomm::host::run_with(3, &options(), |c| {
        misuse_cases::late_rank(c, Duration::from_millis(500), Duration::from_millis(1500));
        Ok(())
    })
    .unwrap();
}

#[test]
fn bad_subgroup_members_are_refused_at_once() {
    hcomm::host::run_with(3, &options(), |c| {
        misuse_cases::bad_subgroups(c);
        Ok(())
    })
    .unwrap();
}

#[test]
fn bad_subgroup_members_are_refused_at_once_on_the_hccl_stand_in() {
    let path = hcomm_hccl_standin::cdylib_path().expect("the stand-in cdylib is built next to the tests");
    let hccl = hcomm::hccl::Hccl::load_from(path).unwrap_or_else(|e| panic!("{e}"));
    hccl.run(2, &options(), |c| {
        misuse_cases::bad_subgroups(c);
        Ok(())
    })
    .unwrap();
}

#[test]
fn nested_library_calls_and_non_blocking_collectives_still_work() {
    hcomm::host::run_with(2, &options(), |c| {
        // A collective's schedule runs point-to-point calls on the thread
        // in the call; a non-blocking collective runs on the helper thread
        // while this thread makes blocking calls.
        let mut bucket = vec![f64::from(u32::try_from(c.rank()).unwrap()) + 1.0; 64];
        let mut x = [1i32; 4];
        hcomm::scope(|s| {
            let req = c.iall_reduce_in_place(s, &mut bucket, hcomm::ReduceOp::Sum)?;
            c.all_reduce_in_place(&mut x, hcomm::ReduceOp::Sum)?;
            req.wait()
        })?;
        assert_eq!(bucket, vec![3.0; 64]);
        assert_eq!(x, [2; 4]);
        let sub = c.split(Some(0), -i64::try_from(c.rank()).unwrap())?.unwrap();
        assert_eq!(sub.rank(), 1 - c.rank());
        Ok(())
    })
    .unwrap();
}

#[test]
fn a_call_while_another_thread_waits_is_refused_naming_the_rank() {
    hcomm::host::run_with(2, &options(), |c| {
        if c.rank() == 1 {
            // Rank 1 makes rank 0's receive wait until rank 0's second
            // thread has tried a call.
            std::thread::sleep(Duration::from_millis(300));
            c.send(&[5u8; 3], 0)?;
            return Ok(());
        }
        std::thread::scope(|s| {
            let waiting = s.spawn(|| {
                let mut b = [0u8; 3];
                c.recv(&mut b, 1).map(|()| b)
            });
            std::thread::sleep(Duration::from_millis(100));
            let err = c.barrier().unwrap_err();
            match &err {
                Error::Precondition { message } => assert!(
                    message.starts_with(
                        "barrier on rank 0 of a 2-rank `host` communicator: another thread is in a call on it"
                    ),
                    "{message}"
                ),
                e => panic!("expected the in-use error, got {e}"),
            }
            assert_eq!(waiting.join().unwrap().unwrap(), [5; 3]);
        });
        Ok(())
    })
    .unwrap();
}
