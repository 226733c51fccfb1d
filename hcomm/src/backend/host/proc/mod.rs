//! The host backend between processes: one rank per process, one TCP
//! connection per pair of ranks for control messages, and data moved by the
//! receiver reading the sender's memory directly when both run on one host
//! (cross-memory attach: one copy, like the in-process fabric), else
//! streamed over the connection (`engine.rs`, `link.rs`). On one host the
//! control messages travel in shared-memory rings instead (`ring.rs`), and
//! the connection only wakes a receiver that sleeps and, by its end, tells
//! that the peer's process is gone. A rank that waits reads its rings and
//! connections and copies the data itself; a connection thread does so
//! only while no thread of the rank waits. Sends up to `EAGER_BYTES` carry
//! their data in the ring (copied in and out, no system call); when every
//! rank runs on this host, the one-shot collectives of the world group and
//! of its splits run on a board in memory the processes share (`shm.rs`,
//! `split.rs`).
//!
//! `HCOMM_TRANSPORT=cma` keeps the single copy for every message and the
//! collectives off the board; `tcp` forces the streamed path on one host
//! too.

mod engine;
mod link;
mod memfd;
mod ring;
mod shm;
mod split;

use std::io::BufReader;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use self::engine::Engine;
use self::link::{allow_peer_reads, read_remote, Link, Msg};
use self::ring::Ring;
use self::shm::ProcBoard;
use self::shm::{Region, ShmBoard};
use super::{subgroup_of, subgroup_topology};
use crate::auth::{self, JobSecret, Key, SECRET_VAR};
use crate::backend::entries::EntryNote;
use crate::backend::host::BOARD_BYTES;
use crate::backend::liveness::{Liveness, Presence};
use crate::backend::{Backend, Board, Capabilities, EntryCarrier, EntryRoute, Issue, OpId, OpIds, P2pOp};
use crate::buffer::Memory;
use crate::error::{Error, Result};
use crate::header::CollHeader;
use crate::options::deadline_after;
use crate::topology::Topology;
use crate::wire::{read_frame_within, write_frame};

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
    /// How this host's processes exchange data (`HCOMM_TRANSPORT`, read
    /// with the launcher's variables).
    fn transport(&self) -> Transport {
        Transport::Shm
    }
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
        let deadline = deadline_after(CLOSE_WAIT);
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
    /// The shared board of the group when every rank of the world runs on
    /// this host (`shm.rs`): the world group's, or a split's (`split.rs`);
    /// `None` for other subgroups.
    board: Option<Arc<ShmBoard>>,
}

impl ProcBackend {
    fn engine(&self) -> &Arc<Engine> {
        &self.handle.0
    }

    /// The backend of the subgroup `members` (ranks of this group) made
    /// under `key`, without a board.
    fn sub(&self, key: &str, members: &[usize]) -> Result<ProcBackend> {
        let (rank, global) = subgroup_of(self.rank, &self.members, members)?;
        let group = subgroup_id(self.group, key, &global);
        self.engine().join_group(group, &global);
        Ok(ProcBackend {
            presence: Arc::clone(&self.presence),
            handle: Arc::clone(&self.handle),
            group,
            members: global,
            rank,
            topology: subgroup_topology(&self.topology),
            board: None,
        })
    }
}

impl Backend for ProcBackend {
    fn name(&self) -> &'static str {
        "host"
    }

    fn capabilities(&self) -> Capabilities<'_> {
        Capabilities {
            board: self.board.is_some().then_some(self as &dyn Board),
            entries: EntryRoute::Carried(self),
            issue: Issue::AsWritten,
            presence: Some(&self.presence),
        }
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
        let deadline = deadline_after(timeout);
        self.engine().wait(self.rank, ids, deadline, what, timeout)
    }

    fn test(&self, id: OpId) -> Result<bool> {
        self.engine().test(id)
    }

    fn cancel(&self, ids: &[OpId]) {
        self.engine().cancel(ids);
    }

    fn enter_collective(&self, header: &CollHeader) -> Result<()> {
        self.engine()
            .enter_collective(self.group, &self.members, header, self.board.is_some())
    }

    fn confirm_collective(&self, header: &CollHeader, timeout: Duration) -> Result<()> {
        self.engine()
            .confirm_collective(self.group, &self.members, self.rank, header, timeout)
    }

    fn subgroup(&self, key: &str, members: &[usize]) -> Result<Arc<dyn Backend>> {
        Ok(Arc::new(self.sub(key, members)?))
    }

    fn split(&self, key: &str, members: &[usize], timeout: Duration) -> Result<Arc<dyn Backend>> {
        let mut sub = self.sub(key, members)?;
        if self.board.is_some() && sub.members.len() > 1 {
            sub.board = split::split_board(&sub, timeout)?.map(Arc::new);
        }
        Ok(Arc::new(sub))
    }

    fn abort(&self, reason: &str) {
        self.engine().abort(self.group, &self.members, reason);
    }
}

