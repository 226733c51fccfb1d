//! The host backend between processes: one rank per process, one TCP
//! connection per pair of ranks for control messages, and data moved by the
//! receiver reading the sender's memory directly when both run on one host
//! (cross-memory attach: one copy, like the in-process fabric), else
//! streamed over the connection (`engine.rs`, `link.rs`). On one host the
//! control messages travel in shared-memory rings instead (`ring.rs`), and
//! the connection only wakes a receiver that sleeps and, by its end, tells
//! that the peer's process is gone. A rank that waits reads its rings and
//! connections and copies the data itself; a connection thread does so
//! only while no thread of the rank waits.
//!
//! `HCOMM_TRANSPORT=tcp` forces the streamed path on one host too.

mod engine;
mod link;
mod ring;

use std::io::BufReader;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use self::engine::Engine;
use self::link::{allow_peer_reads, read_remote, Link, Msg};
use self::ring::Ring;
use super::{subgroup_of, subgroup_topology};
use crate::backend::entries::EntryNote;
use crate::backend::liveness::{Liveness, Presence};
use crate::backend::{Backend, OpId, OpIds, P2pOp};
use crate::buffer::Memory;
use crate::collective::CollHeader;
use crate::error::{Error, Result};
use crate::topology::Topology;
use crate::wire::{read_frame, write_frame};

/// Read by peers to test whether they can read this process's memory.
static PROBE: AtomicU64 = AtomicU64::new(0);

/// Where a rank listens for its peers, as published in the store.
#[derive(Serialize, Deserialize)]
struct Endpoint {
    ip: IpAddr,
    port: u16,
}

/// Where ranks publish and find each other's endpoints (the rendezvous
/// store of the job).
pub(crate) trait Directory {
    /// Publishes `value` under `key`.
    fn publish(&self, key: &str, value: &[u8]) -> Result<()>;
    /// The value of `key`, waiting for it until `deadline`.
    fn lookup(&self, key: &str, deadline: Instant) -> Result<Vec<u8>>;
    /// The address of this host as the other ranks reach it.
    fn local_ip(&self) -> IpAddr;
    /// Why another rank gave up joining, if one did.
    fn gave_up(&self) -> Option<Error>;
}

/// How often the connection thread of a link that carries no data looks
/// whether a thread of its rank reads the connection (then it leaves it
/// alone) or none does (then it waits for messages itself).
const IDLE_CHECK: Duration = Duration::from_millis(10);

/// How long closing waits for the last messages (this rank finished) to
/// be written.
const CLOSE_WAIT: Duration = Duration::from_secs(2);

/// Closes the connections when the last backend of this process is gone,
/// after the messages already queued are written.
struct Handle(Arc<Engine>);

impl Drop for Handle {
    fn drop(&mut self) {
        self.0.closing.store(true, Ordering::SeqCst);
        for link in self.0.links.iter().flatten() {
            link.close();
        }
        let deadline = Instant::now() + CLOSE_WAIT;
        for link in self.0.links.iter().flatten() {
            link.wait_stopped(deadline);
        }
    }
}

/// One rank's view of a group of ranks in different processes.
pub(crate) struct ProcBackend {
    // Dropped first: tells the peers this rank finished while the
    // connections are still open.
    presence: Arc<Presence>,
    handle: Arc<Handle>,
    group: u64,
    /// Global rank of each member, in group order.
    members: Vec<usize>,
    rank: usize,
    topology: Topology,
}

impl ProcBackend {
    fn engine(&self) -> &Arc<Engine> {
        &self.handle.0
    }
}

