//! The rendezvous store: a small key-value store over TCP that the processes
//! of one job use to find each other. Rank 0 serves it
//! ([`Store::serve`]); every process, rank 0 included, is a client
//! ([`Store::connect`] retries until its deadline, so ranks may start in any
//! order).
//!
//! # Protocol
//!
//! One TCP connection per client. Each message is a frame: a 4-byte
//! little-endian length, then that many bytes.
//!
//! A connection begins with a handshake in which each end proves that it
//! knows the job's secret ([`JobSecret`]) without sending it:
//!
//! 1. the server sends `ServerHello { magic, job, nonce: sn }`; a client of
//!    another job (`job` differs from its own) stops here with an error
//!    naming the address;
//! 2. the client answers `ClientAuth { nonce: cn, tag }`, `tag` the HMAC of
//!    both nonces and the job id under the secret; a server that cannot
//!    verify it closes the connection and goes on serving the others;
//! 3. the server proves itself back with `ServerAuth { tag }` over the same
//!    parts under another label, so a client never talks to an impostor.
//!
//! Each handshake frame is at most [`HANDSHAKE_FRAME`] bytes and must come
//! within [`HANDSHAKE_WAIT`]. Then every frame is a [`postcard`]-encoded
//! `Request` (client to server) or `Reply` (server to client) followed by
//! a 32-byte MAC under a key derived from both nonces, over the frame's
//! direction, its sequence number and its bytes: a relay can neither alter,
//! reorder nor replay a frame. A request is at most [`MAX_REQUEST`] bytes.
//! The client sends one request and reads its reply before the next; the
//! server answers requests in order.
//!
//! The server keeps at most [`MAX_CONNECTIONS`] connections, closes each
//! one's socket when it ends, and counts only authenticated clients when
//! rank 0 waits for the others to leave: a silent or hostile connection
//! neither holds memory nor delays the job.
//!
//! | request | reply |
//! |---|---|
//! | `Set { key, value }` | `Ok` |
//! | `Get { keys, wait_ms }`: the first of `keys` that is set, waiting up to `wait_ms` | `Found { index, value }` or `Missing` |
//! | `Add { key, delta }`: the key holds a little-endian `i64` (absent: 0) | `Count(new value)` |
//! | `CompareSet { key, expected, desired }`: sets `desired` if the value equals `expected` (`None`: absent) | `Swapped(bool, current value)` |
//! | `Delete { key }` | `Deleted(existed)` |
//!
//! A barrier is an `Add` on its key followed by waiting until the key's
//! count reaches the number of participants.

use std::collections::HashMap;
use std::io::{self, BufReader, BufWriter, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::auth::{mac, mac_verify, nonce, JobSecret, Key, KEY_BYTES};
use crate::backend::liveness::lock;
use crate::error::{Error, Result};
use crate::options::deadline_after;
use crate::wire::{read_frame_within, read_raw, write_frame, write_raw};

/// A request from a client.
#[derive(Serialize, Deserialize, Debug)]
enum Request {
    Set {
        key: String,
        value: Vec<u8>,
    },
    Get {
        keys: Vec<String>,
        wait_ms: u64,
    },
    Add {
        key: String,
        delta: i64,
    },
    CompareSet {
        key: String,
        expected: Option<Vec<u8>>,
        desired: Vec<u8>,
    },
    Delete {
        key: String,
    },
}

/// The server's answer to one request.
#[derive(Serialize, Deserialize, Debug)]
enum Reply {
    Ok,
    Found { index: u32, value: Vec<u8> },
    Missing,
    Count(i64),
    Swapped(bool, Option<Vec<u8>>),
    Deleted(bool),
}

/// How long a connection attempt waits between tries.
const RETRY: Duration = Duration::from_millis(50);
/// The least and the most a client waits for a reply beyond the
/// server-side wait (see [`reply_slack`]).
const MIN_REPLY_SLACK: Duration = Duration::from_millis(100);
const MAX_REPLY_SLACK: Duration = Duration::from_millis(500);

/// How much longer than a server-side wait a client waits for the reply,
/// for a job whose time limit is `limit`: a tenth of it, between
/// [`MIN_REPLY_SLACK`] and [`MAX_REPLY_SLACK`], so that a store whose host
/// is frozen fails its clients within the limit plus half a second.
fn reply_slack(limit: Duration) -> Duration {
    (limit / 10).clamp(MIN_REPLY_SLACK, MAX_REPLY_SLACK)
}
/// The longest handshake frame (they hold a few ids and nonces).
pub const HANDSHAKE_FRAME: usize = 256;
/// How long either end waits for each handshake frame.
pub const HANDSHAKE_WAIT: Duration = Duration::from_secs(3);
/// The longest request or reply: keys and values are small (endpoints,
/// rank claims, a device communicator's id of about 4 KiB).
pub const MAX_REQUEST: usize = 64 << 10;
/// The most connections the server keeps at once; more are closed at once.
pub const MAX_CONNECTIONS: usize = 512;
/// Tells a store from something else listening on its port.
const MAGIC: [u8; 8] = *b"hcstore1";

/// First handshake frame, server to client.
#[derive(Serialize, Deserialize)]
struct ServerHello {
    magic: [u8; 8],
    job: u64,
    nonce: Key,
}

/// Second handshake frame, client to server.
#[derive(Serialize, Deserialize)]
struct ClientAuth {
    nonce: Key,
    tag: Key,
}

/// Third handshake frame, server to client.
#[derive(Serialize, Deserialize)]
struct ServerAuth {
    tag: Key,
}

/// The parts both proofs of a handshake cover.
fn proof_parts<'a>(sn: &'a Key, cn: &'a Key, job: &'a [u8; 8]) -> [&'a [u8]; 3] {
    [sn, cn, job]
}

