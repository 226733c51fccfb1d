//! Runs enqueued operations on hcomm's host backend.
//!
//! "Device memory" is host memory in the registry, so an operation's buffers
//! become slices typed by its HCCL data type and go to the rank's host
//! communicator. Before a collective moves data, its ranks exchange what they
//! were called with and check that it agrees, the way the stand-in always
//! has: a disagreement fails the collective on every rank and leaves the
//! communicator usable.

use std::cell::RefCell;
use std::mem::{align_of, size_of};

use half::{bf16, f16};
use hcomm::{Comm, Element, ReduceOp};
use hcomm_sys::{HcclDataType, HcclReduceOp};

use crate::codes::stream_failure;
use crate::reduce;
use crate::stream::AsyncError;
use crate::world::CommHandle;

/// The tag of every point-to-point message: HCCL matches a rank pair's sends
/// and receives in posting order.
const TAG: hcomm::Tag = 0;

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
    const ALL: [Kind; 11] = [
        Kind::AllReduce,
        Kind::Broadcast,
        Kind::Reduce,
        Kind::ReduceScatter,
        Kind::AllGather,
        Kind::Scatter,
        Kind::AlltoAll,
        Kind::AlltoAllV,
        Kind::AllGatherV,
        Kind::ReduceScatterV,
        Kind::Barrier,
    ];

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

    fn is_v(self) -> bool {
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

// --- HCCL data types as hcomm elements ----------------------------------------

/// How elements of an HCCL data type travel through hcomm.
#[derive(Clone, Copy, Debug)]
enum Ty {
    I8,
    U8,
    I32,
    U32,
    I64,
    U64,
    F16,
    Bf16,
    F32,
    F64,
    /// No hcomm element (int16, uint16, int128, fp8, hif8): moved as this many
    /// bytes each; int16 and uint16 reduce here.
    Bytes(usize),
}

fn ty(dtype: HcclDataType) -> Ty {
    match dtype {
        HcclDataType::HCCL_DATA_TYPE_INT8 => Ty::I8,
        HcclDataType::HCCL_DATA_TYPE_UINT8 => Ty::U8,
        HcclDataType::HCCL_DATA_TYPE_INT32 => Ty::I32,
        HcclDataType::HCCL_DATA_TYPE_UINT32 => Ty::U32,
        HcclDataType::HCCL_DATA_TYPE_INT64 => Ty::I64,
        HcclDataType::HCCL_DATA_TYPE_UINT64 => Ty::U64,
        HcclDataType::HCCL_DATA_TYPE_FP16 => Ty::F16,
        HcclDataType::HCCL_DATA_TYPE_BFP16 => Ty::Bf16,
        HcclDataType::HCCL_DATA_TYPE_FP32 => Ty::F32,
        HcclDataType::HCCL_DATA_TYPE_FP64 => Ty::F64,
        // Validated at call time: every other type that gets here has a size.
        t => Ty::Bytes(t.size().unwrap_or(1)),
    }
}

/// Runs `$body` with `$t` the element type of `$ty` and `$s` the number of
/// `$t` per HCCL element.
macro_rules! with_element {
    ($ty:expr, $t:ident, $s:ident => $body:expr) => {
        match $ty {
            Ty::I8 => with_element!(@ i8, 1, $t, $s => $body),
            Ty::U8 => with_element!(@ u8, 1, $t, $s => $body),
            Ty::I32 => with_element!(@ i32, 1, $t, $s => $body),
            Ty::U32 => with_element!(@ u32, 1, $t, $s => $body),
            Ty::I64 => with_element!(@ i64, 1, $t, $s => $body),
            Ty::U64 => with_element!(@ u64, 1, $t, $s => $body),
            Ty::F16 => with_element!(@ f16, 1, $t, $s => $body),
            Ty::Bf16 => with_element!(@ bf16, 1, $t, $s => $body),
            Ty::F32 => with_element!(@ f32, 1, $t, $s => $body),
            Ty::F64 => with_element!(@ f64, 1, $t, $s => $body),
            Ty::Bytes(size) => with_element!(@ u8, size, $t, $s => $body),
        }
    };
    (@ $elem:ty, $scale:expr, $t:ident, $s:ident => $body:expr) => {{
        type $t = $elem;
        let $s: usize = $scale;
        $body
    }};
}

/// How a reduction combines blocks that meet on this rank.
#[derive(Clone, Copy, Debug)]
struct Reduction {
    dtype: HcclDataType,
    op: HcclReduceOp,
    /// hcomm's operator where hcomm reduces the type; `None` for int16 and
    /// uint16, which are exchanged as bytes and reduced here.
    hcomm: Option<ReduceOp>,
}

impl Reduction {
    fn of(d: &Desc) -> Reduction {
        let hcomm = match (ty(d.dtype), d.op) {
            (Ty::Bytes(_), _) => None,
            (_, HcclReduceOp::HCCL_REDUCE_SUM) => Some(ReduceOp::Sum),
            (_, HcclReduceOp::HCCL_REDUCE_PROD) => Some(ReduceOp::Prod),
            (_, HcclReduceOp::HCCL_REDUCE_MAX) => Some(ReduceOp::Max),
            (_, HcclReduceOp::HCCL_REDUCE_MIN) => Some(ReduceOp::Min),
            // Not a reduction (validated at call time for those that are).
            _ => None,
        };
        Reduction {
            dtype: d.dtype,
            op: d.op,
            hcomm,
        }
    }

    /// `acc[i] = acc[i] op src[i]`.
    fn combine<T: Element>(self, acc: &mut [T], src: &[T]) {
        if let Some(op) = self.hcomm {
            T::reduce_into(op, acc, src);
            return;
        }
        let (len, src_len) = (std::mem::size_of_val(acc), std::mem::size_of_val(src));
        // SAFETY: hcomm's elements are plain numbers, valid as bytes and from
        // any bytes; the views cover exactly the two slices.
        let (acc, src) = unsafe {
            (
                std::slice::from_raw_parts_mut(acc.as_mut_ptr().cast::<u8>(), len),
                std::slice::from_raw_parts(src.as_ptr().cast::<u8>(), src_len),
            )
        };
        reduce::reduce_into(self.dtype, self.op, acc, src);
    }

    /// `out` = the reduction of the `out.len()`-element blocks of `blocks`, in
    /// rank order.
    fn fold<T: Element>(self, out: &mut [T], blocks: &[T]) {
        let k = out.len();
        if k == 0 {
            return;
        }
        out.copy_from_slice(&blocks[..k]);
        for b in blocks[k..].chunks_exact(k) {
            self.combine(out, b);
        }
    }
}

// --- typed slices over device ranges ------------------------------------------

/// Typed slices over one operation's validated device ranges.
///
/// A range is used in place when it is aligned for its type and no range the
/// operation writes overlaps it (another one, for a written range); otherwise
/// through an aligned copy, written back by [`Views::finish`]. Old HCCL
/// callers may pass in-place or misaligned buffers; neither may become
/// aliasing or misaligned Rust slices.
struct Views {
    /// Byte ranges the operation writes, declared before any slice is made.
    writes: Vec<(usize, usize)>,
    /// Aligned copies, freed on drop.
    copies: RefCell<Vec<*mut [u64]>>,
    /// (copy, device address, bytes) to write back on success.
    write_back: RefCell<Vec<(*const u8, usize, usize)>>,
}

impl Views {
    /// Views for an operation writing the byte ranges `writes` (address, bytes).
    fn new(writes: impl IntoIterator<Item = (usize, usize)>) -> Views {
        Views {
            writes: writes.into_iter().filter(|&(_, b)| b > 0).collect(),
            copies: RefCell::new(Vec::new()),
            write_back: RefCell::new(Vec::new()),
        }
    }

    fn overlaps(&self, addr: usize, bytes: usize) -> usize {
        self.writes
            .iter()
            .filter(|&&(a, b)| addr < a + b && a < addr + bytes)
            .count()
    }

    /// An aligned copy of `bytes` bytes at `addr`.
    ///
    /// # Safety
    ///
    /// `[addr, addr + bytes)` is readable and not written meanwhile.
    unsafe fn copy(&self, addr: usize, bytes: usize) -> *mut u8 {
        let mut words = vec![0u64; bytes.div_ceil(8)].into_boxed_slice();
        // SAFETY: the source per the contract; the copy has room for `bytes`.
        unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, words.as_mut_ptr().cast::<u8>(), bytes) };
        let raw = Box::into_raw(words);
        self.copies.borrow_mut().push(raw);
        raw.cast::<u8>()
    }

    /// The `len` elements at `addr`, read only.
    ///
    /// # Safety
    ///
    /// `[addr, addr + len * size_of::<T>())` is a validated device range that
    /// nobody else writes until the views are dropped; no slice of a written
    /// range exists yet.
    unsafe fn input<T: Element>(&self, addr: usize, len: usize) -> &[T] {
        let bytes = len * size_of::<T>();
        if bytes == 0 {
            return &[];
        }
        let ptr = if addr.is_multiple_of(align_of::<T>()) && self.overlaps(addr, bytes) == 0 {
            addr as *const T
        } else {
            // SAFETY: forwarded contract.
            unsafe { self.copy(addr, bytes) }.cast::<T>().cast_const()
        };
        // SAFETY: `ptr` is aligned and holds `len` elements (any bytes are
        // valid elements); nothing writes them while the views live.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }

    /// The `len` elements at `addr`, to be written.
    ///
    /// # Safety
    ///
    /// As [`Views::input`]; the range was declared in `writes`, is taken once,
    /// and nobody else reads or writes it until [`Views::finish`].
    #[allow(clippy::mut_from_ref)]
    unsafe fn output<T: Element>(&self, addr: usize, len: usize) -> &mut [T] {
        let bytes = len * size_of::<T>();
        if bytes == 0 {
            return &mut [];
        }
        let ptr = if addr.is_multiple_of(align_of::<T>()) && self.overlaps(addr, bytes) == 1 {
            addr as *mut T
        } else {
            // SAFETY: forwarded contract; written ranges that overlap are all
            // copied, so no slice covers what is read here.
            let copy = unsafe { self.copy(addr, bytes) };
            self.write_back.borrow_mut().push((copy.cast_const(), addr, bytes));
            copy.cast::<T>()
        };
        // SAFETY: `ptr` is aligned, holds `len` elements and is handed out once.
        unsafe { std::slice::from_raw_parts_mut(ptr, len) }
    }

    /// Writes the copies of written ranges back (after the operation succeeded).
    fn finish(self) {
        for &(copy, addr, bytes) in &*self.write_back.borrow() {
            // SAFETY: `copy` holds `bytes` bytes (freed only on drop, below);
            // `addr` is the device range it was taken from, writable per the
            // contract of `output`; no slice of either is used any more.
            unsafe { std::ptr::copy_nonoverlapping(copy, addr as *mut u8, bytes) };
        }
    }
}

