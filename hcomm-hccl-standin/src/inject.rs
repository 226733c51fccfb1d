//! Test hooks: make a symbol fail with a chosen code; count misuse the
//! stand-in can see and real hardware would not report.

use std::collections::HashMap;
use std::ffi::{c_char, c_int, CStr};
use std::sync::Mutex;

static ONE_SHOT: Mutex<Option<HashMap<String, Vec<i32>>>> = Mutex::new(None);

/// The code `symbol` must return instead of running, if an injection applies.
pub(crate) fn injected(symbol: &str) -> Option<i32> {
    {
        let mut map = ONE_SHOT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(codes) = map.as_mut().and_then(|m| m.get_mut(symbol)) {
            if !codes.is_empty() {
                return Some(codes.remove(0));
            }
        }
    }
    let spec = std::env::var("HCOMM_STANDIN_FAIL").ok()?;
    spec.split(',').find_map(|item| {
        let (name, code) = item.trim().split_once(':')?;
        (name.trim() == symbol).then(|| code.trim().parse().ok())?
    })
}

/// Makes the next call of `symbol` return `code`.
///
/// # Safety
///
/// `symbol` is null or a NUL-terminated string.
#[no_mangle]
pub unsafe extern "C" fn hcomm_standin_inject_error(symbol: *const c_char, code: c_int) -> c_int {
    if symbol.is_null() {
        return -1;
    }
    // SAFETY: non-null and NUL-terminated per the contract.
    let Ok(name) = unsafe { CStr::from_ptr(symbol) }.to_str() else {
        return -1;
    };
    let mut map = ONE_SHOT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    map.get_or_insert_with(HashMap::new)
        .entry(name.to_owned())
        .or_default()
        .push(code);
    0
}

/// Drops every pending one-shot injection.
#[no_mangle]
pub extern "C" fn hcomm_standin_clear_injections() {
    let mut map = ONE_SHOT.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    *map = None;
}

/// How many times `aclrtFree` freed memory that an enqueued operation had
/// not finished with (on real hardware: a device write into freed memory).
#[no_mangle]
pub extern "C" fn hcomm_standin_freed_in_use() -> u64 {
    crate::memory::freed_in_use()
}