/// One end of an authenticated connection: frames carry a MAC under `key`
/// over their direction and sequence number.
struct Sealed {
    key: Key,
    sent: u64,
    received: u64,
    /// The label of frames this end sends, and of those it receives.
    labels: (&'static [u8], &'static [u8]),
}

impl Sealed {
    fn new(secret: &JobSecret, sn: &Key, cn: &Key, client: bool) -> Sealed {
        let labels: (&[u8], &[u8]) = if client {
            (b"store request", b"store reply")
        } else {
            (b"store reply", b"store request")
        };
        Sealed {
            key: secret.derive(b"hcomm store", &[sn, cn]),
            sent: 0,
            received: 0,
            labels,
        }
    }

    fn send<T: Serialize>(&mut self, w: &mut impl Write, value: &T, buf: &mut Vec<u8>) -> io::Result<()> {
        buf.clear();
        postcard::to_io(value, &mut *buf).map_err(invalid)?;
        let tag = mac(&self.key, self.labels.0, &[&self.sent.to_le_bytes(), buf]);
        self.sent += 1;
        write_raw(w, &[buf, &tag])
    }

    fn receive<T: DeserializeOwned>(&mut self, r: &mut impl io::Read, buf: &mut Vec<u8>) -> io::Result<T> {
        read_raw(r, buf, MAX_REQUEST + KEY_BYTES)?;
        let Some(split) = buf.len().checked_sub(KEY_BYTES) else {
            return Err(invalid("a frame shorter than its MAC"));
        };
        let (body, tag) = buf.split_at(split);
        if !mac_verify(&self.key, self.labels.1, &[&self.received.to_le_bytes(), body], tag) {
            return Err(invalid(
                "a frame whose MAC does not verify (altered, replayed or reordered)",
            ));
        }
        self.received += 1;
        postcard::from_bytes(body).map_err(invalid)
    }
}

fn invalid(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// A client of the rendezvous store (and, on the process that serves it,
/// the server, which stops when this handle is dropped).
pub struct Store {
    addr: String,
    conn: Mutex<Conn>,
    server: Option<Server>,
    /// The end of the time limit the client was connected with: no call
    /// gives up on a reply before it.
    until: Instant,
    /// How long past `until` (or past a request's own wait) a reply may
    /// take.
    slack: Duration,
}

struct Conn {
    reader: BufReader<TcpStream>,
    writer: BufWriter<TcpStream>,
    buf: Vec<u8>,
    sealed: Sealed,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("addr", &self.addr)
            .field("serving", &self.server.is_some())
            .finish_non_exhaustive()
    }
}

impl Store {
    /// Serves a store on `addr` (e.g. `0.0.0.0:29500`; port 0 picks a free
    /// one) for an unauthenticated job and connects to it.
    pub fn serve(addr: &str) -> Result<Store> {
        Store::serve_with(addr, &JobSecret::unauthenticated())
    }

