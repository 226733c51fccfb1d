use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 1..=8)]
    #[postcondition(all_gather(input -> output))]
    pub fn ring(input: &[T; n], output: &mut [T; n * world]) {
        copy input -> output.chunk(rank);
        for s in 0..world - 2 {
            batch {
                send output.chunk((rank - s) % world) to (rank + 1) % world;
                recv output.chunk((rank - s - 1) % world) from (rank - 1) % world;
            }
        }
    }
}

fn main() {}
