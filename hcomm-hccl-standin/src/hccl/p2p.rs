//! Sends and receives: each is checked when called, then enqueued on its
//! stream.

use std::ffi::c_void;

use hcomm_sys::{aclrtStream, HcclComm, HcclDataType, HcclResult, HcclSendRecvItem, HcclSendRecvType};

use super::{call, check_buf, check_rank, comm_of, elem_size, enqueue, err};
use crate::exec;
use crate::op::Item;

/// The skeleton `HcclSend` and `HcclRecv` share: unless injected, checks the
/// peer rank and the buffer, then enqueues the send (`send`) or receive.
fn point_to_point(
    symbol: &'static str,
    send: bool,
    (buf_name, buf): (&str, *mut c_void),
    count: u64,
    dtype: HcclDataType,
    (rank_name, rank): (&str, u32),
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    call(symbol, || {
        let h = comm_of(comm)?;
        let es = elem_size(dtype)?;
        let peer = check_rank(rank_name, rank, &h)?;
        let addr = check_buf(buf_name, buf, count, es, &h)?;
        let item = Item {
            send,
            peer,
            addr,
            count,
            dtype,
        };
        let used = [(addr, count as usize * es)];
        enqueue(&h, stream, &used, move |c, used| {
            exec::point_to_point(c, symbol, &[item], used)
        })
    })
}

/// `HcclSend`: synchronous; completes when `destRank`'s matching `HcclRecv` copied it.
///
/// # Safety
///
/// `sendBuf` is device memory.
#[no_mangle]
pub unsafe extern "C" fn HcclSend(
    sendBuf: *mut c_void,
    count: u64,
    dataType: HcclDataType,
    destRank: u32,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    point_to_point(
        "HcclSend",
        true,
        ("sendBuf", sendBuf),
        count,
        dataType,
        ("destRank", destRank),
        comm,
        stream,
    )
}

/// `HcclRecv`: synchronous; takes the oldest pending send of `srcRank`.
///
/// # Safety
///
/// `recvBuf` is device memory.
#[no_mangle]
pub unsafe extern "C" fn HcclRecv(
    recvBuf: *mut c_void,
    count: u64,
    dataType: HcclDataType,
    srcRank: u32,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    point_to_point(
        "HcclRecv",
        false,
        ("recvBuf", recvBuf),
        count,
        dataType,
        ("srcRank", srcRank),
        comm,
        stream,
    )
}

/// `HcclBatchSendRecv`: sends and receives that progress together. As in
/// HCCL, no items is a success with nothing enqueued, and several items per
/// peer and direction are taken, ordered by count then data type on both
/// sides (so they match up whatever order each side listed them in).
///
/// # Safety
///
/// `sendRecvInfo` holds `itemNum` items whose buffers are device memory.
#[no_mangle]
pub unsafe extern "C" fn HcclBatchSendRecv(
    sendRecvInfo: *mut HcclSendRecvItem,
    itemNum: u32,
    comm: HcclComm,
    stream: aclrtStream,
) -> HcclResult {
    call("HcclBatchSendRecv", || {
        let h = comm_of(comm)?;
        if itemNum == 0 {
            return Ok(());
        }
        if sendRecvInfo.is_null() {
            return err(HcclResult::HCCL_E_PTR, "sendRecvInfo is null");
        }
        // SAFETY: holds `itemNum` items per the contract.
        let raw = unsafe { std::slice::from_raw_parts(sendRecvInfo, itemNum as usize) };
        let mut items: Vec<Item> = Vec::with_capacity(raw.len());
        for (i, it) in raw.iter().enumerate() {
            let es = elem_size(it.dataType)?;
            let peer = check_rank(&format!("items[{i}].remoteRank"), it.remoteRank, &h)?;
            let addr = check_buf(&format!("items[{i}].buf"), it.buf, it.count, es, &h)?;
            let send = match it.sendRecvType {
                HcclSendRecvType::HCCL_SEND => true,
                HcclSendRecvType::HCCL_RECV => false,
                t => {
                    return err(
                        HcclResult::HCCL_E_PARA,
                        format!("items[{i}].sendRecvType {t:?} is not valid"),
                    )
                }
            };
            items.push(Item {
                send,
                peer,
                addr,
                count: it.count,
                dtype: it.dataType,
            });
        }
        // stable: items of equal count and type keep their order
        items.sort_by_key(|it| (it.count, it.dtype.0));
        let used: Vec<(usize, usize)> = items
            .iter()
            .map(|it| (it.addr, it.count as usize * it.dtype.size().unwrap_or(1)))
            .collect();
        enqueue(&h, stream, &used, move |c, used| {
            exec::point_to_point(c, "HcclBatchSendRecv", &items, used)
        })
    })
}
