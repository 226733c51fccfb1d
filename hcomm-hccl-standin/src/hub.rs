//! The hub: the process that made a root info serves its world to the
//! ranks of other processes (127.0.0.1 only: this is a test library).
//!
//! A remote rank's operation ships the bytes of every device range it uses
//! (see `link`); the hub copies them into allocations of its own (on the
//! remote rank's device), runs the very same code an in-process rank runs
//! ([`exec::collective`], [`exec::point_to_point`]) on a handle that stands
//! for the remote rank, and sends back what the operation wrote: the receive
//! range of a collective, the receive buffers of point-to-point. So matching,
//! agreement checks, reductions, timeouts and their messages are one
//! implementation for both layouts.
//!
//! Each connection serves one request at a time. The hub's process, when it
//! exits, waits for its remote ranks to disconnect (at most the connect
//! timeout), so ranks that finish later still get their answers.

use std::collections::HashMap;
use std::io::BufReader;
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener, TcpStream};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use hcomm_sys::aclError;

use crate::exec;
use crate::link::{read_frame, send_frame, JoinError, Request, Response, Who, WireItem};
use crate::memory;
use crate::op::{Desc, Item};
use crate::runtime::{lock, wait_until};
use crate::stream::AsyncError;
use crate::world::{fresh_id, join_world, CommHandle, Group, World};

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
