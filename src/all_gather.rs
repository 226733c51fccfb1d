//! Custom all-gather variants.

use hcomm::comm_schedule;

comm_schedule! {
    /// Ring all-gather: `world - 1` steps, each passes one block to the right.
    #[verify(world in 1..=64)]
    #[postcondition(all_gather(input -> output))]
    pub fn ring_all_gather(input: &[T; n], output: &mut [T; n * world]) {
        copy input -> output.chunk(rank);
        for s in 0..world - 1 {
            batch {
                send output.chunk((rank - s) % world) to (rank + 1) % world;
                recv output.chunk((rank - s - 1) % world) from (rank - 1) % world;
            }
        }
    }

    /// Recursive doubling: in step `k` partners `2^k` apart swap everything
    /// they have gathered so far; `log2(world)` steps.
    #[verify(world in 1..=64)]
    #[requires(is_pow2(world))]
    #[postcondition(all_gather(input -> output))]
    pub fn recursive_doubling_all_gather(input: &[T; n], output: &mut [T; n * world]) {
        copy input -> output.chunk(rank);
        for k in 0..log2(world) {
            let d = pow2(k);
            let peer = rank ^ d;
            let mine = rank / d * d;
            let theirs = peer / d * d;
            batch {
                send output[mine * n..(mine + d) * n] to peer;
                recv output[theirs * n..(theirs + d) * n] from peer;
            }
        }
    }

    /// Bruck's all-gather for any world size: gather rotated into a scratch
    /// buffer in `ceil(log2(world))` steps, then rotate into place.
    #[verify(world in 1..=32)]
    #[postcondition(all_gather(input -> output))]
    pub fn bruck_all_gather(input: &[T; n], output: &mut [T; n * world]) {
        let tmp = scratch[T; n * world];
        copy input -> tmp.chunk(0);
        if world > 1 {
            for k in 0..log2(world - 1) + 1 {
                let d = pow2(k);
                let count = min(d, world - d);
                batch {
                    send tmp[0..count * n] to (rank - d) % world;
                    recv tmp[d * n..(d + count) * n] from (rank + d) % world;
                }
            }
        }
        for i in 0..world {
            copy tmp.chunk(i) -> output.chunk((rank + i) % world);
        }
    }

    /// Two-level all-gather: gather inside groups of `local` consecutive
    /// ranks (a server), then across groups, one rank per server position.
    #[verify(world in 1..=12, local in 1..=world)]
    #[requires(world % local == 0)]
    #[postcondition(all_gather(input -> output))]
    pub fn two_level_all_gather(input: &[T; n], output: &mut [T; n * world], local: usize) {
        let node = scratch[T; n * local];
        all_gather(input -> node) over rank / local;
        all_gather(node -> output) over rank % local;
    }

    /// Sparse all-gather: only the first `active` ranks hold a segment, and
    /// only those segments travel; chunks of inactive ranks are left as they
    /// were.
    #[verify(world in 1..=8, active in 0..=world)]
    pub fn sparse_all_gather(input: &[T; n], output: &mut [T; n * world], active: usize) {
        if rank < active {
            copy input -> output.chunk(rank);
        }
        for s in 1..world {
            let to = (rank + s) % world;
            let from = (rank - s) % world;
            if rank < active && from < active {
                batch {
                    send input to to;
                    recv output.chunk(from) from from;
                }
            } else if rank < active {
                send input to to;
            } else if from < active {
                recv output.chunk(from) from from;
            }
        }
    }
}
