//! Real processes started by `hcomm-run`: every collective with every
//! algorithm, point-to-point patterns, non-blocking and batched operations,
//! subgroups and schedules, checked against serial references on 2 and 4
//! ranks (reading peer memory directly, and over TCP); a rank killed with
//! SIGKILL in the middle of a ring all-reduce; disagreeing launch
//! variables; a late rank; mismatched collectives.
//!
//! The processes are this test binary itself, running the ignored test
//! `rank_main` with `HCOMM_TEST_SCENARIO` naming what to do.

#![allow(
    clippy::float_cmp,
    reason = "the values compared are small integers, exact in every type"
)]

use std::process::Command;
use std::time::{Duration, Instant};

use hcomm::{Algorithm, Collective, Comm, ReduceOp};

mod common;

use common::{assert_all_passed, launch, said, text, SCENARIO};

#[test]
fn every_operation_on_two_and_four_processes() {
    assert_all_passed(&launch(2, "everything", &[]), 2);
    assert_all_passed(&launch(4, "everything", &[]), 4);
}

#[test]
fn every_operation_through_the_hccl_stand_in_across_processes() {
    // Rank 0's process serves the world its root info names; the others
    // join it over loopback and run their operations there.
    let lib = hcomm_hccl_standin::cdylib_path().expect("the stand-in library is built");
    let lib = lib.to_str().unwrap();
    let env = [
        ("HCOMM_BACKEND", "hccl"),
        ("HCOMM_HCCL_LIB", lib),
        ("HCOMM_ACL_LIB", lib),
    ];
    assert_all_passed(&launch(2, "everything", &env), 2);
    assert_all_passed(&launch(4, "everything", &env), 4);
}

#[test]
fn every_operation_over_tcp() {
    assert_all_passed(&launch(3, "everything", &[("HCOMM_TRANSPORT", "tcp")]), 3);
}

#[test]
fn a_killed_rank_fails_the_others_fast_and_the_launcher_names_it() {
    let o = launch(3, "sigkill", &[]);
    let all = text(&o);
    assert!(!o.status.success(), "{all}");
    assert!(all.contains("rank 2 was killed by signal SIGKILL"), "{all}");
    let out = String::from_utf8_lossy(&o.stdout);
    for r in 0..2 {
        assert!(said(&out, r, "survivor saw rank 2 fail"), "{all}");
    }
}

#[test]
fn a_failing_rank_stops_the_job_with_its_exit_code() {
    let o = launch(2, "exit3", &[]);
    let all = text(&o);
    assert!(!o.status.success(), "{all}");
    assert!(all.contains("rank 1 exited with code 3"), "{all}");
}

#[test]
fn a_rank_that_panics_is_named_as_failed_not_finished() {
    let o = launch(2, "panic", &[]);
    let all = text(&o);
    assert!(all.contains("rank 1 exited with code 101"), "{all}");
    assert!(said(&String::from_utf8_lossy(&o.stdout), 0, "scenario passed"), "{all}");
}

#[test]
fn mismatched_collectives_across_processes_are_errors_on_every_rank() {
    assert_all_passed(&launch(2, "mismatch", &[]), 2);
}

#[test]
fn disagreeing_schedule_calls_across_processes_are_mismatches_naming_both_calls() {
    assert_all_passed(&launch(2, "schedule_mismatch", &[]), 2);
    assert_all_passed(&launch(4, "schedule_mismatch", &[]), 4);
    assert_all_passed(&launch(3, "schedule_mismatch", &[("HCOMM_TRANSPORT", "tcp")]), 3);
}

/// The cost of the entry check between processes, per schedule call that
/// sends nothing, with and without the check in the same run: `cargo test
/// --release -p hcomm-run --test multiproc -- --ignored --nocapture
/// schedule_entry_cost`.
#[test]
#[ignore = "a measurement, not a check"]
fn schedule_entry_cost() {
    let o = launch(2, "entry_cost", &[]);
    assert_all_passed(&o, 2);
    for l in String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter(|l| l.contains("per call"))
    {
        eprintln!("{l}");
    }
}