    /// Serves a store on `addr` to the clients that know `secret` and
    /// connects to it.
    pub fn serve_with(addr: &str, secret: &JobSecret) -> Result<Store> {
        let listener = TcpListener::bind(addr).map_err(|e| os_error(&format!("cannot listen on {addr}"), &e))?;
        Store::serve_on(listener, secret, Duration::from_secs(10))
    }

    /// Serves a store on `listener` (bound already: by this process, or
    /// inherited from a launcher that held the port) to the clients that
    /// know `secret`, and connects to it as a client whose time limit is
    /// `limit` (see [`Store::connect_with`]).
    pub fn serve_on(listener: TcpListener, secret: &JobSecret, limit: Duration) -> Result<Store> {
        let local = listener
            .local_addr()
            .map_err(|e| os_error("cannot serve the rendezvous store", &e))?;
        let server = Server::start(listener, secret.clone())?;
        let target = if local.ip().is_unspecified() {
            SocketAddr::from(([127, 0, 0, 1], local.port()))
        } else {
            local
        };
        let mut store = Store::connect_with(&target.to_string(), limit, secret)?;
        store.server = Some(server);
        Ok(store)
    }

    /// Connects to the store of an unauthenticated job at `addr`
    /// (`host:port`), retrying until `deadline` has passed; an unreachable
    /// store is a timeout naming it.
    pub fn connect(addr: &str, deadline: Duration) -> Result<Store> {
        Store::connect_with(addr, deadline, &JobSecret::unauthenticated())
    }

    /// [`Store::connect`] to the store of the job `secret` belongs to. A
    /// store of another job (or one that does not know the secret) is an
    /// [`Error::Config`] naming the address, at once.
    ///
    /// `deadline` is also the client's time limit: no later call gives up
    /// on a reply before it has passed, and none waits for one more than a
    /// tenth of it (at most half a second) past it or past the call's own
    /// wait. A store that does not answer in time (its host frozen or gone)
    /// is [`Error::PeerFailed`] naming rank 0, which serves it.
    pub fn connect_with(addr: &str, deadline: Duration, secret: &JobSecret) -> Result<Store> {
        Store::connect_within(addr, deadline, (deadline_after(deadline), deadline), secret)
    }

    /// [`Store::connect_with`], trying for `deadline`, for a client whose
    /// time limit of `limit` ends at `until`.
    pub(crate) fn connect_within(
        addr: &str,
        deadline: Duration,
        (until, limit): (Instant, Duration),
        secret: &JobSecret,
    ) -> Result<Store> {
        let start = Instant::now();
        let slack = reply_slack(limit);
        let mut last = String::from("no address");
        loop {
            match addr.to_socket_addrs() {
                Ok(addrs) => {
                    for a in addrs {
                        // A hello later than the try's end (plus the
                        // slack) is not waited for.
                        let hello_wait = HANDSHAKE_WAIT.min(deadline.saturating_sub(start.elapsed()) + slack);
                        let stream = TcpStream::connect_timeout(&a, RETRY.max(Duration::from_millis(200)));
                        match stream.map(|s| Store::over(addr, s, secret, hello_wait, (until, slack))) {
                            Ok(Ok(Ok(store))) => return Ok(store),
                            Ok(Err(e)) => return Err(e),
                            // No hello (a store at its connection limit
                            // closes new ones): try again.
                            Ok(Ok(Err(why))) => last = why,
                            Err(e) => last = e.to_string(),
                        }
                    }
                }
                Err(e) => last = e.to_string(),
            }
            if start.elapsed() >= deadline {
                return Err(Error::Timeout {
                    operation: format!("connecting to the rendezvous store at {addr} (last error: {last})"),
                    rank: crate::launch::env::rank_hint(),
                    waited: start.elapsed(),
                    limit: deadline,
                });
            }
            std::thread::sleep(RETRY);
        }
    }

    /// The client over `stream`; `Ok(Err(why))` when no store hello came
    /// (worth another try).
    fn over(
        addr: &str,
        mut stream: TcpStream,
        secret: &JobSecret,
        hello_wait: Duration,
        (until, slack): (Instant, Duration),
    ) -> Result<std::result::Result<Store, String>> {
        let io_err = |e: &io::Error| os_error(&format!("rendezvous store at {addr}"), e);
        stream.set_nodelay(true).map_err(|e| io_err(&e))?;
        let sealed = match client_handshake(addr, &mut stream, secret, hello_wait)? {
            Ok(sealed) => sealed,
            Err(why) => return Ok(Err(why)),
        };
        let reader = BufReader::new(stream.try_clone().map_err(|e| io_err(&e))?);
        Ok(Ok(Store {
            addr: addr.to_owned(),
            conn: Mutex::new(Conn {
                reader,
                writer: BufWriter::new(stream),
                buf: Vec::new(),
                sealed,
            }),
            server: None,
            until,
            slack,
        }))
    }

