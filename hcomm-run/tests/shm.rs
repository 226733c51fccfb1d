//! The shared board between the processes of one host (`backend/host/proc/
//! shm.rs`), in real processes started by `hcomm-run`: exact data of every
//! one-shot collective and of point-to-point at sizes on both sides of the
//! board's size on 2 and 4 processes, the board really used (and not with
//! `HCOMM_TRANSPORT=cma`), the one-shot limits of all-gathers and
//! all-to-alls on two ranks, a rank killed with SIGKILL in the middle of
//! one-shot collectives or of send-receives its peers read from its memory
//! named by the survivors, and nothing left in `/dev/shm` by any of it.
//!
//! The processes are this test binary itself, running the ignored test
//! `shm_rank` with `HCOMM_TEST_SCENARIO` naming what to do.

use std::process::Output;
use std::time::{Duration, Instant};

use hcomm::{Algorithm, Collective, Comm, ReduceOp};

mod common;

use common::{assert_all_said, dev_shm, launch_entry, said, text, SCENARIO};

/// The board's size per rank, in bytes (`BOARD_BYTES`).
const BOARD: usize = 64 << 10;

/// `hcomm-run -n N` this binary's `shm_rank` with `scenario`.
fn launch(n: usize, scenario: &str, extra_env: &[(&str, &str)]) -> Output {
    launch_entry(n, "shm_rank", scenario, extra_env)
}

#[test]
fn one_shot_collectives_and_p2p_across_the_board_size_on_two_and_four_processes() {
    let before = dev_shm();
    for n in [2, 4] {
        let o = launch(n, "exact", &[]);
        assert!(o.status.success(), "{}", text(&o));
        assert_all_said(&o, n, "on the board: all_reduce one_shot");
        assert_all_said(&o, n, "the board is an anonymous memory file");
        assert_all_said(&o, n, "scenario passed");
    }
    assert_eq!(dev_shm(), before, "the jobs left files in /dev/shm");
}

#[test]
fn hcomm_transport_cma_keeps_collectives_off_the_board() {
    let o = launch(2, "exact", &[("HCOMM_TRANSPORT", "cma")]);
    assert!(o.status.success(), "{}", text(&o));
    assert_all_said(&o, 2, "off the board: all_reduce ");
    assert_all_said(&o, 2, "scenario passed");
}

