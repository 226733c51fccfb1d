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

/// A digest of a vector of counts (FNV-1a, a word per count), to compare
/// vectors across ranks with one word each.
pub(crate) fn digest(counts: &[usize]) -> u64 {
    use std::hash::Hasher;
    let mut h = crate::fnv::Fnv::default();
    for &c in counts {
        h.write_usize(c);
    }
    h.finish()
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
