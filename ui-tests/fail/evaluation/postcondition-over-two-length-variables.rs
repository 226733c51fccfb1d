use hcomm::comm_schedule;

comm_schedule! {
    // Two length variables: bounds and overlaps are decided exactly, but the
    // data flow is not, so the postcondition is refused rather than sampled.
    #[verify(world in 2..=2)]
    #[postcondition(all_gather(input -> output))]
    pub fn two(pad: &[T; m], input: &[T; n + m], output: &mut [T; (n + m) * world]) {
        copy input -> output.chunk(rank);
        batch {
            send output.chunk(rank) to (rank + 1) % world;
            recv output.chunk((rank + 1) % world) from (rank + 1) % world;
        }
    }
}

fn main() {}
