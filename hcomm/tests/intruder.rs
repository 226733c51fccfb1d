//! Intruders on 127.0.0.1: a client with a wrong secret, a second job on
//! the same port, silent and garbage connections on the store and on a
//! rank's data port, frames announcing 64 MiB, and a flood of short
//! connections. Each attack is bounded in time and count; the job it aims
//! at must end with the exact data, within a bounded time.
//!
//! The ranks are threads of this process, each joining through
//! `init_job_with` as a process of its own would. The tests run one at a
//! time (`SERIAL`), since two of them count this process's memory and
//! descriptors.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use hcomm::auth::JobSecret;
use hcomm::store::Store;
use hcomm::{init_job_with, BackendKind, CommOptions, Error, JobEnv, ReduceOp};

static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The job's communicator timeout: every test must end well within it.
const TIMEOUT: Duration = Duration::from_secs(20);

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn secret(name: &str) -> JobSecret {
    JobSecret::new(&format!("intruder-test-secret-{name}")).unwrap()
}

fn job(rank: usize, world: usize, port: u16) -> JobEnv {
    let (rank, world, port) = (rank.to_string(), world.to_string(), port.to_string());
    JobEnv::from_vars(|name| match name {
        "HCOMM_RANK" => Some(rank.clone()),
        "HCOMM_WORLD_SIZE" => Some(world.clone()),
        "HCOMM_MASTER_ADDR" => Some("127.0.0.1".into()),
        "HCOMM_MASTER_PORT" => Some(port.clone()),
        _ => None,
    })
    .unwrap()
}

/// One rank of a job: joins, then 20 all-reduces of `[rank + 1; 8]`;
/// returns the last result.
fn start_rank(rank: usize, world: usize, port: u16, secret: &JobSecret) -> JoinHandle<hcomm::Result<Vec<i64>>> {
    let secret = secret.clone();
    std::thread::spawn(move || {
        let options = CommOptions {
            timeout: TIMEOUT,
            ..CommOptions::default()
        };
        let comm = init_job_with(BackendKind::Host, &job(rank, world, port), &options, &secret)?;
        let mut x = vec![0i64; 8];
        for round in 0..20i64 {
            x.fill(rank as i64 + 1 + round);
            comm.all_reduce_in_place(&mut x[..], ReduceOp::Sum)?;
        }
        Ok(x)
    })
}

/// What every rank of a job of `world` ends with.
fn expected(world: usize) -> Vec<i64> {
    let w = world as i64;
    vec![w * (w + 1) / 2 + w * 19; 8]
}

fn assert_completes(ranks: Vec<JoinHandle<hcomm::Result<Vec<i64>>>>, world: usize) {
    for (rank, r) in ranks.into_iter().enumerate() {
        let got = r.join().unwrap();
        assert_eq!(got.as_ref().ok(), Some(&expected(world)), "rank {rank}: {got:?}");
    }
}

/// Where rank `rank` of the job listens for its peers, read from the store
/// by a client that knows the secret.
fn data_port(port: u16, secret: &JobSecret, rank: usize) -> u16 {
    let observer = Store::connect_with(&format!("127.0.0.1:{port}"), TIMEOUT, secret).unwrap();
    let bytes = observer.get(&format!("hcomm/peer/{rank}"), TIMEOUT).unwrap();
    // postcard: variant 0 (IPv4), four bytes, then the port as a varint.
    assert_eq!(bytes[0], 0, "an IPv4 endpoint: {bytes:?}");
    let mut value = 0u16;
    for (i, b) in bytes[5..].iter().enumerate() {
        value |= u16::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            break;
        }
    }
    value
}

/// Connects to 127.0.0.1:`port`, retrying for up to 10 s (the store may
/// not be up yet).
fn dial(port: u16) -> TcpStream {
    let start = Instant::now();
    loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => return s,
            Err(e) if start.elapsed() < Duration::from_secs(10) => {
                let _ = e;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("cannot reach 127.0.0.1:{port}: {e}"),
        }
    }
}

