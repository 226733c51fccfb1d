//! Loads the built stand-in through hcomm-sys's explicit-path API and drives it
//! from 2-4 rank threads, as the HCCL backend of hcomm will.

// C-style calls read best with `&mut out` arguments coerced to pointers, and the
// rank helpers stay methods so every call site reads `me.buf(..)`.
#![allow(clippy::borrow_as_ptr, clippy::unused_self, clippy::struct_field_names)]

use std::ffi::c_void;
use std::ptr::null_mut;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use hcomm_sys::{
    aclError, aclrtMemMallocPolicy, aclrtMemcpyKind, aclrtStream, AclApi, AclError, HcclApi, HcclComm, HcclCommConfig,
    HcclDataType, HcclError, HcclReduceOp, HcclResult, HcclRootInfo, HcclSendRecvItem, HcclSendRecvType, LoadError,
};

const F32: HcclDataType = HcclDataType::HCCL_DATA_TYPE_FP32;
const SUM: HcclReduceOp = HcclReduceOp::HCCL_REDUCE_SUM;

struct Apis {
    hccl: HcclApi,
    acl: AclApi,
    lib: libloading::Library,
}

fn apis() -> &'static Apis {
    static APIS: OnceLock<Apis> = OnceLock::new();
    APIS.get_or_init(|| {
        let path = hcomm_hccl_standin::cdylib_path().expect("the stand-in cdylib is built next to the test");
        let hccl = HcclApi::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let acl = AclApi::load(&path).unwrap_or_else(|e| panic!("{e}"));
        // SAFETY: aclInit accepts a null config path.
        assert_eq!(unsafe { (acl.aclInit)(std::ptr::null()) }, aclError::ACL_SUCCESS);
        // SAFETY: loading the stand-in runs no initialisers with preconditions.
        let lib = unsafe { libloading::Library::new(&path) }.unwrap();
        Apis { hccl, acl, lib }
    })
}

/// One rank's comm, stream and device, with helpers for device buffers of f32.
struct Rank {
    rank: usize,
    comm: HcclComm,
    stream: aclrtStream,
}

impl Rank {
    fn buf(&self, data: &[f32]) -> *mut c_void {
        let a = &apis().acl;
        let bytes = std::mem::size_of_val(data).max(4);
        let mut p = null_mut();
        // SAFETY: valid out pointer; then a copy of `bytes` host bytes into the new allocation.
        unsafe {
            assert_eq!(
                (a.aclrtMalloc)(&mut p, bytes, aclrtMemMallocPolicy::ACL_MEM_MALLOC_HUGE_ONLY),
                aclError::ACL_SUCCESS
            );
            if !data.is_empty() {
                let r = (a.aclrtMemcpy)(
                    p,
                    bytes,
                    data.as_ptr().cast(),
                    bytes,
                    aclrtMemcpyKind::ACL_MEMCPY_HOST_TO_DEVICE,
                );
                assert_eq!(r, aclError::ACL_SUCCESS);
            }
        }
        p
    }

    /// A device buffer holding `data` (any element type, as bytes).
    fn raw(&self, data: &[u8]) -> *mut c_void {
        let p = self.buf(&vec![0.0; data.len().div_ceil(4)]);
        // SAFETY: `p` has room for `data`.
        let r = unsafe {
            (apis().acl.aclrtMemcpy)(
                p,
                data.len(),
                data.as_ptr().cast(),
                data.len(),
                aclrtMemcpyKind::ACL_MEMCPY_HOST_TO_DEVICE,
            )
        };
        assert_eq!(r, aclError::ACL_SUCCESS);
        p
    }

    fn read_raw(&self, p: *mut c_void, n: usize) -> Vec<u8> {
        let mut out = vec![0u8; n];
        // SAFETY: `p` is an allocation of at least `n` bytes.
        let r = unsafe {
            (apis().acl.aclrtMemcpy)(
                out.as_mut_ptr().cast(),
                n,
                p,
                n,
                aclrtMemcpyKind::ACL_MEMCPY_DEVICE_TO_HOST,
            )
        };
        assert_eq!(r, aclError::ACL_SUCCESS);
        out
    }

    fn read(&self, p: *mut c_void, n: usize) -> Vec<f32> {
        let mut out = vec![0f32; n];
        // SAFETY: `p` is an allocation of at least `n` f32s.
        let r = unsafe {
            (apis().acl.aclrtMemcpy)(
                out.as_mut_ptr().cast(),
                n * 4,
                p,
                n * 4,
                aclrtMemcpyKind::ACL_MEMCPY_DEVICE_TO_HOST,
            )
        };
        assert_eq!(r, aclError::ACL_SUCCESS);
        out
    }

    fn sync(&self) -> Result<(), AclError> {
        // SAFETY: a live stream.
        apis()
            .acl
            .check(unsafe { (apis().acl.aclrtSynchronizeStream)(self.stream) })
    }
}

