//! Boards of the subgroups a split makes between the processes of one
//! host (`backend/host/proc/split.rs`), in real processes started by
//! `hcomm-run`: 4 processes split 2x2 twice (pairs of neighbours and pairs
//! two apart, so that each rank's calls on its two subgroups interleave),
//! exact data of one-shot collectives just below, at and just above the
//! board's size with the board used up to it, a rank killed with SIGKILL
//! while its subgroup's partner reads its board named by every survivor,
//! and nothing left in `/dev/shm`.
//!
//! The processes are this test binary itself, running the ignored test
//! `split_rank` with `HCOMM_TEST_SCENARIO` naming what to do.

use std::time::{Duration, Instant};

use hcomm::{Algorithm, Collective, Comm, ReduceOp};

mod common;

use common::{assert_all_said, dev_shm, launch_entry, said, text, SCENARIO};

/// The board's size per rank, in bytes (`BOARD_BYTES`).
const BOARD: usize = 64 << 10;

#[test]
fn splits_of_four_processes_run_one_shot_collectives_on_boards_of_their_own() {
    let before = dev_shm();
    let o = launch_entry(4, "split_rank", "exact", &[]);
    assert!(o.status.success(), "{}", text(&o));
    assert_all_said(&o, 4, "both splits on their boards up to the board's size");
    assert_all_said(&o, 4, "scenario passed");
    assert_eq!(dev_shm(), before, "the job left files in /dev/shm");
}

#[test]
fn a_rank_killed_during_its_splits_one_shot_collectives_is_peer_failed_on_every_survivor() {
    let before = dev_shm();
    let o = launch_entry(4, "split_rank", "sigkill", &[]);
    let all = text(&o);
    assert!(!o.status.success(), "{all}");
    assert!(all.contains("rank 3 was killed by signal SIGKILL"), "{all}");
    let out = String::from_utf8_lossy(&o.stdout);
    // Rank 2 shares the victim's split and sees it fail there; 0 and 1 in
    // the world's collective, which waits for it.
    assert!(said(&out, 2, "survivor saw rank 3 fail in its split"), "{all}");
    for r in 0..2 {
        assert!(said(&out, r, "survivor saw rank 3 fail in the world"), "{all}");
    }
    assert_eq!(dev_shm(), before, "the job left files in /dev/shm");
}

/// Entry point of the processes the tests above start.
#[test]
#[ignore = "run by the other tests in processes of their own"]
fn split_rank() {
    let scenario = std::env::var(SCENARIO).unwrap();
    let world = hcomm::init_from_env().unwrap();
    assert_eq!(world.world(), 4);
    let r = world.rank();
    // Neighbours {0, 1}, {2, 3}; two apart {0, 2}, {1, 3}.
    let near = world.split(Some(u32::try_from(r / 2).unwrap()), 0).unwrap().unwrap();
    let far = world.split(Some(u32::try_from(r % 2).unwrap()), 0).unwrap().unwrap();
    match scenario.as_str() {
        "exact" => exact(r, &near, &far),
        "sigkill" => sigkill(&world, &near),
        other => panic!("unknown scenario {other}"),
    }
    println!("scenario passed");
}

fn value(rank: usize, i: usize) -> i32 {
    i32::try_from((rank + 1) * 100_000 + i % 9973).unwrap()
}

/// The global ranks of `sub`'s members, for global rank `r` in a split
/// of pairs `near` (neighbours) or two apart.
fn members(r: usize, near: bool) -> [usize; 2] {
    if near {
        [r / 2 * 2, r / 2 * 2 + 1]
    } else {
        [r % 2, r % 2 + 2]
    }
}

