//! A rank frozen with SIGSTOP in the middle of a stream of all-reduces, on
//! both transports between processes (the default one, which reads peers'
//! memory, and `HCOMM_TRANSPORT=tcp`), for a large and a small message:
//! the surviving rank must return `Err(PeerFailed)` naming the frozen rank
//! or `Err(Timeout)` within the timeout plus one second of the freeze, and
//! every all-reduce that returned `Ok` before holds exactly the serial sum.
//!
//! The same for the connection between the two ranks when a relay stands
//! in it (rank 1 is given the relay's address for rank 0 through the store)
//! and, at some point, alters one byte, stops forwarding (the connection
//! stays open: a peer whose machine vanished) or closes both sides.
//!
//! A frozen rank that is let go again (SIGCONT) after its peer failed
//! must fail too, within the timeout plus one second of its release, never
//! return `Ok` with wrong data. Seeded runs draw the fault, the message
//! size and the moment on the default transport. A timeout must name the
//! rank it waited for.
//!
//! The store's host (rank 0) frozen while the others join: each of them
//! fails within the timeout plus one second, naming rank 0 or the timeout.
//!
//! Each test starts processes of this test binary (the ignored test
//! `freeze_rank` is the body of a rank) on 127.0.0.1, strikes once both
//! completed a few all-reduces, waits for the verdicts (bounded), then
//! kills them.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use hcomm::{Error, ReduceOp};

/// The communicator's timeout in the rank processes, in seconds.
const TIMEOUT_S: u64 = 2;
/// What the survivor may take beyond the timeout.
const SLACK: Duration = Duration::from_secs(1);
/// The longest a test waits for anything.
const WATCHDOG: Duration = Duration::from_secs(20);
/// All-reduces the ranks complete before the fault (unless a seeded run
/// draws another number).
const BEFORE: usize = 2;

const SIZE_VAR: &str = "HCOMM_FREEZE_ELEMENTS";

fn now_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "FREEZE {line}");
    let _ = out.flush();
}

/// The value rank `r` contributes at `i` in round `k` (exact in f32).
fn value(r: usize, k: usize, i: usize) -> f32 {
    ((r * 7 + k * 3 + i) % 1000) as f32
}

/// The body of a rank: all-reduces until one fails; says how each ended.
#[test]
#[ignore = "the body of a rank process of the tests below"]
fn freeze_rank() {
    let Ok(n) = std::env::var(SIZE_VAR) else {
        return;
    };
    let n: usize = n.parse().unwrap();
    let comm = match hcomm::init_from_env() {
        Ok(c) => c,
        Err(e) => {
            say(&format!("err {} init-{} {e}", now_ms(), kind(&e)));
            std::process::exit(1);
        }
    };
    let r = comm.rank();
    let w = comm.world();
    for k in 0.. {
        let send: Vec<f32> = (0..n).map(|i| value(r, k, i)).collect();
        let mut recv = vec![0f32; n];
        match comm.all_reduce(&send, &mut recv, ReduceOp::Sum) {
            Ok(()) => {
                let wrong = (0..n)
                    // Exact: the values are small integers.
                    .filter(|&i| recv[i].to_bits() != (0..w).map(|q| value(q, k, i)).sum::<f32>().to_bits())
                    .count();
                say(&format!("ok {k} {wrong}"));
            }
            Err(e) => {
                say(&format!("err {} {} {e}", now_ms(), kind(&e)));
                std::process::exit(1);
            }
        }
    }
}

/// An error's kind as the verdict lines spell it.
fn kind(e: &Error) -> String {
    match e {
        Error::PeerFailed { rank, .. } => format!("peer-failed {rank}"),
        Error::Timeout { .. } => "timeout".to_owned(),
        Error::Aborted { .. } => "aborted".to_owned(),
        _ => "other".to_owned(),
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_or(0, |a| a.port())
}

/// Between the two processes: the default transport (shared memory and
/// reading peers' memory) or `HCOMM_TRANSPORT=tcp`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Transport {
    Default,
    Tcp,
}

fn spawn_rank(rank: usize, port: u16, elements: usize, transport: Transport) -> Child {
    spawn_rank_of(rank, 2, port, elements, transport)
}

