//! "Device" memory: host allocations tracked so bad pointers are rejected.

use std::alloc::Layout;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use crate::runtime::lock;

#[derive(Clone, Copy, Debug)]
pub(crate) struct Alloc {
    /// Bytes usable by the caller (the requested size).
    pub(crate) size: usize,
    pub(crate) device: i32,
    layout: Layout,
    /// Process-unique, so a pin never counts against a later allocation at
    /// the same address.
    id: u64,
    /// Pending operations that use it.
    pins: usize,
}

static ALLOCS: Mutex<BTreeMap<usize, Alloc>> = Mutex::new(BTreeMap::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(0);
static FREED_IN_USE: AtomicU64 = AtomicU64::new(0);

/// Allocates `size` bytes (rounded up to 32 plus a 32-byte pad, like ACL) on `device`.
pub(crate) fn alloc(size: usize, device: i32) -> Option<*mut u8> {
    let padded = size.checked_add(31)? / 32 * 32 + 32;
    let layout = Layout::from_size_align(padded, 64).ok()?;
    // SAFETY: `layout` has a non-zero size (at least 32 bytes).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return None;
    }
    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
    let a = Alloc {
        size,
        device,
        layout,
        id,
        pins: 0,
    };
    lock(&ALLOCS).insert(ptr as usize, a);
    Some(ptr)
}

/// Frees an allocation made by [`alloc`]; `false` if `ptr` is not one.
/// Freeing memory a pending operation uses succeeds, as under ACL, and is
/// counted (see [`freed_in_use`]); the operation then fails when it runs.
pub(crate) fn free(ptr: *mut u8) -> bool {
    let Some(a) = lock(&ALLOCS).remove(&(ptr as usize)) else {
        return false;
    };
    if a.pins > 0 {
        FREED_IN_USE.fetch_add(1, Ordering::Relaxed);
    }
    // SAFETY: `ptr` was returned by `alloc_zeroed` with exactly this layout and
    // has just been removed from the registry, so it is freed once.
    unsafe { std::alloc::dealloc(ptr, a.layout) };
    true
}

/// The allocation containing `[ptr, ptr + len)`, if any.
pub(crate) fn find(ptr: *const u8, len: usize) -> Option<Alloc> {
    holder(&lock(&ALLOCS), ptr as usize, len)
}

fn holder(map: &BTreeMap<usize, Alloc>, addr: usize, len: usize) -> Option<Alloc> {
    let (&start, a) = map.range(..=addr).next_back()?;
    let end = start.checked_add(a.size)?;
    (addr.checked_add(len)? <= end).then_some(*a)
}

fn contains(map: &BTreeMap<usize, Alloc>, addr: usize, len: usize) -> bool {
    holder(map, addr, len).is_some()
}

/// Why a device range cannot be used any more.
fn gone(addr: usize, len: usize) -> String {
    format!("{len} bytes at {addr:#x} are no longer device memory (freed while the operation was pending?)")
}

/// A copy of the `len` bytes at `addr`, which must lie in a live allocation.
/// The registry stays locked during the copy, so no `aclrtFree` races it.
pub(crate) fn read(addr: usize, len: usize) -> Result<Vec<u8>, String> {
    if len == 0 {
        return Ok(Vec::new());
    }
    let map = lock(&ALLOCS);
    if !contains(&map, addr, len) {
        return Err(gone(addr, len));
    }
    let mut out = vec![0u8; len];
    // SAFETY: `[addr, addr + len)` lies in a live allocation, which cannot
    // be freed while the registry is locked; `out` holds `len` bytes.
    unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, out.as_mut_ptr(), len) };
    Ok(out)
}

/// Writes each `(addr, bytes)` of `writes`, all of which must lie in live
/// allocations: either every range is written or, if one is not device
/// memory any more, none.
pub(crate) fn write_all(writes: &[(usize, Vec<u8>)]) -> Result<(), String> {
    let map = lock(&ALLOCS);
    if let Some((addr, bytes)) = writes
        .iter()
        .find(|(addr, bytes)| !bytes.is_empty() && !contains(&map, *addr, bytes.len()))
    {
        return Err(gone(*addr, bytes.len()));
    }
    for (addr, bytes) in writes.iter().filter(|(_, b)| !b.is_empty()) {
        // SAFETY: `[addr, addr + len)` lies in a live allocation, which
        // cannot be freed while the registry is locked; `bytes` is host
        // memory, never device memory, so they do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), *addr as *mut u8, bytes.len()) };
    }
    Ok(())
}

/// Copies `len` bytes from `src` to `dst`, both in live allocations (they may
/// overlap).
pub(crate) fn copy(dst: usize, src: usize, len: usize) -> Result<(), String> {
    if len == 0 {
        return Ok(());
    }
    let map = lock(&ALLOCS);
    for addr in [src, dst] {
        if !contains(&map, addr, len) {
            return Err(gone(addr, len));
        }
    }
    // SAFETY: both ranges lie in live allocations, which cannot be freed
    // while the registry is locked; `copy` tolerates overlap.
    unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, len) };
    Ok(())
}

/// How many times memory was freed while a pending operation used it.
pub(crate) fn freed_in_use() -> u64 {
    FREED_IN_USE.load(Ordering::Relaxed)
}

/// The allocations a pending operation uses, pinned until it is dropped.
pub(crate) struct Pin(Vec<(usize, u64)>);

impl Pin {
    /// Pins the allocations holding the (address, bytes) ranges `ranges`.
    pub(crate) fn new(ranges: &[(usize, usize)]) -> Pin {
        let mut map = lock(&ALLOCS);
        let mut pinned = Vec::new();
        for &(addr, len) in ranges.iter().filter(|r| r.1 > 0) {
            let Some((&start, a)) = map.range_mut(..=addr).next_back() else {
                continue;
            };
            if addr.saturating_add(len) <= start.saturating_add(a.size) {
                a.pins += 1;
                pinned.push((start, a.id));
            }
        }
        Pin(pinned)
    }
}

impl Drop for Pin {
    fn drop(&mut self) {
        let mut map = lock(&ALLOCS);
        for (start, id) in &self.0 {
            if let Some(a) = map.get_mut(start).filter(|a| a.id == *id) {
                a.pins -= 1;
            }
        }
    }
}
