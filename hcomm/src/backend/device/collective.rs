//! Collectives as the library's own calls. Those it lacks (gather on HCCL;
//! all-to-all-v on NCCL), and those whose ranks the library numbers
//! differently (subgroups of HCCL), are built from one batch call; a missing
//! barrier is a one-element all-reduce. Nothing falls back to the host
//! algorithms, which would dereference device addresses.

use std::time::{Duration, Instant};

use super::driver::{Item, LibColl};
use super::memory::{CopyKind, DevMem};
use super::staging::Staging;
use super::state::State;
use super::DeviceBackend;
use crate::backend::NativeCall;
use crate::element::{DataType, ReduceOp};
use crate::error::{Error, Result};
use crate::select::Algorithm;

/// One block of a batch call: `(rank of this group, device address, count)`.
type Block = (usize, *mut u8, usize);

/// The blocks of every rank `p`: `count` elements at `base + p * block_bytes`.
///
/// # Safety
///
/// `base` valid for `ranks * block_bytes` bytes.
unsafe fn blocks(base: *mut u8, block_bytes: usize, count: usize, ranks: usize) -> Vec<Block> {
    // SAFETY: every block lies inside the range the caller vouches for.
    (0..ranks)
        .map(|p| (p, unsafe { base.add(p * block_bytes) }, count))
        .collect()
}

impl DeviceBackend {
    /// Stages, enqueues and drains one collective; what ran:
    /// [`Algorithm::Library`], or [`Algorithm::LibraryFold`] where the
    /// library moved the data and this rank combined it.
    ///
    /// # Safety
    ///
    /// The call's buffers valid (receive buffers writable and exclusive)
    /// until this returns.
    pub(super) unsafe fn run_collective(
        &self,
        st: &mut State,
        call: &NativeCall<'_>,
        dtype: DataType,
        limit: Duration,
    ) -> Result<Algorithm> {
        let start = Instant::now();
        let mut staging = Staging::new(&self.ctx);
        // SAFETY: forwarded from the caller.
        let enqueued = unsafe { self.stage_and_enqueue(st, call, dtype, &mut staging)? };
        if let Err(e) = enqueued {
            // Earlier work (queued p2p) may be on the stream: finish it.
            let _ = self.drain(st, start, limit, "collective", &mut staging.memory);
            return Err(e);
        }
        self.drain(st, start, limit, call_name(call), &mut staging.memory)?;
        let ran = if staging.folds() {
            Algorithm::LibraryFold
        } else {
            Algorithm::Library
        };
        // SAFETY: the stream drained; the host outputs are the caller's.
        unsafe { staging.copy_back() }?;
        Ok(ran)
    }

