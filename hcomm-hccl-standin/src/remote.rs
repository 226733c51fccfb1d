//! Worlds that span processes: the process that made a root info serves its
//! world (the hub, 127.0.0.1 only: this is a test library); ranks of other
//! processes join it over loopback TCP and run every operation there.
//!
//! A remote rank's operation ships the bytes of every device range it uses
//! to the hub, which copies them into allocations of its own (on the remote
//! rank's device), runs the very same code an in-process rank runs
//! ([`exec::collective`], [`exec::point_to_point`]) on a handle that stands
//! for the remote rank, and sends back what the operation wrote: the receive
//! range of a collective, the receive buffers of point-to-point. So matching,
//! agreement checks, reductions, timeouts and their messages are one
//! implementation for both layouts.
//!
//! Each request uses a connection of its own from the remote rank's pool
//! (operations of one rank on several streams progress independently); a
//! connection serves one request at a time. The hub's process, when it
//! exits, waits for its remote ranks to disconnect (at most the connect
//! timeout), so ranks that finish later still get their answers.

use std::collections::HashMap;
use std::io::{BufReader, Read, Write};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use hcomm_sys::{aclError, HcclDataType, HcclReduceOp};
use serde::{Deserialize, Serialize};

use crate::exec;
use crate::memory;
use crate::op::{Desc, Item, Kind};
use crate::runtime::{lock, wait_until};
use crate::stream::AsyncError;
use crate::world::{fresh_id, join_world, CommHandle, Group, JoinError, World};

/// The largest frame either side accepts (a test library: 1 GiB).
const MAX_FRAME: usize = 1 << 30;

#[derive(Serialize, Deserialize)]
#[serde(remote = "HcclDataType")]
struct DataTypeDef(i32);

#[derive(Serialize, Deserialize)]
#[serde(remote = "HcclReduceOp")]
struct ReduceOpDef(i32);

#[derive(Serialize, Deserialize)]
#[serde(remote = "Kind")]
enum KindDef {
    AllReduce,
    Broadcast,
    Reduce,
    ReduceScatter,
    AllGather,
    Scatter,
    AlltoAll,
    AlltoAllV,
    AllGatherV,
    ReduceScatterV,
    Barrier,
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "Desc")]
struct DescDef {
    #[serde(with = "KindDef")]
    kind: Kind,
    #[serde(with = "DataTypeDef")]
    dtype: HcclDataType,
    #[serde(with = "ReduceOpDef")]
    op: HcclReduceOp,
    root: u32,
    count: u64,
    send: usize,
    recv: usize,
    send_counts: Vec<u64>,
    send_displs: Vec<u64>,
    recv_counts: Vec<u64>,
    recv_displs: Vec<u64>,
}

#[derive(Serialize, Deserialize)]
#[serde(remote = "Item")]
struct ItemDef {
    send: bool,
    peer: usize,
    addr: usize,
    count: u64,
    #[serde(with = "DataTypeDef")]
    dtype: HcclDataType,
}

