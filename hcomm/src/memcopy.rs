//! Copies of message data between host buffers.
//!
//! A copy of a message of an eighth of the last-level cache or more
//! ([`streaming_threshold`]) writes its destination with non-temporal
//! stores: the lines go to memory without being read first, which a copy
//! through the cache must do (a read for ownership of every destination
//! line), and without evicting the data the ranks are still working on.
//! A collective that moves such messages moves several of them per rank,
//! more than the cache holds. Smaller copies, which stay in the cache, go
//! through `memcpy`, which is faster there; so do all copies on other
//! architectures. `BENCHMARKS.md` ("Copies and waits") has the
//! measurements behind the threshold.

use std::sync::OnceLock;

/// Copies `bytes` bytes from `src` to `dst`.
///
/// # Safety
///
/// `src` valid for reads and `dst` valid for writes of `bytes` bytes; the
/// two ranges do not overlap.
#[inline]
pub(crate) unsafe fn copy_nonoverlapping(src: *const u8, dst: *mut u8, bytes: usize) {
    if bytes >= streaming_threshold() {
        // SAFETY: forwarded from the caller.
        unsafe { streaming::copy(src, dst, bytes) };
        return;
    }
    // SAFETY: forwarded from the caller.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, bytes) };
}

/// Copies `bytes` bytes from `src` to `dst`, which may overlap.
///
/// # Safety
///
/// `src` valid for reads and `dst` valid for writes of `bytes` bytes.
#[inline]
pub(crate) unsafe fn copy(src: *const u8, dst: *mut u8, bytes: usize) {
    if (src as usize).abs_diff(dst as usize) >= bytes {
        // SAFETY: forwarded from the caller; the ranges start `bytes` or
        // more apart, so they do not overlap.
        unsafe { copy_nonoverlapping(src, dst, bytes) };
    } else {
        // SAFETY: forwarded from the caller.
        unsafe { std::ptr::copy(src, dst, bytes) };
    }
}

/// Copies of at least this many bytes bypass the cache: an eighth of the
/// last-level cache of CPU 0 (as sysfs reports it; 32 MiB when it does
/// not), at least 1 MiB.
pub(crate) fn streaming_threshold() -> usize {
    static THRESHOLD: OnceLock<usize> = OnceLock::new();
    *THRESHOLD.get_or_init(|| (last_level_cache().unwrap_or(32 << 20) / 8).max(1 << 20))
}

/// The size of CPU 0's highest-level cache, from
/// `/sys/devices/system/cpu/cpu0/cache/index*/{level,size}`.
fn last_level_cache() -> Option<usize> {
    let dir = std::path::Path::new("/sys/devices/system/cpu/cpu0/cache");
    let mut best: Option<(u32, usize)> = None;
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let read = |name: &str| std::fs::read_to_string(entry.path().join(name)).ok();
        let (Some(level), Some(size)) = (read("level"), read("size")) else {
            continue;
        };
        let (Ok(level), Some(size)) = (level.trim().parse::<u32>(), parse_cache_size(&size)) else {
            continue;
        };
        if best.is_none_or(|(l, _)| level > l) {
            best = Some((level, size));
        }
    }
    best.map(|(_, size)| size)
}