/// Starts this binary's `rank_main` directly with the given variables.
/// The cores the calling thread may run on.
fn my_cores() -> Vec<usize> {
    // SAFETY: `cpu_set_t` is plain bits; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid, writable `cpu_set_t` of the size passed;
    // pid 0 is the calling thread.
    let rc = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &raw mut set) };
    assert_eq!(rc, 0, "sched_getaffinity: {}", std::io::Error::last_os_error());
    let max = usize::try_from(libc::CPU_SETSIZE).unwrap();
    // SAFETY: `set` was filled in by the kernel; `c < CPU_SETSIZE`.
    (0..max).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect()
}

/// The cores each rank of an `n`-process job said it runs on.
fn placement(n: usize, env: &[(&str, &str)]) -> Vec<String> {
    let o = launch(n, "placement", env);
    assert_all_passed(&o, n);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    (0..n)
        .map(|r| {
            let prefix = format!("[{r}] ");
            out.lines()
                .filter(|l| l.starts_with(&prefix))
                .find_map(|l| l.split_once("runs on cores ").map(|(_, cores)| cores))
                .unwrap_or_else(|| panic!("rank {r} did not say its cores\n{}", text(&o)))
                .to_owned()
        })
        .collect()
}

#[test]
fn the_processes_of_a_host_take_one_block_of_its_cores_each() {
    let cores = my_cores();
    let all = format!("{cores:?}");
    let half = cores.len() / 2;
    let expected = if cores.len() >= 2 {
        vec![format!("{:?}", &cores[..half]), format!("{:?}", &cores[half..])]
    } else {
        vec![all.clone(), all.clone()]
    };
    assert_eq!(placement(2, &[]), expected);
    // Left alone by choice.
    assert_eq!(placement(2, &[("HCOMM_BIND", "none")]), vec![all.clone(); 2]);
    // Processes that outnumber the cores share them: consecutive ranks on
    // one core, each core running as many as the next or one more.
    if cores.len() < 8 {
        let n = cores.len() + 1;
        let expected: Vec<String> = (0..n).map(|r| format!("{:?}", [cores[r * cores.len() / n]])).collect();
        assert_eq!(placement(n, &[]), expected);
    }
    // A bad value fails every rank with a reason.
    let o = launch(2, "placement", &[("HCOMM_BIND", "socket")]);
    assert!(!o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("`HCOMM_BIND=socket`: expected `core` or `none`"),
        "{}",
        text(&o)
    );
}

