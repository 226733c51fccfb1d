//! FNV-1a: a hash that is the same in every process and build, for the
//! values ranks derive or compare without talking (entry fingerprints,
//! digests of count vectors, subgroup ids, communicator keys).

use std::hash::Hasher;

const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const PRIME: u64 = 0x0100_0000_01b3;

/// FNV-1a over bytes; an integer written with `write_u64` or `write_usize`
/// goes in as one word (one multiply), not as its eight bytes.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Fnv(OFFSET)
    }
}

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(PRIME);
        }
    }

    fn write_u64(&mut self, word: u64) {
        self.0 = (self.0 ^ word).wrapping_mul(PRIME);
    }

    fn write_usize(&mut self, word: usize) {
        self.write_u64(word as u64);
    }
}

#[cfg(test)]
mod tests {
    use std::hash::Hasher;

    use super::Fnv;

    #[test]
    fn bytes_hash_to_the_published_fnv_1a_values() {
        let hash = |bytes: &[u8]| {
            let mut h = Fnv::default();
            h.write(bytes);
            h.finish()
        };
        // the FNV-1a 64-bit test vectors for "", "a" and "foobar"
        assert_eq!(hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(hash(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(hash(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn a_word_is_one_step() {
        let mut h = Fnv::default();
        h.write_usize(7);
        assert_eq!(
            h.finish(),
            (0xcbf2_9ce4_8422_2325_u64 ^ 7).wrapping_mul(0x0100_0000_01b3)
        );
    }
}