#[derive(Serialize, Deserialize)]
struct WireDesc(#[serde(with = "DescDef")] Desc);

#[derive(Serialize, Deserialize)]
struct WireItem(#[serde(with = "ItemDef")] Item);

/// Which rank of which hub group an operation is for.
#[derive(Serialize, Deserialize, Clone, Copy)]
struct Who {
    group: u64,
    rank: usize,
    device: i32,
    timeout_ms: Option<u64>,
}

/// What a remote rank asks the hub.
#[derive(Serialize, Deserialize)]
enum Request {
    /// Join world `world` as `rank` of `size`.
    Join {
        world: u64,
        size: u32,
        rank: u32,
        timeout_ms: u64,
    },
    /// The sub-communicator `id` of world ranks `ids`, made by `world_rank`.
    Sub {
        group: u64,
        world_rank: usize,
        id: u64,
        ids: Vec<u32>,
    },
    /// A collective over the ranges `(remote address, bytes)`.
    Collective {
        who: Who,
        desc: WireDesc,
        ranges: Vec<(usize, Vec<u8>)>,
    },
    /// Sends and receives that progress together; `ranges` as above.
    PointToPoint {
        who: Who,
        symbol: String,
        items: Vec<WireItem>,
        ranges: Vec<(usize, Vec<u8>)>,
    },
}

/// The hub's answer.
#[derive(Serialize, Deserialize)]
enum Response {
    /// The group handle on the hub.
    Group(u64),
    /// Join failed: parameter error (`false`) or timeout (`true`).
    JoinFailed { timeout: bool, message: String },
    /// The operation ran; what it wrote, by remote address.
    Done(Vec<(usize, Vec<u8>)>),
    /// The operation failed with this ACL code and message.
    Failed { code: i32, message: String },
}

fn send_frame<T: Serialize>(stream: &mut TcpStream, value: &T) -> Result<(), String> {
    let bytes = postcard::to_stdvec(value).map_err(|e| format!("encode: {e}"))?;
    let len = u32::try_from(bytes.len()).map_err(|_| "frame too large".to_owned())?;
    stream
        .write_all(&len.to_le_bytes())
        .and_then(|()| stream.write_all(&bytes))
        .map_err(|e| format!("send to the hub connection: {e}"))
}

fn read_frame<T: for<'de> Deserialize<'de>>(stream: &mut impl Read) -> Result<T, String> {
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).map_err(|e| format!("receive: {e}"))?;
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(format!("frame of {len} bytes is larger than {MAX_FRAME}"));
    }
    let mut bytes = vec![0u8; len];
    stream.read_exact(&mut bytes).map_err(|e| format!("receive: {e}"))?;
    postcard::from_bytes(&bytes).map_err(|e| format!("decode: {e}"))
}

// --- the hub ---------------------------------------------------------------

/// The groups the hub serves, by handle: their world and group.
static GROUPS: Mutex<Option<HashMap<u64, Served>>> = Mutex::new(None);

/// A group the hub serves and the world it belongs to.
type Served = (Arc<World>, Arc<Group>);

/// Open connections of remote ranks that joined a world (for the wait at exit).
static CONNECTED: Mutex<usize> = Mutex::new(0);
static CONNECTED_CV: Condvar = Condvar::new();

static HUB: OnceLock<Result<SocketAddrV4, String>> = OnceLock::new();

/// The address of this process's hub, started on first use.
pub(crate) fn hub() -> Result<SocketAddrV4, String> {
    HUB.get_or_init(|| {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(|e| format!("hub: bind: {e}"))?;
        let addr = match listener.local_addr() {
            Ok(std::net::SocketAddr::V4(a)) => a,
            Ok(other) => return Err(format!("hub: unexpected address {other}")),
            Err(e) => return Err(format!("hub: {e}")),
        };
        std::thread::Builder::new()
            .name("standin-hub".into())
            .spawn(move || {
                for conn in listener.incoming().flatten() {
                    let _ = std::thread::Builder::new()
                        .name("standin-hub-conn".into())
                        .spawn(move || serve(conn));
                }
            })
            .map_err(|e| format!("hub: spawn: {e}"))?;
        // SAFETY: registers a function without arguments that does not
        // unwind (its body runs inside catch_unwind).
        unsafe { libc::atexit(wait_at_exit) };
        Ok(addr)
    })
    .clone()
}

/// Serves one connection's requests until it closes.
fn serve(conn: TcpStream) {
    let _ = conn.set_nodelay(true);
    let Ok(mut writer) = conn.try_clone() else { return };
    let mut reader = BufReader::new(conn);
    let mut member = false;
    while let Ok(request) = read_frame::<Request>(&mut reader) {
        let (joined, response) = answer(request);
        if joined && !member {
            *lock(&CONNECTED) += 1;
            member = true;
        }
        if send_frame(&mut writer, &response).is_err() {
            break;
        }
    }
    if member {
        *lock(&CONNECTED) -= 1;
        CONNECTED_CV.notify_all();
    }
}