fn spawn_rank(scenario: &str, vars: &[(&str, String)]) -> std::process::Child {
    let me = std::env::current_exe().unwrap();
    let mut cmd = Command::new(me);
    cmd.args(["--ignored", "--exact", "rank_main", "--nocapture", "--test-threads=1"])
        .env(SCENARIO, scenario)
        .env("HCOMM_TIMEOUT", "20")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for k in [
        "HCOMM_RANK",
        "HCOMM_WORLD_SIZE",
        "HCOMM_MASTER_ADDR",
        "HCOMM_MASTER_PORT",
        "RANK",
        "WORLD_SIZE",
    ] {
        cmd.env_remove(k);
    }
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.spawn().unwrap()
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn torch_vars(rank: usize, world: usize, port: u16) -> Vec<(&'static str, String)> {
    vec![
        ("RANK", rank.to_string()),
        ("WORLD_SIZE", world.to_string()),
        ("MASTER_ADDR", "127.0.0.1".into()),
        ("MASTER_PORT", port.to_string()),
    ]
}

#[test]
fn a_wrong_world_size_on_one_rank_is_an_error_on_both() {
    let port = free_port();
    let r0 = spawn_rank("join_error", &torch_vars(0, 2, port));
    let r1 = spawn_rank("join_error", &torch_vars(1, 3, port));
    let (o0, o1) = (r0.wait_with_output().unwrap(), r1.wait_with_output().unwrap());
    let (t0, t1) = (text(&o0), text(&o1));
    assert!(o0.status.success() && o1.status.success(), "{t0}\n{t1}");
    assert!(
        t1.contains("join failed: configuration: rank 1 has `WORLD_SIZE=3` but rank 0 has `WORLD_SIZE=2`"),
        "{t1}"
    );
    assert!(
        t0.contains("join failed: peer failed: rank 1: rank 1 could not join"),
        "{t0}"
    );
}

#[test]
fn a_store_that_never_comes_up_is_a_timeout_naming_its_address() {
    let port = free_port();
    let mut vars = torch_vars(1, 2, port);
    vars.push(("HCOMM_TIMEOUT", "1".into()));
    let o = spawn_rank("join_error", &vars).wait_with_output().unwrap();
    let t = text(&o);
    assert!(
        t.contains(&format!(
            "join failed: timeout: connecting to the rendezvous store at 127.0.0.1:{port}"
        )),
        "{t}"
    );
}

#[test]
fn two_processes_claiming_one_rank_is_an_error() {
    let port = free_port();
    let start = Instant::now();
    let r0 = spawn_rank("join_error", &torch_vars(0, 3, port));
    std::thread::sleep(Duration::from_millis(200));
    let a = spawn_rank("join_error", &torch_vars(1, 3, port));
    std::thread::sleep(Duration::from_millis(300));
    let b = spawn_rank("join_error", &torch_vars(1, 3, port));
    let outs: Vec<String> = [r0, a, b]
        .into_iter()
        .map(|c| text(&c.wait_with_output().unwrap()))
        .collect();
    let all = outs.join("\n");
    assert!(all.contains("`RANK=1` is claimed by two processes"), "{all}");
    assert!(start.elapsed() < Duration::from_secs(10), "{all}");
}

#[test]
fn a_rank_that_starts_before_the_store_joins_within_the_deadline() {
    let port = free_port();
    let r1 = spawn_rank("everything", &torch_vars(1, 2, port));
    std::thread::sleep(Duration::from_millis(700));
    let r0 = spawn_rank("everything", &torch_vars(0, 2, port));
    for o in [r0.wait_with_output().unwrap(), r1.wait_with_output().unwrap()] {
        assert!(
            o.status.success() && String::from_utf8_lossy(&o.stdout).contains("scenario passed"),
            "{}",
            text(&o)
        );
    }
}

// ---------------------------------------------------------------------------
// The ranks' side.

/// Entry point of the processes the tests above start.
#[test]
#[ignore = "run by the other tests in processes of their own"]
fn rank_main() {
    let scenario = std::env::var(SCENARIO).unwrap();
    match scenario.as_str() {
        "everything" => everything(&hcomm::init_from_env().unwrap()),
        "sigkill" => sigkill(&hcomm::init_from_env().unwrap()),
        "mismatch" => mismatch(&hcomm::init_from_env().unwrap()),
        "schedule_mismatch" => schedule_mismatch(&hcomm::init_from_env().unwrap()),
        "entry_cost" => entry_cost(&hcomm::init_from_env().unwrap()),
        "placement" => {
            let comm = hcomm::init_from_env().unwrap();
            println!("runs on cores {:?}", my_cores());
            comm.barrier().unwrap();
        }
        "panic" => {
            let comm = hcomm::init_from_env().unwrap();
            ignore_sigterm();
            comm.barrier().unwrap();
            assert!(comm.rank() != 1, "rank 1 panics on purpose");
            let e = comm.recv(&mut [0u8; 4], 1).unwrap_err();
            assert!(
                matches!(&e, hcomm::Error::PeerFailed { rank: 1, reason } if reason.contains("panicked")),
                "{e}"
            );
        }
        "exit3" => {
            let comm = hcomm::init_from_env().unwrap();
            comm.barrier().unwrap();
            if comm.rank() == 1 {
                std::process::exit(3);
            }
            std::thread::sleep(Duration::from_secs(60));
        }
        "join_error" => match hcomm::init_from_env() {
            Ok(c) => println!("joined as rank {}", c.rank()),
            Err(e) => println!("join failed: {e}"),
        },
        other => panic!("unknown scenario {other}"),
    }
    println!("scenario passed");
}

fn value(rank: usize, i: usize) -> i64 {
    (rank as i64 + 1) * 1000 + (i as i64 % 97)
}

fn everything(comm: &Comm) {
    let (r, w) = (comm.rank(), comm.world());
    // Every collective with every algorithm that supports this world, at a
    // small odd length and one that crosses ring segments.
    for c in Collective::ALL {
        for &a in Algorithm::for_collective(c) {
            if !a.supports_world(w) {
                continue;
            }
            comm.set_algorithm(c, Some(a)).unwrap();
            for n in [7usize, 40_000] {
                check_collective(comm, c, n).unwrap_or_else(|e| panic!("{c} with {a} on {n}: {e}"));
            }
            comm.set_algorithm(c, None).unwrap();
        }
    }
    // f32 sums and max.
    let mut x = vec![r as f32 + 0.5; 33];
    comm.all_reduce_in_place(&mut x, ReduceOp::Max).unwrap();
    assert_eq!(x, vec![w as f32 - 0.5; 33]);
    point_to_point(comm);
    subgroups(comm);
    schedules(comm);
}

/// One collective of `n` elements per block against its serial reference.
fn check_collective(comm: &Comm, c: Collective, n: usize) -> hcomm::Result<()> {
    let (r, w) = (comm.rank(), comm.world());
    let sum = |i: usize| (0..w).map(|q| value(q, i)).sum::<i64>();
    let root = w - 1;
    match c {
        Collective::AllReduce => {
            let send: Vec<i64> = (0..n).map(|i| value(r, i)).collect();
            let mut recv = vec![0; n];
            comm.all_reduce(&send, &mut recv, ReduceOp::Sum)?;
            assert!(recv.iter().enumerate().all(|(i, &v)| v == sum(i)));
        }
        Collective::AllGather => {
            let send: Vec<i64> = (0..n).map(|i| value(r, i)).collect();
            let mut recv = vec![0; n * w];
            comm.all_gather(&send, &mut recv)?;
            assert!(recv.iter().enumerate().all(|(k, &v)| v == value(k / n, k % n)));
        }
        Collective::ReduceScatter => {
            let send: Vec<i64> = (0..n * w).map(|i| value(r, i)).collect();
            let mut recv = vec![0; n];
            comm.reduce_scatter(&send, &mut recv, ReduceOp::Sum)?;
            assert!(recv.iter().enumerate().all(|(i, &v)| v == sum(r * n + i)));
        }
        Collective::AllToAll => {
            let send: Vec<i64> = (0..n * w).map(|i| value(r, i)).collect();
            let mut recv = vec![0; n * w];
            comm.all_to_all(&send, &mut recv)?;
            assert!(recv.iter().enumerate().all(|(k, &v)| v == value(k / n, r * n + k % n)));
        }
        Collective::AllToAllV => {
            // rank q sends q + j + 1 elements to rank j
            let counts_to = |q: usize| (0..w).map(|j| q + j + 1).collect::<Vec<_>>();
            let send_counts = counts_to(r);
            let recv_counts: Vec<usize> = (0..w).map(|q| q + r + 1).collect();
            let send: Vec<i64> = (0..send_counts.iter().sum()).map(|i| value(r, i)).collect();
            let mut recv = vec![0; recv_counts.iter().sum()];
            comm.all_to_allv(&send, &send_counts, &mut recv, &recv_counts)?;
            let mut expect = Vec::new();
            for q in 0..w {
                let start: usize = counts_to(q)[..r].iter().sum();
                expect.extend((start..=start + q + r).map(|i| value(q, i)));
            }
            assert_eq!(recv, expect);
        }
        Collective::Broadcast => {
            let mut buf: Vec<i64> = (0..n).map(|i| if r == root { value(r, i) } else { 0 }).collect();
            comm.broadcast(&mut buf, root)?;
            assert!(buf.iter().enumerate().all(|(i, &v)| v == value(root, i)));
        }
        Collective::Reduce => {
            let send: Vec<i64> = (0..n).map(|i| value(r, i)).collect();
            let mut recv = vec![0; n];
            comm.reduce(&send, &mut recv, ReduceOp::Sum, root)?;
            if r == root {
                assert!(recv.iter().enumerate().all(|(i, &v)| v == sum(i)));
            }
        }
        Collective::Gather => {
            let send: Vec<i64> = (0..n).map(|i| value(r, i)).collect();
            let mut recv = vec![0; if r == root { n * w } else { 0 }];
            comm.gather(&send, &mut recv, root)?;
            if r == root {
                assert!(recv.iter().enumerate().all(|(k, &v)| v == value(k / n, k % n)));
            }
        }
        Collective::Scatter => {
            let send: Vec<i64> = if r == root {
                (0..n * w).map(|i| value(r, i)).collect()
            } else {
                Vec::new()
            };
            let mut recv = vec![0; n];
            comm.scatter(&send, &mut recv, root)?;
            assert!(recv.iter().enumerate().all(|(i, &v)| v == value(root, r * n + i)));
        }
        Collective::Barrier => comm.barrier()?,
        // `Collective` is non-exhaustive: a new one fails here until it has
        // a reference
        other => panic!("{other}: no serial reference in this test"),
    }
    Ok(())
}

fn point_to_point(comm: &Comm) {
    let (r, w) = (comm.rank(), comm.world());
    let (right, left) = ((r + 1) % w, (r + w - 1) % w);
    // Ring exchange, large enough to matter.
    let send: Vec<u32> = (0..100_000).map(|i| (r * 7 + i) as u32).collect();
    let mut got = vec![0u32; 100_000];
    comm.send_recv(&send, right, &mut got, left).unwrap();
    assert!(got.iter().enumerate().all(|(i, &v)| v == (left * 7 + i) as u32));
    // Ordering per (src, dst, tag): three messages on tag 5 arrive in order,
    // a tag-9 message posted first does not overtake them. (Device libraries
    // have no tags: their messages match in posting order.)
    let tags = comm.backend_name() == "host";
    if tags && r == 0 {
        let msgs = [[0u8], [1], [2]];
        comm.batch(|b| {
            b.send_tagged(&[99u8][..], w - 1, 9)?;
            for m in &msgs {
                b.send_tagged(&m[..], w - 1, 5)?;
            }
            Ok(())
        })
        .unwrap();
    }
    if tags && r == w - 1 {
        for k in 0..3u8 {
            let mut b = [0u8];
            comm.recv_tagged(&mut b, 0, 5).unwrap();
            assert_eq!(b[0], k);
        }
        let mut b = [0u8];
        comm.recv_tagged(&mut b, 0, 9).unwrap();
        assert_eq!(b[0], 99);
    }
    // A message to itself.
    let mut me = [0u32; 3];
    comm.batch(|b| {
        b.send(&[1u32, 2, 3][..], r)?;
        b.recv(&mut me[..], r)
    })
    .unwrap();
    assert_eq!(me, [1, 2, 3]);
    // Non-blocking: receive from everyone, send to everyone.
    let mine: Vec<u64> = vec![r as u64; 5];
    let mut from: Vec<Vec<u64>> = vec![vec![0; 5]; w];
    hcomm::scope(|s| {
        let mut reqs = Vec::new();
        for (q, buf) in from.iter_mut().enumerate() {
            reqs.push(comm.irecv(s, &mut buf[..], q)?);
        }
        for q in 0..w {
            reqs.push(comm.isend(s, &mine[..], q)?);
        }
        hcomm::wait_all(reqs)
    })
    .unwrap();
    assert!(from.iter().enumerate().all(|(q, b)| b.iter().all(|&v| v == q as u64)));
    // A combining receive in a batch.
    let mut acc = [r as f64; 4];
    comm.batch(|b| {
        b.send(&[1.0f64; 4][..], right)?;
        b.recv_reduce(&mut acc[..], left, 0, ReduceOp::Sum)
    })
    .unwrap();
    assert_eq!(acc, [r as f64 + 1.0; 4]);
    // A length mismatch on a point-to-point pair is an error on both ends.
    if w >= 2 && r < 2 {
        let e = if r == 0 {
            comm.send_tagged(&[0i32; 3], 1, 77)
        } else {
            comm.recv_tagged(&mut [0i32; 4], 0, 77)
        };
        // The host backend compares envelopes; a device library fails the
        // transfer on both ends.
        let named = match &e {
            Err(hcomm::Error::Mismatch { .. }) => tags,
            Err(hcomm::Error::Backend { message, .. }) => {
                !tags && message.contains("receives 16 bytes from rank 0, which sends 12 bytes")
            }
            _ => false,
        };
        assert!(named, "{e:?}");
    }
    comm.barrier().unwrap();
}

fn subgroups(comm: &Comm) {
    let (r, w) = (comm.rank(), comm.world());
    let half = comm.split(Some((r % 2) as u32), -(r as i64)).unwrap().unwrap();
    let members: Vec<usize> = (0..w).filter(|q| q % 2 == r % 2).collect();
    // keys are negative ranks: the new order is reversed
    assert_eq!(
        half.rank(),
        members.len() - 1 - members.iter().position(|&q| q == r).unwrap()
    );
    let mut x = [r as i64];
    half.all_reduce_in_place(&mut x, ReduceOp::Sum).unwrap();
    assert_eq!(x[0], members.iter().map(|&q| q as i64).sum::<i64>());
    let sub = comm.subgroup("first-two", &[0, w - 1]);
    if r == 0 || r == w - 1 {
        let sub = sub.unwrap();
        let mut y = [r as i32 + 1; 3];
        sub.all_reduce_in_place(&mut y, ReduceOp::Max).unwrap();
        assert_eq!(y, [w as i32; 3]);
    }
}

fn schedules(comm: &Comm) {
    let (r, w) = (comm.rank(), comm.world());
    let mine = [r as u32 * 10, r as u32 * 10 + 1];
    let mut out = vec![0u32; 2 * w];
    hcomm::schedules::ring_all_gather(comm, &mine, &mut out).unwrap();
    assert_eq!(
        out,
        (0..w)
            .flat_map(|q| [q as u32 * 10, q as u32 * 10 + 1])
            .collect::<Vec<_>>()
    );
    let mut out = vec![0u32; 2 * w];
    hcomm::schedules::bruck_all_gather(comm, &mine, &mut out).unwrap();
    assert_eq!(
        out,
        (0..w)
            .flat_map(|q| [q as u32 * 10, q as u32 * 10 + 1])
            .collect::<Vec<_>>()
    );
    let send: Vec<u32> = (0..w).map(|j| (r * 10 + j) as u32).collect();
    let mut recv = vec![0u32; w];
    hcomm::schedules::pairwise_all_to_all(comm, &send, &mut recv).unwrap();
    assert_eq!(recv, (0..w).map(|q| (q * 10 + r) as u32).collect::<Vec<_>>());
    let mut b = vec![if r == 0 { 5u8 } else { 0 }; 9];
    hcomm::schedules::binomial_broadcast(comm, &mut b, 0).unwrap();
    assert_eq!(b, vec![5u8; 9]);
    language_gaps(comm);
}

/// `wait all` over requests posted in a loop, a `shift` postcondition, and
/// `ceil_log2` rounds in a schedule without buffers (no turbofish), across
/// processes.
fn language_gaps(comm: &Comm) {
    hcomm::comm_schedule! {
        #[verify(world in 1..=4)]
        #[postcondition(all_gather(input -> output))]
        fn direct_all_gather(input: &[T; n], output: &mut [T; n * world]) {
            copy input -> output.chunk(rank);
            for s in 1..world {
                let r = irecv output.chunk((rank - s) % world) from (rank - s) % world;
                let h = isend input to (rank + s) % world;
            }
            wait all;
        }

        #[verify(world in 1..=4)]
        #[postcondition(shift(input -> output, from = (rank - 1) % world))]
        fn ring_shift(input: &[T; n], output: &mut [T; n]) {
            batch {
                send input to (rank + 1) % world;
                recv output from (rank - 1) % world;
            }
        }

        #[verify(world in 1..=4)]
        fn dissemination_barrier() {
            let token = scratch[T; 1];
            let seen = scratch[T; 1];
            for k in 0..ceil_log2(world) {
                batch {
                    send token to (rank + pow2(k)) % world;
                    recv seen from (rank - pow2(k)) % world;
                }
            }
        }
    }
    let (r, w) = (comm.rank(), comm.world());
    let mine = [r as u64 * 10, r as u64 * 10 + 1];
    let mut out = vec![0u64; 2 * w];
    direct_all_gather(comm, &mine, &mut out).unwrap();
    dissemination_barrier(comm).unwrap();
    let mut left = [0u64; 2];
    ring_shift(comm, &mine, &mut left).unwrap();
    let l = ((r + w - 1) % w) as u64;
    assert_eq!(left, [l * 10, l * 10 + 1]);
    assert_eq!(
        out,
        (0..w)
            .flat_map(|q| [q as u64 * 10, q as u64 * 10 + 1])
            .collect::<Vec<_>>()
    );
}

/// Survivors finish their checks even when the launcher asks them to stop.
fn ignore_sigterm() {
    use nix::sys::signal::{signal, SigHandler, Signal};
    // SAFETY: ignoring SIGTERM installs no handler code.
    unsafe { signal(Signal::SIGTERM, SigHandler::SigIgn) }.unwrap();
}

/// Rank 2 kills itself with SIGKILL while the ring all-reduces run; the
/// others must fail with `PeerFailed` naming rank 2 within seconds.
fn sigkill(comm: &Comm) {
    use nix::sys::signal::{kill, Signal};
    comm.set_algorithm(Collective::AllReduce, Some(Algorithm::Ring))
        .unwrap();
    ignore_sigterm();
    let mut x = vec![1.0f32; 1 << 20];
    comm.all_reduce_in_place(&mut x, ReduceOp::Sum).unwrap();
    if comm.rank() == 2 {
        let me = nix::unistd::Pid::this();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            let _ = kill(me, Signal::SIGKILL);
        });
    }
    let start = Instant::now();
    loop {
        match comm.all_reduce_in_place(&mut x, ReduceOp::Sum) {
            Ok(()) => assert!(
                start.elapsed() < Duration::from_secs(20),
                "rank 2 was never seen to fail"
            ),
            Err(hcomm::Error::PeerFailed { rank: 2, reason }) => {
                let at = start.elapsed();
                assert!(at < Duration::from_secs(10), "took {at:?}");
                println!("survivor saw rank 2 fail ({reason})");
                break;
            }
            Err(e) => panic!("expected rank 2 to be named, got {e}"),
        }
    }
}