fn spawn_rank_of(rank: usize, world: usize, port: u16, elements: usize, transport: Transport) -> Child {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--ignored", "--exact", "freeze_rank", "--nocapture", "--test-threads=1"])
        .env(SIZE_VAR, elements.to_string())
        .env("HCOMM_TIMEOUT", TIMEOUT_S.to_string())
        .env("HCOMM_RANK", rank.to_string())
        .env("HCOMM_WORLD_SIZE", world.to_string())
        .env("HCOMM_MASTER_ADDR", "127.0.0.1")
        .env("HCOMM_MASTER_PORT", port.to_string())
        .env("LOCAL_RANK", rank.to_string())
        .env("HCOMM_BIND", "none")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for k in [
        "RANK",
        "WORLD_SIZE",
        "MASTER_ADDR",
        "MASTER_PORT",
        "HCOMM_BACKEND",
        "HCOMM_TRANSPORT",
        "HCOMM_JOB_SECRET",
        "HCOMM_JOB_ID",
        "TORCHELASTIC_RUN_ID",
        "HCOMM_STORE_FD",
    ] {
        cmd.env_remove(k);
    }
    if transport == Transport::Tcp {
        cmd.env("HCOMM_TRANSPORT", "tcp");
    }
    cmd.spawn().unwrap()
}

fn signal(child: &Child, sig: &str) {
    let _ = Command::new("kill").args([sig, &child.id().to_string()]).status();
}

/// The verdict lines (after `FREEZE `) of the ranks from `first` on, each
/// with its rank, as they come.
fn verdict_lines(ranks: &mut [Child], first: usize) -> mpsc::Receiver<(usize, String)> {
    let (tx, rx) = mpsc::channel();
    for (r, child) in ranks.iter_mut().enumerate().skip(first) {
        let out = BufReader::new(child.stdout.take().unwrap());
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                // The harness may begin the line with the test's name.
                if let Some((_, rest)) = line.split_once("FREEZE ") {
                    let _ = tx.send((r, rest.to_owned()));
                }
            }
        });
    }
    rx
}

/// An error line's time (ms since the epoch) and the rest (`<kind> <message>`).
fn error_line(rest: &str) -> (String, u128) {
    let (at, rest) = rest.split_once(' ').unwrap();
    (rest.to_owned(), at.parse().unwrap())
}