impl Drop for Views {
    fn drop(&mut self) {
        for &raw in &*self.copies.borrow() {
            // SAFETY: made by `Box::into_raw` in `copy` and freed once, here.
            drop(unsafe { Box::from_raw(raw) });
        }
    }
}

// --- collectives ----------------------------------------------------------------

/// Runs the collective `d` of `h`'s rank: the ranks' calls are checked for
/// agreement, then the data moves.
pub(crate) fn collective(h: &CommHandle, d: &Desc) -> Result<(), AsyncError> {
    let symbol = d.kind.symbol();
    let seq = h.group.enter(h.rank);
    agree(&h.comm, d).map_err(|e| match e {
        hcomm::Error::Timeout {
            rank, waited, limit, ..
        } => {
            let missing = h.group.missing(seq);
            let operation = format!("collective #{seq}: ranks {missing:?} did not call it");
            stream_failure(
                symbol,
                &hcomm::Error::Timeout {
                    operation,
                    rank,
                    waited,
                    limit,
                },
            )
        }
        e => stream_failure(symbol, &e),
    })?;
    let reduction = Reduction::of(d);
    with_element!(ty(d.dtype), T, s => {
        // SAFETY: the call's buffers were validated when it was made and are
        // not touched by anyone else until the stream ran it.
        unsafe { move_data::<T>(&h.comm, d, s, reduction) }
    })
    .map_err(|e| stream_failure(symbol, &e))
}

