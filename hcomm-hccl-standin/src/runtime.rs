//! Process state shared by the ACL and HCCL halves: thread device, recent error
//! message, timeouts from the environment, and handle registries.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

thread_local! {
    static DEVICE: Cell<Option<i32>> = const { Cell::new(None) };
    static RECENT: RefCell<CString> = RefCell::new(CString::default());
}

/// Locks, ignoring poisoning (no code here panics while holding a lock).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Waits on `cv` until notified or `deadline` (`None`: no deadline) passed.
pub(crate) fn wait_until<'a, T>(
    cv: &Condvar,
    guard: MutexGuard<'a, T>,
    deadline: Option<Instant>,
) -> MutexGuard<'a, T> {
    match deadline {
        None => cv.wait(guard).unwrap_or_else(PoisonError::into_inner),
        Some(d) => {
            let left = d.saturating_duration_since(Instant::now());
            cv.wait_timeout(guard, left).unwrap_or_else(PoisonError::into_inner).0
        }
    }
}

/// `timeout` from now (`None`: never, also when it does not fit an `Instant`).
pub(crate) fn deadline(timeout: Option<Duration>) -> Option<Instant> {
    timeout.and_then(|t| Instant::now().checked_add(t))
}

pub(crate) fn device_count() -> i32 {
    std::env::var("HCOMM_STANDIN_DEVICE_COUNT")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .filter(|&n: &i32| n > 0)
        .unwrap_or(8)
}

pub(crate) fn current_device() -> Option<i32> {
    DEVICE.with(Cell::get)
}

pub(crate) fn set_current_device(device: Option<i32>) {
    DEVICE.with(|d| d.set(device));
}

/// Records `message` as the calling thread's most recent error.
pub(crate) fn set_recent(message: &str) {
    let c = CString::new(message.replace('\0', " ")).unwrap_or_default();
    RECENT.with(|r| *r.borrow_mut() = c);
}

/// Pointer to the calling thread's most recent error message (valid until the
/// next failure on this thread).
pub(crate) fn recent_ptr() -> *const std::ffi::c_char {
    RECENT.with(|r| r.borrow().as_ptr())
}

fn env_secs(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(default)
}

/// `HCCL_CONNECT_TIMEOUT` (default 120 s): how long init waits for the other ranks.
pub(crate) fn connect_timeout() -> Duration {
    Duration::from_secs(env_secs("HCCL_CONNECT_TIMEOUT", 120))
}

/// `HCCL_EXEC_TIMEOUT` (default 1836 s, 0 = never): how long an op waits for peers.
pub(crate) fn default_exec_timeout() -> Option<Duration> {
    match env_secs("HCCL_EXEC_TIMEOUT", 1836) {
        0 => None,
        s => Some(Duration::from_secs(s)),
    }
}

/// Live handles of one kind, keyed by the address handed to C.
pub(crate) struct Registry<T> {
    map: Mutex<Option<HashMap<usize, Arc<T>>>>,
}

impl<T> Registry<T> {
    pub(crate) const fn new() -> Self {
        Self { map: Mutex::new(None) }
    }

    /// Registers `value` and returns its handle.
    pub(crate) fn insert(&self, value: Arc<T>) -> *mut std::ffi::c_void {
        let handle = Arc::as_ptr(&value) as usize;
        lock(&self.map).get_or_insert_with(HashMap::new).insert(handle, value);
        handle as *mut std::ffi::c_void
    }

    pub(crate) fn get(&self, handle: *mut std::ffi::c_void) -> Option<Arc<T>> {
        lock(&self.map).as_ref()?.get(&(handle as usize)).cloned()
    }

    pub(crate) fn remove(&self, handle: *mut std::ffi::c_void) -> Option<Arc<T>> {
        lock(&self.map).as_mut()?.remove(&(handle as usize))
    }
}
