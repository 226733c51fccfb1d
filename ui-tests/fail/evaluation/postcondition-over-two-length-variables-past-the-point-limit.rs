use hcomm::comm_schedule;

comm_schedule! {
    // Two length variables and a scratch buffer 40 elements longer than a
    // block: the box of (m, n) that decides every value passes the
    // checker's 64 values of each, so the postcondition is not decided.
    #[verify(world in 2..=2)]
    #[postcondition(all_gather(input -> output))]
    pub fn two(tail: &[T; m], input: &[T; n + m], output: &mut [T; (n + m) * world]) {
        let tmp = scratch[T; n + m + 40];
        copy input -> tmp[0..n + m];
        copy tmp[0..n + m] -> output.chunk(rank);
        batch {
            send output.chunk(rank) to (rank + 1) % world;
            recv output.chunk((rank + 1) % world) from (rank + 1) % world;
        }
    }
}

fn main() {}
