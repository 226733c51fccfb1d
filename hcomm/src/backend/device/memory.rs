//! Device allocations: RAII ownership, the registry that tells device
//! addresses from host ones, and deferred frees while a stream may still use
//! memory.
//!
//! A device operation that timed out (or whose peer failed) cannot be
//! cancelled: the library may still read or write its buffers until its own
//! execution timeout. While any communicator of a device has such abandoned
//! work, frees on that device are deferred until the work drained, so the
//! library never touches memory that was handed back.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use super::driver::Driver;
use super::lock;
use crate::error::{Error, Result};

/// One device of one loaded library: allocation, copies, deferred frees.
pub(crate) struct DeviceCtx {
    pub(crate) driver: Arc<dyn Driver>,
    pub(crate) device: i32,
    /// Communicators of this device with abandoned device work.
    stuck: AtomicUsize,
    deferred: Mutex<Vec<usize>>,
    /// Freed allocations kept for reuse, by size class (drivers that pool).
    pool: Mutex<Pool>,
}

/// Freed device allocations by size class (a power of two of at least
/// [`Pool::MIN_CLASS`] bytes), at most [`Pool::CAP`] bytes in all; a free
/// beyond the cap hands the memory back to the library.
#[derive(Default)]
struct Pool {
    free: HashMap<usize, Vec<usize>>,
    bytes: usize,
}

impl Pool {
    const MIN_CLASS: usize = 512;
    const CAP: usize = 256 << 20;

    fn class(bytes: usize) -> usize {
        bytes.max(Self::MIN_CLASS).next_power_of_two()
    }

    fn take(&mut self, class: usize) -> Option<*mut u8> {
        let p = self.free.get_mut(&class)?.pop()?;
        self.bytes -= class;
        Some(p as *mut u8)
    }

    /// Keeps `ptr` of `class` bytes; `false` when the pool is full.
    fn keep(&mut self, ptr: *mut u8, class: usize) -> bool {
        if self.bytes + class > Self::CAP {
            return false;
        }
        self.bytes += class;
        self.free.entry(class).or_default().push(ptr as usize);
        true
    }
}

impl std::fmt::Debug for DeviceCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceCtx")
            .field("backend", &self.driver.name())
            .field("device", &self.device)
            .finish_non_exhaustive()
    }
}

impl DeviceCtx {
    /// The context of `device` for `driver` (one per driver instance and device).
    pub(crate) fn get(driver: &Arc<dyn Driver>, device: i32) -> Arc<DeviceCtx> {
        type Contexts = Mutex<HashMap<(u64, i32), Arc<DeviceCtx>>>;
        static CTXS: OnceLock<Contexts> = OnceLock::new();
        let mut map = lock(CTXS.get_or_init(|| Mutex::new(HashMap::new())));
        Arc::clone(map.entry((driver.id(), device)).or_insert_with(|| {
            Arc::new(DeviceCtx {
                driver: Arc::clone(driver),
                device,
                stuck: AtomicUsize::new(0),
                deferred: Mutex::new(Vec::new()),
                pool: Mutex::new(Pool::default()),
            })
        }))
    }

    /// Binds the device to the calling thread.
    pub(crate) fn bind(&self) -> Result<()> {
        self.driver
            .bind(self.device)
            .map_err(|e| e.into_error(self.driver.name()))
    }

    /// Allocates `bytes` bytes of device memory (no allocation for 0 bytes).
    pub(crate) fn alloc(self: &Arc<Self>, bytes: usize) -> Result<DevMem> {
        if bytes == 0 {
            return Ok(DevMem {
                ctx: Arc::clone(self),
                ptr: std::ptr::NonNull::<u64>::dangling().as_ptr().cast(),
                bytes: 0,
            });
        }
        self.bind()?;
        let pooled = if self.driver.pools_memory() {
            lock(&self.pool).take(Pool::class(bytes))
        } else {
            None
        };
        let ptr = match pooled {
            Some(p) => p,
            None => self
                .driver
                .malloc(self.alloc_bytes(bytes))
                .map_err(|e| e.into_error(self.driver.name()))?,
        };
        Ok(DevMem {
            ctx: Arc::clone(self),
            ptr,
            bytes,
        })
    }

    /// The bytes allocated for a request of `bytes`: its size class where
    /// freed memory is pooled, so any allocation of the class can reuse it.
    fn alloc_bytes(&self, bytes: usize) -> usize {
        if self.driver.pools_memory() {
            Pool::class(bytes)
        } else {
            bytes
        }
    }

    /// A synchronous copy of `bytes` bytes.
    ///
    /// # Safety
    ///
    /// Both ranges valid for `bytes` bytes on the sides `kind` names.
    pub(crate) unsafe fn copy(&self, dst: *mut u8, src: *const u8, bytes: usize, kind: CopyKind) -> Result<()> {
        if bytes == 0 || std::ptr::eq(dst, src) {
            return Ok(());
        }
        self.bind()?;
        // SAFETY: forwarded from the caller.
        unsafe { self.driver.memcpy(dst, src, bytes, kind) }.map_err(|e| e.into_error(self.driver.name()))
    }

