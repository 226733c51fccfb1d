//! Misuse scenarios shared by the in-process tests (`hcomm/tests/misuse.rs`)
//! and the process tests (`hcomm-run/tests/misuse.rs`): each runs on every
//! rank of a communicator and asserts the exact result or error that rank
//! must see, panicking otherwise.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use hcomm::{Comm, Error, ReduceOp};

/// Elements of each hammering all-reduce: enough for the ring algorithm
/// to move it in several messages.
const LEN: usize = 1024;

/// Successful all-reduces each hammering thread makes.
pub(crate) const CALLS_PER_THREAD: usize = 100;

/// What thread `t` of rank `r` contributes to every element.
fn contribution(r: usize, t: usize) -> i64 {
    let r = i64::try_from(r).unwrap();
    (r + 1) * if t == 0 { 1 } else { 1000 }
}

/// Every sum one call can have on a rank whose thread `t` made it: its own
/// contribution plus one whole contribution of each other rank (which of
/// the other rank's threads made the call paired with it is that rank's
/// order of calls).
fn valid_sums(world: usize, rank: usize, t: usize) -> Vec<i64> {
    let mut sums = vec![contribution(rank, t)];
    for r in (0..world).filter(|&r| r != rank) {
        sums = sums
            .iter()
            .flat_map(|s| [s + contribution(r, 0), s + contribution(r, 1)])
            .collect();
    }
    sums
}

/// What one hammering thread saw.
#[derive(Default)]
pub(crate) struct Hammered {
    /// The sum of every successful call, in the thread's order.
    pub sums: Vec<i64>,
    /// Calls refused because the other thread was in a call.
    pub refused: usize,
}

/// One thread's loop: all-reduces until `CALLS_PER_THREAD` succeeded, each
/// result checked element by element; a refusal must be the in-use error.
fn hammer_thread(comm: &Comm, t: usize) -> Hammered {
    let (rank, world) = (comm.rank(), comm.world());
    let valid = valid_sums(world, rank, t);
    let send = vec![contribution(rank, t); LEN];
    let mut out = Hammered::default();
    let started = Instant::now();
    while out.sums.len() < CALLS_PER_THREAD {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "rank {rank} thread {t}: still hammering after 60 s"
        );
        let mut recv = vec![0i64; LEN];
        match comm.all_reduce(&send, &mut recv, ReduceOp::Sum) {
            Ok(()) => {
                let first = recv[0];
                assert!(
                    valid.contains(&first),
                    "rank {rank} thread {t}: Ok with {first}, which no pairing of whole calls gives ({valid:?})"
                );
                if let Some(i) = recv.iter().position(|&x| x != first) {
                    panic!(
                        "rank {rank} thread {t}: Ok with mixed data: element 0 is {first}, element {i} is {}",
                        recv[i]
                    );
                }
                out.sums.push(first);
            }
            Err(Error::Precondition { message }) if message.contains("another thread is in a call on it") => {
                assert!(message.contains(&format!("rank {rank} of a {world}-rank")), "{message}");
                out.refused += 1;
                std::thread::yield_now();
            }
            Err(e) => panic!("rank {rank} thread {t}: unexpected error {e}"),
        }
    }
    out
}

/// Two threads of every rank all-reduce on `comm` at once: through one
/// shared handle (`clones == false`) or through a clone each. Every call
/// returns the exact sum of whole calls or the in-use error; every rank
/// sees the same sums (the calls pair up across ranks); and the
/// communicator then works from one thread as before. Returns the calls
/// refused on this rank.
pub(crate) fn hammer(comm: &Comm, clones: bool) -> usize {
    let (rank, world) = (comm.rank(), comm.world());
    let seen: Vec<Hammered> = std::thread::scope(|s| {
        let threads: Vec<_> = (0..2)
            .map(|t| {
                let own = comm.clone();
                s.spawn(move || {
                    if clones {
                        hammer_thread(&own, t)
                    } else {
                        drop(own);
                        hammer_thread(comm, t)
                    }
                })
            })
            .collect();
        threads.into_iter().map(|h| h.join().unwrap()).collect()
    });
    // Each rank made exactly 2 * CALLS_PER_THREAD calls, so every call met
    // its peers; each sum is the same on every rank.
    let mut mine: Vec<i64> = seen.iter().flat_map(|h| h.sums.iter().copied()).collect();
    mine.sort_unstable();
    let mut all = vec![0i64; mine.len() * world];
    comm.all_gather(&mine, &mut all).unwrap();
    for (r, theirs) in all.chunks(mine.len()).enumerate() {
        assert_eq!(theirs, &mine[..], "rank {rank}: rank {r} saw other sums");
    }
    let mut x = [i64::try_from(rank).unwrap(); 4];
    comm.all_reduce_in_place(&mut x, ReduceOp::Sum).unwrap();
    let want = i64::try_from(world * (world - 1) / 2).unwrap();
    assert_eq!(x, [want; 4]);
    seen.iter().map(|h| h.refused).sum()
}

