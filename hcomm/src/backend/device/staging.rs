//! Host memory on a device backend: every operation accepts host buffers by
//! staging them through device buffers (copy in, operate, copy out).
//! [`crate::DeviceBuffer`]s skip the copies.

use std::sync::Arc;

use super::memory::{is_device, CopyKind, DevMem, DeviceCtx};
use crate::backend::{Dir, P2pOp};
use crate::element::{DataType, ReduceOp};
use crate::error::Result;

/// Copies `bytes` bytes of host memory into a new device buffer.
///
/// # Safety
///
/// `src` valid for reads of `bytes` bytes.
pub(super) unsafe fn stage_in(ctx: &Arc<DeviceCtx>, src: *const u8, bytes: usize) -> Result<DevMem> {
    let m = ctx.alloc(bytes)?;
    // SAFETY: `m` holds `bytes` device bytes; `src` per the caller.
    unsafe { ctx.copy(m.ptr, src, bytes, CopyKind::HostToDevice)? };
    Ok(m)
}

/// What to do with a receive's staging buffer once its data arrived.
#[derive(Clone, Copy, Debug)]
pub(super) enum Finish {
    /// Copy into the user's host buffer.
    ToHost(*mut u8),
    /// Combine into the user's buffer with `op` (through the host).
    Reduce {
        dst: *mut u8,
        on_device: bool,
        op: ReduceOp,
    },
}

impl Finish {
    /// Runs the finishing step from the device bytes at `src`.
    ///
    /// # Safety
    ///
    /// `src` valid device memory of `count` elements; the finish's target
    /// valid and exclusively this operation's.
    pub(super) unsafe fn apply(self, ctx: &DeviceCtx, src: *const u8, count: usize, dtype: DataType) -> Result<()> {
        let bytes = count * dtype.size();
        if bytes == 0 {
            return Ok(());
        }
        // SAFETY: forwarded from the caller for every copy below.
        unsafe {
            match self {
                Finish::ToHost(host) => ctx.copy(host, src, bytes, CopyKind::DeviceToHost),
                Finish::Reduce { dst, on_device, op } => {
                    let mut incoming = vec![0u64; bytes.div_ceil(8)];
                    let incoming = incoming.as_mut_ptr().cast::<u8>();
                    ctx.copy(incoming, src, bytes, CopyKind::DeviceToHost)?;
                    if on_device {
                        let mut acc = vec![0u64; bytes.div_ceil(8)];
                        let acc = acc.as_mut_ptr().cast::<u8>();
                        ctx.copy(acc, dst, bytes, CopyKind::DeviceToHost)?;
                        dtype.reduce_raw(op, acc, incoming, count);
                        ctx.copy(dst, acc, bytes, CopyKind::HostToDevice)
                    } else {
                        dtype.reduce_raw(op, dst, incoming, count);
                        Ok(())
                    }
                }
            }
        }
    }
}

/// The staging of one point-to-point operation: a device copy of a host
/// send; a device buffer for a receive into host memory or with a
/// reduction, and what to do with its data on arrival.
///
/// # Safety
///
/// The op's buffer valid for `count` elements of `dtype`.
pub(super) unsafe fn stage_p2p(ctx: &Arc<DeviceCtx>, op: &P2pOp) -> Result<(Option<DevMem>, Option<Finish>)> {
    let bytes = op.count * op.dtype.size();
    let on_device = bytes > 0 && is_device(op.ptr, bytes);
    match (op.dir, on_device, op.reduce) {
        (Dir::Send, true, _) | (Dir::Recv, true, None) => Ok((None, None)),
        // SAFETY: forwarded from the caller.
        (Dir::Send, false, _) => unsafe { stage_in(ctx, op.ptr, bytes) }.map(|m| (Some(m), None)),
        (Dir::Recv, _, reduce) => ctx.alloc(bytes).map(|m| {
            let finish = match reduce {
                None => Finish::ToHost(op.ptr),
                Some(op_) => Finish::Reduce {
                    dst: op.ptr,
                    on_device,
                    op: op_,
                },
            };
            (Some(m), Some(finish))
        }),
    }
}