fn mismatch(comm: &Comm) {
    let r = comm.rank();
    let mut x = vec![1i32; 4 + r];
    let e = comm.all_reduce_in_place(&mut x, ReduceOp::Sum).unwrap_err();
    assert!(
        matches!(&e, hcomm::Error::Mismatch { message } if message.contains("all_reduce")),
        "{e}"
    );
    // a different collective on each rank
    let e = if r == 0 {
        comm.broadcast(&mut [0u8; 2], 0)
    } else {
        comm.all_reduce_in_place(&mut [0u8; 2], ReduceOp::Sum)
    }
    .unwrap_err();
    assert!(matches!(e, hcomm::Error::Mismatch { .. }), "{e}");
}

/// The `Mismatch` message of a call whose ranks disagree, within seconds.
/// Every rank that exchanges data with a disagreeing neighbour, or waits
/// for one, gets it. With more than 2 ranks a rank whose call completed
/// with data from ranks that are not its ring neighbours, before its
/// neighbours' calls reached it, may return `Ok` (`None`); the communicator
/// is aborted with the disagreement all the same, so its next call fails
/// naming it.
fn disagreement(c: &Comm, may_pass: bool, what: &str, call: impl FnOnce() -> hcomm::Result<()>) -> Option<String> {
    let start = Instant::now();
    let result = call();
    let took = start.elapsed();
    assert!(took < Duration::from_secs(10), "{what}: took {took:?}");
    match result {
        Err(hcomm::Error::Mismatch { message }) => Some(message),
        Err(other) => panic!("{what}: expected a mismatch, got {other}"),
        Ok(()) => {
            assert!(may_pass, "{what}: the call passed");
            let e = c.barrier().expect_err("the communicator is aborted");
            assert!(e.to_string().contains("disagree"), "{what}: {e}");
            None
        }
    }
}