/// `32768K` (sysfs's notation), `8M` or `512` (bytes).
fn parse_cache_size(text: &str) -> Option<usize> {
    let text = text.trim();
    let (digits, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => text.split_at(i),
        None => (text, ""),
    };
    let n: usize = digits.parse().ok()?;
    let unit = match unit {
        "" => 1,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(unit)
}

#[cfg(target_arch = "x86_64")]
mod streaming {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};

    /// `memcpy` with non-temporal stores: the destination's unaligned head
    /// and tail through `memcpy`, its 64-byte aligned middle 16 bytes at a
    /// time with `movntdq`, then a store fence, so that the data is visible
    /// to other threads before anything this thread stores after the copy
    /// (the completion of the transfer, say).
    ///
    /// # Safety
    ///
    /// `src` valid for reads and `dst` valid for writes of `bytes` bytes;
    /// the two ranges do not overlap.
    #[expect(
        clippy::cast_ptr_alignment,
        reason = "`loadu` reads unaligned memory; the stores' addresses are 64-byte aligned"
    )]
    pub(super) unsafe fn copy(src: *const u8, dst: *mut u8, bytes: usize) {
        let head = dst.align_offset(64).min(bytes);
        // SAFETY: the first `head <= bytes` bytes of both ranges.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, head) };
        let body = (bytes - head) / 64 * 64;
        let mut k = head;
        while k < head + body {
            // SAFETY: bytes `k..k + 64` lie in both ranges (`k + 64 <= head
            // + body <= bytes`); the loads may be unaligned; `dst + k` is
            // 64-byte aligned (`dst + head` is, and `k - head` is a multiple
            // of 64), as the 16-byte stores need.
            unsafe {
                let s = src.add(k);
                let d = dst.add(k);
                let a = _mm_loadu_si128(s.cast::<__m128i>());
                let b = _mm_loadu_si128(s.add(16).cast::<__m128i>());
                let c = _mm_loadu_si128(s.add(32).cast::<__m128i>());
                let e = _mm_loadu_si128(s.add(48).cast::<__m128i>());
                _mm_stream_si128(d.cast::<__m128i>(), a);
                _mm_stream_si128(d.add(16).cast::<__m128i>(), b);
                _mm_stream_si128(d.add(32).cast::<__m128i>(), c);
                _mm_stream_si128(d.add(48).cast::<__m128i>(), e);
            }
            k += 64;
        }
        // SAFETY: `sfence` has no operands; SSE is part of x86-64.
        unsafe { _mm_sfence() };
        // SAFETY: the last `bytes - k` bytes of both ranges.
        unsafe { std::ptr::copy_nonoverlapping(src.add(k), dst.add(k), bytes - k) };
    }
}

/// Elsewhere the large copies are `memcpy`'s too.
#[cfg(not(target_arch = "x86_64"))]
mod streaming {
    /// `memcpy`.
    ///
    /// # Safety
    ///
    /// As [`super::copy_nonoverlapping`].
    pub(super) unsafe fn copy(src: *const u8, dst: *mut u8, bytes: usize) {
        // SAFETY: forwarded from the caller.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, bytes) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_sizes_parse_as_sysfs_writes_them() {
        assert_eq!(parse_cache_size("32768K\n"), Some(32 << 20));
        assert_eq!(parse_cache_size("8M"), Some(8 << 20));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size("12Q"), None);
        assert_eq!(parse_cache_size(""), None);
        assert!(streaming_threshold() >= 1 << 20);
    }

    /// Every alignment of source and destination and every length around
    /// the 64-byte body, through the streaming path directly and through
    /// `copy` (overlapping both ways, and disjoint above the threshold).
    #[test]
    fn copies_are_exact_at_every_alignment_and_length() {
        let src: Vec<u8> = (0..4096u32).map(|i| (i * 7 + 3) as u8).collect();
        for s_off in 0..64 {
            for d_off in [0, 1, 15, 16, 33, 63] {
                for len in [0, 1, 63, 64, 65, 127, 128, 129, 1000, 2048] {
                    let mut dst = vec![0u8; 4096];
                    // SAFETY: both ranges lie inside their vectors.
                    unsafe { streaming::copy(src.as_ptr().add(s_off), dst.as_mut_ptr().add(d_off), len) };
                    assert_eq!(
                        &dst[d_off..d_off + len],
                        &src[s_off..s_off + len],
                        "{s_off} {d_off} {len}"
                    );
                    assert!(dst[..d_off].iter().all(|&b| b == 0));
                    assert!(dst[d_off + len..].iter().all(|&b| b == 0));
                }
            }
        }
        let n = streaming_threshold() + 4099;
        let big: Vec<u8> = (0..n).map(|i| (i % 251) as u8).collect();
        let mut out = vec![0u8; n + 8];
        // SAFETY: both ranges lie inside their vectors.
        unsafe { copy(big.as_ptr(), out.as_mut_ptr().add(3), n) };
        assert_eq!(&out[3..n + 3], &big[..]);
        for shift in [1usize, 4096] {
            let mut buf: Vec<u8> = (0..n + shift).map(|i| (i % 253) as u8).collect();
            let want: Vec<u8> = buf[..n].to_vec();
            // SAFETY: both ranges lie inside `buf`; `copy` allows overlap.
            unsafe { copy(buf.as_ptr(), buf.as_mut_ptr().add(shift), n) };
            assert_eq!(&buf[shift..], &want[..]);
            let mut buf: Vec<u8> = (0..n + shift).map(|i| (i % 253) as u8).collect();
            let want: Vec<u8> = buf[shift..].to_vec();
            // SAFETY: as above, the other direction.
            unsafe { copy(buf.as_ptr().add(shift), buf.as_mut_ptr(), n) };
            assert_eq!(&buf[..n], &want[..]);
        }
    }
}