/// The shared board of a job's processes on one host (the world group or
/// a split of it, when every rank runs here and mapped every region).
impl Board for ProcBackend {
    fn capacity(&self) -> usize {
        BOARD_BYTES
    }

    fn exchange(
        &self,
        header: &CollHeader,
        len: usize,
        timeout: Duration,
        fill: &mut dyn FnMut(&mut [u8]),
        take: &mut dyn FnMut(usize, &[u8]),
    ) -> Result<()> {
        let Some(board) = self.board.as_deref() else {
            return Err(Error::precondition("this group has no shared board"));
        };
        let board = ProcBoard {
            board,
            engine: self.engine(),
            group: self.group,
            members: &self.members,
        };
        board.exchange(header, len, timeout, fill, take)
    }
}

/// Entry notes travel on the links, ahead of the call's data.
impl EntryCarrier for ProcBackend {
    fn announce(&self, note: &EntryNote) -> Result<()> {
        self.engine().announce_entry(self.group, &self.members, self.rank, note)
    }

    fn failure(&self, seq: u64) -> Option<Error> {
        self.engine().entries.failure(self.group, seq)
    }
}

/// The id every member process computes for a subgroup, without talking.
fn subgroup_id(parent: u64, key: &str, members: &[usize]) -> u64 {
    use std::hash::Hasher;
    // FNV-1a: stable across processes and builds.
    let mut h = crate::fnv::Fnv::default();
    h.write_u64(parent);
    h.write(key.as_bytes());
    h.write(&[0xff]);
    for &m in members {
        h.write_usize(m);
    }
    h.finish() | 1
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

/// How long a connection on a rank's data port may take to prove itself
/// before it is dropped (accepting goes on meanwhile).
const HANDSHAKE_WAIT: Duration = Duration::from_secs(3);

/// The longest handshake frame (a `Hello` holds a host name and a list of
/// cores).
const HANDSHAKE_FRAME: usize = 64 << 10;

/// The most connections proving themselves at once on a rank's data port;
/// more are closed at once.
const MAX_PENDING: usize = 64;

/// Second frame of a connection's handshake: the sender knows the job's
/// secret, for this connection (both nonces) and these two ranks.
#[derive(Serialize, Deserialize)]
struct Proof {
    tag: Key,
}

/// What this rank tells each peer.
struct Me {
    rank: usize,
    world: usize,
    job: u64,
    pid: i32,
    host: String,
    probe_addr: u64,
    probe: u64,
    cores: Vec<u32>,
    secret: JobSecret,
}

/// A peer that proved itself.
struct Peer {
    rank: usize,
    world: usize,
    pid: i32,
    host: String,
    probe_addr: u64,
    probe: u64,
    cores: Vec<u32>,
    /// The key of this connection: only its two ends can compute it.
    link_key: Key,
}

/// The world backend of rank `rank` of `world` processes: publishes where
/// it listens in `store`, connects to every other rank (lower ranks are
/// dialled, higher ones accepted) and starts the connection threads; also
/// which ranks share this host, told by each peer with the `cores` its
/// process may run on. Every connection proves that both ends know
/// `secret` (`handshake`); one on this rank's port that does not is
/// dropped and accepting goes on.
pub(crate) fn connect(
    store: &dyn Directory,
    rank: usize,
    world: usize,
    topology: &Topology,
    timeout: Duration,
    cores: &[usize],
    secret: &JobSecret,
) -> Result<(Arc<dyn Backend>, HostPeers)> {
    let transport = store.transport();
    // Before any peer can probe this process's memory; withdrawn below
    // when no peer reads it.
    let may_read = transport != Transport::Tcp && world > 1;
    if may_read {
        allow_peer_reads(true);
    }
    let probe = probe_value();
    PROBE.store(probe, Ordering::SeqCst);
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
    let me = Arc::new(Me {
        rank,
        world,
        job: secret.job_id(),
        pid: std::process::id() as i32,
        host: host.clone(),
        probe_addr: std::ptr::from_ref(&PROBE) as u64,
        probe,
        cores: mine.clone(),
        secret: secret.clone(),
    });
    let deadline = deadline_after(timeout);
    let mut streams: Vec<Option<(TcpStream, Peer)>> = (0..world).map(|_| None).collect();
    for (peer, slot) in streams.iter_mut().enumerate().take(rank) {
        let bytes = store.lookup(&format!("hcomm/peer/{peer}"), deadline)?;
        let ep: Endpoint = postcard::from_bytes(&bytes).map_err(|e| os_error("decoding a peer's endpoint", &e))?;
        let addr = SocketAddr::new(ep.ip, ep.port);
        let mut stream = TcpStream::connect_timeout(&addr, timeout.max(Duration::from_secs(1)))
            .map_err(|e| os_error(&format!("cannot connect to rank {peer} at {addr}"), &e))?;
        let wait = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_secs(1));
        let started = Instant::now();
        let theirs = handshake(&mut stream, &me, Some(peer), wait).map_err(|why| match why {
            // a peer that is frozen or too slow, not one that refused us
            Refusal::Quiet(e) => Error::Timeout {
                operation: format!("the handshake with rank {peer} at {addr} ({e})"),
                rank,
                waited: started.elapsed(),
                limit: timeout,
            },
            Refusal::Said(why) => Error::Config {
                message: format!(
                    "rank {rank}: rank {peer} at {addr} failed the handshake: {why}; hint: every process of a job \
                     needs the same `{SECRET_VAR}`"
                ),
            },
        })?;
        *slot = Some((stream, theirs));
    }
    accept_peers(&listener, store, &me, &mut streams, deadline, timeout)?;
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
        let Some((stream, theirs)) = s else {
            continue;
        };
        let same_host = theirs.host == host;
        if same_host {
            here.count += 1;
            here.index += usize::from(peer < rank);
            here.same_cores &= theirs.cores == mine;
        }
        if theirs.world != world {
            return Err(Error::Config {
                message: format!(
                    "rank {peer} runs in a world of {} ranks, rank {rank} in one of {world}",
                    theirs.world
                ),
            });
        }
        let can_read =
            may_read && same_host && same_user(theirs.pid) && can_read(theirs.pid, theirs.probe_addr, theirs.probe);
        ready.push((peer, stream, theirs.pid, can_read, theirs.link_key));
    }
    // This rank's board region, offered when every rank runs on this host
    // (`shm.rs`).
    let region = (transport == Transport::Shm && may_read && here.count == world)
        .then(Region::create)
        .and_then(|r| r.map_err(|e| tracing::debug!(rank, %e, "no board region")).ok());
    let mut answered = Vec::with_capacity(ready.len());
    for (peer, mut stream, pid, can_read, link_key) in ready {
        // The ring this peer may send its control messages in (where it
        // cannot map it, they come on the connection).
        let rx = if can_read { Ring::create().ok() } else { None };
        let ready = Msg::Ready {
            can_read,
            ring: rx.as_ref().map(Ring::fd),
            board: region.as_ref().filter(|_| can_read).map(Region::fd),
        };
        write_frame(&mut stream, &ready, &mut buf).map_err(|e| os_error("handshake with a peer", &e))?;
        answered.push((peer, stream, pid, can_read, rx, link_key));
    }
    let mut opened = Vec::with_capacity(answered.len());
    for (peer, mut stream, pid, can_read, rx, link_key) in answered {
        // The peer answers once it has accepted its own peers: up to the
        // deadline (a connection accepted here kept the short wait of its
        // handshake until now).
        let left = deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_secs(1));
        let theirs: Msg = stream
            .set_read_timeout(Some(left))
            .and_then(|()| read_frame_within(&mut stream, &mut buf, HANDSHAKE_FRAME))
            .map_err(|e| os_error("handshake with a peer", &e))?;
        let (cma, their_ring, their_board) = match theirs {
            Msg::Ready {
                can_read: true,
                ring,
                board,
            } => (can_read, ring, board),
            _ => (false, None, None),
        };
        let rx = rx.filter(|_| cma);
        let tx = their_ring.filter(|_| cma).and_then(|fd| {
            Ring::open(pid, fd)
                .map_err(|e| tracing::debug!(rank, peer, %e, "no ring"))
                .ok()
        });
        let board = their_board.filter(|_| cma && region.is_some()).and_then(|fd| {
            Region::open(pid, fd)
                .map_err(|e| tracing::debug!(rank, peer, %e, "no board region"))
                .ok()
        });
        opened.push(Opened {
            peer,
            stream,
            pid,
            cma,
            rings: (rx, tx),
            link_key,
            board,
        });
    }
    let board = agree_on_board(rank, region, &mut opened, &mut buf)?;
    let mut links: Vec<Option<Arc<Link>>> = (0..world).map(|_| None).collect();
    let mut readers = Vec::new();
    for Opened {
        peer,
        stream,
        pid,
        cma,
        rings,
        link_key,
        ..
    } in opened
    {
        tracing::debug!(
            rank,
            peer,
            cma,
            ring = rings.1.is_some(),
            board = board.is_some(),
            "connected"
        );
        let io = |e: std::io::Error| os_error("peer connection", &e);
        stream.set_nodelay(true).map_err(io)?;
        stream.set_read_timeout(None).map_err(io)?;
        let read_half = stream.try_clone().map_err(io)?;
        // The connection's key (derived in the authenticated handshake from
        // the job secret, both nonces and both ranks), for the frames' MACs.
        links[peer] = Some(Link::new(pid, cma, stream, rings, link_key, rank < peer).map_err(io)?);
        readers.push((peer, read_half));
    }
    if may_read && !links.iter().flatten().any(|l| l.cma) {
        // No peer reads this process's memory.
        allow_peer_reads(false);
    }
    let liveness = Liveness::new(world);
    let engine = Engine::new(rank, Arc::clone(&liveness), links, transport == Transport::Shm);
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
        board: board.map(Arc::new),
    });
    Ok((backend, here))
}