/// Runs `f` on `n` rank threads joined through HcclCommInitRootInfo(Config).
fn run<R: Send>(n: usize, config: Option<&HcclCommConfig>, f: impl Fn(&Rank) -> R + Sync) -> Vec<R> {
    let Apis { hccl, acl, .. } = apis();
    let mut root = HcclRootInfo::zeroed();
    // SAFETY: valid pointers; the device is set first, as HCCL requires.
    unsafe {
        assert_eq!((acl.aclrtSetDevice)(0), aclError::ACL_SUCCESS);
        assert_eq!((hccl.HcclGetRootInfo)(&mut root), HcclResult::HCCL_SUCCESS);
    }
    let root = HcclRootInfo::from_bytes(root.as_bytes()).unwrap(); // as if sent out of band
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..n)
            .map(|r| {
                let f = &f;
                s.spawn(move || {
                    let mut comm = null_mut();
                    let mut stream = null_mut();
                    // SAFETY: valid pointers and a root info from HcclGetRootInfo.
                    unsafe {
                        assert_eq!((acl.aclrtSetDevice)(r as i32), aclError::ACL_SUCCESS);
                        let code = match config {
                            None => (hccl.HcclCommInitRootInfo)(n as u32, &root, r as u32, &mut comm),
                            Some(c) => {
                                (hccl.HcclCommInitRootInfoConfig.unwrap())(n as u32, &root, r as u32, c, &mut comm)
                            }
                        };
                        assert_eq!(code, HcclResult::HCCL_SUCCESS);
                        assert_eq!((acl.aclrtCreateStream)(&mut stream), aclError::ACL_SUCCESS);
                    }
                    let rank = Rank { rank: r, comm, stream };
                    let out = f(&rank);
                    // SAFETY: live handles, drained by `f` (which may have
                    // destroyed the communicator itself: an abort).
                    unsafe {
                        let mut size = 0;
                        if (hccl.HcclGetRankSize)(comm, &mut size) == HcclResult::HCCL_SUCCESS {
                            assert_eq!((hccl.HcclCommDestroy)(comm), HcclResult::HCCL_SUCCESS);
                        }
                        assert_eq!((acl.aclrtDestroyStream)(stream), aclError::ACL_SUCCESS);
                    }
                    out
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn collectives_over_four_ranks() {
    let h = &apis().hccl;
    run(4, None, |me| {
        let n = 4;
        let r = me.rank as f32;
        let mut size = 0;
        let mut id = 0;
        // SAFETY: all buffers below are device allocations of the stated sizes.
        unsafe {
            assert_eq!((h.HcclGetRankSize)(me.comm, &mut size), HcclResult::HCCL_SUCCESS);
            assert_eq!((h.HcclGetRankId)(me.comm, &mut id), HcclResult::HCCL_SUCCESS);
            assert_eq!((size, id as usize), (4, me.rank));

            let send = me.buf(&[r, 10.0 * r]);
            let recv = me.buf(&[0.0; 2]);
            assert_eq!(
                (h.HcclAllReduce)(send, recv, 2, F32, SUM, me.comm, me.stream),
                HcclResult::HCCL_SUCCESS
            );
            let gathered = me.buf(&[0.0; 8]);
            assert_eq!(
                (h.HcclAllGather)(send, gathered, 2, F32, me.comm, me.stream),
                HcclResult::HCCL_SUCCESS
            );
            let rs_send = me.buf(&[1.0, 2.0, 3.0, 4.0]);
            let rs_recv = me.buf(&[0.0]);
            assert_eq!(
                (h.HcclReduceScatter)(rs_send, rs_recv, 1, F32, SUM, me.comm, me.stream),
                HcclResult::HCCL_SUCCESS
            );
            let bcast = me.buf(&[r, r]);
            assert_eq!(
                (h.HcclBroadcast)(bcast, 2, F32, 2, me.comm, me.stream),
                HcclResult::HCCL_SUCCESS
            );
            let a2a_send = me.buf(&[r * 10.0, r * 10.0 + 1.0, r * 10.0 + 2.0, r * 10.0 + 3.0]);
            let a2a_recv = me.buf(&[0.0; 4]);
            assert_eq!(
                (h.HcclAlltoAll)(a2a_send, 1, F32, a2a_recv, 1, F32, me.comm, me.stream),
                HcclResult::HCCL_SUCCESS
            );
            assert_eq!((h.HcclBarrier)(me.comm, me.stream), HcclResult::HCCL_SUCCESS);
            me.sync().unwrap();

            assert_eq!(me.read(recv, 2), [6.0, 60.0]);
            assert_eq!(me.read(gathered, 8), [0.0, 0.0, 1.0, 10.0, 2.0, 20.0, 3.0, 30.0]);
            assert_eq!(me.read(rs_recv, 1), [n as f32 * (r + 1.0)]);
            assert_eq!(me.read(bcast, 2), [2.0, 2.0]);
            let expect: Vec<f32> = (0..4).map(|j| j as f32 * 10.0 + r).collect();
            assert_eq!(me.read(a2a_recv, 4), expect);
        }
    });
}

#[test]
fn alltoallv_scatter_reduce_and_p2p_over_three_ranks() {
    let h = &apis().hccl;
    run(3, None, |me| {
        let r = me.rank;
        let n = 3;
        // Rank r sends j+1 elements (value 100r + j) to rank j.
        let send_counts: Vec<u64> = (0..n as u64).map(|j| j + 1).collect();
        let sdispls: Vec<u64> = (0..n as u64).map(|j| j * (j + 1) / 2).collect();
        let recv_counts = vec![r as u64 + 1; n];
        let rdispls: Vec<u64> = (0..n as u64).map(|j| j * (r as u64 + 1)).collect();
        let mut data = Vec::new();
        for j in 0..n {
            data.extend(std::iter::repeat_n((100 * r + j) as f32, j + 1));
        }
        // SAFETY: device buffers of the stated sizes; host count arrays of n values.
        unsafe {
            let send = me.buf(&data);
            let recv = me.buf(&vec![0.0; n * (r + 1)]);
            let code = (h.HcclAlltoAllV)(
                send,
                send_counts.as_ptr().cast(),
                sdispls.as_ptr().cast(),
                F32,
                recv,
                recv_counts.as_ptr().cast(),
                rdispls.as_ptr().cast(),
                F32,
                me.comm,
                me.stream,
            );
            assert_eq!(code, HcclResult::HCCL_SUCCESS);

            let sc_send = me.buf(&[7.0, 8.0, 9.0]);
            let sc_recv = me.buf(&[0.0]);
            assert_eq!(
                (h.HcclScatter)(sc_send, sc_recv, 1, F32, 1, me.comm, me.stream),
                HcclResult::HCCL_SUCCESS
            );
            let red_send = me.buf(&[r as f32 + 1.0]);
            let red_recv = me.buf(&[0.0]);
            let max = HcclReduceOp::HCCL_REDUCE_MAX;
            assert_eq!(
                (h.HcclReduce)(red_send, red_recv, 1, F32, max, 0, me.comm, me.stream),
                HcclResult::HCCL_SUCCESS
            );

            // Ring shift with synchronous send/recv in matching order: even ranks send first.
            let out = me.buf(&[r as f32]);
            let inb = me.buf(&[-1.0]);
            let (next, prev) = (((r + 1) % n) as u32, ((r + n - 1) % n) as u32);
            let send_first = r % 2 == 0 && r != n - 1;
            for step in 0..2 {
                let code = if (step == 0) == send_first {
                    (h.HcclSend)(out, 1, F32, next, me.comm, me.stream)
                } else {
                    (h.HcclRecv)(inb, 1, F32, prev, me.comm, me.stream)
                };
                assert_eq!(code, HcclResult::HCCL_SUCCESS);
            }
            // The same exchange as one batch (send and receive progress together).
            let inb2 = me.buf(&[-1.0]);
            let mut items = [
                HcclSendRecvItem {
                    sendRecvType: HcclSendRecvType::HCCL_SEND,
                    buf: out,
                    count: 1,
                    dataType: F32,
                    remoteRank: next,
                },
                HcclSendRecvItem {
                    sendRecvType: HcclSendRecvType::HCCL_RECV,
                    buf: inb2,
                    count: 1,
                    dataType: F32,
                    remoteRank: prev,
                },
            ];
            assert_eq!(
                (h.HcclBatchSendRecv)(items.as_mut_ptr(), 2, me.comm, me.stream),
                HcclResult::HCCL_SUCCESS
            );
            me.sync().unwrap();

            let expect: Vec<f32> = (0..n)
                .flat_map(|j| std::iter::repeat_n((100 * j + r) as f32, r + 1))
                .collect();
            assert_eq!(me.read(recv, n * (r + 1)), expect);
            assert_eq!(me.read(sc_recv, 1), [7.0 + r as f32]);
            if r == 0 {
                assert_eq!(me.read(red_recv, 1), [3.0]);
            }
            assert_eq!(me.read(inb, 1), [((r + n - 1) % n) as f32]);
            assert_eq!(me.read(inb2, 1), [((r + n - 1) % n) as f32]);
        }
    });
}

#[test]
fn v_ops_int16_misaligned_and_in_place_buffers_and_mismatches_over_three_ranks() {
    let h = &apis().hccl;
    let i16s = |v: &[i16]| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
    run(3, None, |me| {
        let r = me.rank;
        let n = 3;
        // SAFETY: device buffers of the stated sizes; host count arrays of n values.
        unsafe {
            // All-gather-V: rank j sends j + 1 elements, landing at 4j (gaps keep -1).
            let send = me.buf(&vec![r as f32; r + 1]);
            let recv = me.buf(&[-1.0; 12]);
            let counts: Vec<u64> = (1..=n as u64).collect();
            let displs: Vec<u64> = (0..n as u64).map(|j| 4 * j).collect();
            let ag = h.HcclAllGatherV.unwrap();
            let code = ag(
                send,
                r as u64 + 1,
                recv,
                counts.as_ptr().cast(),
                displs.as_ptr().cast(),
                F32,
                me.comm,
                me.stream,
            );
            assert_eq!(code, HcclResult::HCCL_SUCCESS);
            // Reduce-scatter-V: rank j gets j + 1 elements, block j at 3j of every send buffer.
            let rs_send = me.buf(&(0..9).map(|i| (i + r) as f32).collect::<Vec<_>>());
            let rs_recv = me.buf(&vec![0.0; r + 1]);
            let rs_displs: Vec<u64> = (0..n as u64).map(|j| 3 * j).collect();
            let rs = h.HcclReduceScatterV.unwrap();
            let code = rs(
                rs_send,
                counts.as_ptr().cast(),
                rs_displs.as_ptr().cast(),
                rs_recv,
                r as u64 + 1,
                F32,
                SUM,
                me.comm,
                me.stream,
            );
            assert_eq!(code, HcclResult::HCCL_SUCCESS);
            // int16 (no hcomm element): reduced by the stand-in itself.
            let i16_buf = me.raw(&i16s(&[r as i16 - 5, 300]));
            let max = HcclReduceOp::HCCL_REDUCE_MAX;
            let int16 = HcclDataType::HCCL_DATA_TYPE_INT16;
            assert_eq!(
                (h.HcclAllReduce)(i16_buf, i16_buf, 2, int16, max, me.comm, me.stream),
                HcclResult::HCCL_SUCCESS
            );
            // In place, and at an address that is not aligned for f32.
            let inplace = me.buf(&[1.0, r as f32]);
            assert_eq!(
                (h.HcclAllReduce)(inplace, inplace, 2, F32, SUM, me.comm, me.stream),
                HcclResult::HCCL_SUCCESS
            );
            let odd = me.raw(&[&[0xAA][..], &2f32.to_ne_bytes(), &[0xBB]].concat());
            let odd_in = odd.cast::<u8>().add(1).cast::<c_void>();
            let odd_out = me.buf(&[0.0]);
            assert_eq!(
                (h.HcclAllReduce)(odd_in, odd_out, 1, F32, SUM, me.comm, me.stream),
                HcclResult::HCCL_SUCCESS
            );
            me.sync().unwrap();

            let mut want = vec![-1.0; 12];
            for j in 0..n {
                want[4 * j..=5 * j].fill(j as f32);
            }
            assert_eq!(me.read(recv, 12), want);
            let want: Vec<f32> = (0..=r).map(|i| (0..n).map(|q| (3 * r + i + q) as f32).sum()).collect();
            assert_eq!(me.read(rs_recv, r + 1), want);
            assert_eq!(me.read_raw(i16_buf, 4), i16s(&[-3, 300]));
            assert_eq!(me.read(inplace, 2), [3.0, 3.0]);
            assert_eq!(me.read(odd_out, 1), [6.0]);

            // Ranks that disagree on the count: every rank's stream fails, and
            // the communicator stays usable.
            let a = me.buf(&[1.0, 1.0]);
            let b = me.buf(&[0.0, 0.0]);
            let count = if r == 1 { 2 } else { 1 };
            assert_eq!(
                (h.HcclAllReduce)(a, b, count, F32, SUM, me.comm, me.stream),
                HcclResult::HCCL_SUCCESS
            );
            assert_eq!(me.sync(), Err(AclError::RtFailure));
            let msg = std::ffi::CStr::from_ptr((apis().acl.aclGetRecentErrMsg.unwrap())())
                .to_string_lossy()
                .into_owned();
            assert!(msg.contains("collective mismatch"), "{msg}");
            assert_eq!(
                (h.HcclAllReduce)(a, b, 2, F32, SUM, me.comm, me.stream),
                HcclResult::HCCL_SUCCESS
            );
            me.sync().unwrap();
            assert_eq!(me.read(b, 2), [3.0, 3.0]);
        }
    });
}

#[test]
fn sub_communicators_are_one_level_deep() {
    let h = &apis().hccl;
    run(4, None, |me| {
        let r = me.rank as u32;
        let mut ids = [r % 2, r % 2 + 2];
        let mut parent = me.comm;
        let mut sub = null_mut();
        let create = h.HcclCreateSubCommConfig.unwrap();
        let mut config = HcclCommConfig::new();
        // SAFETY: valid pointers; `ids` holds 2 sorted global ranks including this one.
        unsafe {
            let code = create(
                &mut parent,
                2,
                ids.as_mut_ptr(),
                u64::from(r % 2),
                r / 2,
                &mut config,
                &mut sub,
            );
            assert_eq!(code, HcclResult::HCCL_SUCCESS);
            let mut size = 0;
            assert_eq!((h.HcclGetRankSize)(sub, &mut size), HcclResult::HCCL_SUCCESS);
            assert_eq!(size, 2);
            let send = me.buf(&[r as f32]);
            let recv = me.buf(&[0.0]);
            assert_eq!(
                (h.HcclAllReduce)(send, recv, 1, F32, SUM, sub, me.stream),
                HcclResult::HCCL_SUCCESS
            );
            me.sync().unwrap();
            assert_eq!(me.read(recv, 1), [if r.is_multiple_of(2) { 2.0 } else { 4.0 }]);

            let mut own = [r / 2];
            let mut subsub = null_mut();
            let mut nested = sub;
            let code = create(&mut nested, 1, own.as_mut_ptr(), 9, 0, &mut config, &mut subsub);
            assert_eq!(code, HcclResult::HCCL_E_NOT_SUPPORT);
            assert_eq!((h.HcclCommDestroy)(sub), HcclResult::HCCL_SUCCESS);
        }
    });
}

/// Two communicators of one process (`HcclCommInitAll`) for argument checks.
fn init_all() -> [HcclComm; 2] {
    let Apis { hccl, acl, .. } = apis();
    let mut devices = [0, 1];
    let mut comms = [null_mut(); 2];
    // SAFETY: valid arrays of two.
    unsafe {
        assert_eq!(
            (hccl.HcclCommInitAll)(2, devices.as_mut_ptr(), comms.as_mut_ptr()),
            HcclResult::HCCL_SUCCESS
        );
        assert_eq!((acl.aclrtSetDevice)(0), aclError::ACL_SUCCESS);
    }
    comms
}

#[test]
fn rejects_what_hccl_rejects() {
    let Apis { hccl: h, acl: a, .. } = apis();
    let [comm, _] = init_all();
    let me = Rank {
        rank: 0,
        comm,
        stream: null_mut(),
    };
    let mut stream = null_mut();
    // SAFETY: every call passes pointers that are valid or deliberately null/foreign.
    unsafe {
        assert_eq!((a.aclrtCreateStream)(&mut stream), aclError::ACL_SUCCESS);
        let buf = me.buf(&[1.0, 2.0]);
        let other = me.buf(&[0.0, 0.0]);
        let mut host = [0f32; 2];
        let host_ptr = host.as_mut_ptr().cast::<c_void>();
        // recvBuf == sendBuf for all-to-all.
        assert_eq!(
            (h.HcclAlltoAll)(buf, 1, F32, buf, 1, F32, comm, stream),
            HcclResult::HCCL_E_PARA
        );
        let counts = [1u64, 0];
        let displs = [0u64, 0];
        let (c, d) = (counts.as_ptr().cast(), displs.as_ptr().cast());
        assert_eq!(
            (h.HcclAlltoAllV)(buf, c, d, F32, buf, c, d, F32, comm, stream),
            HcclResult::HCCL_E_PARA
        );
        // Bad data type and reduce op.
        assert_eq!(
            (h.HcclAllReduce)(buf, other, 2, HcclDataType(99), SUM, comm, stream),
            HcclResult::HCCL_E_PARA
        );
        assert_eq!(
            (h.HcclAllReduce)(buf, other, 2, F32, HcclReduceOp(7), comm, stream),
            HcclResult::HCCL_E_PARA
        );
        let int128 = HcclDataType::HCCL_DATA_TYPE_INT128;
        assert_eq!(
            (h.HcclAllReduce)(buf, other, 0, int128, SUM, comm, stream),
            HcclResult::HCCL_E_NOT_SUPPORT
        );
        // Null and foreign pointers.
        assert_eq!(
            (h.HcclAllReduce)(null_mut(), other, 2, F32, SUM, comm, stream),
            HcclResult::HCCL_E_PTR
        );
        assert_eq!(
            (h.HcclAllReduce)(host_ptr, other, 2, F32, SUM, comm, stream),
            HcclResult::HCCL_E_PTR
        );
        assert_eq!(
            (h.HcclAllReduce)(buf, other, 3, F32, SUM, comm, stream),
            HcclResult::HCCL_E_PTR,
            "past the end"
        );
        assert_eq!(
            (h.HcclAllReduce)(buf, other, 2, F32, SUM, null_mut(), stream),
            HcclResult::HCCL_E_PTR
        );
        assert_eq!(
            (h.HcclAllReduce)(buf, other, 2, F32, SUM, comm, null_mut()),
            HcclResult::HCCL_E_PTR
        );
        assert_eq!(
            (h.HcclSend)(buf, 1, F32, 2, comm, stream),
            HcclResult::HCCL_E_PARA,
            "rank out of range"
        );
        let msg = std::ffi::CStr::from_ptr((a.aclGetRecentErrMsg.unwrap())())
            .to_string_lossy()
            .into_owned();
        assert!(msg.contains("destRank 2 is out of range"), "{msg}");
        // ACL checks.
        let r = (a.aclrtMemcpy)(host_ptr, 4, buf, 8, aclrtMemcpyKind::ACL_MEMCPY_DEVICE_TO_HOST);
        assert_eq!(r.result(), Err(AclError::InvalidParam), "count > destMax");
        let r = (a.aclrtMemcpy)(host_ptr, 8, host_ptr, 8, aclrtMemcpyKind::ACL_MEMCPY_DEVICE_TO_HOST);
        assert_eq!(r.result(), Err(AclError::InvalidParam), "source is not device memory");
        assert_eq!((a.aclrtFree)(host_ptr).result(), Err(AclError::InvalidParam));
        assert_eq!((a.aclInit)(std::ptr::null()), aclError::ACL_ERROR_REPEAT_INITIALIZE);
        assert_eq!((a.aclrtFree)(buf), aclError::ACL_SUCCESS);
        assert_eq!((a.aclrtFree)(buf).result(), Err(AclError::InvalidParam), "double free");
        assert_eq!((a.aclrtDestroyStream)(stream), aclError::ACL_SUCCESS);
    }
}

#[test]
fn exec_timeout_fails_the_stream() {
    let Apis { hccl: h, acl: a, .. } = apis();
    let mut config = HcclCommConfig::new();
    config.hcclExecTimeOut = 1;
    let results = run(2, Some(&config), |me| {
        if me.rank == 1 {
            return None;
        }
        // SAFETY: device buffers; rank 1 never calls the all-reduce.
        unsafe {
            let send = me.buf(&[1.0]);
            let recv = me.buf(&[0.0]);
            assert_eq!(
                (h.HcclAllReduce)(send, recv, 1, F32, SUM, me.comm, me.stream),
                HcclResult::HCCL_SUCCESS
            );
            let err = me.sync().unwrap_err();
            let msg = std::ffi::CStr::from_ptr((a.aclGetRecentErrMsg.unwrap())())
                .to_string_lossy()
                .into_owned();
            // A later synchronisation reports nothing new.
            me.sync().unwrap();
            Some((err, msg))
        }
    });
    let (err, msg) = results[0].clone().unwrap();
    assert_eq!(err, AclError::RtTaskTimeout);
    assert!(
        msg.contains("HcclAllReduce") && msg.contains("ranks [1] did not call it"),
        "{msg}"
    );
    // `Display` carries the library's message (the latest one for this code, which a
    // parallel test may have replaced with its own timeout).
    assert!(err.to_string().contains("execution timeout"), "{err}");
}

#[test]
fn a_destroy_from_another_thread_fails_operations_waiting_for_peers_at_once() {
    let Apis { hccl: h, acl: a, .. } = apis();
    let results = run(2, None, |me| {
        if me.rank == 1 {
            return None;
        }
        // SAFETY: device buffers; rank 1 never calls the all-reduce or the
        // receive; the communicator is destroyed once, from another thread.
        unsafe {
            let send = me.buf(&[1.0]);
            let recv = me.buf(&[0.0]);
            assert_eq!(
                (h.HcclAllReduce)(send, recv, 1, F32, SUM, me.comm, me.stream),
                HcclResult::HCCL_SUCCESS
            );
            assert_eq!(
                (h.HcclRecv)(recv, 1, F32, 1, me.comm, me.stream),
                HcclResult::HCCL_SUCCESS
            );
            let started = Instant::now();
            let comm = me.comm as usize;
            let destroyed = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                (h.HcclCommDestroy)(comm as HcclComm)
            });
            let err = me.sync().unwrap_err();
            let msg = std::ffi::CStr::from_ptr((a.aclGetRecentErrMsg.unwrap())())
                .to_string_lossy()
                .into_owned();
            assert_eq!(destroyed.join().unwrap(), HcclResult::HCCL_SUCCESS);
            Some((err, msg, started.elapsed()))
        }
    });
    let (err, msg, took) = results[0].clone().unwrap();
    assert_eq!(err, AclError::RtFailure);
    assert_eq!(
        msg,
        "HcclAllReduce: the communicator was destroyed while collective #0 waited for ranks [1]"
    );
    // The default execution timeout is 1836 s.
    assert!(took < Duration::from_secs(5), "{took:?}");
}

#[test]
fn both_ranks_sending_first_time_out() {
    let h = &apis().hccl;
    let mut config = HcclCommConfig::new();
    config.hcclExecTimeOut = 1;
    let errs = run(2, Some(&config), |me| {
        let peer = 1 - me.rank as u32;
        // SAFETY: device buffers.
        unsafe {
            let b = me.buf(&[1.0]);
            let c = me.buf(&[0.0]);
            assert_eq!(
                (h.HcclSend)(b, 1, F32, peer, me.comm, me.stream),
                HcclResult::HCCL_SUCCESS
            );
            assert_eq!(
                (h.HcclRecv)(c, 1, F32, peer, me.comm, me.stream),
                HcclResult::HCCL_SUCCESS
            );
        }
        me.sync()
    });
    assert_eq!(errs, [Err(AclError::RtTaskTimeout), Err(AclError::RtTaskTimeout)]);
}

#[test]
fn injected_errors_and_missing_optional_symbols() {
    let Apis { hccl: h, lib, .. } = apis();
    // SAFETY: the hook's C signature.
    let inject: libloading::Symbol<unsafe extern "C" fn(*const std::ffi::c_char, i32) -> i32> =
        unsafe { lib.get(b"hcomm_standin_inject_error\0") }.unwrap();
    let [comm, _] = init_all();
    let mut status = HcclResult::HCCL_SUCCESS;
    // SAFETY: valid pointers.
    unsafe {
        assert_eq!(inject(c"HcclGetCommAsyncError".as_ptr(), 21), 0);
        let f = h.HcclGetCommAsyncError.unwrap();
        let code = f(comm, &mut status);
        assert_eq!(code.result(), Err(HcclError::Remote));
        // The table copied the library's own strings at load time.
        assert!(
            HcclError::Remote.to_string().ends_with(": error cqe"),
            "{}",
            HcclError::Remote
        );
        assert_eq!(f(comm, &mut status), HcclResult::HCCL_SUCCESS, "one-shot");
    }
    let err = hcomm_sys::require_fn!(h, HcclGroupStart).unwrap_err();
    assert!(
        matches!(
            err,
            LoadError::MissingSymbol {
                symbol: "HcclGroupStart",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .starts_with("symbol `HcclGroupStart` not found in HCCL library `"),
        "{err}"
    );
    assert!(hcomm_sys::require_fn!(h, HcclCommInitRootInfoConfig).is_ok());
}

#[test]
fn init_rejects_foreign_root_info_and_disagreeing_sizes() {
    let Apis { hccl: h, acl: a, .. } = apis();
    let mut comm = null_mut();
    let mut root = HcclRootInfo::zeroed();
    // SAFETY: valid pointers.
    unsafe {
        assert_eq!((a.aclrtSetDevice)(0), aclError::ACL_SUCCESS);
        assert_eq!(
            (h.HcclCommInitRootInfo)(2, &root, 0, &mut comm),
            HcclResult::HCCL_E_PARA
        );
        assert_eq!((h.HcclGetRootInfo)(&mut root), HcclResult::HCCL_SUCCESS);
        assert_eq!(
            (h.HcclCommInitRootInfo)(2, &root, 2, &mut comm),
            HcclResult::HCCL_E_PARA
        );
        assert_eq!(
            (h.HcclCommInitRootInfo)(2, &root, 0, null_mut()),
            HcclResult::HCCL_E_PTR
        );
        let mut bad = HcclCommConfig::new();
        bad.header.magicWord = 0;
        let f = h.HcclCommInitRootInfoConfig.unwrap();
        assert_eq!(f(1, &root, 0, &bad, &mut comm), HcclResult::HCCL_E_PARA);
    }
}

/// A serial reference of the stand-in's reductions: `op` folded over the
/// ranks' values in rank order, in `f64` (exact for the small values used).
fn fold_ref(op: HcclReduceOp, values: impl Iterator<Item = f64>) -> f64 {
    values
        .reduce(|a, b| match op {
            HcclReduceOp::HCCL_REDUCE_SUM => a + b,
            HcclReduceOp::HCCL_REDUCE_PROD => a * b,
            HcclReduceOp::HCCL_REDUCE_MAX => a.max(b),
            _ => a.min(b),
        })
        .unwrap()
}

/// `x` as the bytes of one element of `dtype`.
fn encode(dtype: HcclDataType, x: f64) -> Vec<u8> {
    use HcclDataType as T;
    match dtype {
        T::HCCL_DATA_TYPE_INT8 => (x as i8).to_ne_bytes().to_vec(),
        T::HCCL_DATA_TYPE_UINT8 => (x as u8).to_ne_bytes().to_vec(),
        T::HCCL_DATA_TYPE_INT16 => (x as i16).to_ne_bytes().to_vec(),
        T::HCCL_DATA_TYPE_UINT16 => (x as u16).to_ne_bytes().to_vec(),
        T::HCCL_DATA_TYPE_INT32 => (x as i32).to_ne_bytes().to_vec(),
        T::HCCL_DATA_TYPE_UINT32 => (x as u32).to_ne_bytes().to_vec(),
        T::HCCL_DATA_TYPE_INT64 => (x as i64).to_ne_bytes().to_vec(),
        T::HCCL_DATA_TYPE_UINT64 => (x as u64).to_ne_bytes().to_vec(),
        T::HCCL_DATA_TYPE_FP16 => half::f16::from_f64(x).to_ne_bytes().to_vec(),
        T::HCCL_DATA_TYPE_BFP16 => half::bf16::from_f64(x).to_ne_bytes().to_vec(),
        T::HCCL_DATA_TYPE_FP32 => (x as f32).to_ne_bytes().to_vec(),
        _ => x.to_ne_bytes().to_vec(),
    }
}

#[test]
fn every_type_and_operator_hccl_runs_matches_a_serial_reference_and_the_rest_is_not_supported() {
    let h = &apis().hccl;
    let types: Vec<HcclDataType> = (0..12).map(HcclDataType).collect();
    let ops = [
        HcclReduceOp::HCCL_REDUCE_SUM,
        HcclReduceOp::HCCL_REDUCE_PROD,
        HcclReduceOp::HCCL_REDUCE_MAX,
        HcclReduceOp::HCCL_REDUCE_MIN,
    ];
    // What rank `r` contributes at index `i`: small, positive for the
    // unsigned types, so every type holds every partial result exactly.
    let value = |r: usize, i: usize, op: HcclReduceOp| -> f64 {
        if op == HcclReduceOp::HCCL_REDUCE_PROD {
            [1.0, 2.0, 3.0][(r + i) % 3]
        } else {
            ((r * 5 + i * 3) % 7) as f64
        }
    };
    run(3, None, |me| {
        // SAFETY: device buffers of the stated sizes.
        unsafe {
            for &dtype in &types {
                let size = dtype.size().unwrap();
                for op in ops {
                    let mine: Vec<u8> = (0..4).flat_map(|i| encode(dtype, value(me.rank, i, op))).collect();
                    let send = me.raw(&mine);
                    let recv = me.raw(&vec![0u8; mine.len()]);
                    let code = (h.HcclAllReduce)(send, recv, 4, dtype, op, me.comm, me.stream);
                    // the stand-in plays an Atlas A2 chip (`aclrtGetSocName`)
                    let chip = hcomm_sys::HcclChip::from_soc_name("Ascend910B1");
                    if !hcomm_sys::hccl_reduction_supported(chip, hcomm_sys::HcclReduction::AllReduce, dtype, op) {
                        assert_eq!(code, HcclResult::HCCL_E_NOT_SUPPORT, "{dtype:?} {op:?}");
                        continue;
                    }
                    assert_eq!(code, HcclResult::HCCL_SUCCESS, "{dtype:?} {op:?}");
                    me.sync().unwrap();
                    let want: Vec<u8> = (0..4)
                        .flat_map(|i| encode(dtype, fold_ref(op, (0..3).map(|r| value(r, i, op)))))
                        .collect();
                    assert_eq!(me.read_raw(recv, 4 * size), want, "{dtype:?} {op:?}");
                }
            }
            // fp16 accumulates in f32 and rounds once: 2048 + 1 + 1 is 2050,
            // where rounding after each step would stay at 2048.
            let fp16 = HcclDataType::HCCL_DATA_TYPE_FP16;
            let x = me.raw(&encode(fp16, if me.rank == 0 { 2048.0 } else { 1.0 }));
            assert_eq!(
                (h.HcclAllReduce)(x, x, 1, fp16, SUM, me.comm, me.stream),
                HcclResult::HCCL_SUCCESS
            );
            me.sync().unwrap();
            assert_eq!(me.read_raw(x, 2), encode(fp16, 2050.0));
        }
    });
}

#[test]
fn messages_match_in_stream_order_and_sizes_that_disagree_fail_both_ends() {
    let h = &apis().hccl;
    run(2, None, |me| {
        // SAFETY: device buffers of the stated sizes.
        unsafe {
            if me.rank == 0 {
                let (a, b) = (me.buf(&[1.0, 2.0]), me.buf(&[3.0, 4.0]));
                for buf in [a, b] {
                    assert_eq!(
                        (h.HcclSend)(buf, 2, F32, 1, me.comm, me.stream),
                        HcclResult::HCCL_SUCCESS
                    );
                }
                me.sync().unwrap();
                let long = me.buf(&[5.0, 6.0]);
                assert_eq!(
                    (h.HcclSend)(long, 2, F32, 1, me.comm, me.stream),
                    HcclResult::HCCL_SUCCESS
                );
            } else {
                let (x, y) = (me.buf(&[0.0; 2]), me.buf(&[0.0; 2]));
                for buf in [x, y] {
                    assert_eq!(
                        (h.HcclRecv)(buf, 2, F32, 0, me.comm, me.stream),
                        HcclResult::HCCL_SUCCESS
                    );
                }
                me.sync().unwrap();
                assert_eq!((me.read(x, 2), me.read(y, 2)), (vec![1.0, 2.0], vec![3.0, 4.0]));
                let short = me.buf(&[0.0]);
                assert_eq!(
                    (h.HcclRecv)(short, 1, F32, 0, me.comm, me.stream),
                    HcclResult::HCCL_SUCCESS
                );
            }
            assert_eq!(me.sync(), Err(AclError::RtFailure));
            let msg = std::ffi::CStr::from_ptr((apis().acl.aclGetRecentErrMsg.unwrap())())
                .to_string_lossy()
                .into_owned();
            assert!(
                msg.contains("rank 1 receives 4 bytes from rank 0, which sends 8 bytes"),
                "{msg}"
            );
        }
    });
}

#[test]
fn a_buffer_freed_while_its_collective_waits_fails_the_collective_instead_of_being_written() {
    let Apis { hccl: h, acl: a, lib } = apis();
    // SAFETY: the hook's C signature.
    let freed_in_use: libloading::Symbol<extern "C" fn() -> u64> =
        unsafe { lib.get(b"hcomm_standin_freed_in_use\0") }.unwrap();
    let before = freed_in_use();
    let both_called = std::sync::Barrier::new(2);
    run(2, None, |me| {
        // SAFETY: device buffers of the stated sizes; rank 0 frees its
        // receive buffer before rank 1 calls, so the collective cannot run.
        unsafe {
            let send = me.buf(&[1.0]);
            let recv = me.buf(&[0.0]);
            if me.rank == 0 {
                assert_eq!(
                    (h.HcclAllReduce)(send, recv, 1, F32, SUM, me.comm, me.stream),
                    HcclResult::HCCL_SUCCESS
                );
                assert_eq!((a.aclrtFree)(recv), aclError::ACL_SUCCESS);
                both_called.wait();
            } else {
                both_called.wait();
                assert_eq!(
                    (h.HcclAllReduce)(send, recv, 1, F32, SUM, me.comm, me.stream),
                    HcclResult::HCCL_SUCCESS
                );
            }
            assert_eq!(me.sync(), Err(AclError::RtFailure));
            let msg = std::ffi::CStr::from_ptr((a.aclGetRecentErrMsg.unwrap())())
                .to_string_lossy()
                .into_owned();
            assert!(msg.contains("no longer device memory"), "{msg}");
        }
    });
    assert!(
        freed_in_use() > before,
        "the free of a pending operation's buffer is counted"
    );
}

#[test]
fn batches_take_several_items_per_peer_in_hccl_order_and_may_be_empty() {
    let h = &apis().hccl;
    run(2, None, |me| {
        let peer = 1 - me.rank as u32;
        // SAFETY: device buffers of the stated sizes.
        unsafe {
            // nothing to do: success, nothing enqueued
            assert_eq!(
                (h.HcclBatchSendRecv)(null_mut(), 0, me.comm, me.stream),
                HcclResult::HCCL_SUCCESS
            );
            // three sends to the peer (counts 3, 1, 2) and three receives,
            // posted in another order on each rank: HCCL orders both sides'
            // items by count, so the counts match up
            let item = |send: bool, buf, count| HcclSendRecvItem {
                sendRecvType: if send {
                    HcclSendRecvType::HCCL_SEND
                } else {
                    HcclSendRecvType::HCCL_RECV
                },
                buf,
                count,
                dataType: F32,
                remoteRank: peer,
            };
            let base = 10.0 * me.rank as f32;
            let s3 = me.buf(&[base + 3.0; 3]);
            let s1 = me.buf(&[base + 1.0]);
            let s2 = me.buf(&[base + 2.0; 2]);
            let (r1, r2, r3) = (me.buf(&[0.0]), me.buf(&[0.0; 2]), me.buf(&[0.0; 3]));
            let mut items = if me.rank == 0 {
                [
                    item(true, s3, 3),
                    item(false, r2, 2),
                    item(true, s1, 1),
                    item(false, r3, 3),
                    item(true, s2, 2),
                    item(false, r1, 1),
                ]
            } else {
                [
                    item(false, r1, 1),
                    item(false, r3, 3),
                    item(false, r2, 2),
                    item(true, s2, 2),
                    item(true, s1, 1),
                    item(true, s3, 3),
                ]
            };
            assert_eq!(
                (h.HcclBatchSendRecv)(items.as_mut_ptr(), 6, me.comm, me.stream),
                HcclResult::HCCL_SUCCESS
            );
            me.sync().unwrap();
            let other = 10.0 * f32::from(u8::try_from(peer).unwrap_or(0));
            assert_eq!(me.read(r1, 1), [other + 1.0]);
            assert_eq!(me.read(r2, 2), [other + 2.0; 2]);
            assert_eq!(me.read(r3, 3), [other + 3.0; 3]);
        }
    });
}
