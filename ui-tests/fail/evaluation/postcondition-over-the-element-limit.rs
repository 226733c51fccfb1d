use hcomm::comm_schedule;

comm_schedule! {
    // A collective gathers into a scratch buffer one element longer than
    // the blocks: collectives keep one symbol per group of elements, and no
    // common factor leaves 135 million, past the checker's limit.
    #[verify(world in [64])]
    #[postcondition(all_gather(input -> output))]
    pub fn bruck(input: &[T; 16384], output: &mut [T; 16384 * world]) {
        let tmp = scratch[T; 16384 * world + 1];
        all_gather(input -> tmp[0..16384 * world]);
        copy tmp[0..16384 * world] -> output;
    }
}

fn main() {}