/// How the processes of one host exchange data (`HCOMM_TRANSPORT`, read
/// with the launcher's variables); across hosts everything goes over TCP.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Transport {
    /// Collectives up to the board's size on a board in shared memory,
    /// small messages copied through the shared rings, larger ones read
    /// from the peer's memory (`shm`, the default).
    #[default]
    Shm,
    /// Messages read from the peer's memory, collectives as messages too
    /// (`cma`: the path before the shared board).
    Cma,
    /// Control messages and data over TCP (`tcp`).
    Tcp,
}

/// A connection to a peer once both ends told what they can map.
struct Opened {
    peer: usize,
    stream: TcpStream,
    pid: i32,
    /// Whether data moves by memory reads (both ends can read the other).
    cma: bool,
    /// The ring this rank receives in and the one it sends in.
    rings: (Option<Ring>, Option<Ring>),
    link_key: Key,
    /// The peer's board region, mapped here.
    board: Option<Region>,
}

/// Whether the job's ranks use the shared board: every rank tells every
/// other whether it holds its own region and mapped every peer's, so that
/// all decide alike (a rank on the board and one off it would run
/// different algorithms). The board of rank `rank` when all did.
fn agree_on_board(
    rank: usize,
    region: Option<Region>,
    opened: &mut [Opened],
    buf: &mut Vec<u8>,
) -> Result<Option<ShmBoard>> {
    let mine = region.is_some() && opened.iter().all(|o| o.board.is_some());
    for o in opened.iter_mut() {
        write_frame(&mut o.stream, &Msg::Board { ok: mine }, buf).map_err(|e| os_error("handshake with a peer", &e))?;
    }
    let mut all = mine;
    for o in opened.iter_mut() {
        let theirs: Msg = read_frame_within(&mut o.stream, buf, HANDSHAKE_FRAME)
            .map_err(|e| os_error("handshake with a peer", &e))?;
        all &= matches!(theirs, Msg::Board { ok: true });
    }
    let Some(own) = region.filter(|_| all) else {
        return Ok(None);
    };
    let mut regions: Vec<(usize, Region)> = opened
        .iter_mut()
        .filter_map(|o| Some((o.peer, o.board.take()?)))
        .collect();
    regions.push((rank, own));
    regions.sort_by_key(|(r, _)| *r);
    Ok(Some(ShmBoard::new(rank, regions.into_iter().map(|(_, r)| r).collect())))
}