/// Ranks calling different schedules, or one schedule with different
/// scalars, operators or lengths, or failing before the call: `Err(Mismatch)`
/// naming both calls (see [`disagreement`]). Each case runs on a subgroup of
/// its own (a disagreement aborts its communicator).
fn schedule_mismatch(comm: &Comm) {
    use hcomm::schedules::{binomial_broadcast, bruck_all_gather, ring_all_gather, ring_all_reduce};
    let (r, w) = (comm.rank(), comm.world());
    let all: Vec<usize> = (0..w).collect();
    let fresh = |key: &str| comm.subgroup(key, &all).unwrap();
    // the last rank is the odd one out
    let odd = r == w - 1;
    let may_pass = w > 2;
    let same = "(every rank must pass the same scalars and lengths)";

    let c = fresh("schedules");
    let m = disagreement(&c, may_pass, "different schedules", || {
        let mut out = vec![0u32; 2 * w];
        if odd {
            bruck_all_gather(&c, &[1, 2], &mut out)
        } else {
            ring_all_gather(&c, &[1, 2], &mut out)
        }
    });
    if w == 2 {
        assert_eq!(
            m.as_deref(),
            Some(
                "ranks 0 and 1 disagree on which schedule they call (every rank must call the same schedules in the \
                 same order): rank 0 called `ring_all_gather` with T = u32, n = 2; rank 1 called `bruck_all_gather` \
                 with T = u32, n = 2"
            )
        );
    }
    if let Some(m) = m {
        assert!(m.contains("called `bruck_all_gather` with T = u32, n = 2"), "{m}");
    }

    let c = fresh("scalars");
    let m = disagreement(&c, may_pass, "different roots", || {
        binomial_broadcast(&c, &mut [7u8; 3], usize::from(odd))
    });
    if w == 2 {
        assert_eq!(
            m,
            Some(format!(
                "ranks 0 and 1 disagree on their call of `binomial_broadcast` {same}: rank 0 with T = u8, root = 0, \
                 n = 3; rank 1 with T = u8, root = 1, n = 3"
            ))
        );
    }
    if let Some(m) = m {
        assert!(
            m.contains("with T = u8, root = 1, n = 3") && m.contains("with T = u8, root = 0, n = 3"),
            "{m}"
        );
    }

    let c = fresh("operators");
    let m = disagreement(&c, may_pass, "different operators", || {
        let op = if odd { ReduceOp::Max } else { ReduceOp::Sum };
        ring_all_reduce(&c, &mut vec![1i32; 2 * w], op)
    });
    if w == 2 {
        assert_eq!(
            m,
            Some(format!(
                "ranks 0 and 1 disagree on their call of `ring_all_reduce` {same}: rank 0 with T = i32, op = sum, \
                 n = 2; rank 1 with T = i32, op = max, n = 2"
            ))
        );
    }
    if let Some(m) = m {
        assert!(
            m.contains("with T = i32, op = max, n = 2") && m.contains("with T = i32, op = sum, n = 2"),
            "{m}"
        );
    }

    let c = fresh("lengths");
    let m = disagreement(&c, may_pass, "different lengths", || {
        let n = if odd { 3 } else { 2 };
        ring_all_gather(&c, &vec![1u64; n], &mut vec![0u64; n * w])
    });
    if let Some(m) = m {
        assert!(
            m.contains("with T = u64, n = 3") && m.contains("with T = u64, n = 2"),
            "{m}"
        );
    }

    let c = fresh("failed");
    let mut out = vec![0u32; 2 * w + usize::from(odd)];
    let mut call = || ring_all_gather(&c, &[1, 2], &mut out);
    if odd {
        let e = call().expect_err("a wrong length");
        assert!(matches!(e, hcomm::Error::BufferLength { .. }), "{e}");
    } else if let Some(m) = disagreement(&c, w > 2, "a rank failing before entry", call) {
        assert!(
            m.contains(&format!("rank {} failed before entering it: ", w - 1)),
            "{m}"
        );
    }

    // agreeing calls after all that, on a fresh subgroup, move the right data
    let c = fresh("agree");
    let mut out = vec![0u32; 2 * w];
    ring_all_gather(&c, &[r as u32, 10], &mut out).unwrap();
    assert_eq!(out, (0..w).flat_map(|q| [q as u32, 10]).collect::<Vec<_>>());
}