    /// Stages the call's host buffers and enqueues it. The outer error:
    /// staging failed and nothing was enqueued; the inner one: enqueueing
    /// failed (earlier work may be on the stream).
    ///
    /// # Safety
    ///
    /// As [`DeviceBackend::run_collective`].
    unsafe fn stage_and_enqueue(
        &self,
        st: &mut State,
        call: &NativeCall<'_>,
        dtype: DataType,
        staging: &mut Staging<'_>,
    ) -> Result<Result<()>> {
        let es = dtype.size();
        let w = self.lib_rank.len();
        let me = self.rank;
        let lib = |r: usize| self.lib_rank[r];
        // SAFETY (whole block): every address comes from the caller's call,
        // valid for the lengths the collective implies; staged copies are
        // owned by `staging` until the stream drained.
        let enqueued = unsafe {
            match *call {
                NativeCall::AllReduce { send, recv, count, op } => {
                    let (s, d) = staging.input_output(send, recv, count * es)?;
                    let c = LibColl::AllReduce {
                        send: s,
                        recv: d,
                        count,
                        op,
                    };
                    self.reduction(st, &c, dtype, staging)
                }
                NativeCall::Broadcast { buf, count, root } => {
                    let d = staging.output(buf, count * es, me == root)?;
                    if me == root {
                        staging.discard_outputs();
                    }
                    let c = LibColl::Broadcast {
                        buf: d,
                        count,
                        root: lib(root),
                    };
                    self.native(st, &c, dtype)
                }
                NativeCall::Reduce {
                    send,
                    recv,
                    count,
                    op,
                    root,
                } => {
                    let bytes = count * es;
                    let (s, d) = if me == root {
                        staging.input_output(send, recv, bytes)?
                    } else {
                        let s = staging.input(send, bytes)?;
                        (s, s)
                    };
                    let c = LibColl::Reduce {
                        send: s,
                        recv: d,
                        count,
                        op,
                        root: lib(root),
                    };
                    self.reduction(st, &c, dtype, staging)
                }
                NativeCall::ReduceScatter {
                    send,
                    recv,
                    recv_count,
                    op,
                } => {
                    let block = recv_count * es;
                    let mut s = staging.input(send, block * w)?;
                    let d = staging.output(recv, block, false)?;
                    if !self.identity && block > 0 {
                        s = self.permute_blocks(s, block, staging)?;
                    }
                    let c = LibColl::ReduceScatter {
                        send: s,
                        recv: d,
                        recv_count,
                        op,
                    };
                    self.reduction(st, &c, dtype, staging)
                }
                NativeCall::AllGather { send, recv, send_count } => {
                    let block = send_count * es;
                    let s = staging.input(send, block)?;
                    let d = staging.output(recv, block * w, false)?;
                    if self.identity {
                        let c = LibColl::AllGather {
                            send: s,
                            recv: d,
                            send_count,
                        };
                        self.native(st, &c, dtype)
                    } else {
                        let sends: Vec<Block> = (0..w).map(|p| (p, s, send_count)).collect();
                        self.direct(st, &sends, &blocks(d, block, send_count, w), dtype)
                    }
                }
                NativeCall::AllToAll {
                    send,
                    recv,
                    count_per_peer: n,
                } => {
                    let block = n * es;
                    let s = staging.input(send, block * w)?;
                    let d = staging.output(recv, block * w, false)?;
                    let c = LibColl::AllToAll {
                        send: s,
                        recv: d,
                        count: n,
                    };
                    self.library_or(st, self.identity.then_some(c), dtype, |st| {
                        self.direct(st, &blocks(s, block, n, w), &blocks(d, block, n, w), dtype)
                    })
                }
                NativeCall::AllToAllV {
                    send,
                    send_counts,
                    recv,
                    recv_counts,
                } => {
                    let total = |c: &[usize]| c.iter().sum::<usize>() * es;
                    let s = staging.input(send, total(send_counts))?;
                    let d = staging.output(recv, total(recv_counts), false)?;
                    let (sd, rd) = (displacements(send_counts), displacements(recv_counts));
                    // Indexed by library rank.
                    let mut arrays = [vec![0u64; w], vec![0u64; w], vec![0u64; w], vec![0u64; w]];
                    for r in 0..w {
                        let l = lib(r) as usize;
                        arrays[0][l] = send_counts[r] as u64;
                        arrays[1][l] = sd[r] as u64;
                        arrays[2][l] = recv_counts[r] as u64;
                        arrays[3][l] = rd[r] as u64;
                    }
                    let c = LibColl::AllToAllV {
                        send: s,
                        send_counts: &arrays[0],
                        send_displs: &arrays[1],
                        recv: d,
                        recv_counts: &arrays[2],
                        recv_displs: &arrays[3],
                    };
                    self.library_or(st, Some(c), dtype, |st| {
                        let sends: Vec<Block> = (0..w).map(|p| (p, s.add(sd[p] * es), send_counts[p])).collect();
                        let recvs: Vec<Block> = (0..w).map(|p| (p, d.add(rd[p] * es), recv_counts[p])).collect();
                        self.direct(st, &sends, &recvs, dtype)
                    })
                }
                NativeCall::Gather {
                    send,
                    recv,
                    count,
                    root,
                } => {
                    let block = count * es;
                    let s = staging.input(send, block)?;
                    let d = if me == root {
                        staging.output(recv, block * w, false)?
                    } else {
                        s
                    };
                    let c = LibColl::Gather {
                        send: s,
                        recv: d,
                        count,
                        root: lib(root),
                    };
                    self.library_or(st, self.identity.then_some(c), dtype, |st| {
                        let (own, at_root) = self.rooted_blocks(root, s, d, count, es);
                        self.direct(st, &own, &at_root, dtype)
                    })
                }
                NativeCall::Scatter {
                    send,
                    recv,
                    count,
                    root,
                } => {
                    let block = count * es;
                    let d = staging.output(recv, block, false)?;
                    let s = if me == root { staging.input(send, block * w)? } else { d };
                    let c = LibColl::Scatter {
                        send: s,
                        recv: d,
                        count,
                        root: lib(root),
                    };
                    self.library_or(st, self.identity.then_some(c), dtype, |st| {
                        let (own, at_root) = self.rooted_blocks(root, d, s, count, es);
                        self.direct(st, &at_root, &own, dtype)
                    })
                }
                NativeCall::Barrier => {
                    if let Some(r) = self.enqueue(st, &LibColl::Barrier, dtype) {
                        r.map(|()| st.depend_on_all())
                    } else {
                        // No barrier in the library: a one-byte all-reduce.
                        if st.barrier.is_none() {
                            st.barrier = Some(self.ctx.alloc(8)?);
                        }
                        let p = st.barrier.as_ref().map_or(std::ptr::null_mut(), |m| m.ptr);
                        let c = LibColl::AllReduce {
                            send: p,
                            recv: p,
                            count: 1,
                            op: ReduceOp::Sum,
                        };
                        self.native(st, &c, DataType::U8)
                    }
                }
            }
        };
        Ok(enqueued)
    }

    /// Enqueues `call` on the stream (the caller drains it); `None` when the
    /// library lacks it.
    fn enqueue(&self, st: &State, call: &LibColl<'_>, dtype: DataType) -> Option<Result<()>> {
        let stream = st.stream?;
        if let Err(e) = self.ctx.bind() {
            return Some(Err(e));
        }
        // SAFETY: live handles; the call's device ranges stay valid until the
        // caller drained the stream (or kept them alive after abandonment).
        let r = unsafe { self.ctx.driver.collective(self.comm.raw, stream, call, dtype) }?;
        Some(r.map_err(|e| self.dev_err(e)))
    }