fn kind_index(kind: Kind) -> u64 {
    Kind::ALL.iter().position(|&k| k == kind).unwrap_or(0) as u64
}

/// Every rank's call, as far as the ranks must agree on it; fails every rank
/// (with a [`hcomm::Error::Mismatch`]) if they do not.
fn agree(c: &Comm, d: &Desc) -> hcomm::Result<()> {
    let n = c.world();
    let width = 5 + 2 * n;
    let mut mine = vec![0u64; width];
    mine[0] = kind_index(d.kind);
    mine[1] = u64::from(d.dtype.0 as u32);
    mine[2] = u64::from(d.op.0 as u32);
    mine[3] = u64::from(d.root);
    mine[4] = d.count;
    for (at, v) in [(5, &d.send_counts), (5 + n, &d.recv_counts)] {
        mine[at..at + v.len()].copy_from_slice(v);
    }
    let mut all = vec![0u64; width * n];
    c.all_gather(&mine, &mut all)?;
    let descs: Vec<Desc> = all
        .chunks_exact(width)
        .map(|w| {
            let mut e = Desc::new(Kind::ALL[w[0] as usize], HcclDataType(w[1] as u32 as i32));
            e.op = HcclReduceOp(w[2] as u32 as i32);
            e.root = w[3] as u32;
            e.count = w[4];
            e.send_counts = w[5..5 + n].to_vec();
            e.recv_counts = w[5 + n..].to_vec();
            e
        })
        .collect();
    // Every rank reaches the same verdict, this rank's view of it first.
    std::iter::once(c.rank())
        .chain(0..n)
        .try_for_each(|r| check_agree(&descs, r).and_then(|()| check_counts(&descs, r)))
        .map_err(|message| hcomm::Error::Mismatch { message })
}

