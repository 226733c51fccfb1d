//! The NCCL function table (`libnccl.so.2`, then `libnccl.so`).
//!
//! Signatures: NCCL's `nccl.h`. Note the differences to HCCL: the
//! communicator out-parameter comes first, the unique id is passed by value,
//! ranks are `int` and counts `size_t`.

use std::ffi::{c_char, c_int, c_void};

use crate::codes::{ncclDataType_t, ncclRedOp_t, ncclResult_t, Lib};
use crate::load::api_table;
use crate::types::{cudaStream_t, ncclComm_t, ncclConfig_t, ncclUniqueId};

api_table! {
    /// Function table of NCCL. Calling an entry is `unsafe`: the caller upholds
    /// the C contract and keeps the table alive during the call.
    pub struct NcclApi: crate::load::NCCL, NCCL_API;
    required {
        /// `major*10000 + minor*100 + patch` (after 2.8).
        fn ncclGetVersion(version: *mut c_int) -> ncclResult_t;
        /// Creates a unique id on the root rank.
        fn ncclGetUniqueId(uniqueId: *mut ncclUniqueId) -> ncclResult_t;
        /// Joins a communicator (id **by value**).
        fn ncclCommInitRank(comm: *mut ncclComm_t, nranks: c_int, commId: ncclUniqueId, rank: c_int) -> ncclResult_t;
        /// Creates `ndev` communicators of one process (`devlist` null: first `ndev` devices).
        fn ncclCommInitAll(comm: *mut ncclComm_t, ndev: c_int, devlist: *const c_int) -> ncclResult_t;
        /// Destroys a communicator.
        fn ncclCommDestroy(comm: ncclComm_t) -> ncclResult_t;
        /// Aborts a communicator and its running device work.
        fn ncclCommAbort(comm: ncclComm_t) -> ncclResult_t;
        /// Number of ranks.
        fn ncclCommCount(comm: ncclComm_t, count: *mut c_int) -> ncclResult_t;
        /// Own rank.
        fn ncclCommUserRank(comm: ncclComm_t, rank: *mut c_int) -> ncclResult_t;
        /// CUDA device of the communicator.
        fn ncclCommCuDevice(comm: ncclComm_t, device: *mut c_int) -> ncclResult_t;
        /// Asynchronous error of the communicator.
        fn ncclCommGetAsyncError(comm: ncclComm_t, asyncError: *mut ncclResult_t) -> ncclResult_t;
        /// Static message of a code.
        fn ncclGetErrorString(result: ncclResult_t) -> *const c_char;
        /// All-reduce.
        fn ncclAllReduce(sendbuff: *const c_void, recvbuff: *mut c_void, count: usize, datatype: ncclDataType_t, op: ncclRedOp_t, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
        /// Broadcast from `root` (separate buffers; in place when equal).
        fn ncclBroadcast(sendbuff: *const c_void, recvbuff: *mut c_void, count: usize, datatype: ncclDataType_t, root: c_int, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
        /// Reduce to `root`.
        fn ncclReduce(sendbuff: *const c_void, recvbuff: *mut c_void, count: usize, datatype: ncclDataType_t, op: ncclRedOp_t, root: c_int, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
        /// All-gather; recv holds `sendcount * nranks` elements.
        fn ncclAllGather(sendbuff: *const c_void, recvbuff: *mut c_void, sendcount: usize, datatype: ncclDataType_t, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
        /// Reduce-scatter; send holds `recvcount * nranks` elements.
        fn ncclReduceScatter(sendbuff: *const c_void, recvbuff: *mut c_void, recvcount: usize, datatype: ncclDataType_t, op: ncclRedOp_t, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
        /// Send (must be grouped with the matching receives to avoid deadlock).
        fn ncclSend(sendbuff: *const c_void, count: usize, datatype: ncclDataType_t, peer: c_int, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
        /// Receive.
        fn ncclRecv(recvbuff: *mut c_void, count: usize, datatype: ncclDataType_t, peer: c_int, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
        /// Starts a group.
        fn ncclGroupStart() -> ncclResult_t;
        /// Ends a group (guarantees enqueueing, not completion).
        fn ncclGroupEnd() -> ncclResult_t;
    }
    optional {
        /// Joins a communicator with a config (2.14+).
        fn ncclCommInitRankConfig(comm: *mut ncclComm_t, nranks: c_int, commId: ncclUniqueId, rank: c_int, config: *mut ncclConfig_t) -> ncclResult_t;
        /// Flushes outstanding work before destroy (2.14+).
        fn ncclCommFinalize(comm: ncclComm_t) -> ncclResult_t;
        /// Splits by color/key (2.18+); `config` null inherits.
        fn ncclCommSplit(comm: ncclComm_t, color: c_int, key: c_int, newcomm: *mut ncclComm_t, config: *mut ncclConfig_t) -> ncclResult_t;
        /// Last error message of a communicator (2.13+).
        fn ncclGetLastError(comm: ncclComm_t) -> *const c_char;
        /// All-to-all, `count` per peer (2.28+).
        fn ncclAlltoAll(sendbuff: *const c_void, recvbuff: *mut c_void, count: usize, datatype: ncclDataType_t, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
        /// Gather to `root` (2.28+).
        fn ncclGather(sendbuff: *const c_void, recvbuff: *mut c_void, count: usize, datatype: ncclDataType_t, root: c_int, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
        /// Scatter from `root` (2.28+).
        fn ncclScatter(sendbuff: *const c_void, recvbuff: *mut c_void, count: usize, datatype: ncclDataType_t, root: c_int, comm: ncclComm_t, stream: cudaStream_t) -> ncclResult_t;
    }
}

impl NcclApi {
    fn on_load(&self) {
        crate::codes::record_messages(Lib::Nccl, &ncclResult_t::ALL, |code| self.error_string(code));
    }

    /// `ncclGetErrorString(code)` copied into a `String`.
    #[doc(alias = "ncclGetErrorString")]
    pub fn error_string(&self, code: ncclResult_t) -> Option<String> {
        // SAFETY: ncclGetErrorString takes any code and returns null or a static
        // NUL-terminated string; the table is alive.
        unsafe { crate::codes::c_string((self.ncclGetErrorString)(code)) }
    }

    /// `ncclGetLastError(NULL)`: NCCL's last message (it names causes a
    /// result code does not), `None` where the library lacks the symbol or
    /// has nothing to say.
    #[doc(alias = "ncclGetLastError")]
    pub fn last_error(&self) -> Option<String> {
        let f = self.ncclGetLastError?;
        // SAFETY: a null communicator asks for the last global error; NCCL
        // returns null or a NUL-terminated string it owns; the table is alive.
        let text = unsafe { crate::codes::c_string(f(std::ptr::null_mut())) }?;
        let text = text.trim();
        (!text.is_empty()).then(|| text.to_owned())
    }

    /// `ncclGetVersion`: `major * 10000 + minor * 100 + patch` (2.32.3 is 23203).
    #[doc(alias = "ncclGetVersion")]
    pub fn version(&self) -> Option<i32> {
        let mut v: c_int = 0;
        // SAFETY: a valid out pointer; the table is alive.
        let code = unsafe { (self.ncclGetVersion)(&raw mut v) };
        (code == ncclResult_t::ncclSuccess).then_some(v)
    }
}
