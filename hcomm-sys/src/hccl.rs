//! The HCCL function table (`libhccl.so`, falling back to `libhcomm.so`).
//!
//! Signatures: HCCL's `hccl.h` (communicator management and operators).
//! Every operator is stream-ordered: it is enqueued on `stream` and complete
//! after `aclrtSynchronizeStream`.

use std::ffi::{c_char, c_void};

use crate::codes::{HcclDataType, HcclReduceOp, HcclResult, Lib};
use crate::load::api_table;
use crate::types::{aclrtStream, HcclComm, HcclCommConfig, HcclRootInfo, HcclSendRecvItem};

api_table! {
    /// Function table of HCCL. Fields carry the C names; calling any of them is
    /// `unsafe`: the caller upholds the C contract (valid pointers of the stated
    /// sizes, live handles, HCCL's calling rules) and keeps the table
    /// alive for the duration of the call.
    pub struct HcclApi: crate::load::HCCL, HCCL_API;
    required {
        /// Writes the root info on the root rank.
        fn HcclGetRootInfo(rootInfo: *mut HcclRootInfo) -> HcclResult;
        /// Joins a communicator (collective, blocking).
        fn HcclCommInitRootInfo(nRanks: u32, rootInfo: *const HcclRootInfo, rank: u32, comm: *mut HcclComm) -> HcclResult;
        /// Creates `ndev` communicators of one process, one per device.
        fn HcclCommInitAll(ndev: u32, devices: *mut i32, comms: *mut HcclComm) -> HcclResult;
        /// Destroys a communicator (`HCCL_E_AGAIN` while busy).
        fn HcclCommDestroy(comm: HcclComm) -> HcclResult;
        /// Number of ranks.
        fn HcclGetRankSize(comm: HcclComm, rankSize: *mut u32) -> HcclResult;
        /// Own rank.
        fn HcclGetRankId(comm: HcclComm, rank: *mut u32) -> HcclResult;
        /// All-reduce; `count` elements per rank.
        fn HcclAllReduce(sendBuf: *mut c_void, recvBuf: *mut c_void, count: u64, dataType: HcclDataType, op: HcclReduceOp, comm: HcclComm, stream: aclrtStream) -> HcclResult;
        /// In-place broadcast from `root`.
        fn HcclBroadcast(buf: *mut c_void, count: u64, dataType: HcclDataType, root: u32, comm: HcclComm, stream: aclrtStream) -> HcclResult;
        /// Reduce to `root`.
        fn HcclReduce(sendBuf: *mut c_void, recvBuf: *mut c_void, count: u64, dataType: HcclDataType, op: HcclReduceOp, root: u32, comm: HcclComm, stream: aclrtStream) -> HcclResult;
        /// Reduce-scatter; send holds `recvCount * nranks` elements.
        fn HcclReduceScatter(sendBuf: *mut c_void, recvBuf: *mut c_void, recvCount: u64, dataType: HcclDataType, op: HcclReduceOp, comm: HcclComm, stream: aclrtStream) -> HcclResult;
        /// All-gather; recv holds `sendCount * nranks` elements.
        fn HcclAllGather(sendBuf: *mut c_void, recvBuf: *mut c_void, sendCount: u64, dataType: HcclDataType, comm: HcclComm, stream: aclrtStream) -> HcclResult;
        /// Scatter from `root`; `recvCount` elements per rank.
        fn HcclScatter(sendBuf: *mut c_void, recvBuf: *mut c_void, recvCount: u64, dataType: HcclDataType, root: u32, comm: HcclComm, stream: aclrtStream) -> HcclResult;
        /// All-to-all with equal counts per peer; `recvBuf != sendBuf`.
        fn HcclAlltoAll(sendBuf: *const c_void, sendCount: u64, sendType: HcclDataType, recvBuf: *const c_void, recvCount: u64, recvType: HcclDataType, comm: HcclComm, stream: aclrtStream) -> HcclResult;
        /// All-to-all with per-peer counts and displacements (host `uint64_t[nranks]` arrays, in elements); `recvBuf != sendBuf`.
        fn HcclAlltoAllV(sendBuf: *const c_void, sendCounts: *const c_void, sdispls: *const c_void, sendType: HcclDataType, recvBuf: *const c_void, recvCounts: *const c_void, rdispls: *const c_void, recvType: HcclDataType, comm: HcclComm, stream: aclrtStream) -> HcclResult;
        /// Stream-ordered barrier.
        fn HcclBarrier(comm: HcclComm, stream: aclrtStream) -> HcclResult;
        /// Synchronous send; must be paired with the peer's `HcclRecv`.
        fn HcclSend(sendBuf: *mut c_void, count: u64, dataType: HcclDataType, destRank: u32, comm: HcclComm, stream: aclrtStream) -> HcclResult;
        /// Synchronous receive.
        fn HcclRecv(recvBuf: *mut c_void, count: u64, dataType: HcclDataType, srcRank: u32, comm: HcclComm, stream: aclrtStream) -> HcclResult;
        /// Mixed sends and receives that progress together (at most one per peer and direction).
        fn HcclBatchSendRecv(sendRecvInfo: *mut HcclSendRecvItem, itemNum: u32, comm: HcclComm, stream: aclrtStream) -> HcclResult;
    }
    optional {
        /// Joins a communicator with a config.
        fn HcclCommInitRootInfoConfig(nRanks: u32, rootInfo: *const HcclRootInfo, rank: u32, config: *const HcclCommConfig, comm: *mut HcclComm) -> HcclResult;
        /// Creates a sub-communicator of `*comm` (note: a **pointer to** the parent handle).
        /// Ranks not joining pass `rankIds = NULL` and `subCommId = 0xFFFFFFFF`.
        fn HcclCreateSubCommConfig(comm: *mut HcclComm, rankNum: u32, rankIds: *mut u32, subCommId: u64, subCommRankId: u32, config: *mut HcclCommConfig, subComm: *mut HcclComm) -> HcclResult;
        /// Asynchronous (RDMA completion) error of a communicator.
        fn HcclGetCommAsyncError(comm: HcclComm, asyncError: *mut HcclResult) -> HcclResult;
        /// Static message of a code.
        fn HcclGetErrorString(code: HcclResult) -> *const c_char;
        /// A capability `v` is supported iff the result `> v`.
        fn HcclGetCommConfigCapability() -> u32;
        /// Name of a communicator (buffer of at least 128 bytes).
        fn HcclGetCommName(comm: HcclComm, commName: *mut c_char) -> HcclResult;
        /// All-gather with per-rank counts (host `uint64_t` arrays).
        fn HcclAllGatherV(sendBuf: *mut c_void, sendCount: u64, recvBuf: *mut c_void, recvCounts: *const c_void, recvDispls: *const c_void, dataType: HcclDataType, comm: HcclComm, stream: aclrtStream) -> HcclResult;
        /// Reduce-scatter with per-rank counts (host `uint64_t` arrays).
        fn HcclReduceScatterV(sendBuf: *mut c_void, sendCounts: *const c_void, sendDispls: *const c_void, recvBuf: *mut c_void, recvCount: u64, dataType: HcclDataType, op: HcclReduceOp, comm: HcclComm, stream: aclrtStream) -> HcclResult;
        /// Starts a group (experimental, CANN >= 9.0).
        fn HcclGroupStart() -> HcclResult;
        /// Ends a group (experimental, CANN >= 9.0).
        fn HcclGroupEnd() -> HcclResult;
    }
}

impl HcclApi {
    fn on_load(&self) {
        crate::codes::record_messages(Lib::Hccl, &HcclResult::KNOWN, |code| self.error_string(code));
    }

    /// `HcclGetErrorString(code)` copied into a `String`; `None` if the library lacks
    /// the function or returns null.
    #[doc(alias = "HcclGetErrorString")]
    pub fn error_string(&self, code: HcclResult) -> Option<String> {
        let f = self.HcclGetErrorString?;
        // SAFETY: HcclGetErrorString takes any code and returns null or a static
        // NUL-terminated string; the table (and so the library) is alive.
        unsafe { crate::codes::c_string(f(code)) }
    }
}