/// Rank 0 splits while the other ranks all-gather two i64 each (the shape
/// of split's own exchange): every rank gets `Err(Mismatch)` naming the
/// split's exchange, none gets `Ok`.
pub(crate) fn split_versus_all_gather(comm: &Comm) {
    let rank = comm.rank();
    let err = if rank == 0 {
        comm.split(Some(0), 0).map(|_| ()).unwrap_err()
    } else {
        let mine = [7i64, 7];
        let mut all = vec![0i64; 2 * comm.world()];
        comm.all_gather(&mine, &mut all).unwrap_err()
    };
    match &err {
        Error::Mismatch { message } => assert!(message.contains("split exchange"), "rank {rank}: {message}"),
        e => panic!("rank {rank}: expected a mismatch, got {e}"),
    }
}

/// Rank 0 all-reduces `late` after the others, whose limit is `limit`:
/// they time out; rank 0 gets an abort naming a peer that timed out, never
/// `Ok`; every later call fails on every rank.
pub(crate) fn late_rank(comm: &Comm, limit: Duration, late: Duration) {
    let rank = comm.rank();
    let every: Vec<usize> = (0..comm.world()).collect();
    let sub = comm.subgroup("misuse.late", &every).unwrap();
    sub.set_timeout(limit);
    let mut x = [1.0f64; 8];
    if rank == 0 {
        std::thread::sleep(late);
    }
    let started = Instant::now();
    let err = sub.all_reduce_in_place(&mut x, ReduceOp::Sum).unwrap_err();
    match (&err, rank) {
        (Error::Aborted { reason }, 0) => {
            // A peer that timed out names itself and the operation.
            let peer_timed_out = (1..comm.world()).any(|p| reason.starts_with(&format!("rank {p} timed out in ")));
            assert!(peer_timed_out, "{reason}");
        }
        (Error::PeerFailed { rank: peer, reason }, 0) => {
            assert!(*peer != 0 && reason.contains("timed out in"), "{err}");
        }
        (Error::Timeout { rank: r, .. }, r0) if r0 != 0 => assert_eq!(*r, r0),
        // A peer that timed out first may abort this rank's wait.
        (Error::Aborted { reason }, _) => assert!(reason.contains("timed out in"), "{reason}"),
        _ => panic!("rank {rank}: expected a timeout (peers) or an abort (rank 0), got {err}"),
    }
    assert!(
        started.elapsed() < limit + Duration::from_secs(5),
        "rank {rank}: failed only after {:?}",
        started.elapsed()
    );
    let again = sub.all_reduce_in_place(&mut x, ReduceOp::Sum).unwrap_err();
    assert!(
        matches!(again, Error::Aborted { .. } | Error::PeerFailed { .. }),
        "rank {rank}: {again}"
    );
    // The parent communicator is untouched.
    comm.barrier().unwrap();
}

/// Repeated and out-of-range subgroup members are refused at once on every
/// rank, naming the member.
pub(crate) fn bad_subgroups(comm: &Comm) {
    let w = comm.world();
    let cases: BTreeMap<&str, (Vec<usize>, String)> = [
        ("repeated", (vec![0, 0], "name rank 0 more than once".to_owned())),
        (
            "repeated later",
            (vec![1, 0, 1], "name rank 1 more than once".to_owned()),
        ),
        ("out of range", (vec![0, w], format!("member {w} is out of range"))),
    ]
    .into_iter()
    .collect();
    for (what, (members, want)) in cases {
        let started = Instant::now();
        match comm.subgroup(&format!("misuse.{what}"), &members) {
            Err(Error::Precondition { message }) => assert!(message.contains(&want), "{what}: {message}"),
            other => panic!(
                "rank {}: {what} {members:?}: expected a precondition error, got {other:?}",
                comm.rank()
            ),
        }
        assert!(
            started.elapsed() < Duration::from_secs(1),
            "{what}: took {:?}",
            started.elapsed()
        );
    }
    comm.barrier().unwrap();
}