/// All-reduces, all-gathers and broadcasts on both splits in turn, at
/// element counts whose bytes per rank lie just below, at and just above
/// the board's size (and small ones), three rounds so that both pages of
/// every region are reused: exact data, and the board used exactly up to
/// its size.
fn exact(r: usize, near: &Comm, far: &Comm) {
    let word = size_of::<i32>();
    let counts = [1, 1024, BOARD / word - 1, BOARD / word, BOARD / word + 1];
    let mut on_board = true;
    for round in 0..3 {
        for &n in &counts {
            for (sub, is_near) in [(near, true), (far, false)] {
                let group = members(r, is_near);
                assert_eq!(group[sub.rank()], r);
                let send: Vec<i32> = (0..n).map(|i| value(r, i + round)).collect();
                let mut recv = vec![0; n];
                sub.all_reduce(&send, &mut recv, ReduceOp::Sum).unwrap();
                let sum = |i: usize| group.iter().map(|&q| value(q, i)).sum::<i32>();
                assert!((0..n).all(|i| recv[i] == sum(i + round)), "all_reduce of {n}");
                let board = sub.last_algorithms(Collective::AllReduce) == [Algorithm::OneShot];
                on_board &= board == (n * word <= BOARD);
                let m = n.div_ceil(8);
                let send: Vec<i32> = (0..m).map(|i| value(r, i + round)).collect();
                let mut recv = vec![0; 2 * m];
                sub.all_gather(&send, &mut recv).unwrap();
                assert!(
                    (0..2 * m).all(|k| recv[k] == value(group[k / m], k % m + round)),
                    "all_gather of {m}"
                );
                for (root, &from) in group.iter().enumerate() {
                    let mut buf: Vec<i32> = (0..n)
                        .map(|i| if sub.rank() == root { value(r, i) } else { -1 })
                        .collect();
                    sub.broadcast(&mut buf, root).unwrap();
                    assert!((0..n).all(|i| buf[i] == value(from, i)), "broadcast of {n} from {root}");
                }
            }
        }
    }
    assert!(on_board, "an all-reduce left or missed the board");
    println!("both splits on their boards up to the board's size");
}

/// Global rank 3 kills itself with SIGKILL while ranks 2 and 3 run
/// one-shot all-reduces on their split of neighbours and ranks 0 and 1
/// all-reduces of the world (which wait for rank 3): rank 2 must get
/// `PeerFailed` naming its partner (rank 1 of the split) there, ranks 0
/// and 1 naming rank 3 in the world, within seconds.
fn sigkill(world: &Comm, near: &Comm) {
    use nix::sys::signal::{kill, signal, SigHandler, Signal};
    // SAFETY: ignoring SIGTERM installs no handler code.
    unsafe { signal(Signal::SIGTERM, SigHandler::SigIgn) }.unwrap();
    let mut x = vec![1i32; 1024];
    let split = |x: &mut [i32]| {
        x.fill(1);
        near.all_reduce_in_place(x, ReduceOp::Sum)?;
        assert_eq!(near.last_algorithms(Collective::AllReduce), [Algorithm::OneShot]);
        assert!(x.iter().all(|&v| v == 2), "wrong data: {:?}", &x[..4]);
        Ok::<(), hcomm::Error>(())
    };
    let whole = |x: &mut [i32]| {
        x.fill(1);
        world.all_reduce_in_place(x, ReduceOp::Sum)?;
        assert!(x.iter().all(|&v| v == 4), "wrong data: {:?}", &x[..4]);
        Ok::<(), hcomm::Error>(())
    };
    split(&mut x).unwrap();
    whole(&mut x).unwrap();
    let r = world.rank();
    if r == 3 {
        let me = nix::unistd::Pid::this();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            let _ = kill(me, Signal::SIGKILL);
        });
    }
    let (place, named) = if r >= 2 { ("its split", 1) } else { ("the world", 3) };
    let start = Instant::now();
    loop {
        match if r >= 2 { split(&mut x) } else { whole(&mut x) } {
            Ok(()) => assert!(
                start.elapsed() < Duration::from_secs(20),
                "rank 3 was never seen to fail"
            ),
            Err(hcomm::Error::PeerFailed { rank, reason }) if rank == named => {
                let at = start.elapsed();
                assert!(at < Duration::from_secs(10), "took {at:?}");
                println!("survivor saw rank 3 fail in {place} ({reason})");
                break;
            }
            Err(e) => panic!("expected rank 3 to be named in {place}, got {e}"),
        }
    }
}