    /// The address this client is connected to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// This end's address of the connection to the store: the address of
    /// this host as the store's host reaches it.
    pub fn local_ip(&self) -> std::net::IpAddr {
        lock(&self.conn)
            .writer
            .get_ref()
            .local_addr()
            .map_or(std::net::IpAddr::from([127, 0, 0, 1]), |a| a.ip())
    }

    /// The port the store listens on, when this handle serves it.
    pub fn serving_port(&self) -> Option<u16> {
        self.server.as_ref().map(|s| s.addr.port())
    }

    /// Sends `request` (which the server may hold up to `wait`) and reads
    /// its reply, waiting until `wait` or the client's limit has passed,
    /// whichever is later, plus the slack.
    fn call(&self, request: &Request, wait: Duration) -> Result<Reply> {
        let patience = wait.max(self.until.saturating_duration_since(Instant::now())) + self.slack;
        let mut conn = lock(&self.conn);
        let conn = &mut *conn;
        let result = (|| {
            conn.reader.get_ref().set_read_timeout(Some(patience))?;
            conn.writer.get_ref().set_write_timeout(Some(patience))?;
            conn.sealed.send(&mut conn.writer, request, &mut conn.buf)?;
            conn.writer.flush()?;
            conn.sealed.receive::<Reply>(&mut conn.reader, &mut conn.buf)
        })();
        result.map_err(|e| match e.kind() {
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Error::PeerFailed {
                rank: 0,
                reason: format!(
                    "it serves the rendezvous store at {}, which sent no reply within {patience:?} (its process is \
                     stopped or frozen, or its host is gone)",
                    self.addr
                ),
            },
            io::ErrorKind::UnexpectedEof | io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe => {
                Error::PeerFailed {
                    rank: 0,
                    reason: format!(
                        "it served the rendezvous store at {}, which closed the connection ({e})",
                        self.addr
                    ),
                }
            }
            _ => os_error(&format!("rendezvous store at {}", self.addr), &e),
        })
    }

    fn unexpected(&self, reply: &Reply) -> Error {
        Error::Backend {
            backend: "host",
            message: format!("rendezvous store at {}: unexpected reply {reply:?}", self.addr),
        }
    }

    /// Sets `key` to `value`.
    pub fn set(&self, key: &str, value: &[u8]) -> Result<()> {
        let request = Request::Set {
            key: key.to_owned(),
            value: value.to_vec(),
        };
        match self.call(&request, Duration::ZERO)? {
            Reply::Ok => Ok(()),
            r => Err(self.unexpected(&r)),
        }
    }

    /// The value of `key`, waiting up to `wait` for it to be set.
    pub fn get(&self, key: &str, wait: Duration) -> Result<Vec<u8>> {
        self.get_any(&[key], wait).map(|(_, v)| v)
    }

    /// The first of `keys` that is set, with its index, waiting up to `wait`
    /// for one to be set.
    pub fn get_any(&self, keys: &[&str], wait: Duration) -> Result<(usize, Vec<u8>)> {
        let request = Request::Get {
            keys: keys.iter().map(|&k| k.to_owned()).collect(),
            wait_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
        };
        match self.call(&request, wait)? {
            Reply::Found { index, value } => Ok((index as usize, value)),
            Reply::Missing => Err(Error::Timeout {
                operation: format!(
                    "waiting for `{}` in the rendezvous store at {}",
                    keys.join("` or `"),
                    self.addr
                ),
                rank: crate::launch::env::rank_hint(),
                waited: wait,
                limit: wait,
            }),
            r => Err(self.unexpected(&r)),
        }
    }

    /// Adds `delta` to the counter `key` (absent: 0) and returns the sum.
    pub fn add(&self, key: &str, delta: i64) -> Result<i64> {
        let request = Request::Add {
            key: key.to_owned(),
            delta,
        };
        match self.call(&request, Duration::ZERO)? {
            Reply::Count(n) => Ok(n),
            r => Err(self.unexpected(&r)),
        }
    }