/// The device stand-ins for the host buffers of one collective: `memory`
/// must outlive the device work (it goes to the graveyard on abandonment);
/// [`Staging::copy_back`] moves results into the host outputs.
pub(super) struct Staging<'a> {
    ctx: &'a Arc<DeviceCtx>,
    /// Staging buffers the device may use until the stream drained.
    pub(super) memory: Vec<DevMem>,
    /// `(host, device, bytes)` of every staged output.
    outputs: Vec<(*mut u8, *const u8, usize)>,
    /// Host folds to run once the stream drained, before the copies back.
    folds: Vec<Fold>,
}

/// A reduction on the host of blocks the library delivered
/// ([`super::emulate`]): `dst = fold(op, blocks at src + offsets[q])` for
/// every rank `q` in order.
#[derive(Debug)]
pub(super) struct Fold {
    src: *const u8,
    offsets: Vec<usize>,
    count: usize,
    dtype: DataType,
    op: ReduceOp,
    dst: *mut u8,
}

impl Fold {
    pub(super) fn new(
        src: *const u8,
        offsets: Vec<usize>,
        count: usize,
        dtype: DataType,
        op: ReduceOp,
        dst: *mut u8,
    ) -> Self {
        Fold {
            src,
            offsets,
            count,
            dtype,
            op,
            dst,
        }
    }

    /// Runs the fold.
    ///
    /// # Safety
    ///
    /// `src` valid device memory up to the last offset plus one block,
    /// drained; `dst` valid for one block (host or device), exclusive.
    unsafe fn run(&self, ctx: &DeviceCtx) -> Result<()> {
        let bytes = self.count * self.dtype.size();
        let Some(&last) = self.offsets.iter().max() else {
            return Ok(());
        };
        if bytes == 0 {
            return Ok(());
        }
        let total = last + bytes;
        // u64 words keep every element type aligned
        let mut all = vec![0u64; total.div_ceil(8)];
        let all = all.as_mut_ptr().cast::<u8>();
        let mut acc = vec![0u64; bytes.div_ceil(8)];
        let acc = acc.as_mut_ptr().cast::<u8>();
        // SAFETY: `all` holds `total` bytes, `acc` `bytes`; the source
        // and destination per the caller; every offset is within `total`.
        unsafe {
            ctx.copy(all, self.src, total, CopyKind::DeviceToHost)?;
            std::ptr::copy_nonoverlapping(all.add(self.offsets[0]), acc, bytes);
            for &o in &self.offsets[1..] {
                self.dtype.reduce_raw(self.op, acc, all.add(o), self.count);
            }
            if self.op == ReduceOp::Avg {
                self.dtype.divide_raw(acc, self.count, self.offsets.len());
            }
            local_copy(ctx, self.dst, acc, bytes)
        }
    }
}

impl<'a> Staging<'a> {
    pub(super) fn new(ctx: &'a Arc<DeviceCtx>) -> Self {
        Staging {
            ctx,
            memory: Vec::new(),
            outputs: Vec::new(),
            folds: Vec::new(),
        }
    }

    /// Keeps `m` alive until the stream drained; its device address.
    pub(super) fn keep(&mut self, m: DevMem) -> *mut u8 {
        let p = m.ptr;
        self.memory.push(m);
        p
    }

    /// Device address of an input of `bytes` bytes at `ptr`.
    ///
    /// # Safety
    ///
    /// `ptr` valid for reads of `bytes` bytes (host or this device).
    pub(super) unsafe fn input(&mut self, ptr: *const u8, bytes: usize) -> Result<*mut u8> {
        if bytes == 0 || is_device(ptr, bytes) {
            return Ok(ptr.cast_mut());
        }
        // SAFETY: forwarded from the caller.
        let m = unsafe { stage_in(self.ctx, ptr, bytes)? };
        Ok(self.keep(m))
    }

    /// Device address of an output of `bytes` bytes at `ptr`; host outputs
    /// get a staging buffer (preloaded with the host data when `preload`)
    /// whose content [`Staging::copy_back`] copies back.
    ///
    /// # Safety
    ///
    /// `ptr` valid for reads and writes of `bytes` bytes.
    pub(super) unsafe fn output(&mut self, ptr: *mut u8, bytes: usize, preload: bool) -> Result<*mut u8> {
        if bytes == 0 || is_device(ptr, bytes) {
            return Ok(ptr);
        }
        let m = if preload {
            // SAFETY: forwarded from the caller.
            unsafe { stage_in(self.ctx, ptr, bytes)? }
        } else {
            self.ctx.alloc(bytes)?
        };
        self.outputs.push((ptr, m.ptr, bytes));
        Ok(self.keep(m))
    }