/// At exit of the hub's process: waits until every remote rank closed its
/// connections (its communicators are gone, or its process ended), at most
/// the connect timeout, so peers finishing later still get their answers.
extern "C" fn wait_at_exit() {
    let _ = std::panic::catch_unwind(|| {
        let deadline = Instant::now().checked_add(crate::runtime::connect_timeout());
        let mut open = lock(&CONNECTED);
        while *open > 0 && deadline.is_none_or(|d| Instant::now() < d) {
            open = wait_until(&CONNECTED_CV, open, deadline);
        }
    });
}

fn register(world: Arc<World>, group: Arc<Group>) -> u64 {
    let id = fresh_id();
    lock(&GROUPS)
        .get_or_insert_with(HashMap::new)
        .insert(id, (world, group));
    id
}

fn group(id: u64) -> Option<Served> {
    lock(&GROUPS).as_ref()?.get(&id).cloned()
}

/// Runs one request; whether the connection belongs to a joined rank, and
/// the answer.
fn answer(request: Request) -> (bool, Response) {
    match request {
        Request::Join {
            world,
            size,
            rank,
            timeout_ms,
        } => match join_world(world, size, rank, Duration::from_millis(timeout_ms)) {
            Ok(w) => {
                let g = Arc::clone(&w.group);
                (true, Response::Group(register(w, g)))
            }
            Err(JoinError::Para(message)) => (
                false,
                Response::JoinFailed {
                    timeout: false,
                    message,
                },
            ),
            Err(JoinError::Timeout(message)) => (false, Response::JoinFailed { timeout: true, message }),
        },
        Request::Sub {
            group: parent,
            world_rank,
            id,
            ids,
        } => match group(parent) {
            Some((world, _)) => {
                let g = world.sub(world_rank, id, &ids);
                (true, Response::Group(register(world, g)))
            }
            None => (false, unknown_group(parent)),
        },
        Request::Collective { who, desc, ranges } => run(who, &ranges, |h, map| {
            let d = translate(desc.0, map);
            exec::collective(h, &d, &[]).map(|()| vec![d.recv])
        }),
        Request::PointToPoint {
            who,
            symbol,
            items,
            ranges,
        } => run(who, &ranges, |h, map| {
            let items: Vec<Item> = items
                .into_iter()
                .map(|WireItem(mut it)| {
                    it.addr = map(it.addr);
                    it
                })
                .collect();
            exec::point_to_point(h, &symbol, &items, &[])
                .map(|()| items.iter().filter(|it| !it.send).map(|it| it.addr).collect())
        }),
    }
}

fn unknown_group(id: u64) -> Response {
    Response::Failed {
        code: aclError::ACL_ERROR_RT_FAILURE.0,
        message: format!("hub: no communicator {id}"),
    }
}

/// The desc with every address moved by `map`.
fn translate(mut d: Desc, map: &dyn Fn(usize) -> usize) -> Desc {
    d.send = map(d.send);
    d.recv = map(d.recv);
    d
}

/// Copies `ranges` into allocations of the hub on `who.device`, runs `op`
/// for the remote rank with addresses translated, and answers with the bytes
/// of the ranges holding the local addresses `op` says it wrote.
fn run(
    who: Who,
    ranges: &[(usize, Vec<u8>)],
    op: impl FnOnce(&CommHandle, &dyn Fn(usize) -> usize) -> Result<Vec<usize>, AsyncError>,
) -> (bool, Response) {
    let Some((world, group)) = group(who.group) else {
        return (false, unknown_group(who.group));
    };
    let local = Locals::copy_in(ranges, who.device);
    let response = match local {
        Err(message) => Response::Failed {
            code: aclError::ACL_ERROR_RT_FAILURE.0,
            message,
        },
        Ok(local) => {
            let h = CommHandle {
                world,
                group,
                rank: who.rank,
                world_rank: who.rank,
                device: who.device,
                exec_timeout: who.timeout_ms.map(Duration::from_millis),
                name: String::new(),
                in_flight: AtomicUsize::new(0),
                remote: None,
            };
            let map = |addr: usize| local.to_local(addr);
            match op(&h, &map) {
                Ok(written) => match local.copy_out(&written) {
                    Ok(out) => Response::Done(out),
                    Err(message) => Response::Failed {
                        code: aclError::ACL_ERROR_RT_FAILURE.0,
                        message,
                    },
                },
                Err(e) => Response::Failed {
                    code: e.code.0,
                    message: e.message,
                },
            }
        }
    };
    (true, response)
}

