//! The shared board between the processes of one host (`backend/host/proc/
//! shm.rs`), in real processes started by `hcomm-run`: exact data of every
//! one-shot collective and of point-to-point at sizes on both sides of the
//! board's size on 2 and 4 processes, the board really used (and not with
//! `HCOMM_TRANSPORT=cma`), a rank killed with SIGKILL in the middle of
//! one-shot collectives named by the survivors, and nothing left in
//! `/dev/shm` by any of it.
//!
//! The processes are this test binary itself, running the ignored test
//! `shm_rank` with `HCOMM_TEST_SCENARIO` naming what to do.

use std::collections::BTreeSet;
use std::process::Output;
use std::time::{Duration, Instant};

use hcomm::{Algorithm, Collective, Comm, ReduceOp};

mod common;

use common::{assert_all_said, launch_entry, said, text, SCENARIO};

/// The board's size per rank, in bytes (`BOARD_BYTES`).
const BOARD: usize = 64 << 10;

/// `hcomm-run -n N` this binary's `shm_rank` with `scenario`.
fn launch(n: usize, scenario: &str, extra_env: &[(&str, &str)]) -> Output {
    launch_entry(n, "shm_rank", scenario, extra_env)
}

/// The names in `/dev/shm` that could be hcomm's (other programs on a
/// shared host, Open MPI among them, put their own there meanwhile).
fn dev_shm() -> BTreeSet<String> {
    std::fs::read_dir("/dev/shm").map_or_else(
        |_| BTreeSet::new(),
        |d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.contains("hcomm"))
                .collect()
        },
    )
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
fn a_rank_killed_during_one_shot_collectives_is_peer_failed_on_every_survivor() {
    let before = dev_shm();
    for n in [2, 4] {
        let o = launch(n, "sigkill", &[]);
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
        "sigkill" => sigkill(&hcomm::init_from_env().unwrap()),
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

/// The last rank kills itself with SIGKILL while the ranks run one-shot
/// all-reduces; the others must fail with `PeerFailed` naming it within
/// seconds.
fn sigkill(comm: &Comm) {
    use nix::sys::signal::{kill, signal, SigHandler, Signal};
    // SAFETY: ignoring SIGTERM installs no handler code.
    unsafe { signal(Signal::SIGTERM, SigHandler::SigIgn) }.unwrap();
    let victim = comm.world() - 1;
    let mut x = vec![1i32; 1024];
    comm.all_reduce_in_place(&mut x, ReduceOp::Sum).unwrap();
    assert_eq!(comm.last_algorithms(Collective::AllReduce), [Algorithm::OneShot]);
    if comm.rank() == victim {
        let me = nix::unistd::Pid::this();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            let _ = kill(me, Signal::SIGKILL);
        });
    }
    let start = Instant::now();
    loop {
        x.fill(1);
        match comm.all_reduce_in_place(&mut x, ReduceOp::Sum) {
            Ok(()) => {
                assert!(
                    start.elapsed() < Duration::from_secs(20),
                    "rank {victim} was never seen to fail"
                );
                let world = i32::try_from(comm.world()).unwrap();
                assert!(x.iter().all(|&v| v == world), "wrong data: {:?}", &x[..4]);
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
