use hcomm::comm_schedule;

comm_schedule! {
    // A ring that forwards only the first and the last element of each
    // block: right for n = 1 and n = 2; the declared box 1..=4 runs n = 3.
    #[verify(world in 2..=3, n in 1..=4)]
    #[postcondition(all_gather(input -> output))]
    pub fn ends_only(input: &[T; n], output: &mut [T; n * world]) {
        copy input -> output.chunk(rank);
        for s in 0..world - 1 {
            batch {
                send output.chunk((rank - s) % world)[0..1] to (rank + 1) % world;
                recv output.chunk((rank - s - 1) % world)[0..1] from (rank - 1) % world;
            }
            batch {
                send output.chunk((rank - s) % world)[n - 1..n] to (rank + 1) % world;
                recv output.chunk((rank - s - 1) % world)[n - 1..n] from (rank - 1) % world;
            }
        }
    }
}

fn main() {}