/// The hub's copies of a remote rank's ranges: (remote base, local base, bytes).
struct Locals(Vec<(usize, usize, usize)>);

impl Locals {
    fn copy_in(ranges: &[(usize, Vec<u8>)], device: i32) -> Result<Locals, String> {
        let mut locals = Locals(Vec::new());
        for (remote, bytes) in ranges {
            let Some(ptr) = memory::alloc(bytes.len().max(1), device) else {
                return Err(format!("hub: cannot allocate {} bytes", bytes.len()));
            };
            locals.0.push((*remote, ptr as usize, bytes.len()));
            memory::write_all(&[(ptr as usize, bytes.clone())])?;
        }
        Ok(locals)
    }

    /// The local address of remote address `addr` (0 where no range holds
    /// it: nothing is read there, and 0 is no live allocation).
    fn to_local(&self, addr: usize) -> usize {
        self.0
            .iter()
            .filter(|&&(r, _, n)| addr >= r && (addr - r < n || (n == 0 && addr == r)))
            // The largest range holding it: an in-place call's send block
            // lies in its receive range, and both must be one local buffer.
            .max_by_key(|&&(_, _, n)| n)
            .map_or(0, |&(r, l, _)| l + (addr - r))
    }

    /// The bytes of every range starting at one of the local addresses `written`, by remote address.
    fn copy_out(&self, written: &[usize]) -> Result<Vec<(usize, Vec<u8>)>, String> {
        let mut out = Vec::new();
        for &(r, l, n) in &self.0 {
            if written.contains(&l) && !out.iter().any(|(a, _): &(usize, Vec<u8>)| *a == r) {
                out.push((r, memory::read(l, n)?));
            }
        }
        Ok(out)
    }
}

impl Drop for Locals {
    fn drop(&mut self) {
        for &(_, l, _) in &self.0 {
            memory::free(l as *mut u8);
        }
    }
}

// --- a remote rank -----------------------------------------------------------

/// A remote rank's way to its world's hub: idle connections, reused.
pub(crate) struct Link {
    hub: SocketAddrV4,
    idle: Mutex<Vec<(TcpStream, BufReader<TcpStream>)>>,
}

/// What makes a handle remote: the link and its group on the hub.
pub(crate) struct Remote {
    pub(crate) link: Arc<Link>,
    pub(crate) group: u64,
}

impl Link {
    pub(crate) fn new(hub: SocketAddrV4) -> Arc<Link> {
        Arc::new(Link {
            hub,
            idle: Mutex::new(Vec::new()),
        })
    }

    /// Sends `request` and waits for the answer (at most `wait`, `None`: no limit).
    fn call(&self, request: &Request, wait: Option<Duration>) -> Result<Response, String> {
        let taken = lock(&self.idle).pop();
        let (mut writer, mut reader) = if let Some(c) = taken {
            c
        } else {
            let s = TcpStream::connect(self.hub).map_err(|e| format!("connect to the hub at {}: {e}", self.hub))?;
            let _ = s.set_nodelay(true);
            let r = s.try_clone().map_err(|e| e.to_string())?;
            (s, BufReader::new(r))
        };
        reader.get_ref().set_read_timeout(wait).map_err(|e| e.to_string())?;
        send_frame(&mut writer, request)?;
        let response = read_frame(&mut reader).map_err(|e| format!("the hub at {}: {e}", self.hub))?;
        lock(&self.idle).push((writer, reader));
        Ok(response)
    }