impl Backend for ProcBackend {
    fn name(&self) -> &'static str {
        "host"
    }

    fn presence(&self) -> Option<&Presence> {
        Some(&self.presence)
    }

    fn announce_entry(&self, note: &EntryNote) -> Option<Result<()>> {
        Some(self.engine().announce_entry(self.group, &self.members, self.rank, note))
    }

    fn entry_failure(&self, seq: u64) -> Option<Error> {
        self.engine().entries.failure(self.group, seq)
    }

    fn rank(&self) -> usize {
        self.rank
    }

    fn world(&self) -> usize {
        self.members.len()
    }

    fn accepts(&self, memory: Memory) -> bool {
        memory == Memory::Host
    }

    fn topology(&self) -> Topology {
        self.topology.clone()
    }

    unsafe fn post(&self, ops: &[P2pOp], ids: &mut OpIds) -> Result<()> {
        // SAFETY: the caller upholds the buffer contract of `Backend::post`.
        unsafe { self.engine().post(self.group, &self.members, self.rank, ops, ids) }
    }

    fn wait(&self, ids: &[OpId], timeout: Duration, what: &str) -> Result<()> {
        let deadline = Instant::now()
            .checked_add(timeout)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365));
        self.engine().wait(self.rank, ids, deadline, what, timeout)
    }

    fn test(&self, id: OpId) -> Result<bool> {
        self.engine().test(id)
    }

    fn cancel(&self, ids: &[OpId]) {
        self.engine().cancel(ids);
    }

    fn enter_collective(&self, header: &CollHeader) -> Result<()> {
        self.engine().enter_collective(self.group, &self.members, header)
    }

    fn confirm_collective(&self, header: &CollHeader, timeout: Duration) -> Result<()> {
        self.engine()
            .confirm_collective(self.group, &self.members, self.rank, header, timeout)
    }

    fn subgroup(&self, key: &str, members: &[usize]) -> Result<Arc<dyn Backend>> {
        let (rank, global) = subgroup_of(self.rank, &self.members, members)?;
        let group = subgroup_id(self.group, key, &global);
        self.engine().join_group(group, &global);
        let topology = subgroup_topology(&self.topology);
        Ok(Arc::new(ProcBackend {
            presence: Arc::clone(&self.presence),
            handle: Arc::clone(&self.handle),
            group,
            members: global,
            rank,
            topology,
        }))
    }

    fn abort(&self, reason: &str) {
        self.engine().abort(self.group, &self.members, reason);
    }
}

/// The id every member process computes for a subgroup, without talking.
fn subgroup_id(parent: u64, key: &str, members: &[usize]) -> u64 {
    // FNV-1a: stable across processes and builds.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    };
    eat(&parent.to_le_bytes());
    eat(key.as_bytes());
    eat(&[0xff]);
    for &m in members {
        eat(&(m as u64).to_le_bytes());
    }
    h | 1
}

/// The processes of a job on this process's host, as connecting found
/// them (from which the launcher places them on cores).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HostPeers {
    /// This process's place among them, in rank order.
    pub(crate) index: usize,
    /// How many there are, this one included.
    pub(crate) count: usize,
    /// Whether every one of them may run on the same cores as this one
    /// (nobody placed them yet).
    pub(crate) same_cores: bool,
}