/// Garbage for a peer: a length it accepts, then bytes that decode as
/// nothing it expects.
fn send_garbage(stream: &mut TcpStream) {
    let mut frame = 40u32.to_le_bytes().to_vec();
    frame.extend(std::iter::repeat_n(0xffu8, 40));
    let _ = stream.write_all(&frame);
}

fn vm_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn a_client_with_a_wrong_secret_is_refused_and_the_job_completes() {
    let _serial = serial();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let good = secret("good");
    let rank0 = start_rank(0, 2, port, &good);
    for (who, bad) in [
        ("wrong secret", secret("bad")),
        ("no secret", JobSecret::unauthenticated()),
    ] {
        let start = Instant::now();
        let e = Store::connect_with(&addr, Duration::from_secs(10), &bad).unwrap_err();
        assert!(
            matches!(&e, Error::Config { message } if message.contains(&addr) && message.contains("another job")),
            "{who}: {e}"
        );
        assert!(start.elapsed() < Duration::from_secs(5), "{who}: {:?}", start.elapsed());
    }
    let rank1 = start_rank(1, 2, port, &good);
    assert_completes(vec![rank0, rank1], 2);
}

#[test]
fn a_second_job_on_the_same_port_fails_naming_it_and_the_first_completes() {
    let _serial = serial();
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let a = secret("job-a");
    let b = secret("job-b");
    let a0 = start_rank(0, 2, port, &a);
    // Job A's store is up once a client of A gets in.
    drop(Store::connect_with(&addr, TIMEOUT, &a).unwrap());
    let b0 = start_rank(0, 2, port, &b).join().unwrap().unwrap_err();
    assert!(b0.to_string().contains(&addr), "job B rank 0: {b0}");
    let start = Instant::now();
    let b1 = start_rank(1, 2, port, &b).join().unwrap().unwrap_err();
    assert!(
        matches!(&b1, Error::Config { message } if message.contains(&addr) && message.contains("another job")),
        "job B rank 1: {b1}"
    );
    assert!(start.elapsed() < Duration::from_secs(5), "{:?}", start.elapsed());
    // Two unauthenticated jobs with different run ids do not mix either.
    let c1 = start_rank(1, 2, port, &JobSecret::unauthenticated_run("job-c"))
        .join()
        .unwrap()
        .unwrap_err();
    assert!(
        matches!(&c1, Error::Config { message } if message.contains("another job")),
        "{c1}"
    );
    let a1 = start_rank(1, 2, port, &a);
    assert_completes(vec![a0, a1], 2);
}

#[test]
fn an_unauthenticated_client_cannot_claim_a_rank_abort_or_change_the_world() {
    let _serial = serial();
    let port = free_port();
    let good = secret("job");
    let rank0 = start_rank(0, 3, port, &good);
    // The old protocol's requests, sent raw: a `CompareSet` of
    // `hcomm/rank/1`, a `Set` of `hcomm/abort` and of `hcomm/world`
    // (postcard: variant, then length-prefixed strings and bytes).
    let requests: [&[u8]; 3] = [
        b"\x03\x0chcomm/rank/1\x00\x04evil",
        b"\x00\x0bhcomm/abort\x04evil",
        b"\x00\x0bhcomm/world\x12HCOMM_WORLD_SIZE=9",
    ];
    for request in requests {
        let mut s = dial(port);
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut frame = (request.len() as u32).to_le_bytes().to_vec();
        frame.extend_from_slice(request);
        let _ = s.write_all(&frame);
        // The server closes it after its hello: read to the end.
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
    }
    let e = Store::connect(&format!("127.0.0.1:{port}"), Duration::from_secs(5)).unwrap_err();
    assert!(matches!(e, Error::Config { .. }), "{e}");
    let observer = Store::connect_with(&format!("127.0.0.1:{port}"), TIMEOUT, &good).unwrap();
    assert!(matches!(
        observer.get("hcomm/abort", Duration::ZERO),
        Err(Error::Timeout { .. })
    ));
    let world = observer.get("hcomm/world", TIMEOUT).unwrap();
    assert_eq!(world, b"HCOMM_WORLD_SIZE=3");
    drop(observer);
    let rest: Vec<_> = (1..3).map(|r| start_rank(r, 3, port, &good)).collect();
    assert_completes(std::iter::once(rank0).chain(rest).collect(), 3);
}