#[test]
fn an_unknown_hcomm_transport_is_a_config_error_naming_it() {
    // Rank 0 fails before its store serves, so rank 1 times out joining.
    let o = launch(
        2,
        "join",
        &[("HCOMM_TRANSPORT", "carrier-pigeon"), ("HCOMM_TIMEOUT", "2")],
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let expect = "join failed: configuration: `HCOMM_TRANSPORT=carrier-pigeon` is not a transport";
    assert!(said(&out, 0, expect), "{}", text(&o));
}

#[test]
fn all_gathers_and_all_to_alls_of_two_ranks_leave_the_board_past_their_limits() {
    for n in [2, 4] {
        let o = launch(n, "pair_limits", &[]);
        assert!(o.status.success(), "{}", text(&o));
        assert_all_said(&o, n, "pair limits held");
        assert_all_said(&o, n, "scenario passed");
    }
}

#[test]
fn a_rank_killed_during_one_shot_collectives_is_peer_failed_on_every_survivor() {
    killed_rank_is_named("sigkill");
}

#[test]
fn a_rank_killed_while_its_peers_read_its_sends_is_peer_failed_on_every_survivor() {
    killed_rank_is_named("sigkill_p2p");
}

/// In `scenario` on 2 and 4 processes the last rank kills itself: the
/// launcher names it, every survivor gets `PeerFailed` naming it, and
/// nothing is left in `/dev/shm`.
fn killed_rank_is_named(scenario: &str) {
    let before = dev_shm();
    for n in [2, 4] {
        let o = launch(n, scenario, &[]);
        let all = text(&o);
        assert!(!o.status.success(), "{all}");
        let victim = n - 1;
        assert!(
            all.contains(&format!("rank {victim} was killed by signal SIGKILL")),
            "{all}"
        );
        let out = String::from_utf8_lossy(&o.stdout);
        for r in 0..victim {
            assert!(said(&out, r, &format!("survivor saw rank {victim} fail")), "{all}");
        }
    }
    assert_eq!(dev_shm(), before, "the jobs left files in /dev/shm");
}

/// Entry point of the processes the tests above start.
#[test]
#[ignore = "run by the other tests in processes of their own"]
fn shm_rank() {
    let scenario = std::env::var(SCENARIO).unwrap();
    match scenario.as_str() {
        "exact" => exact(&hcomm::init_from_env().unwrap()),
        "sigkill" => sigkill(&hcomm::init_from_env().unwrap(), one_shot_all_reduces),
        "sigkill_p2p" => sigkill(&hcomm::init_from_env().unwrap(), victim_send_recvs),
        "pair_limits" => pair_limits(&hcomm::init_from_env().unwrap()),
        "join" => match hcomm::init_from_env() {
            Ok(c) => println!("joined as rank {}", c.rank()),
            Err(e) => println!("join failed: {e}"),
        },
        other => panic!("unknown scenario {other}"),
    }
    println!("scenario passed");
}

fn value(rank: usize, i: usize) -> i32 {
    i32::try_from((rank + 1) * 100_000 + i % 9973).unwrap()
}

/// Every collective the board runs, at element counts whose bytes per
/// rank lie just below, at and just above the board's size (and small
/// ones), many times over so that both pages of every rank are reused;
/// then point-to-point at the same sizes. Says which algorithm the 4 KiB
/// all-reduce took.
fn exact(comm: &Comm) {
    let (r, w) = (comm.rank(), comm.world());
    let word = size_of::<i32>();
    // Both sides of the eager size of point-to-point (8 KiB) and of the
    // board (64 KiB).
    let eager = (8 << 10) / word;
    let counts = [
        1,
        1024,
        eager - 1,
        eager,
        eager + 1,
        BOARD / word - 1,
        BOARD / word,
        BOARD / word + 1,
    ];
    for round in 0..3 {
        for &n in &counts {
            // all-reduce: n elements per rank
            let send: Vec<i32> = (0..n).map(|i| value(r, i + round)).collect();
            let mut recv = vec![0; n];
            comm.all_reduce(&send, &mut recv, ReduceOp::Sum).unwrap();
            let sum = |i: usize| (0..w).map(|q| value(q, i)).sum::<i32>();
            assert!((0..n).all(|i| recv[i] == sum(i + round)), "all_reduce of {n}");
            // all-gather: n / w elements per rank
            let m = (n / w).max(1);
            let send: Vec<i32> = (0..m).map(|i| value(r, i + round)).collect();
            let mut recv = vec![0; m * w];
            comm.all_gather(&send, &mut recv).unwrap();
            assert!(
                (0..m * w).all(|k| recv[k] == value(k / m, k % m + round)),
                "all_gather of {m}"
            );
            // reduce-scatter and all-to-all: m * w elements sent per rank
            let send: Vec<i32> = (0..m * w).map(|i| value(r, i + round)).collect();
            let mut part = vec![0; m];
            comm.reduce_scatter(&send, &mut part, ReduceOp::Sum).unwrap();
            assert!(
                (0..m).all(|i| part[i] == sum(r * m + i + round)),
                "reduce_scatter of {m}"
            );
            let mut recv = vec![0; m * w];
            comm.all_to_all(&send, &mut recv).unwrap();
            assert!(
                (0..m * w).all(|k| recv[k] == value(k / m, r * m + k % m + round)),
                "all_to_all of {m}"
            );
            // broadcast from every root
            for root in 0..w {
                let mut buf: Vec<i32> = (0..n).map(|i| if r == root { value(r, i) } else { -1 }).collect();
                comm.broadcast(&mut buf, root).unwrap();
                assert!((0..n).all(|i| buf[i] == value(root, i)), "broadcast of {n} from {root}");
            }
            comm.barrier().unwrap();
            // point-to-point around the ring
            let (right, left) = ((r + 1) % w, (r + w - 1) % w);
            let send: Vec<i32> = (0..n).map(|i| value(r, i + round)).collect();
            let mut got = vec![0; n];
            comm.send_recv(&send, right, &mut got, left).unwrap();
            assert!((0..n).all(|i| got[i] == value(left, i + round)), "send_recv of {n}");
        }
    }
    let mut x = vec![1i32; 1024];
    comm.all_reduce_in_place(&mut x, ReduceOp::Sum).unwrap();
    assert_eq!(x, vec![i32::try_from(w).unwrap(); 1024]);
    // The board's regions are memory files without a name: mapped as
    // `/memfd:...`, nothing from `/dev/shm`.
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    assert!(!maps.contains("/dev/shm/"), "{maps}");
    if maps.contains("/memfd:hcomm-board") {
        println!("the board is an anonymous memory file");
    }
    let used = comm.last_algorithms(Collective::AllReduce);
    let place = if used == [Algorithm::OneShot] { "on" } else { "off" };
    let names: Vec<&str> = used.iter().map(|a| a.name()).collect();
    println!("{place} the board: all_reduce {}", names.join(","));
}

/// All-gathers (elements per rank) and all-to-alls (elements sent per
/// rank) just below, at and just above the bytes per rank up to which two
/// ranks run them on the board (8 and 16 KiB): exact data, and on 2
/// processes the board up to the limit and another algorithm past it (on
/// 4, the board throughout).
fn pair_limits(comm: &Comm) {
    let (r, w) = (comm.rank(), comm.world());
    let word = size_of::<i32>();
    let (gather, all_to_all) = ((8 << 10) / word, (16 << 10) / word);
    for round in 0..2 {
        for m in [gather - 1, gather, gather + 1] {
            let send: Vec<i32> = (0..m).map(|i| value(r, i + round)).collect();
            let mut recv = vec![0; m * w];
            comm.all_gather(&send, &mut recv).unwrap();
            assert!(
                (0..m * w).all(|k| recv[k] == value(k / m, k % m + round)),
                "all_gather of {m}"
            );
            let board = comm.last_algorithms(Collective::AllGather) == [Algorithm::OneShot];
            assert_eq!(board, w > 2 || m <= gather, "all_gather of {m} on {w} ranks");
        }
        for total in [all_to_all - w, all_to_all, all_to_all + w] {
            let m = total / w;
            let send: Vec<i32> = (0..m * w).map(|i| value(r, i + round)).collect();
            let mut recv = vec![0; m * w];
            comm.all_to_all(&send, &mut recv).unwrap();
            assert!(
                (0..m * w).all(|k| recv[k] == value(k / m, r * m + k % m + round)),
                "all_to_all of {m}"
            );
            let board = comm.last_algorithms(Collective::AllToAll) == [Algorithm::OneShot];
            assert_eq!(board, w > 2 || m * w <= all_to_all, "all_to_all of {m} on {w} ranks");
        }
    }
    println!("pair limits held");
}

/// One-shot all-reduces of 4 KiB, checked.
fn one_shot_all_reduces(comm: &Comm, x: &mut [i32]) -> hcomm::Result<()> {
    x.fill(1);
    comm.all_reduce_in_place(x, ReduceOp::Sum)?;
    assert_eq!(comm.last_algorithms(Collective::AllReduce), [Algorithm::OneShot]);
    let world = i32::try_from(comm.world()).unwrap();
    assert!(x.iter().all(|&v| v == world), "wrong data: {:?}", &x[..4]);
    Ok(())
}

/// Send-receives of 256 KiB between the last rank and each other rank in
/// turn (each reads the other's send from its memory, one system call per
/// message), checked.
fn victim_send_recvs(comm: &Comm, x: &mut [i32]) -> hcomm::Result<()> {
    let (r, last) = (comm.rank(), comm.world() - 1);
    let send: Vec<i32> = (0..64 << 10).map(|i| value(r, i)).collect();
    let mut got = vec![0i32; send.len()];
    let peers: Vec<usize> = if r == last { (0..last).collect() } else { vec![last] };
    for peer in peers {
        comm.send_recv(&send, peer, &mut got, peer)?;
        assert!(
            got.iter().enumerate().all(|(i, &v)| v == value(peer, i)),
            "send_recv with {peer}"
        );
    }
    x[0] = got[0];
    Ok(())
}

/// The last rank kills itself with SIGKILL while the ranks run `op`; the
/// others must fail with `PeerFailed` naming it within seconds.
fn sigkill(comm: &Comm, op: fn(&Comm, &mut [i32]) -> hcomm::Result<()>) {
    use nix::sys::signal::{kill, signal, SigHandler, Signal};
    // SAFETY: ignoring SIGTERM installs no handler code.
    unsafe { signal(Signal::SIGTERM, SigHandler::SigIgn) }.unwrap();
    let victim = comm.world() - 1;
    let mut x = vec![1i32; 1024];
    op(comm, &mut x).unwrap();
    if comm.rank() == victim {
        let me = nix::unistd::Pid::this();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            let _ = kill(me, Signal::SIGKILL);
        });
    }
    let start = Instant::now();
    loop {
        match op(comm, &mut x) {
            Ok(()) => {
                assert!(
                    start.elapsed() < Duration::from_secs(20),
                    "rank {victim} was never seen to fail"
                );
            }
            Err(hcomm::Error::PeerFailed { rank, reason }) if rank == victim => {
                let at = start.elapsed();
                assert!(at < Duration::from_secs(10), "took {at:?}");
                println!("survivor saw rank {victim} fail ({reason})");
                break;
            }
            Err(e) => panic!("expected rank {victim} to be named, got {e}"),
        }
    }
}