    /// Device addresses of an input and an output of `bytes` bytes each,
    /// which may be the same buffer (in place: one preloaded output).
    ///
    /// # Safety
    ///
    /// As [`Staging::input`] for `send`, [`Staging::output`] for `recv`.
    pub(super) unsafe fn input_output(
        &mut self,
        send: *const u8,
        recv: *mut u8,
        bytes: usize,
    ) -> Result<(*mut u8, *mut u8)> {
        // SAFETY: forwarded from the caller.
        unsafe {
            if std::ptr::eq(send, recv) {
                let d = self.output(recv, bytes, true)?;
                Ok((d, d))
            } else {
                Ok((self.input(send, bytes)?, self.output(recv, bytes, false)?))
            }
        }
    }

    /// Forgets the staged outputs: nothing is copied back (a broadcast root
    /// keeps its own data).
    pub(super) fn discard_outputs(&mut self) {
        self.outputs.clear();
    }

    /// Whether a host fold completes the call (the library moved the data).
    pub(super) fn folds(&self) -> bool {
        !self.folds.is_empty()
    }

    /// Runs `fold` in [`Staging::copy_back`], before the copies.
    pub(super) fn fold(&mut self, fold: Fold) {
        self.folds.push(fold);
    }

    /// Runs the host folds, then copies every staged output back to its
    /// host buffer.
    ///
    /// # Safety
    ///
    /// The stream drained; the host outputs still valid and exclusive.
    pub(super) unsafe fn copy_back(&self) -> Result<()> {
        for f in &self.folds {
            // SAFETY: the stream drained; the fold's buffers are this
            // collective's (staging memory or the caller's outputs).
            unsafe { f.run(self.ctx)? };
        }
        for &(host, dev, bytes) in &self.outputs {
            // SAFETY: `dev` holds the result, `host` is the caller's output
            // buffer of `bytes` bytes.
            unsafe { self.ctx.copy(host, dev, bytes, CopyKind::DeviceToHost)? };
        }
        Ok(())
    }
}

/// `dst = src` for `bytes` bytes, each side host or device memory.
///
/// # Safety
///
/// Both ranges valid for `bytes` bytes, `dst` writable; they may overlap.
pub(super) unsafe fn local_copy(ctx: &DeviceCtx, dst: *mut u8, src: *const u8, bytes: usize) -> Result<()> {
    let kind = match (is_device(dst, bytes), is_device(src, bytes)) {
        (false, false) => {
            // SAFETY: forwarded from the caller.
            unsafe { std::ptr::copy(src, dst, bytes) };
            return Ok(());
        }
        (true, false) => CopyKind::HostToDevice,
        (false, true) => CopyKind::DeviceToHost,
        (true, true) => CopyKind::DeviceToDevice,
    };
    // SAFETY: forwarded from the caller.
    unsafe { ctx.copy(dst, src, bytes, kind) }
}

/// `dst = dst op src` for `count` elements, each side host or device memory
/// (the arithmetic runs on the host).
///
/// # Safety
///
/// Both ranges valid for `count` elements, disjoint, `dst` writable.
pub(super) unsafe fn local_reduce(
    ctx: &Arc<DeviceCtx>,
    dtype: DataType,
    op: ReduceOp,
    dst: *mut u8,
    src: *const u8,
    count: usize,
) -> Result<()> {
    let bytes = count * dtype.size();
    let src_on_device = is_device(src, bytes);
    let dst_on_device = is_device(dst, bytes);
    if !src_on_device && !dst_on_device {
        // SAFETY: forwarded from the caller.
        unsafe { dtype.reduce_raw(op, dst, src, count) };
        return Ok(());
    }
    let finish = Finish::Reduce {
        dst,
        on_device: dst_on_device,
        op,
    };
    if src_on_device {
        // SAFETY: forwarded from the caller.
        return unsafe { finish.apply(ctx, src, count, dtype) };
    }
    // Host source, device destination: stage the source.
    // SAFETY: forwarded from the caller.
    let m = unsafe { stage_in(ctx, src, bytes)? };
    // SAFETY: `m` holds `count` elements; `dst` per the caller.
    unsafe { finish.apply(ctx, m.ptr, count, dtype) }
}