#[test]
fn silent_and_garbage_connections_delay_nobody() {
    let _serial = serial();
    let port = free_port();
    let good = secret("job");
    let rank0 = start_rank(0, 2, port, &good);
    // On the store: one silent, one garbage, one announcing 64 MiB.
    let silent_store = dial(port);
    let mut garbage_store = dial(port);
    send_garbage(&mut garbage_store);
    let mut huge_store = dial(port);
    let _ = huge_store.write_all(&(64u32 << 20).to_le_bytes());
    // On rank 0's data port: the same three.
    let data = data_port(port, &good, 0);
    let silent_data = dial(data);
    let mut garbage_data = dial(data);
    send_garbage(&mut garbage_data);
    let mut huge_data = dial(data);
    let _ = huge_data.write_all(&(64u32 << 20).to_le_bytes());
    let start = Instant::now();
    let rank1 = start_rank(1, 2, port, &good);
    assert_completes(vec![rank0, rank1], 2);
    // The silent connections are still open; nobody waited for them.
    assert!(
        start.elapsed() < Duration::from_secs(2),
        "the job took {:?} with intruders",
        start.elapsed()
    );
    drop((
        silent_store,
        garbage_store,
        huge_store,
        silent_data,
        garbage_data,
        huge_data,
    ));
}

#[test]
fn frames_announcing_64_mib_leave_the_store_small() {
    let _serial = serial();
    let good = secret("job");
    let store = Store::serve_with("127.0.0.1:0", &good).unwrap();
    let port = store.serving_port().unwrap();
    let before = vm_rss_kib();
    let mut conns = Vec::new();
    for _ in 0..16 {
        let mut s = dial(port);
        let _ = s.write_all(&(64u32 << 20).to_le_bytes());
        let _ = s.write_all(&[7; 4096]);
        conns.push(s);
    }
    std::thread::sleep(Duration::from_millis(300));
    let grown = vm_rss_kib().saturating_sub(before);
    assert!(grown < 64 << 10, "RSS grew by {grown} KiB");
    // The store still serves its job.
    let client = Store::connect_with(&format!("127.0.0.1:{port}"), TIMEOUT, &good).unwrap();
    client.set("k", b"v").unwrap();
    assert_eq!(store.get("k", Duration::ZERO).unwrap(), b"v");
    drop(conns);
}

#[test]
fn connections_opened_and_closed_leave_no_descriptors() {
    let _serial = serial();
    let good = secret("job");
    let store = Store::serve_with("127.0.0.1:0", &good).unwrap();
    let port = store.serving_port().unwrap();
    // What the process opens once (the random source, a client's
    // descriptors) is opened before counting.
    drop(Store::connect_with(&format!("127.0.0.1:{port}"), TIMEOUT, &good).unwrap());
    for _ in 0..10 {
        drop(dial(port));
    }
    std::thread::sleep(Duration::from_millis(500));
    let before = open_fds();
    for _ in 0..1500 {
        drop(dial(port));
    }
    // Each connection's thread ends when it reads the end of the stream.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut now = open_fds();
    while now > before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
        now = open_fds();
    }
    assert!(
        now <= before,
        "{before} descriptors before, {now} after 1500 connections"
    );
    let client = Store::connect_with(&format!("127.0.0.1:{port}"), TIMEOUT, &good).unwrap();
    client.set("k", b"v").unwrap();
    assert_eq!(store.get("k", Duration::ZERO).unwrap(), b"v");
}
