use hcomm::comm_schedule;

comm_schedule! {
    // Forwards each block in two pieces, [0..n + 1] and [m - 1..m + n]:
    // they cover the block only while m <= n + 2, which every (m, n) in
    // 1..=2 satisfies; the first wrong point is m = 4, n = 1.
    #[verify(world in 2..=2)]
    #[postcondition(all_gather(input -> output))]
    pub fn two_pieces(tail: &[T; m], input: &[T; n + m], output: &mut [T; (n + m) * world]) {
        copy input -> output.chunk(rank);
        for s in 0..world - 1 {
            batch {
                send output.chunk((rank - s) % world)[0..n + 1] to (rank + 1) % world;
                recv output.chunk((rank - s - 1) % world)[0..n + 1] from (rank - 1) % world;
            }
            batch {
                send output.chunk((rank - s) % world)[m - 1..m + n] to (rank + 1) % world;
                recv output.chunk((rank - s - 1) % world)[m - 1..m + n] from (rank - 1) % world;
            }
        }
    }
}

fn main() {}
