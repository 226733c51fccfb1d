use hcomm::comm_schedule;

comm_schedule! {
    // An all_gather statement of 16384-element blocks into a scratch buffer
    // one element longer, copied out with its blocks turned by one: decided
    // at world 64 with runs, and wrong.
    #[verify(world in [64])]
    #[postcondition(all_gather(input -> output))]
    pub fn gather(input: &[T; 16384], output: &mut [T; 16384 * world]) {
        let tmp = scratch[T; 16384 * world + 1];
        all_gather(input -> tmp[0..16384 * world]);
        copy tmp[16384..16384 * world] -> output[0..16384 * (world - 1)];
        copy tmp[0..16384] -> output[16384 * (world - 1)..16384 * world];
    }
}

fn main() {}