    /// Joins world `world` as `rank` of `size` through the hub: the group handle.
    pub(crate) fn join(&self, world: u64, size: u32, rank: u32, timeout: Duration) -> Result<u64, JoinError> {
        let request = Request::Join {
            world,
            size,
            rank,
            timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
        };
        match self.call(&request, timeout.checked_add(Duration::from_secs(10))) {
            Ok(Response::Group(g)) => Ok(g),
            Ok(Response::JoinFailed { timeout: true, message }) => Err(JoinError::Timeout(message)),
            Ok(Response::JoinFailed { message, .. } | Response::Failed { message, .. }) => {
                Err(JoinError::Para(message))
            }
            Ok(Response::Done(_)) => Err(JoinError::Para("hub: unexpected answer to a join".into())),
            Err(message) => Err(JoinError::Timeout(format!("HcclCommInitRootInfo: {message}"))),
        }
    }

    /// The hub group of sub-communicator `id` over `ids`, made by `world_rank` of `group`.
    pub(crate) fn sub(&self, group: u64, world_rank: usize, id: u64, ids: &[u32]) -> Result<u64, String> {
        let request = Request::Sub {
            group,
            world_rank,
            id,
            ids: ids.to_vec(),
        };
        match self.call(&request, Some(Duration::from_secs(60)))? {
            Response::Group(g) => Ok(g),
            Response::Failed { message, .. } | Response::JoinFailed { message, .. } => Err(message),
            Response::Done(_) => Err("hub: unexpected answer to a sub-communicator".into()),
        }
    }
}

impl Remote {
    fn who(&self, h: &CommHandle) -> Who {
        Who {
            group: self.group,
            rank: h.rank,
            device: h.device,
            timeout_ms: h.exec_timeout.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
        }
    }

    /// Runs `request` on the hub and writes back what it wrote.
    fn run(&self, h: &CommHandle, symbol: &str, request: &Request) -> Result<(), AsyncError> {
        let wait = h.exec_timeout.and_then(|t| t.checked_add(Duration::from_secs(10)));
        match self.link.call(request, wait) {
            Ok(Response::Done(written)) => memory::write_all(&written).map_err(|m| crate::codes::failed(symbol, &m)),
            Ok(Response::Failed { code, message }) => Err(AsyncError {
                code: aclError(code),
                message,
            }),
            Ok(_) => Err(crate::codes::failed(symbol, "hub: unexpected answer")),
            Err(message) => Err(crate::codes::failed(symbol, &message)),
        }
    }

    /// Runs collective `d` of `h`, whose device ranges are `used`, on the hub.
    pub(crate) fn collective(&self, h: &CommHandle, d: &Desc, used: &[(usize, usize)]) -> Result<(), AsyncError> {
        let symbol = d.kind.symbol();
        let ranges = read_ranges(used).map_err(|m| crate::codes::failed(symbol, &m))?;
        let request = Request::Collective {
            who: self.who(h),
            desc: WireDesc(d.clone()),
            ranges,
        };
        self.run(h, symbol, &request)
    }

    /// Runs the sends and receives `items` of `h` on the hub.
    pub(crate) fn point_to_point(
        &self,
        h: &CommHandle,
        symbol: &str,
        items: &[Item],
        used: &[(usize, usize)],
    ) -> Result<(), AsyncError> {
        let ranges = read_ranges(used).map_err(|m| crate::codes::failed(symbol, &m))?;
        let request = Request::PointToPoint {
            who: self.who(h),
            symbol: symbol.to_owned(),
            items: items.iter().copied().map(WireItem).collect(),
            ranges,
        };
        self.run(h, symbol, &request)
    }
}

fn read_ranges(used: &[(usize, usize)]) -> Result<Vec<(usize, Vec<u8>)>, String> {
    used.iter().map(|&(a, n)| memory::read(a, n).map(|b| (a, b))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_in_place_send_block_maps_into_its_receive_buffer() {
        // send: 8 bytes at 0x1010, inside the receive range of 32 bytes at 0x1000
        let locals = Locals(vec![(0x1010, 0x9000, 8), (0x1000, 0x5000, 32), (0x2000, 0x7000, 0)]);
        assert_eq!(locals.to_local(0x1010), 0x5010);
        assert_eq!(locals.to_local(0x1000), 0x5000);
        assert_eq!(locals.to_local(0x2000), 0x7000);
        assert_eq!(locals.to_local(0x1020), 0);
        assert_eq!(locals.to_local(0), 0);
        std::mem::forget(locals);
    }
}
