//! Transparent huge pages for large torch tensors that are communicated
//! again and again (gradient buckets, a benchmark's buffer).
//!
//! numpy asks the kernel for huge pages for arrays of 4 MiB and more when it
//! allocates them; torch's CPU allocator does not (unless the program sets
//! `THP_MEM_ALLOC_ENABLE=1` before torch allocates). On 4 KiB pages the
//! runtime's copies and reductions of the same 64 MiB took about twice as
//! long (all-reduce of 2 processes: 39-49 ms on a torch tensor's memory,
//! 21-22 ms on numpy's). Huge pages cannot be asked for before a tensor is
//! first written (torch writes it before we see it), so a tensor of at least
//! [`MIN_BYTES`] lent for the second time at the same address and length is
//! collapsed into huge pages once, in place, with its contents kept
//! (`madvise(MADV_COLLAPSE)`, Linux 6.1 and later; elsewhere the call fails
//! and nothing changes). A tensor lent once, such as a temporary, is never
//! collapsed, and a range is collapsed at most once while it is remembered,
//! so the one-time cost (a copy of the tensor) is paid once per buffer.
//! Nothing is done where the system's `transparent_hugepage` setting is
//! `never`.

use std::sync::{Mutex, OnceLock, PoisonError};

use crate::lent::Raw;

/// Tensors smaller than this are left as they are (numpy's threshold).
const MIN_BYTES: usize = 4 << 20;

/// The size of a huge page on x86-64 and aarch64 with 4 KiB base pages.
const HUGE_PAGE: usize = 2 << 20;

/// How many large ranges are remembered (the oldest is forgotten first).
const REMEMBERED: usize = 64;

/// `madvise` advice `MADV_COLLAPSE` (Linux 6.1; not in every libc crate's
/// list of constants).
const MADV_COLLAPSE: libc::c_int = 25;

/// Large ranges lent so far: `(address, bytes, collapsed)`, newest last.
static SEEN: Mutex<Vec<(usize, usize, bool)>> = Mutex::new(Vec::new());

/// Whether the system has transparent huge pages and allows them (Linux
/// with the setting `always` or `madvise`).
fn allowed() -> bool {
    static ALLOWED: OnceLock<bool> = OnceLock::new();
    *ALLOWED.get_or_init(|| {
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").is_ok_and(|s| !s.contains("[never]"))
    })
}

/// Notes that `raw` is lent; on its second lend (see the module's doc),
/// returns the 2 MiB-aligned part of it to collapse.
fn due(raw: Raw) -> Option<std::ops::Range<usize>> {
    let bytes = raw.len * raw.dtype.size();
    if bytes < MIN_BYTES {
        return None;
    }
    let mut seen = SEEN.lock().unwrap_or_else(PoisonError::into_inner);
    match seen.iter_mut().find(|(a, b, _)| *a == raw.addr && *b == bytes) {
        Some((_, _, true)) => None,
        Some((_, _, collapsed)) => {
            *collapsed = true;
            let start = raw.addr.next_multiple_of(HUGE_PAGE);
            let end = (raw.addr + bytes) / HUGE_PAGE * HUGE_PAGE;
            (start < end).then_some(start..end)
        }
        None => {
            if seen.len() == REMEMBERED {
                seen.remove(0);
            }
            seen.push((raw.addr, bytes, false));
            None
        }
    }
}

/// Collapses `raw`'s memory into huge pages when it is due (see the
/// module's doc). `raw` must describe memory of a live tensor.
pub(crate) fn collapse_if_reused(py: pyo3::Python<'_>, raw: Raw) {
    if !allowed() {
        return;
    }
    let Some(range) = due(raw) else {
        return;
    };
    py.detach(|| {
        // SAFETY: `range` lies inside the tensor's elements (rounded inwards
        // to whole huge pages), which the caller's tensor keeps mapped;
        // MADV_COLLAPSE only changes which physical pages back the range,
        // keeping its contents (concurrent accesses are the kernel's to
        // order, as for khugepaged). A failure (older kernel, no huge page
        // free) leaves the memory as it was; it is only a speed hint.
        let _ = unsafe { libc::madvise(range.start as *mut libc::c_void, range.end - range.start, MADV_COLLAPSE) };
    });
}