    /// Enqueues a collective every library has; all ranks become dependencies.
    pub(super) fn native(&self, st: &mut State, call: &LibColl<'_>, dtype: DataType) -> Result<()> {
        match self.enqueue(st, call, dtype) {
            Some(r) => {
                r?;
                st.depend_on_all();
                Ok(())
            }
            None => Err(Error::Backend {
                backend: self.name(),
                message: format!("the loaded library lacks `{}`", call.name()),
            }),
        }
    }

    /// Enqueues `call` where given and the library has it, else runs
    /// `fallback` (one batch call).
    fn library_or(
        &self,
        st: &mut State,
        call: Option<LibColl<'_>>,
        dtype: DataType,
        fallback: impl FnOnce(&mut State) -> Result<()>,
    ) -> Result<()> {
        match call.and_then(|c| self.enqueue(st, &c, dtype)) {
            // A library collective waits on every rank, so a wait on it must
            // watch every rank for failure.
            Some(r) => r.map(|()| st.depend_on_all()),
            None => fallback(st),
        }
    }

    /// The blocks of a gather (or, mirrored, a scatter) as one batch call:
    /// this rank's own block, moved with the root; at the root, one block of
    /// `all` per rank (itself included).
    ///
    /// # Safety
    ///
    /// `own` valid for `count` elements of `es` bytes; at the root, `all`
    /// valid for one such block per rank.
    unsafe fn rooted_blocks(
        &self,
        root: usize,
        own: *mut u8,
        all: *mut u8,
        count: usize,
        es: usize,
    ) -> (Vec<Block>, Vec<Block>) {
        if self.rank == root {
            // SAFETY: forwarded from the caller.
            let all = unsafe { blocks(all, count * es, count, self.lib_rank.len()) };
            (vec![(self.rank, own, count)], all)
        } else {
            (vec![(root, own, count)], Vec::new())
        }
    }

    /// One batch call that moves `sends` and `recvs` (this group's ranks,
    /// device addresses), each peer at most once per direction; blocks of
    /// this rank to itself are device copies.
    fn direct(&self, st: &mut State, sends: &[Block], recvs: &[Block], dtype: DataType) -> Result<()> {
        let me = self.rank;
        if let (Some(&(_, s, n)), Some(&(_, r, _))) =
            (sends.iter().find(|x| x.0 == me), recvs.iter().find(|x| x.0 == me))
        {
            // SAFETY: both ranges are device memory of `n` elements of this call.
            unsafe { self.ctx.copy(r, s, n * dtype.size(), CopyKind::DeviceToDevice)? };
        }
        let items: Vec<Item> = sends
            .iter()
            .map(|x| (true, x))
            .chain(recvs.iter().map(|x| (false, x)))
            .filter(|(_, x)| x.0 != me)
            .map(|(send, &(peer, ptr, count))| Item {
                send,
                ptr,
                count,
                dtype,
                peer: self.lib_rank[peer],
            })
            .collect();
        if items.is_empty() {
            return Ok(());
        }
        let Some(stream) = st.stream else { return Ok(()) };
        for x in sends.iter().chain(recvs) {
            st.deps[x.0] = true;
        }
        // SAFETY: as in `enqueue`.
        unsafe { self.submit_batch(stream, &items) }
    }

    /// Copies block `j` of `src` to block `perm(j)` of a new device buffer.
    fn permute_blocks(&self, src: *mut u8, block_bytes: usize, staging: &mut Staging<'_>) -> Result<*mut u8> {
        let w = self.lib_rank.len();
        let m: DevMem = self.ctx.alloc(block_bytes * w)?;
        for (r, &l) in self.lib_rank.iter().enumerate() {
            // SAFETY: block `r` of `src` and block `l` of `m` are in bounds.
            unsafe {
                self.ctx.copy(
                    m.ptr.add(l as usize * block_bytes),
                    src.add(r * block_bytes),
                    block_bytes,
                    CopyKind::DeviceToDevice,
                )?;
            }
        }
        Ok(staging.keep(m))
    }
}

/// The offset of each block when blocks of `counts` elements lie end to end.
fn displacements(counts: &[usize]) -> Vec<usize> {
    counts
        .iter()
        .scan(0usize, |at, &n| {
            let here = *at;
            *at += n;
            Some(here)
        })
        .collect()
}

fn call_name(call: &NativeCall<'_>) -> &'static str {
    match call {
        NativeCall::AllReduce { .. } => "all_reduce",
        NativeCall::AllGather { .. } => "all_gather",
        NativeCall::ReduceScatter { .. } => "reduce_scatter",
        NativeCall::AllToAll { .. } => "all_to_all",
        NativeCall::AllToAllV { .. } => "all_to_allv",
        NativeCall::Broadcast { .. } => "broadcast",
        NativeCall::Reduce { .. } => "reduce",
        NativeCall::Gather { .. } => "gather",
        NativeCall::Scatter { .. } => "scatter",
        NativeCall::Barrier => "barrier",
    }
}
