//! Collective operations: the algorithms themselves and the methods of
//! [`crate::Comm`] that run them. Their descriptors and the consistency
//! header every rank exchanges are [`crate::header`]'s; algorithm names and
//! selection are `select.rs`'s.

mod api;
#[cfg(test)]
pub(crate) mod conformance;
mod direct;
mod halving_doubling;
mod nonblocking;
mod one_shot;
mod ring;
pub mod schedules;
mod tree;

pub(crate) use crate::header::{CollHeader, Collective, Exchange};
pub(crate) use crate::select::Algorithm;

pub(crate) use crate::raw::part;

/// A digest of a vector of counts (FNV-1a over their bytes), to compare
/// vectors across ranks with one word each.
pub(crate) fn digest(counts: &[usize]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &c in counts {
        for b in (c as u64).to_le_bytes() {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::part;

    #[test]
    fn parts_cover_the_buffer_in_order() {
        for len in 0..20 {
            for parts in 1..7 {
                let mut next = 0;
                for i in 0..parts {
                    let (start, count) = part(len, parts, i);
                    assert_eq!(start, next);
                    next += count;
                }
                assert_eq!(next, len);
            }
        }
    }
}
