use hcomm::comm_schedule;

comm_schedule! {
    /// A collective gathers into a scratch buffer one element longer than
    /// the blocks: no common factor, 135 million elements in all at world
    /// 64; the checker cuts the collective's blocks into runs alike and
    /// decides it with 2 runs per block.
    #[verify(world in [64])]
    #[postcondition(all_gather(input -> output))]
    pub fn gather(input: &[T; 16384], output: &mut [T; 16384 * world]) {
        let tmp = scratch[T; 16384 * world + 1];
        all_gather(input -> tmp[0..16384 * world]);
        copy tmp[0..16384 * world] -> output;
    }
}

fn main() {
    // world 2, outside the verify set: checked at the first call
    let out = hcomm::host::run(2, |comm| {
        let input = vec![comm.rank() as u32 + 1; 16384];
        let mut output = vec![0_u32; 2 * 16384];
        gather(comm, &input, &mut output)?;
        Ok(output)
    })
    .unwrap();
    for output in out {
        assert!(output[..16384].iter().all(|&x| x == 1));
        assert!(output[16384..].iter().all(|&x| x == 2));
    }
}
