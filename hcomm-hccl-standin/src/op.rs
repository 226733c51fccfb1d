//! Descriptions of enqueued HCCL operations, as validated when they were
//! called: which collective with which buffers, or which sends and receives.

use hcomm_sys::{HcclDataType, HcclReduceOp};

/// Which collective.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
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

impl Kind {
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            Kind::AllReduce => "HcclAllReduce",
            Kind::Broadcast => "HcclBroadcast",
            Kind::Reduce => "HcclReduce",
            Kind::ReduceScatter => "HcclReduceScatter",
            Kind::AllGather => "HcclAllGather",
            Kind::Scatter => "HcclScatter",
            Kind::AlltoAll => "HcclAlltoAll",
            Kind::AlltoAllV => "HcclAlltoAllV",
            Kind::AllGatherV => "HcclAllGatherV",
            Kind::ReduceScatterV => "HcclReduceScatterV",
            Kind::Barrier => "HcclBarrier",
        }
    }

    pub(crate) fn is_v(self) -> bool {
        matches!(self, Kind::AlltoAllV | Kind::AllGatherV | Kind::ReduceScatterV)
    }
}

/// One rank's collective call. Addresses are of registered buffers, validated
/// when the call was made; counts are in elements.
#[derive(Clone, Debug)]
pub(crate) struct Desc {
    pub(crate) kind: Kind,
    pub(crate) dtype: HcclDataType,
    pub(crate) op: HcclReduceOp,
    pub(crate) root: u32,
    /// The count that must agree across ranks (per-rank / per-peer count).
    pub(crate) count: u64,
    pub(crate) send: usize,
    pub(crate) recv: usize,
    /// V-ops: per-peer send counts and displacements.
    pub(crate) send_counts: Vec<u64>,
    pub(crate) send_displs: Vec<u64>,
    /// V-ops: per-peer receive counts and displacements.
    pub(crate) recv_counts: Vec<u64>,
    pub(crate) recv_displs: Vec<u64>,
}

impl Desc {
    pub(crate) fn new(kind: Kind, dtype: HcclDataType) -> Self {
        Desc {
            kind,
            dtype,
            op: HcclReduceOp::HCCL_REDUCE_RESERVED,
            root: 0,
            count: 0,
            send: 0,
            recv: 0,
            send_counts: Vec::new(),
            send_displs: Vec::new(),
            recv_counts: Vec::new(),
            recv_displs: Vec::new(),
        }
    }
}

/// One send or receive of `HcclSend`, `HcclRecv` or `HcclBatchSendRecv`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Item {
    pub(crate) send: bool,
    pub(crate) peer: usize,
    pub(crate) addr: usize,
    pub(crate) count: u64,
    pub(crate) dtype: HcclDataType,
}

/// Extent in elements of per-peer blocks `counts[j]` at `displs[j]`.
pub(crate) fn extent(counts: &[u64], displs: &[u64]) -> u64 {
    counts
        .iter()
        .zip(displs)
        .map(|(c, d)| c.saturating_add(*d))
        .max()
        .unwrap_or(0)
}