    /// Sets `key` to `desired` if its value is `expected` (`None`: the key
    /// is absent). `Ok(Ok(()))` when it did; `Ok(Err(current))` otherwise.
    pub fn compare_set(
        &self,
        key: &str,
        expected: Option<&[u8]>,
        desired: &[u8],
    ) -> Result<Result<(), Option<Vec<u8>>>> {
        let request = Request::CompareSet {
            key: key.to_owned(),
            expected: expected.map(<[u8]>::to_vec),
            desired: desired.to_vec(),
        };
        match self.call(&request, Duration::ZERO)? {
            Reply::Swapped(true, _) => Ok(Ok(())),
            Reply::Swapped(false, current) => Ok(Err(current)),
            r => Err(self.unexpected(&r)),
        }
    }

    /// Deletes `key`; whether it existed.
    pub fn delete(&self, key: &str) -> Result<bool> {
        match self.call(&Request::Delete { key: key.to_owned() }, Duration::ZERO)? {
            Reply::Deleted(existed) => Ok(existed),
            r => Err(self.unexpected(&r)),
        }
    }

    /// On the serving process: waits until every other authenticated
    /// client has disconnected (at most `wait`), so that stopping the
    /// server cuts off no reply; connections that never proved themselves
    /// are not waited for. Returns whether they all did.
    pub fn wait_for_clients_to_leave(&self, wait: Duration) -> bool {
        let Some(server) = &self.server else {
            return true;
        };
        let deadline = deadline_after(wait);
        let mut clients = lock(&server.shared.clients);
        while *clients > 1 {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            clients = server
                .shared
                .left
                .wait_timeout(clients, deadline - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
        true
    }

    /// Waits until `count` clients reached the barrier `name` (each name is
    /// used once), at most `wait`.
    pub fn barrier(&self, name: &str, count: usize, wait: Duration) -> Result<()> {
        let key = format!("barrier/{name}");
        let arrived = self.add(&key, 1)?;
        let done = format!("{key}/done");
        if arrived >= count as i64 {
            return self.set(&done, &[]);
        }
        self.get(&done, wait).map(drop)
    }
}

/// The client's half of the handshake (see the module's documentation);
/// `Ok(Err(why))` when the server sent no hello.
fn client_handshake(
    addr: &str,
    stream: &mut TcpStream,
    secret: &JobSecret,
    wait: Duration,
) -> Result<std::result::Result<Sealed, String>> {
    let job = secret.job_id().to_le_bytes();
    let other_job = || Error::Config {
        message: format!(
            "the rendezvous store at {addr} belongs to another job (or this process has a wrong `{}`); hint: give \
             each job its own `MASTER_PORT`, and every process of a job the same secret",
            crate::auth::SECRET_VAR
        ),
    };
    let mut buf = Vec::new();
    let hello: io::Result<ServerHello> = (|| {
        stream.set_read_timeout(Some(wait.max(Duration::from_millis(1))))?;
        read_frame_within(stream, &mut buf, HANDSHAKE_FRAME)
    })();
    let hello = match hello {
        Ok(hello) => hello,
        Err(e) => return Ok(Err(format!("no store hello ({e}); is something else listening there?"))),
    };
    if hello.magic != MAGIC {
        return Err(Error::Config {
            message: format!("{addr} is not a rendezvous store of this library (it answered something else)"),
        });
    }
    if hello.job.to_le_bytes() != job {
        return Err(other_job());
    }
    let cn = nonce()?;
    let parts = proof_parts(&hello.nonce, &cn, &job);
    let auth = ClientAuth {
        nonce: cn,
        tag: secret.tag(b"store client", &parts),
    };
    let proof: io::Result<ServerAuth> = (|| {
        write_frame(stream, &auth, &mut buf)?;
        read_frame_within(stream, &mut buf, HANDSHAKE_FRAME)
    })();
    // The server closes the connection of a client it cannot verify.
    let proof = proof.map_err(|_| other_job())?;
    if !secret.verify(b"store server", &parts, &proof.tag) {
        return Err(Error::Config {
            message: format!(
                "the rendezvous store at {addr} could not prove that it knows the job's secret (an impostor, or \
                 another job); hint: give each job its own `MASTER_PORT`"
            ),
        });
    }
    stream
        .set_read_timeout(None)
        .map_err(|e| os_error(&format!("rendezvous store at {addr}"), &e))?;
    Ok(Ok(Sealed::new(secret, &hello.nonce, &cn, true)))
}

/// The server's half of the handshake; `None` when the peer failed it.
fn server_handshake(stream: &mut TcpStream, secret: &JobSecret, job: u64) -> io::Result<Option<Sealed>> {
    let job = job.to_le_bytes();
    let sn = nonce().map_err(|e| io::Error::other(e.to_string()))?;
    let mut buf = Vec::new();
    stream.set_read_timeout(Some(HANDSHAKE_WAIT))?;
    let hello = ServerHello {
        magic: MAGIC,
        job: u64::from_le_bytes(job),
        nonce: sn,
    };
    write_frame(stream, &hello, &mut buf)?;
    let auth: ClientAuth = read_frame_within(stream, &mut buf, HANDSHAKE_FRAME)?;
    let parts = proof_parts(&sn, &auth.nonce, &job);
    if !secret.verify(b"store client", &parts, &auth.tag) {
        return Ok(None);
    }
    let proof = ServerAuth {
        tag: secret.tag(b"store server", &parts),
    };
    write_frame(stream, &proof, &mut buf)?;
    // An authenticated client may wait long between requests (a rank
    // joining late).
    stream.set_read_timeout(None)?;
    Ok(Some(Sealed::new(secret, &sn, &auth.nonce, false)))
}

/// The serving side: an accept thread and a thread per connection over one
/// shared map.
struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<std::thread::JoinHandle<()>>,
}

struct Shared {
    secret: JobSecret,
    /// `secret.job_id()`, computed once.
    job: u64,
    map: Mutex<HashMap<String, Vec<u8>>>,
    changed: Condvar,
    stopping: AtomicBool,
    /// The open connections, by number, to shut down when the server
    /// stops; each is removed (and its socket closed) when it ends.
    conns: Mutex<HashMap<u64, TcpStream>>,
    next_conn: AtomicU64,
    /// Authenticated clients connected now.
    clients: Mutex<usize>,
    left: Condvar,
}

impl Server {
    fn start(listener: TcpListener, secret: JobSecret) -> Result<Server> {
        let addr = listener.local_addr().map_err(|e| os_error("rendezvous store", &e))?;
        let shared = Arc::new(Shared {
            job: secret.job_id(),
            secret,
            map: Mutex::default(),
            changed: Condvar::new(),
            stopping: AtomicBool::new(false),
            conns: Mutex::default(),
            next_conn: AtomicU64::new(0),
            clients: Mutex::new(0),
            left: Condvar::new(),
        });
        let s = Arc::clone(&shared);
        let accept = std::thread::Builder::new()
            .name("hcomm-store".into())
            .spawn(move || accept_loop(&listener, &s))
            .map_err(|e| os_error("cannot start the rendezvous store", &e))?;
        Ok(Server {
            addr,
            shared,
            accept: Some(accept),
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.shared.changed.notify_all();
        for (_, c) in lock(&self.shared.conns).drain() {
            let _ = c.shutdown(Shutdown::Both);
        }
        // Wake the accept loop so it sees `stopping`.
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip([127, 0, 0, 1].into());
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

fn accept_loop(listener: &TcpListener, shared: &Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        let id = shared.next_conn.fetch_add(1, Ordering::Relaxed);
        {
            let mut conns = lock(&shared.conns);
            if conns.len() >= MAX_CONNECTIONS {
                tracing::warn!(
                    limit = MAX_CONNECTIONS,
                    "rendezvous store: too many connections, closing a new one"
                );
                continue;
            }
            let Ok(clone) = stream.try_clone() else { continue };
            conns.insert(id, clone);
        }
        let s = Arc::clone(shared);
        let spawned = std::thread::Builder::new()
            .name("hcomm-store-conn".into())
            .spawn(move || {
                if let Err(e) = serve_conn(stream, &s) {
                    tracing::debug!(error = %e, "rendezvous store connection closed");
                }
                lock(&s.conns).remove(&id);
            });
        if let Err(e) = spawned {
            lock(&shared.conns).remove(&id);
            tracing::warn!(error = %e, "rendezvous store: cannot serve a connection");
        }
    }
}

/// Counts an authenticated client while it is connected.
struct Client<'a>(&'a Shared);

impl<'a> Client<'a> {
    fn arrive(shared: &'a Shared) -> Client<'a> {
        *lock(&shared.clients) += 1;
        Client(shared)
    }
}

impl Drop for Client<'_> {
    fn drop(&mut self) {
        *lock(&self.0.clients) -= 1;
        self.0.left.notify_all();
    }
}

fn serve_conn(mut stream: TcpStream, shared: &Shared) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let Some(mut sealed) = server_handshake(&mut stream, &shared.secret, shared.job)? else {
        tracing::warn!(
            peer = ?stream.peer_addr().ok(),
            "rendezvous store: a connection failed the handshake (another job, or a wrong secret); closed it"
        );
        return Ok(());
    };
    let _client = Client::arrive(shared);
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = BufWriter::new(stream);
    let mut buf = Vec::new();
    loop {
        let request: Request = match sealed.receive(&mut reader, &mut buf) {
            Ok(r) => r,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        };
        let reply = shared.apply(request);
        sealed.send(&mut writer, &reply, &mut buf)?;
        writer.flush()?;
    }
}

impl Shared {
    fn apply(&self, request: Request) -> Reply {
        let mut map = lock(&self.map);
        match request {
            Request::Set { key, value } => {
                map.insert(key, value);
                self.changed.notify_all();
                Reply::Ok
            }
            Request::Get { keys, wait_ms } => {
                let deadline = deadline_after(Duration::from_millis(wait_ms));
                loop {
                    if let Some((index, value)) = keys.iter().enumerate().find_map(|(i, k)| map.get(k).map(|v| (i, v)))
                    {
                        return Reply::Found {
                            index: index as u32,
                            value: value.clone(),
                        };
                    }
                    let now = Instant::now();
                    if now >= deadline || self.stopping.load(Ordering::SeqCst) {
                        return Reply::Missing;
                    }
                    map = self
                        .changed
                        .wait_timeout(map, deadline - now)
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .0;
                }
            }
            Request::Add { key, delta } => {
                let old = map.get(&key).map_or(0, |v| decode_count(v));
                let new = old.wrapping_add(delta);
                map.insert(key, new.to_le_bytes().to_vec());
                self.changed.notify_all();
                Reply::Count(new)
            }
            Request::CompareSet { key, expected, desired } => {
                let current = map.get(&key);
                if current.map(Vec::as_slice) == expected.as_deref() {
                    map.insert(key, desired);
                    self.changed.notify_all();
                    Reply::Swapped(true, None)
                } else {
                    Reply::Swapped(false, current.cloned())
                }
            }
            Request::Delete { key } => Reply::Deleted(map.remove(&key).is_some()),
        }
    }
}

fn decode_count(v: &[u8]) -> i64 {
    <[u8; 8]>::try_from(v).map_or(0, i64::from_le_bytes)
}

fn os_error(what: &str, e: &io::Error) -> Error {
    Error::Backend {
        backend: "host",
        message: format!("{what}: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operation_and_a_barrier_across_clients() {
        let server = Store::serve("127.0.0.1:0").unwrap();
        let addr = format!("127.0.0.1:{}", server.serving_port().unwrap());
        let client = Store::connect(&addr, Duration::from_secs(5)).unwrap();
        server.set("a", b"1").unwrap();
        assert_eq!(client.get("a", Duration::ZERO).unwrap(), b"1");
        assert!(matches!(
            client.get("b", Duration::from_millis(10)),
            Err(Error::Timeout { .. })
        ));
        assert_eq!(client.add("n", 2).unwrap(), 2);
        assert_eq!(server.add("n", -5).unwrap(), -3);
        assert_eq!(client.compare_set("c", None, b"x").unwrap(), Ok(()));
        assert_eq!(server.compare_set("c", None, b"y").unwrap(), Err(Some(b"x".to_vec())));
        assert_eq!(server.compare_set("c", Some(b"x"), b"y").unwrap(), Ok(()));
        assert_eq!(client.get_any(&["z", "c"], Duration::ZERO).unwrap(), (1, b"y".to_vec()));
        assert!(client.delete("c").unwrap());
        assert!(!client.delete("c").unwrap());
        // a get that waits sees a later set; a barrier releases both sides
        std::thread::scope(|s| {
            let waiter = s.spawn(|| client.get("later", Duration::from_secs(5)).unwrap());
            std::thread::sleep(Duration::from_millis(20));
            server.set("later", b"v").unwrap();
            assert_eq!(waiter.join().unwrap(), b"v");
            let other = s.spawn(|| client.barrier("b", 2, Duration::from_secs(5)));
            server.barrier("b", 2, Duration::from_secs(5)).unwrap();
            other.join().unwrap().unwrap();
        });
        drop(client);
        assert!(server.wait_for_clients_to_leave(Duration::from_secs(5)));
    }

    #[test]
    fn a_relay_can_neither_alter_nor_replay_nor_reorder_frames() {
        let secret = JobSecret::new("0123456789abcdef-store").unwrap();
        let (sn, cn) = ([1u8; KEY_BYTES], [2u8; KEY_BYTES]);
        let mut client = Sealed::new(&secret, &sn, &cn, true);
        let mut server = Sealed::new(&secret, &sn, &cn, false);
        let mut buf = Vec::new();
        let mut wire = Vec::new();
        let first = Request::Delete { key: "a".into() };
        client.send(&mut wire, &first, &mut buf).unwrap();
        let one = wire.clone();
        client
            .send(&mut wire, &Request::Delete { key: "b".into() }, &mut buf)
            .unwrap();
        let two = wire[one.len()..].to_vec();
        // Reordered: the second frame first.
        let mut fresh = Sealed::new(&secret, &sn, &cn, false);
        let e = fresh.receive::<Request>(&mut &two[..], &mut buf).unwrap_err();
        assert!(e.to_string().contains("MAC"), "{e}");
        // In order: both.
        let mut r = &wire[..];
        assert!(matches!(server.receive(&mut r, &mut buf).unwrap(), Request::Delete { key } if key == "a"));
        assert!(matches!(server.receive(&mut r, &mut buf).unwrap(), Request::Delete { key } if key == "b"));
        // Replayed: the first frame again.
        assert!(server.receive::<Request>(&mut &one[..], &mut buf).is_err());
        // Altered: one bit of the key.
        let mut altered = one.clone();
        altered[6] ^= 1;
        let mut fresh = Sealed::new(&secret, &sn, &cn, false);
        assert!(fresh.receive::<Request>(&mut &altered[..], &mut buf).is_err());
        // A reply is not a request: the directions have their own labels.
        let mut back = Vec::new();
        let mut fresh = Sealed::new(&secret, &sn, &cn, true);
        fresh.send(&mut back, &first, &mut buf).unwrap();
        let mut as_reply = Sealed::new(&secret, &sn, &cn, true);
        assert!(as_reply.receive::<Request>(&mut &back[..], &mut buf).is_err());
    }

    #[test]
    fn an_absent_store_is_a_timeout_naming_its_address() {
        // A port nobody listens on: bind one, then drop the listener.
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let addr = format!("127.0.0.1:{port}");
        let e = Store::connect(&addr, Duration::from_millis(200)).unwrap_err();
        assert!(
            matches!(&e, Error::Timeout { operation, .. } if operation.contains(&addr)),
            "{e}"
        );
    }

    #[test]
    fn a_listener_that_sends_no_hello_is_tried_again_until_the_deadline() {
        // What a store at its connection limit does: accept, then close.
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        listener.set_nonblocking(true).unwrap();
        let stop = AtomicBool::new(false);
        let accepted = std::thread::scope(|s| {
            let closer = s.spawn(|| {
                let mut n = 0;
                while !stop.load(Ordering::SeqCst) {
                    if let Ok((c, _)) = listener.accept() {
                        drop(c);
                        n += 1;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                n
            });
            let e = Store::connect_with(&addr, Duration::from_millis(400), &JobSecret::unauthenticated()).unwrap_err();
            stop.store(true, Ordering::SeqCst);
            assert!(
                matches!(&e, Error::Timeout { operation, .. } if operation.contains(&addr) && operation.contains("no store hello")),
                "{e}"
            );
            closer.join().unwrap()
        });
        assert!(accepted >= 2, "tried {accepted} times");
    }

    #[test]
    fn a_late_server_is_found_within_the_deadline() {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let addr = format!("127.0.0.1:{port}");
        std::thread::scope(|s| {
            let client = s.spawn(|| Store::connect(&addr, Duration::from_secs(10)));
            std::thread::sleep(Duration::from_millis(300));
            let server = Store::serve(&addr).unwrap();
            let client = client.join().unwrap().unwrap();
            client.set("k", b"v").unwrap();
            assert_eq!(server.get("k", Duration::ZERO).unwrap(), b"v");
        });
    }
}