fn check_agree(descs: &[Desc], rank: usize) -> Result<(), String> {
    let mine = &descs[rank];
    for (r, d) in descs.iter().enumerate() {
        let same = d.kind == mine.kind
            && d.dtype == mine.dtype
            && d.op == mine.op
            && d.root == mine.root
            && (d.kind.is_v() || d.count == mine.count);
        if !same {
            return Err(format!(
                "collective mismatch: rank {rank} called {}({:?} x {}, op {:?}, root {}) but rank {r} called {}({:?} x {}, op {:?}, root {})",
                mine.kind.symbol(), mine.dtype, mine.count, mine.op, mine.root,
                d.kind.symbol(), d.dtype, d.count, d.op, d.root
            ));
        }
    }
    Ok(())
}

/// Per-peer counts of V-ops: what `rank` expects from each rank is what that
/// rank sends it.
fn check_counts(descs: &[Desc], rank: usize) -> Result<(), String> {
    let me = &descs[rank];
    for (j, d) in descs.iter().enumerate() {
        let (expects, sends) = match me.kind {
            Kind::AlltoAllV => (me.recv_counts[j], d.send_counts[rank]),
            Kind::AllGatherV => (me.recv_counts[j], d.count),
            Kind::ReduceScatterV => {
                if d.send_counts[rank] != me.count {
                    return Err(format!(
                        "HcclReduceScatterV: rank {rank} receives {} elements but rank {j} sends it {}",
                        me.count, d.send_counts[rank]
                    ));
                }
                continue;
            }
            _ => return Ok(()),
        };
        if expects != sends {
            return Err(format!(
                "{}: rank {rank} expects {expects} elements from rank {j}, which sends {sends}",
                me.kind.symbol()
            ));
        }
    }
    Ok(())
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

/// `v` in elements of the type moved (`s` per HCCL element).
fn scaled(v: &[u64], s: usize) -> Vec<usize> {
    v.iter().map(|&x| x as usize * s).collect()
}

/// Sends `counts[j]` elements at `displs[j]` of `input` to rank `j`; returns
/// what the ranks sent this one, packed in rank order (`recv_counts[j]` from
/// rank `j`).
fn exchange_v<T: Element>(
    c: &Comm,
    input: &[T],
    (counts, displs): (&[usize], &[usize]),
    recv_counts: &[usize],
) -> hcomm::Result<Vec<T>> {
    let mut packed = Vec::with_capacity(counts.iter().sum());
    for (&k, &at) in counts.iter().zip(displs) {
        packed.extend_from_slice(&input[at..at + k]);
    }
    let mut got = vec![T::ZERO; recv_counts.iter().sum()];
    c.all_to_allv(&packed, counts, &mut got, recv_counts)?;
    Ok(got)
}

/// Moves the data of collective `d` (which every rank agreed on).
///
/// # Safety
///
/// The buffers of `d` are validated device ranges (for `d.count` and the V
/// arrays, in elements of `s` x `T`) that nobody else touches meanwhile.
unsafe fn move_data<T: Element>(c: &Comm, d: &Desc, s: usize, red: Reduction) -> hcomm::Result<()> {
    let (n, me) = (c.world(), c.rank());
    let k = d.count as usize * s;
    let root = d.root as usize;
    let bytes = |len: usize| len * size_of::<T>();
    // SAFETY (every `input`/`output` below): forwarded contract; written ranges
    // are declared in `Views::new` and each is taken once.
    unsafe {
        match d.kind {
            Kind::Barrier => c.barrier(),
            Kind::AllReduce => {
                let v = Views::new([(d.recv, bytes(k))]);
                match red.hcomm {
                    Some(op) if d.send == d.recv => c.all_reduce_in_place(v.output::<T>(d.recv, k), op)?,
                    Some(op) => c.all_reduce(v.input::<T>(d.send, k), v.output::<T>(d.recv, k), op)?,
                    None => {
                        let mut all = vec![T::ZERO; n * k];
                        c.all_gather(v.input::<T>(d.send, k), &mut all)?;
                        red.fold(v.output::<T>(d.recv, k), &all);
                    }
                }
                v.finish();
                Ok(())
            }
            Kind::Broadcast => {
                let v = Views::new([(d.recv, bytes(k))]);
                c.broadcast(v.output::<T>(d.recv, k), root)?;
                v.finish();
                Ok(())
            }
            Kind::Reduce => {
                let out = if me == root { k } else { 0 };
                let v = Views::new([(d.recv, bytes(out))]);
                let send = v.input::<T>(d.send, k);
                if let Some(op) = red.hcomm {
                    c.reduce(send, v.output::<T>(d.recv, out), op, root)?;
                } else {
                    let mut all = vec![T::ZERO; n * out];
                    c.gather(send, &mut all, root)?;
                    red.fold(v.output::<T>(d.recv, out), &all);
                }
                v.finish();
                Ok(())
            }
            Kind::ReduceScatter => {
                let v = Views::new([(d.recv, bytes(k))]);
                let send = v.input::<T>(d.send, n * k);
                if let Some(op) = red.hcomm {
                    c.reduce_scatter(send, v.output::<T>(d.recv, k), op)?;
                } else {
                    let mut blocks = vec![T::ZERO; n * k];
                    c.all_to_all(send, &mut blocks)?;
                    red.fold(v.output::<T>(d.recv, k), &blocks);
                }
                v.finish();
                Ok(())
            }
            Kind::AllGather => {
                let v = Views::new([(d.recv, bytes(n * k))]);
                c.all_gather(v.input::<T>(d.send, k), v.output::<T>(d.recv, n * k))?;
                v.finish();
                Ok(())
            }
            Kind::Scatter => {
                let v = Views::new([(d.recv, bytes(k))]);
                let send = v.input::<T>(d.send, if me == root { n * k } else { 0 });
                c.scatter(send, v.output::<T>(d.recv, k), root)?;
                v.finish();
                Ok(())
            }
            Kind::AlltoAll => {
                let v = Views::new([(d.recv, bytes(n * k))]);
                c.all_to_all(v.input::<T>(d.send, n * k), v.output::<T>(d.recv, n * k))?;
                v.finish();
                Ok(())
            }
            Kind::AlltoAllV | Kind::AllGatherV => {
                // An all-gather-V sends its one block to every rank.
                let (send_len, counts, displs) = if d.kind == Kind::AlltoAllV {
                    let len = extent(&d.send_counts, &d.send_displs) as usize * s;
                    (len, scaled(&d.send_counts, s), scaled(&d.send_displs, s))
                } else {
                    (k, vec![k; n], vec![0; n])
                };
                let (recv_counts, recv_displs) = (scaled(&d.recv_counts, s), scaled(&d.recv_displs, s));
                let recv_len = extent(&d.recv_counts, &d.recv_displs) as usize * s;
                let v = Views::new([(d.recv, bytes(recv_len))]);
                let got = exchange_v(c, v.input::<T>(d.send, send_len), (&counts, &displs), &recv_counts)?;
                // Gaps between the blocks keep what they held.
                let out = v.output::<T>(d.recv, recv_len);
                let mut from = 0;
                for (&len, &at) in recv_counts.iter().zip(&recv_displs) {
                    out[at..at + len].copy_from_slice(&got[from..from + len]);
                    from += len;
                }
                v.finish();
                Ok(())
            }
            Kind::ReduceScatterV => {
                let (counts, displs) = (scaled(&d.send_counts, s), scaled(&d.send_displs, s));
                let send_len = extent(&d.send_counts, &d.send_displs) as usize * s;
                let v = Views::new([(d.recv, bytes(k))]);
                let blocks = exchange_v(c, v.input::<T>(d.send, send_len), (&counts, &displs), &vec![k; n])?;
                red.fold(v.output::<T>(d.recv, k), &blocks);
                v.finish();
                Ok(())
            }
        }
    }
}

// --- point-to-point ---------------------------------------------------------------

/// Runs sends and receives that progress together (one item: `HcclSend` or
/// `HcclRecv`, synchronous like HCCL's); `symbol` names the call in errors.
pub(crate) fn point_to_point(h: &CommHandle, symbol: &str, items: &[Item]) -> Result<(), AsyncError> {
    let c = &h.comm;
    let len = |it: &Item| with_element!(ty(it.dtype), T, s => (it.count as usize * s, size_of::<T>()));
    let v = Views::new(items.iter().filter(|it| !it.send).map(|it| {
        let (k, size) = len(it);
        (it.addr, k * size)
    }));
    // SAFETY (every `input`/`output` below): the items' buffers were validated
    // when the call was made and nobody else touches them until the stream ran
    // it; every received range is declared in `Views::new` and taken once.
    let result = match items {
        // A blocking send or receive to this rank itself is refused by hcomm; in
        // a batch it waits, as HCCL's does, for the matching call.
        [it] if it.peer != c.rank() => with_element!(ty(it.dtype), T, s => {
            let k = it.count as usize * s;
            if it.send {
                c.send_tagged(unsafe { v.input::<T>(it.addr, k) }, it.peer, TAG)
            } else {
                c.recv_tagged(unsafe { v.output::<T>(it.addr, k) }, it.peer, TAG)
            }
        }),
        _ => c.batch(|b| {
            for it in items {
                with_element!(ty(it.dtype), T, s => {
                    let k = it.count as usize * s;
                    if it.send {
                        b.send_tagged(unsafe { v.input::<T>(it.addr, k) }, it.peer, TAG)?;
                    } else {
                        b.recv_tagged(unsafe { v.output::<T>(it.addr, k) }, it.peer, TAG)?;
                    }
                });
            }
            Ok(())
        }),
    };
    result.map_err(|e| stream_failure(symbol, &e))?;
    v.finish();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn misaligned_and_overlapping_ranges_go_through_copies() {
        let mut mem = [0u8; 64];
        let base = mem.as_mut_ptr() as usize;
        let at = base.next_multiple_of(8);
        // SAFETY: every range lies in `mem`, which nothing else touches.
        unsafe {
            std::ptr::copy_nonoverlapping([1.5f32, 2.5].as_ptr().cast::<u8>(), (at + 1) as *mut u8, 8);
            let v = Views::new([(at + 16, 8), (at + 20, 8)]);
            let input = v.input::<f32>(at + 1, 2);
            assert_eq!(
                input.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                [1.5f32.to_bits(), 2.5f32.to_bits()]
            );
            assert!(v.copies.borrow().len() == 1, "misaligned input copied");
            let out = v.output::<f32>(at + 16, 2);
            out.copy_from_slice(&[7.0, 8.0]);
            assert_eq!(v.write_back.borrow().len(), 1, "overlapping outputs copied");
            v.finish();
            let mut back = [0f32; 2];
            std::ptr::copy_nonoverlapping((at + 16) as *const u8, back.as_mut_ptr().cast::<u8>(), 8);
            assert_eq!(back.map(f32::to_bits), [7f32.to_bits(), 8f32.to_bits()]);
        }
    }

    #[test]
    fn int16_reductions_fold_in_rank_order() {
        let red = Reduction {
            dtype: HcclDataType::HCCL_DATA_TYPE_INT16,
            op: HcclReduceOp::HCCL_REDUCE_MAX,
            hcomm: None,
        };
        let blocks: Vec<u8> = [3i16, -4, 5, 6].iter().flat_map(|x| x.to_ne_bytes()).collect();
        let mut out = [0u8; 4];
        red.fold(&mut out, &blocks);
        let want: Vec<u8> = [5i16, 6].iter().flat_map(|x| x.to_ne_bytes()).collect();
        assert_eq!(out.as_slice(), want.as_slice());
    }
}