    /// Marks that a communicator of this device left work behind.
    pub(crate) fn mark_stuck(&self) {
        self.stuck.fetch_add(1, Ordering::SeqCst);
    }

    /// The abandoned work of one communicator drained: run deferred frees when
    /// none is left.
    pub(crate) fn unmark_stuck(&self) {
        if self.stuck.fetch_sub(1, Ordering::SeqCst) == 1 {
            let ptrs: Vec<usize> = std::mem::take(&mut *lock(&self.deferred));
            for p in ptrs {
                self.free_now(p as *mut u8);
            }
        }
    }

    fn free(&self, ptr: *mut u8, bytes: usize) {
        if self.stuck.load(Ordering::SeqCst) > 0 {
            lock(&self.deferred).push(ptr as usize);
        } else if !(self.driver.pools_memory() && lock(&self.pool).keep(ptr, Pool::class(bytes))) {
            self.free_now(ptr);
        }
    }

    fn free_now(&self, ptr: *mut u8) {
        let result = self.bind().and_then(|()| {
            // SAFETY: `ptr` came from `malloc` of this driver and device and is
            // freed exactly once (its owner is gone).
            unsafe { self.driver.free(ptr) }.map_err(|e| e.into_error(self.driver.name()))
        });
        if let Err(e) = result {
            record_teardown_error(e);
        }
    }
}

/// Direction of a synchronous copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CopyKind {
    HostToDevice,
    DeviceToHost,
    DeviceToDevice,
}

/// An owned device allocation, freed (or its free deferred) on drop.
pub(crate) struct DevMem {
    pub(crate) ctx: Arc<DeviceCtx>,
    pub(crate) ptr: *mut u8,
    pub(crate) bytes: usize,
}

// SAFETY: a device address is a plain number to the host; the allocation is
// owned by this value alone and the driver calls on it are thread-safe.
unsafe impl Send for DevMem {}
// SAFETY: as above; `&DevMem` exposes only the address.
unsafe impl Sync for DevMem {}

const _: () = {
    const fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<DevMem>();
};

impl Drop for DevMem {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.ctx.free(self.ptr, self.bytes);
        }
    }
}

/// User-visible device allocations (`DeviceBuffer`s), by start address.
static REGISTRY: Mutex<BTreeMap<usize, usize>> = Mutex::new(BTreeMap::new());

/// Records `[ptr, ptr + bytes)` as device memory handed to users.
pub(crate) fn register(ptr: *const u8, bytes: usize) {
    if bytes > 0 {
        lock(&REGISTRY).insert(ptr as usize, bytes);
    }
}

/// Forgets an allocation recorded by [`register`].
pub(crate) fn unregister(ptr: *const u8) {
    lock(&REGISTRY).remove(&(ptr as usize));
}

/// Whether `[ptr, ptr + bytes)` lies in a registered device allocation.
/// Empty ranges count as host memory: nothing is ever copied for them.
pub(crate) fn is_device(ptr: *const u8, bytes: usize) -> bool {
    if bytes == 0 {
        return false;
    }
    let addr = ptr as usize;
    let map = lock(&REGISTRY);
    map.range(..=addr)
        .next_back()
        .is_some_and(|(&start, &len)| addr + bytes <= start + len)
}

static TEARDOWN_ERRORS: Mutex<Vec<Error>> = Mutex::new(Vec::new());

/// Records an error from a destructor (a free, a communicator destroy), which
/// cannot return it.
pub(crate) fn record_teardown_error(error: Error) {
    tracing::warn!(error = %error, "device resource release failed");
    let mut errors = lock(&TEARDOWN_ERRORS);
    if errors.len() < 64 {
        errors.push(error);
    }
}

/// Takes the errors recorded by destructors since the last call.
pub(crate) fn take_teardown_errors() -> Vec<Error> {
    std::mem::take(&mut *lock(&TEARDOWN_ERRORS))
}

#[cfg(test)]
mod tests {
    use super::Pool;

    #[test]
    fn the_pool_reuses_by_size_class_and_stops_at_its_cap() {
        assert_eq!(Pool::class(1), 512);
        assert_eq!(Pool::class(512), 512);
        assert_eq!(Pool::class(513), 1024);
        assert_eq!(Pool::class(3 << 20), 4 << 20);
        let mut pool = Pool::default();
        let a = 0x1000 as *mut u8;
        assert!(pool.keep(a, 1024));
        assert_eq!(pool.take(512), None, "another class");
        assert_eq!(pool.take(1024), Some(a));
        assert_eq!(pool.take(1024), None, "taken once");
        assert_eq!(pool.bytes, 0);
        // fill to the cap: the next one is handed back to the library
        assert!(pool.keep(a, Pool::CAP));
        assert!(!pool.keep(0x2000 as *mut u8, 512));
        assert_eq!(pool.bytes, Pool::CAP);
    }
}