/// The world backend of rank `rank` of `world` processes: publishes where
/// it listens in `store`, connects to every other rank (lower ranks are
/// dialled, higher ones accepted) and starts the connection threads; also
/// which ranks share this host, told by each peer with the `cores` its
/// process may run on.
pub(crate) fn connect(
    store: &dyn Directory,
    rank: usize,
    world: usize,
    topology: &Topology,
    timeout: Duration,
    cores: &[usize],
) -> Result<(Arc<dyn Backend>, HostPeers)> {
    allow_peer_reads();
    let nonce = nonce();
    PROBE.store(nonce, Ordering::SeqCst);
    let local_ip = store.local_ip();
    let bind_ip = if local_ip.is_loopback() {
        local_ip
    } else {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    };
    let listener =
        TcpListener::bind(SocketAddr::new(bind_ip, 0)).map_err(|e| os_error("cannot listen for peers", &e))?;
    let port = listener
        .local_addr()
        .map_err(|e| os_error("cannot listen for peers", &e))?
        .port();
    let endpoint =
        postcard::to_stdvec(&Endpoint { ip: local_ip, port }).map_err(|e| os_error("encoding the endpoint", &e))?;
    store.publish(&format!("hcomm/peer/{rank}"), &endpoint)?;
    let host = hostname();
    let mine: Vec<u32> = cores.iter().filter_map(|&c| u32::try_from(c).ok()).collect();
    let hello = Msg::Hello {
        rank: rank as u32,
        world: world as u32,
        pid: std::process::id() as i32,
        host: host.clone(),
        probe_addr: std::ptr::from_ref(&PROBE) as u64,
        probe: nonce,
        cores: mine.clone(),
    };
    let deadline = Instant::now() + timeout;
    let mut streams: Vec<Option<(TcpStream, Msg)>> = (0..world).map(|_| None).collect();
    for (peer, slot) in streams.iter_mut().enumerate().take(rank) {
        let bytes = store.lookup(&format!("hcomm/peer/{peer}"), deadline)?;
        let ep: Endpoint = postcard::from_bytes(&bytes).map_err(|e| os_error("decoding a peer's endpoint", &e))?;
        let addr = SocketAddr::new(ep.ip, ep.port);
        let mut stream = TcpStream::connect_timeout(&addr, timeout.max(Duration::from_secs(1)))
            .map_err(|e| os_error(&format!("cannot connect to rank {peer} at {addr}"), &e))?;
        let theirs = handshake(&mut stream, &hello, deadline)?;
        *slot = Some((stream, theirs));
    }
    listener.set_nonblocking(true).map_err(|e| os_error("listener", &e))?;
    let mut accepted = 0;
    let mut next_check = Instant::now();
    while accepted < world - rank - 1 {
        match listener.accept() {
            Ok((mut stream, _)) => {
                stream
                    .set_nonblocking(false)
                    .map_err(|e| os_error("peer connection", &e))?;
                let theirs = handshake(&mut stream, &hello, deadline)?;
                let Msg::Hello { rank: r, .. } = theirs else { continue };
                let r = r as usize;
                if r <= rank || r >= world || streams[r].is_some() {
                    return Err(Error::Config {
                        message: format!("rank {rank}: an unexpected peer connected claiming rank {r} of {world}"),
                    });
                }
                streams[r] = Some((stream, theirs));
                accepted += 1;
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= next_check {
                    if let Some(e) = store.gave_up() {
                        return Err(e);
                    }
                    next_check = Instant::now() + Duration::from_millis(100);
                }
                if Instant::now() >= deadline {
                    let missing: Vec<usize> = (rank + 1..world).filter(|&r| streams[r].is_none()).collect();
                    return Err(Error::Timeout {
                        operation: format!("waiting for ranks {missing:?} to connect"),
                        rank,
                        waited: timeout,
                        limit: timeout,
                    });
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(e) => return Err(os_error("accepting a peer", &e)),
        }
    }
    let force_tcp = std::env::var("HCOMM_TRANSPORT").is_ok_and(|v| v.trim().eq_ignore_ascii_case("tcp"));
    // Tell each peer whether this process can read its memory, then learn
    // the same from it: data moves by memory reads only when both can.
    let mut ready = Vec::new();
    let mut buf = Vec::new();
    let mut here = HostPeers {
        index: 0,
        count: 1,
        same_cores: true,
    };
    for (peer, s) in streams.into_iter().enumerate() {
        let Some((
            mut stream,
            Msg::Hello {
                pid,
                host: their_host,
                probe_addr,
                probe,
                world: their_world,
                cores: theirs,
                ..
            },
        )) = s
        else {
            continue;
        };
        let same_host = their_host == host;
        if same_host {
            here.count += 1;
            here.index += usize::from(peer < rank);
            here.same_cores &= theirs == mine;
        }
        if their_world as usize != world {
            return Err(Error::Config {
                message: format!("rank {peer} runs in a world of {their_world} ranks, rank {rank} in one of {world}"),
            });
        }
        let can_read = !force_tcp && same_host && can_read(pid, probe_addr, probe);
        // The ring this peer may send its control messages in (where it
        // cannot map it, they come on the connection).
        let rx = if can_read { Ring::create().ok() } else { None };
        let ring = rx.as_ref().map(Ring::fd);
        write_frame(&mut stream, &Msg::Ready { can_read, ring }, &mut buf)
            .map_err(|e| os_error("handshake with a peer", &e))?;
        ready.push((peer, stream, pid, can_read, rx));
    }
    let mut links: Vec<Option<Arc<Link>>> = (0..world).map(|_| None).collect();
    let mut readers = Vec::new();
    for (peer, mut stream, pid, can_read, rx) in ready {
        let theirs: Msg = read_frame(&mut stream, &mut buf).map_err(|e| os_error("handshake with a peer", &e))?;
        let (cma, their_ring) = match theirs {
            Msg::Ready { can_read: true, ring } => (can_read, ring),
            _ => (false, None),
        };
        let rx = rx.filter(|_| cma);
        let tx = their_ring.filter(|_| cma).and_then(|fd| {
            Ring::open(pid, fd)
                .map_err(|e| tracing::debug!(rank, peer, %e, "no ring"))
                .ok()
        });
        tracing::debug!(rank, peer, cma, ring = tx.is_some(), "connected");
        let io = |e: std::io::Error| os_error("peer connection", &e);
        stream.set_nodelay(true).map_err(io)?;
        stream.set_read_timeout(None).map_err(io)?;
        let read_half = stream.try_clone().map_err(io)?;
        let (lo, hi) = (rank.min(peer), rank.max(peer));
        let mac_key = crate::launch::auth::JobSecret::unauthenticated()
            .derive(b"hcomm link", &[&(lo as u64).to_le_bytes(), &(hi as u64).to_le_bytes()]);
        links[peer] = Some(Link::new(pid, cma, stream, (rx, tx), mac_key, rank < peer).map_err(io)?);
        readers.push((peer, read_half));
    }
    let liveness = Liveness::new(world);
    let engine = Engine::new(rank, Arc::clone(&liveness), links);
    engine.join_group(0, &(0..world).collect::<Vec<_>>());
    for (peer, read_half) in readers {
        spawn_threads(&engine, peer, read_half)?;
    }
    let backend = Arc::new(ProcBackend {
        presence: Presence::new(&liveness, rank),
        handle: Arc::new(Handle(engine)),
        group: 0,
        members: (0..world).collect(),
        rank,
        topology: topology.clone(),
    });
    Ok((backend, here))
}

/// Sends our `Hello` and reads the peer's.
fn handshake(stream: &mut TcpStream, hello: &Msg, deadline: Instant) -> Result<Msg> {
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_secs(1));
    let mut buf = Vec::new();
    let result = (|| {
        stream.set_read_timeout(Some(left))?;
        write_frame(stream, hello, &mut buf)?;
        // The read timeout stays until the handshake's second message.
        read_frame(stream, &mut buf)
    })();
    result.map_err(|e| os_error("handshake with a peer", &e))
}

/// The reader and writer threads of the connection to `peer`.
fn spawn_threads(engine: &Arc<Engine>, peer: usize, read_half: TcpStream) -> Result<()> {
    let Some(link) = engine.links[peer].clone() else {
        return Ok(());
    };
    let writer_link = Arc::clone(&link);
    let e = Arc::clone(engine);
    if !link.cma {
        std::thread::Builder::new()
            .name(format!("hcomm-tx-{peer}"))
            .spawn(move || {
                let result = writer_link.write_loop();
                writer_link.shutdown();
                writer_link.mark_stopped();
                if let Err(err) = result {
                    e.link_lost(peer, &format!("writing to it failed: {err}"));
                }
            })
            .map_err(|e| os_error("cannot start a connection thread", &e))?;
    }
    let e = Arc::clone(engine);
    let reader = std::thread::Builder::new().name(format!("hcomm-rx-{peer}"));
    if link.cma {
        // Only control messages: a thread of this rank that waits in the
        // engine reads them itself; this thread reads those that arrive
        // while none does, looking every `IDLE_CHECK` whether one does (so
        // that it is not woken by every message).
        reader
            .spawn(move || loop {
                if link.ended() {
                    return;
                }
                if e.progressing() {
                    std::thread::sleep(IDLE_CHECK);
                    continue;
                }
                match link.wait_readable(IDLE_CHECK) {
                    Err(err) => {
                        e.link_lost(peer, &err.to_string());
                        link.shutdown();
                        return;
                    }
                    Ok(true) if !e.progressing() => {
                        if !e.receive_from(peer, &link, true) {
                            return;
                        }
                    }
                    Ok(_) => {}
                }
            })
            .map_err(|e| os_error("cannot start a connection thread", &e))?;
        return Ok(());
    }
    reader
        .spawn(move || {
            let mut r = link.reader(BufReader::with_capacity(64 << 10, read_half));
            let mut buf = Vec::with_capacity(256);
            let why = loop {
                match r.next_msg(&mut buf) {
                    Ok(msg) => {
                        if let Err(err) = e.handle(peer, msg, &mut r) {
                            break err.to_string();
                        }
                    }
                    Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => {
                        break "connection closed".to_owned()
                    }
                    Err(err) => break err.to_string(),
                }
            };
            e.link_lost(peer, &why);
            link.shutdown();
        })
        .map_err(|e| os_error("cannot start a connection thread", &e))?;
    Ok(())
}

/// Whether this process can read the word `probe` at `addr` in process `pid`.
fn can_read(pid: i32, addr: u64, probe: u64) -> bool {
    let mut word = [0u8; 8];
    read_remote(pid, addr, &mut word).is_ok() && u64::from_ne_bytes(word) == probe
}

/// This host's name (empty when unknown).
pub(crate) fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_default()
}

/// A value no other process is likely to hold at the probe's address.
fn nonce() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish() | 1
}

fn os_error(what: &str, e: &dyn std::fmt::Display) -> Error {
    Error::Backend {
        backend: "host",
        message: format!("{what}: {e}"),
    }
}
