//! "Device" memory: host allocations tracked so bad pointers are rejected.

use std::alloc::Layout;
use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::runtime::lock;

#[derive(Clone, Copy, Debug)]
pub(crate) struct Alloc {
    /// Bytes usable by the caller (the requested size).
    pub(crate) size: usize,
    pub(crate) device: i32,
    layout: Layout,
}

static ALLOCS: Mutex<BTreeMap<usize, Alloc>> = Mutex::new(BTreeMap::new());

/// Allocates `size` bytes (rounded up to 32 plus a 32-byte pad, like ACL) on `device`.
pub(crate) fn alloc(size: usize, device: i32) -> Option<*mut u8> {
    let padded = size.checked_add(31)? / 32 * 32 + 32;
    let layout = Layout::from_size_align(padded, 64).ok()?;
    // SAFETY: `layout` has a non-zero size (at least 32 bytes).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
    if ptr.is_null() {
        return None;
    }
    lock(&ALLOCS).insert(ptr as usize, Alloc { size, device, layout });
    Some(ptr)
}

/// Frees an allocation made by [`alloc`]; `false` if `ptr` is not one.
pub(crate) fn free(ptr: *mut u8) -> bool {
    let Some(a) = lock(&ALLOCS).remove(&(ptr as usize)) else {
        return false;
    };
    // SAFETY: `ptr` was returned by `alloc_zeroed` with exactly this layout and
    // has just been removed from the registry, so it is freed once.
    unsafe { std::alloc::dealloc(ptr, a.layout) };
    true
}

/// The allocation containing `[ptr, ptr + len)`, if any.
pub(crate) fn find(ptr: *const u8, len: usize) -> Option<Alloc> {
    let addr = ptr as usize;
    let map = lock(&ALLOCS);
    let (&start, a) = map.range(..=addr).next_back()?;
    let end = start.checked_add(a.size)?;
    (addr.checked_add(len)? <= end).then_some(*a)
}