/// Releases and kills every rank.
fn stop(ranks: &mut [Child]) {
    for child in ranks {
        signal(child, "-CONT");
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// What happens to the job once both ranks completed [`BEFORE`]
/// all-reduces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// Rank 1 gets SIGSTOP.
    Freeze,
    /// Rank 1 gets SIGSTOP, and SIGCONT once rank 0 failed.
    FreezeThenResume,
    /// The relay flips one byte it forwards from rank 1 to rank 0.
    Alter,
    /// The relay stops forwarding and reading; the connections stay open.
    Stall,
    /// The relay closes both connections.
    Drop,
}

/// What the relay does with what it forwards.
const FORWARD: u8 = 0;
const ALTER: u8 = 1;
const ALTERED: u8 = 2;
const STALL: u8 = 3;
const DROP: u8 = 4;

/// A relay between rank 1 and rank 0 (listening on `addr`).
struct Relay {
    addr: SocketAddr,
    mode: Arc<AtomicU8>,
}

impl Relay {
    fn start(to: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mode = Arc::new(AtomicU8::new(FORWARD));
        let m = Arc::clone(&mode);
        std::thread::spawn(move || {
            let Ok((a, _)) = listener.accept() else { return };
            let Ok(b) = TcpStream::connect(to) else { return };
            let _ = a.set_nodelay(true);
            let _ = b.set_nodelay(true);
            let (a2, b2) = (a.try_clone().unwrap(), b.try_clone().unwrap());
            let m2 = Arc::clone(&m);
            // rank 1 -> rank 0 (the direction a byte is altered in), and back
            std::thread::spawn(move || pump(a, b, &m, true));
            std::thread::spawn(move || pump(b2, a2, &m2, false));
        });
        Relay { addr, mode }
    }
}

/// Forwards `from` to `to` as `mode` says, until either ends or the
/// watchdog passes.
fn pump(mut from: TcpStream, mut to: TcpStream, mode: &AtomicU8, alters: bool) {
    use std::io::Read;
    let start = Instant::now();
    let _ = from.set_read_timeout(Some(Duration::from_millis(50)));
    let mut buf = vec![0u8; 64 << 10];
    while start.elapsed() < WATCHDOG {
        match mode.load(Ordering::SeqCst) {
            STALL => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            DROP => {
                let _ = from.shutdown(std::net::Shutdown::Both);
                let _ = to.shutdown(std::net::Shutdown::Both);
                return;
            }
            _ => {}
        }
        let n = match from.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => continue,
            Err(_) => break,
        };
        if alters
            && mode
                .compare_exchange(ALTER, ALTERED, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            buf[n / 2] ^= 0x10;
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(std::net::Shutdown::Write);
}

/// The endpoint a rank publishes in the store (as the library encodes it).
#[derive(serde::Serialize, serde::Deserialize)]
struct Endpoint {
    ip: std::net::IpAddr,
    port: u16,
}

/// Starts rank 0, puts a relay in front of it, and gives rank 1 the
/// relay's address.
fn spawn_with_relay(port: u16, elements: usize, transport: Transport) -> (Vec<Child>, Relay) {
    let zero = spawn_rank(0, port, elements, transport);
    let store = hcomm::store::Store::connect(&format!("127.0.0.1:{port}"), Duration::from_secs(10)).unwrap();
    let ep: Endpoint = postcard::from_bytes(&store.get("hcomm/peer/0", Duration::from_secs(10)).unwrap()).unwrap();
    let relay = Relay::start(SocketAddr::new(ep.ip, ep.port));
    let via = Endpoint {
        ip: relay.addr.ip(),
        port: relay.addr.port(),
    };
    store.set("hcomm/peer/0", &postcard::to_stdvec(&via).unwrap()).unwrap();
    drop(store);
    let one = spawn_rank(1, port, elements, transport);
    (vec![zero, one], relay)
}

/// How a run ended: each rank's error line (`<kind> <message>`), and the
/// time from the fault to it (for a resumed rank, from its release).
struct Outcome {
    verdicts: [Option<(String, Duration)>; 2],
}

/// Runs the all-reduces of `elements` f32 with `fault` after `before` of
/// them.
fn run(elements: usize, transport: Transport, fault: Fault, before: usize) -> Outcome {
    let port = free_port();
    let frozen = matches!(fault, Fault::Freeze | Fault::FreezeThenResume);
    let (mut ranks, relay) = if frozen {
        ((0..2).map(|r| spawn_rank(r, port, elements, transport)).collect(), None)
    } else {
        let (ranks, relay) = spawn_with_relay(port, elements, transport);
        (ranks, Some(relay))
    };
    let rx = verdict_lines(&mut ranks, 0);
    let start = Instant::now();
    let mut done = [0usize; 2];
    let mut struck_ms = None;
    let mut resumed_ms = None;
    let mut verdicts: [Option<(String, u128)>; 2] = [None, None];
    // A frozen rank says nothing more: only rank 0's verdict is awaited.
    let awaited = if fault == Fault::Freeze { 1 } else { 2 };
    while start.elapsed() < WATCHDOG && verdicts.iter().flatten().count() < awaited {
        if fault == Fault::FreezeThenResume && verdicts[0].is_some() && resumed_ms.is_none() {
            resumed_ms = Some(now_ms());
            signal(&ranks[1], "-CONT");
        }
        let Ok((r, line)) = rx.recv_timeout(Duration::from_millis(100)) else {
            continue;
        };
        if let Some(rest) = line.strip_prefix("ok ") {
            let wrong: usize = rest.split(' ').nth(1).unwrap().parse().unwrap();
            assert_eq!(wrong, 0, "rank {r} returned Ok with {wrong} wrong elements: {line}");
            done[r] += 1;
            if struck_ms.is_none() && done[0] >= before && done[1] >= before {
                struck_ms = Some(now_ms());
                match (fault, &relay) {
                    (Fault::Freeze | Fault::FreezeThenResume, _) => signal(&ranks[1], "-STOP"),
                    (Fault::Alter, Some(relay)) => relay.mode.store(ALTER, Ordering::SeqCst),
                    (Fault::Stall, Some(relay)) => relay.mode.store(STALL, Ordering::SeqCst),
                    (Fault::Drop, Some(relay)) => relay.mode.store(DROP, Ordering::SeqCst),
                    _ => unreachable!("a relay fault without a relay"),
                }
            }
        } else if let Some(rest) = line.strip_prefix("err ") {
            verdicts[r] = Some(error_line(rest));
        } else {
            panic!("rank {r}: {line}");
        }
    }
    stop(&mut ranks);
    let struck_ms = struck_ms.expect("the ranks completed the all-reduces before the fault");
    let mut r = 0;
    Outcome {
        verdicts: verdicts.map(|v| {
            let from = if r == 1 {
                resumed_ms.unwrap_or(struck_ms)
            } else {
                struck_ms
            };
            r += 1;
            v.map(|(line, at)| {
                let took = Duration::from_millis(u64::try_from(at.saturating_sub(from)).unwrap());
                (line, took)
            })
        }),
    }
}

/// Runs `fault` and checks that every rank that is not frozen fails
/// naming the other or the timeout, within the timeout plus [`SLACK`] of
/// the fault; the verdicts.
fn check(elements: usize, transport: Transport, fault: Fault) -> Vec<String> {
    check_after(elements, transport, fault, BEFORE)
}

/// [`check`] with the fault after `before` all-reduces.
fn check_after(elements: usize, transport: Transport, fault: Fault, before: usize) -> Vec<String> {
    let outcome = run(elements, transport, fault, before);
    let survivors = if fault == Fault::Freeze { 1 } else { 2 };
    let mut lines = Vec::new();
    for (r, verdict) in outcome.verdicts.iter().enumerate().take(survivors) {
        let (line, took) = verdict
            .as_ref()
            .unwrap_or_else(|| panic!("rank {r} returned no error within the watchdog ({fault:?})"));
        eprintln!("{fault:?} elements {elements} {transport:?}: rank {r} failed {took:?} after the fault: {line}");
        let other = 1 - r;
        // A released rank may find the communicator aborted by its peer's
        // timeout, which names it.
        let aborted_by_peer = fault == Fault::FreezeThenResume
            && r == 1
            && line.starts_with(&format!("aborted aborted: rank {other} timed out"));
        assert!(
            line.starts_with(&format!("peer-failed {other} "))
                || (line.starts_with("timeout ") && line.contains(&format!("waiting for rank {other} ")))
                || aborted_by_peer,
            "rank {r} must fail naming rank {other}, as a failed peer or the rank its timeout waited for \
             ({fault:?}): {line}"
        );
        // The all-reduce in flight at the fault began at most at the fault.
        assert!(
            *took <= Duration::from_secs(TIMEOUT_S) + SLACK,
            "rank {r} took {took:?} after the fault, beyond the timeout of {TIMEOUT_S} s plus {SLACK:?} ({fault:?}): \
             {line}"
        );
        lines.push(line.clone());
    }
    lines
}

/// 1 Mi f32 (4 MiB): data in flight when the fault comes.
const LARGE: usize = 1 << 20;
const SMALL: usize = 16;

/// One test per line: its name, then the fault, the message size and the
/// transport that [`check`] runs.
macro_rules! fault_tests {
    ($($name:ident: $fault:ident, $elements:ident, $transport:ident;)*) => {
        $(
            #[test]
            fn $name() {
                check($elements, Transport::$transport, Fault::$fault);
            }
        )*
    };
}

fault_tests! {
    frozen_rank_during_a_large_all_reduce_over_tcp: Freeze, LARGE, Tcp;
    frozen_rank_during_a_small_all_reduce_over_tcp: Freeze, SMALL, Tcp;
    frozen_rank_during_a_large_all_reduce_on_the_default_transport: Freeze, LARGE, Default;
    frozen_rank_during_a_small_all_reduce_on_the_default_transport: Freeze, SMALL, Default;
    a_frozen_rank_released_after_its_peer_failed_fails_too_on_the_default_transport: FreezeThenResume, SMALL, Default;
    a_frozen_rank_released_after_its_peer_failed_fails_too_over_tcp: FreezeThenResume, LARGE, Tcp;
    a_relay_that_stops_forwarding_is_a_timeout_or_a_failed_peer_over_tcp: Stall, LARGE, Tcp;
    a_dropped_connection_fails_the_peer_over_tcp: Drop, SMALL, Tcp;
    a_dropped_connection_fails_the_peer_on_the_default_transport: Drop, SMALL, Default;
}

/// Seeded faults on the default transport: the fault (a freeze, a freeze
/// then release, a dropped connection), the message size and the number of
/// all-reduces before it are drawn; every survivor fails within the bound,
/// none hangs, none returns `Ok` with wrong data.
#[test]
fn seeded_faults_on_the_default_transport() {
    let mut state: u64 = 0x5eed_f0e2_2026_1204;
    let mut draw = |n: u64| {
        // SplitMix64: a fixed sequence, the same on every run.
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        usize::try_from((z ^ (z >> 31)) % n).unwrap()
    };
    for round in 0..3 {
        let fault = [Fault::Freeze, Fault::FreezeThenResume, Fault::Drop][draw(3)];
        let elements = [SMALL, 4096, LARGE][draw(3)];
        let before = 1 + draw(4);
        eprintln!("seeded round {round}: {fault:?}, {elements} elements, after {before} all-reduces");
        check_after(elements, Transport::Default, fault, before);
    }
}

/// The store's host (rank 0 of 3) frozen while rank 1 waits in the
/// rendezvous and before rank 2 arrives: both fail within the timeout plus
/// one second, naming rank 0 or the timeout.
#[test]
fn a_frozen_store_host_fails_the_joining_ranks_within_the_bound() {
    let port = free_port();
    let mut ranks = vec![
        spawn_rank_of(0, 3, port, SMALL, Transport::Default),
        spawn_rank_of(1, 3, port, SMALL, Transport::Default),
    ];
    // Rank 1 is in the rendezvous once its endpoint is in the store.
    let store = hcomm::store::Store::connect(&format!("127.0.0.1:{port}"), Duration::from_secs(10)).unwrap();
    store.get("hcomm/peer/1", Duration::from_secs(10)).unwrap();
    drop(store);
    signal(&ranks[0], "-STOP");
    let frozen_ms = now_ms();
    ranks.push(spawn_rank_of(2, 3, port, SMALL, Transport::Default));
    let rx = verdict_lines(&mut ranks, 1);
    let start = Instant::now();
    let mut verdicts: [Option<(String, u128)>; 3] = [None, None, None];
    while start.elapsed() < WATCHDOG && verdicts.iter().flatten().count() < 2 {
        let Ok((r, line)) = rx.recv_timeout(Duration::from_millis(100)) else {
            continue;
        };
        let rest = line
            .strip_prefix("err ")
            .unwrap_or_else(|| panic!("rank {r} joined a job whose store host is frozen: {line}"));
        verdicts[r] = Some(error_line(rest));
    }
    stop(&mut ranks);
    for (r, verdict) in verdicts.iter().enumerate().skip(1) {
        let (line, at) = verdict
            .as_ref()
            .unwrap_or_else(|| panic!("rank {r} returned no error within the watchdog"));
        let took = Duration::from_millis(u64::try_from(at.saturating_sub(frozen_ms)).unwrap());
        eprintln!("frozen store host: rank {r} failed {took:?} after the freeze: {line}");
        assert!(
            line.starts_with("init-peer-failed 0 ") || line.starts_with("init-timeout "),
            "rank {r} must fail naming rank 0 or the timeout: {line}"
        );
        assert!(
            took <= Duration::from_secs(TIMEOUT_S) + SLACK,
            "rank {r} took {took:?} after the freeze, beyond the timeout of {TIMEOUT_S} s plus {SLACK:?}: {line}"
        );
    }
}

#[test]
fn a_relay_that_alters_one_byte_fails_the_integrity_check() {
    let lines = check(LARGE, Transport::Tcp, Fault::Alter);
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("peer-failed 1 ") && l.contains("integrity check failed")),
        "rank 0 must name rank 1 and the failed integrity check: {lines:?}"
    );
}
