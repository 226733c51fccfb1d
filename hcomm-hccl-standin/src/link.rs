//! A rank of another process than its world's hub (see `hub`): the wire
//! format of its requests and its connections to the hub, over loopback TCP.
//! Each request uses a connection of its own from the rank's pool
//! (operations of one rank on several streams progress independently).

use std::io::{BufReader, Read, Write};
use std::net::{SocketAddrV4, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hcomm_sys::{aclError, HcclDataType, HcclReduceOp};
use serde::{Deserialize, Serialize};

use crate::memory;
use crate::op::{Desc, Item, Kind};
use crate::runtime::lock;
use crate::stream::AsyncError;

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
pub(crate) struct WireDesc(#[serde(with = "DescDef")] pub(crate) Desc);

#[derive(Serialize, Deserialize)]
pub(crate) struct WireItem(#[serde(with = "ItemDef")] pub(crate) Item);

/// Which rank of which hub group an operation is for.
#[derive(Serialize, Deserialize, Clone, Copy)]
pub(crate) struct Who {
    pub(crate) group: u64,
    pub(crate) rank: usize,
    pub(crate) device: i32,
    pub(crate) timeout_ms: Option<u64>,
}

impl Who {
    /// Rank `rank` of hub group `group` on `device`, whose operations wait
    /// for their peers at most `timeout` (`None`: no limit).
    pub(crate) fn new(group: u64, rank: usize, device: i32, timeout: Option<Duration>) -> Who {
        Who {
            group,
            rank,
            device,
            timeout_ms: timeout.map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
        }
    }
}

/// What a remote rank asks the hub.
#[derive(Serialize, Deserialize)]
pub(crate) enum Request {
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
pub(crate) enum Response {
    /// The group handle on the hub.
    Group(u64),
    /// Join failed: parameter error (`false`) or timeout (`true`).
    JoinFailed { timeout: bool, message: String },
    /// The operation ran; what it wrote, by remote address.
    Done(Vec<(usize, Vec<u8>)>),
    /// The operation failed with this ACL code and message.
    Failed { code: i32, message: String },
}

pub(crate) fn send_frame<T: Serialize>(stream: &mut TcpStream, value: &T) -> Result<(), String> {
    let bytes = postcard::to_stdvec(value).map_err(|e| format!("encode: {e}"))?;
    let len = u32::try_from(bytes.len()).map_err(|_| "frame too large".to_owned())?;
    stream
        .write_all(&len.to_le_bytes())
        .and_then(|()| stream.write_all(&bytes))
        .map_err(|e| format!("send to the hub connection: {e}"))
}

pub(crate) fn read_frame<T: for<'de> Deserialize<'de>>(stream: &mut impl Read) -> Result<T, String> {
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

/// A remote rank's way to its world's hub: idle connections, reused.
pub(crate) struct Link {
    hub: SocketAddrV4,
    idle: Mutex<Vec<(TcpStream, BufReader<TcpStream>)>>,
}

/// What makes a handle remote: the link, and who the handle is on the hub.
pub(crate) struct Remote {
    pub(crate) link: Arc<Link>,
    pub(crate) who: Who,
}

/// Why joining a world failed.
pub(crate) enum JoinError {
    /// Disagreeing `nRanks` or a rank joining twice.
    Para(String),
    /// Not every rank joined in time.
    Timeout(String),
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
    /// Runs `request` on the hub and writes back what it wrote.
    fn run(&self, symbol: &str, request: &Request) -> Result<(), AsyncError> {
        let wait = self
            .who
            .timeout_ms
            .and_then(|t| Duration::from_millis(t).checked_add(Duration::from_secs(10)));
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

    /// Runs collective `d`, whose device ranges are `used`, on the hub.
    pub(crate) fn collective(&self, d: &Desc, used: &[(usize, usize)]) -> Result<(), AsyncError> {
        let symbol = d.kind.symbol();
        let ranges = read_ranges(used).map_err(|m| crate::codes::failed(symbol, &m))?;
        let request = Request::Collective {
            who: self.who,
            desc: WireDesc(d.clone()),
            ranges,
        };
        self.run(symbol, &request)
    }

    /// Runs the sends and receives `items` on the hub.
    pub(crate) fn point_to_point(
        &self,
        symbol: &str,
        items: &[Item],
        used: &[(usize, usize)],
    ) -> Result<(), AsyncError> {
        let ranges = read_ranges(used).map_err(|m| crate::codes::failed(symbol, &m))?;
        let request = Request::PointToPoint {
            who: self.who,
            symbol: symbol.to_owned(),
            items: items.iter().copied().map(WireItem).collect(),
            ranges,
        };
        self.run(symbol, &request)
    }
}

fn read_ranges(used: &[(usize, usize)]) -> Result<Vec<(usize, Vec<u8>)>, String> {
    used.iter().map(|&(a, n)| memory::read(a, n).map(|b| (a, b))).collect()
}