/// Accepts the ranks above `me.rank` until each proved itself, each
/// connection's handshake on a thread of its own, so that a silent or
/// hostile connection delays nobody: it is dropped when it fails or after
/// `HANDSHAKE_WAIT`, and so is a valid one claiming a rank already taken.
fn accept_peers(
    listener: &TcpListener,
    store: &dyn Directory,
    me: &Arc<Me>,
    streams: &mut [Option<(TcpStream, Peer)>],
    deadline: Instant,
    timeout: Duration,
) -> Result<()> {
    let (rank, world) = (me.rank, me.world);
    listener.set_nonblocking(true).map_err(|e| os_error("listener", &e))?;
    let (done_tx, done_rx) = std::sync::mpsc::channel::<(TcpStream, std::result::Result<Peer, Refusal>)>();
    let mut pending = 0usize;
    let mut accepted = 0;
    let mut next_check = Instant::now();
    while accepted < world - rank - 1 {
        let mut idle = true;
        match listener.accept() {
            Ok((mut stream, from)) => {
                idle = false;
                if pending >= MAX_PENDING {
                    tracing::warn!(rank, %from, "too many connections proving themselves; closed one");
                } else if stream.set_nonblocking(false).is_ok() {
                    pending += 1;
                    let me = Arc::clone(me);
                    let done = done_tx.clone();
                    let spawned = std::thread::Builder::new().name("hcomm-hello".into()).spawn(move || {
                        let result = handshake(&mut stream, &me, None, HANDSHAKE_WAIT);
                        let _ = done.send((stream, result));
                    });
                    if let Err(e) = spawned {
                        pending -= 1;
                        tracing::warn!(rank, %e, "cannot check a peer connection; closed it");
                    }
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) => return Err(os_error("accepting a peer", &e)),
        }
        while let Ok((stream, result)) = done_rx.try_recv() {
            idle = false;
            pending -= 1;
            match result {
                Ok(peer) if streams[peer.rank].is_none() => {
                    let r = peer.rank;
                    streams[r] = Some((stream, peer));
                    accepted += 1;
                }
                Ok(peer) => {
                    tracing::warn!(
                        rank,
                        claimed = peer.rank,
                        "a second connection claimed a rank; dropped it"
                    );
                }
                Err(why) => {
                    let from = stream.peer_addr().ok();
                    tracing::warn!(rank, ?from, %why, "a connection failed the handshake; dropped it");
                }
            }
        }
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
        if idle {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
    Ok(())
}

/// Both ends send a `Hello` with a fresh nonce, then a `Proof` (the
/// dialling end first): the HMAC
/// under the job's secret of the sender's nonce, the receiver's, the
/// sender's rank, the receiver's and the job id. `expect`: the rank this
/// end dialled; `None` on the accepting end, which takes any rank above
/// its own. Each read waits at most `wait`; the error says why the peer
/// failed.
fn handshake(
    stream: &mut TcpStream,
    me: &Me,
    expect: Option<usize>,
    wait: Duration,
) -> std::result::Result<Peer, Refusal> {
    let nonce = auth::nonce().map_err(|e| Refusal::Said(e.to_string()))?;
    let mut buf = Vec::new();
    let io = Refusal::from_io;
    stream.set_read_timeout(Some(wait)).map_err(io)?;
    let hello = Msg::Hello {
        rank: me.rank as u32,
        world: me.world as u32,
        job: me.job,
        nonce,
        pid: me.pid,
        host: me.host.clone(),
        probe_addr: me.probe_addr,
        probe: me.probe,
        cores: me.cores.clone(),
    };
    write_frame(stream, &hello, &mut buf).map_err(io)?;
    let theirs: Msg = read_frame_within(stream, &mut buf, HANDSHAKE_FRAME).map_err(io)?;
    let Msg::Hello {
        rank: their_rank,
        world,
        job,
        nonce: their_nonce,
        pid,
        host,
        probe_addr,
        probe,
        cores,
    } = theirs
    else {
        return Err(Refusal::Said("its first message is not a hello".into()));
    };
    if job != me.job {
        return Err(Refusal::Said(
            "it belongs to another job (or has a wrong secret)".into(),
        ));
    }
    let r = their_rank as usize;
    let fits = match expect {
        Some(p) => r == p,
        None => r > me.rank && r < me.world,
    };
    if !fits {
        return Err(Refusal::Said(format!(
            "it claims rank {r}, not one rank {} expects there",
            me.rank
        )));
    }
    let mine = (me.rank as u64).to_le_bytes();
    let their = (r as u64).to_le_bytes();
    let job = me.job.to_le_bytes();
    let tag = me
        .secret
        .tag(b"hcomm hello", &[&nonce, &their_nonce, &mine, &their, &job]);
    // The dialling end proves itself first (it reached the address the
    // store published); the accepting end answers only a peer that did,
    // so a stranger learns no proof of it.
    if expect.is_some() {
        write_frame(stream, &Proof { tag }, &mut buf).map_err(io)?;
    }
    let proof: Proof = read_frame_within(stream, &mut buf, HANDSHAKE_FRAME).map_err(io)?;
    if !me
        .secret
        .verify(b"hcomm hello", &[&their_nonce, &nonce, &their, &mine, &job], &proof.tag)
    {
        return Err(Refusal::Said(format!(
            "its proof for rank {r} does not verify (a wrong secret)"
        )));
    }
    if expect.is_none() {
        write_frame(stream, &Proof { tag }, &mut buf).map_err(io)?;
    }
    let (lo, hi) = if r < me.rank {
        ((&their_nonce, &their), (&nonce, &mine))
    } else {
        ((&nonce, &mine), (&their_nonce, &their))
    };
    let link_key = me.secret.derive(b"hcomm link", &[lo.0, hi.0, lo.1, hi.1]);
    Ok(Peer {
        rank: r,
        world: world as usize,
        pid,
        host,
        probe_addr,
        probe,
        cores,
        link_key,
    })
}

/// Why a peer failed the handshake.
#[derive(Debug)]
enum Refusal {
    /// It said nothing within the wait (a frozen or overloaded process):
    /// the read timed out.
    Quiet(std::io::Error),
    /// It answered wrongly, or the connection failed or ended (a peer that
    /// refuses a wrong secret closes the connection).
    Said(String),
}

impl Refusal {
    fn from_io(e: std::io::Error) -> Refusal {
        match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => Refusal::Quiet(e),
            _ => Refusal::Said(e.to_string()),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::Quiet(e) => write!(f, "it said nothing in time ({e})"),
            Refusal::Said(why) => f.write_str(why),
        }
    }
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

/// Whether process `pid` runs as this process's effective user (whose
/// memory this process may then read; another user's, never).
fn same_user(pid: i32) -> bool {
    use std::os::unix::fs::MetadataExt;
    // SAFETY: `geteuid` takes no arguments, touches no memory and cannot
    // fail.
    let me = unsafe { libc::geteuid() };
    std::fs::metadata(format!("/proc/{pid}")).is_ok_and(|m| m.uid() == me)
}

/// A value no other process is likely to hold at the probe's address.
fn probe_value() -> u64 {
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

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::{Condvar, Mutex};

    use super::*;
    use crate::backend::liveness::lock;

    /// The store of a job, in memory.
    #[derive(Default)]
    struct Board {
        map: Mutex<HashMap<String, Vec<u8>>>,
        changed: Condvar,
    }

    impl Directory for Board {
        fn publish(&self, key: &str, value: &[u8]) -> Result<()> {
            lock(&self.map).insert(key.to_owned(), value.to_vec());
            self.changed.notify_all();
            Ok(())
        }

        fn lookup(&self, key: &str, deadline: Instant) -> Result<Vec<u8>> {
            let mut map = lock(&self.map);
            loop {
                if let Some(v) = map.get(key) {
                    return Ok(v.clone());
                }
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return Err(Error::Timeout {
                        operation: format!("waiting for `{key}`"),
                        rank: 0,
                        waited: left,
                        limit: left,
                    });
                }
                map = self
                    .changed
                    .wait_timeout(map, left)
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .0;
            }
        }

        fn local_ip(&self) -> IpAddr {
            IpAddr::V4(Ipv4Addr::LOCALHOST)
        }

        fn gave_up(&self) -> Option<Error> {
            None
        }
    }

    fn me(rank: usize, secret: &JobSecret) -> Me {
        Me {
            rank,
            world: 2,
            job: secret.job_id(),
            pid: std::process::id() as i32,
            host: hostname(),
            probe_addr: 0,
            probe: 1,
            cores: Vec::new(),
            secret: secret.clone(),
        }
    }

    #[test]
    fn both_ends_of_a_handshake_derive_the_same_link_key() {
        let secret = JobSecret::new("0123456789abcdef-link").unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let (a, b) = std::thread::scope(|s| {
            let dialer = s.spawn(|| {
                let mut stream = TcpStream::connect(addr).unwrap();
                handshake(&mut stream, &me(1, &secret), Some(0), HANDSHAKE_WAIT).unwrap()
            });
            let (mut stream, _) = listener.accept().unwrap();
            let b = handshake(&mut stream, &me(0, &secret), None, HANDSHAKE_WAIT).unwrap();
            (dialer.join().unwrap(), b)
        });
        assert_eq!((a.rank, b.rank), (0, 1));
        let link_key: Key = a.link_key;
        assert_eq!(link_key, b.link_key);
        assert_ne!(link_key, [0; auth::KEY_BYTES]);
        assert_ne!(link_key, secret.derive(b"hcomm link", &[]));
    }

    /// A rank 0 whose process is frozen: the kernel accepts the connection
    /// into the listener's backlog, and nobody answers the hello. Rank 1's
    /// handshake is a timeout, not a configuration error about the secret.
    #[test]
    fn a_silent_peer_in_the_handshake_is_a_timeout_naming_it() {
        let secret = JobSecret::new("0123456789abcdef-quiet").unwrap();
        let board = Board::default();
        let silent = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = silent.local_addr().unwrap().port();
        let endpoint = postcard::to_stdvec(&Endpoint {
            ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            port,
        })
        .unwrap();
        board.publish("hcomm/peer/0", &endpoint).unwrap();
        let start = Instant::now();
        let got = connect(&board, 1, 2, &Topology::FullMesh, Duration::from_secs(1), &[0], &secret);
        let took = start.elapsed();
        match got {
            Err(Error::Timeout { operation, rank: 1, .. }) => {
                assert!(operation.contains("rank 0"), "{operation}");
            }
            Err(e) => panic!("expected a timeout naming rank 0, got {e}"),
            Ok(_) => panic!("joined a job whose rank 0 never answered"),
        }
        assert!(took < Duration::from_secs(3), "took {took:?}");
        drop(silent);
    }

    #[test]
    fn a_fake_hello_claiming_rank_1_is_dropped_and_the_real_rank_1_joins() {
        let secret = JobSecret::new("0123456789abcdef-job").unwrap();
        let board = Board::default();
        let cores = [0usize];
        std::thread::scope(|s| {
            let rank0 = s.spawn(|| {
                connect(
                    &board,
                    0,
                    2,
                    &Topology::FullMesh,
                    Duration::from_secs(20),
                    &cores,
                    &secret,
                )
            });
            // Right job id, right format, claiming rank 1, wrong secret.
            let bytes = board
                .lookup("hcomm/peer/0", Instant::now() + Duration::from_secs(10))
                .unwrap();
            let ep: Endpoint = postcard::from_bytes(&bytes).unwrap();
            let mut fake = TcpStream::connect(SocketAddr::new(ep.ip, ep.port)).unwrap();
            let mut intruder = me(1, &JobSecret::new("0123456789abcdef-evil").unwrap());
            intruder.job = secret.job_id();
            let why = handshake(&mut fake, &intruder, Some(0), HANDSHAKE_WAIT).err();
            // Rank 0 closes the connection after the intruder's proof:
            // the intruder reads its end, or rank 0's proof it cannot check.
            assert!(why.is_some(), "the intruder's handshake succeeded");
            let start = Instant::now();
            let rank1 = s.spawn(|| {
                connect(
                    &board,
                    1,
                    2,
                    &Topology::FullMesh,
                    Duration::from_secs(20),
                    &cores,
                    &secret,
                )
            });
            let (r0, r1) = (rank0.join().unwrap(), rank1.join().unwrap());
            assert!(r0.is_ok() && r1.is_ok(), "{:?} {:?}", r0.err(), r1.err());
            assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());
            let (b0, b1) = (r0.unwrap().0, r1.unwrap().0);
            assert_eq!((b0.rank(), b1.rank(), b0.world()), (0, 1, 2));
            drop(fake);
        });
    }
}
