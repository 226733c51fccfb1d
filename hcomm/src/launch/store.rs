//! The rendezvous store: a small key-value store over TCP that the processes
//! of one job use to find each other. Rank 0 serves it
//! ([`Store::serve`]); every process, rank 0 included, is a client
//! ([`Store::connect`] retries until its deadline, so ranks may start in any
//! order).
//!
//! # Protocol
//!
//! One TCP connection per client. Each message is a frame: a 4-byte
//! little-endian length, then a [`postcard`]-encoded `Request` (client to
//! server) or `Reply` (server to client). The client sends one request and
//! reads its reply before the next; the server answers requests in order.
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
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::backend::liveness::lock;
use crate::error::{Error, Result};
use crate::wire::{read_frame, write_frame};

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
/// How much longer than a server-side wait a client waits for the reply.
const REPLY_SLACK: Duration = Duration::from_secs(10);

/// A client of the rendezvous store (and, on the process that serves it,
/// the server, which stops when this handle is dropped).
pub struct Store {
    addr: String,
    conn: Mutex<Conn>,
    server: Option<Server>,
}

struct Conn {
    reader: BufReader<TcpStream>,
    writer: BufWriter<TcpStream>,
    buf: Vec<u8>,
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
    /// one) and connects to it.
    pub fn serve(addr: &str) -> Result<Store> {
        let listener = TcpListener::bind(addr).map_err(|e| os_error(&format!("cannot listen on {addr}"), &e))?;
        let local = listener
            .local_addr()
            .map_err(|e| os_error(&format!("cannot listen on {addr}"), &e))?;
        let server = Server::start(listener)?;
        let target = if local.ip().is_unspecified() {
            SocketAddr::from(([127, 0, 0, 1], local.port()))
        } else {
            local
        };
        let mut store = Store::connect(&target.to_string(), Duration::from_secs(10))?;
        store.server = Some(server);
        Ok(store)
    }

    /// Connects to the store at `addr` (`host:port`), retrying until
    /// `deadline` has passed; an unreachable store is a timeout naming it.
    pub fn connect(addr: &str, deadline: Duration) -> Result<Store> {
        let start = Instant::now();
        let mut last = String::from("no address");
        loop {
            match addr.to_socket_addrs() {
                Ok(addrs) => {
                    for a in addrs {
                        match TcpStream::connect_timeout(&a, RETRY.max(Duration::from_millis(200))) {
                            Ok(stream) => return Store::over(addr, stream),
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

    fn over(addr: &str, stream: TcpStream) -> Result<Store> {
        let io_err = |e: &io::Error| os_error(&format!("rendezvous store at {addr}"), e);
        stream.set_nodelay(true).map_err(|e| io_err(&e))?;
        let reader = BufReader::new(stream.try_clone().map_err(|e| io_err(&e))?);
        Ok(Store {
            addr: addr.to_owned(),
            conn: Mutex::new(Conn {
                reader,
                writer: BufWriter::new(stream),
                buf: Vec::new(),
            }),
            server: None,
        })
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

    fn call(&self, request: &Request, wait: Duration) -> Result<Reply> {
        let mut conn = lock(&self.conn);
        let conn = &mut *conn;
        let result = (|| {
            conn.reader.get_ref().set_read_timeout(Some(wait + REPLY_SLACK))?;
            write_frame(&mut conn.writer, request, &mut conn.buf)?;
            conn.writer.flush()?;
            read_frame::<Reply>(&mut conn.reader, &mut conn.buf)
        })();
        result.map_err(|e| os_error(&format!("rendezvous store at {}", self.addr), &e))
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

    /// On the serving process: waits until every other client has
    /// disconnected (at most `wait`), so that stopping the server cuts off
    /// no reply. Returns whether they all did.
    pub fn wait_for_clients_to_leave(&self, wait: Duration) -> bool {
        let Some(server) = &self.server else {
            return true;
        };
        let deadline = Instant::now() + wait;
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

/// The serving side: an accept thread and a thread per connection over one
/// shared map.
struct Server {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<std::thread::JoinHandle<()>>,
}

#[derive(Default)]
struct Shared {
    map: Mutex<HashMap<String, Vec<u8>>>,
    changed: Condvar,
    stopping: AtomicBool,
    conns: Mutex<Vec<TcpStream>>,
    /// Clients connected now.
    clients: Mutex<usize>,
    left: Condvar,
}

impl Server {
    fn start(listener: TcpListener) -> Result<Server> {
        let addr = listener.local_addr().map_err(|e| os_error("rendezvous store", &e))?;
        let shared = Arc::new(Shared::default());
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
        for c in lock(&self.shared.conns).drain(..) {
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
        let Ok(clone) = stream.try_clone() else { continue };
        lock(&shared.conns).push(clone);
        let s = Arc::clone(shared);
        *lock(&shared.clients) += 1;
        let spawned = std::thread::Builder::new()
            .name("hcomm-store-conn".into())
            .spawn(move || {
                if let Err(e) = serve_conn(stream, &s) {
                    tracing::debug!(error = %e, "rendezvous store connection closed");
                }
                *lock(&s.clients) -= 1;
                s.left.notify_all();
            });
        if let Err(e) = spawned {
            *lock(&shared.clients) -= 1;
            tracing::warn!(error = %e, "rendezvous store: cannot serve a connection");
        }
    }
}

fn serve_conn(stream: TcpStream, shared: &Shared) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = BufWriter::new(stream);
    let mut buf = Vec::new();
    loop {
        let request: Request = match read_frame(&mut reader, &mut buf) {
            Ok(r) => r,
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(()),
            Err(e) => return Err(e),
        };
        let reply = shared.apply(request);
        write_frame(&mut writer, &reply, &mut buf)?;
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
                let deadline = Instant::now() + Duration::from_millis(wait_ms.min(86_400_000));
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