/// Times schedule calls, the entry check on and off in turns, and prints
/// the medians per call: one that sends nothing and a ring all-gather of 4
/// elements per rank.
fn entry_cost(comm: &Comm) {
    hcomm::comm_schedule! {
        /// One local copy, no message.
        #[verify(world in 1..=4)]
        fn local_copy(a: &[T; n], b: &mut [T; n]) {
            copy a -> b;
        }
    }
    const CALLS: u32 = 2_000;
    const ROUNDS: usize = 30;
    let (a, mut b) = ([1i32; 4], [0i32; 4]);
    let mut out = vec![0i32; 4 * comm.world()];
    let time = |what: &str, call: &mut dyn FnMut() -> hcomm::Result<()>| {
        let mut times = [Vec::new(), Vec::new()];
        for round in 0..ROUNDS {
            let on = round % 2 == 0;
            hcomm::__private::set_entry_check(comm, on);
            comm.barrier().unwrap();
            let start = Instant::now();
            for _ in 0..CALLS {
                call().unwrap();
            }
            times[usize::from(on)].push(start.elapsed() / CALLS);
            comm.barrier().unwrap();
        }
        for t in &mut times {
            t.sort();
        }
        let (on, off) = (times[1][ROUNDS / 4], times[0][ROUNDS / 4]);
        println!(
            "{what}, {} processes (median of {} rounds each): {on:?} per call with the entry check, {off:?} without, \
             ratio {:.2}",
            comm.world(),
            ROUNDS / 2,
            on.as_secs_f64() / off.as_secs_f64()
        );
    };
    time("schedule call sending nothing", &mut || local_copy(comm, &a, &mut b));
    time("ring all-gather schedule, 4 x i32 per rank", &mut || {
        hcomm::schedules::ring_all_gather(comm, &a, &mut out)
    });
}
