hcomm::comm_schedule! {
    #[verify(world in 1..=8)]
    pub fn ring_all_gather(input: &[T; n], output: &mut [T; n * world]) {
        copy input -> output.chunk(rank);
        for s in 0..world - 1 {
            send output.chunk((rank - s) % world) to (rank + 1) % world;
            recv output.chunk((rank - s - 1) % world) from (rank - 1) % world;
        }
    }
}

fn main() {}
