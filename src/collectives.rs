//! Classic collectives as schedules: ring all-reduce, pairwise all-to-all and
//! a binomial-tree broadcast from any root.

use hcomm::comm_schedule;

comm_schedule! {
    /// Ring all-reduce (sum): a reduce-scatter ring, then an all-gather ring.
    #[verify(world in 1..=32)]
    #[postcondition(all_reduce(input -> output, sum))]
    pub fn ring_all_reduce(input: &[T; n * world], output: &mut [T; n * world]) {
        copy input -> output;
        for s in 0..world - 1 {
            batch {
                send output.chunk((rank - s) % world) to (rank + 1) % world;
                recv output.chunk((rank - s - 1) % world) from (rank - 1) % world reduce sum;
            }
        }
        for s in 0..world - 1 {
            batch {
                send output.chunk((rank + 1 - s) % world) to (rank + 1) % world;
                recv output.chunk((rank - s) % world) from (rank - 1) % world;
            }
        }
    }

    /// Pairwise all-to-all: in step `s` send to `rank + s`, receive from
    /// `rank - s`.
    #[verify(world in 1..=32)]
    #[postcondition(all_to_all(input -> output))]
    pub fn pairwise_all_to_all(input: &[T; n * world], output: &mut [T; n * world]) {
        copy input.chunk(rank) -> output.chunk(rank);
        for s in 1..world {
            batch {
                send input.chunk((rank + s) % world) to (rank + s) % world;
                recv output.chunk((rank - s) % world) from (rank - s) % world;
            }
        }
    }

    /// Binomial-tree broadcast from `root`: in round `k` every rank that has
    /// the data passes it `2^k` ranks further.
    #[verify(world in 1..=32, root in 0..world)]
    #[postcondition(broadcast(buf, root = root))]
    pub fn binomial_broadcast(buf: &mut [T; n], root: usize) {
        let v = (rank - root) % world;
        if world > 1 {
            for k in 0..log2(world - 1) + 1 {
                let d = pow2(k);
                if v < d && v + d < world {
                    send buf to (v + d + root) % world;
                } else if v >= d && v < 2 * d {
                    recv buf from (v - d + root) % world;
                }
            }
        }
    }
}
