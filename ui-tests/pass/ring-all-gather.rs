use hcomm::comm_schedule;

comm_schedule! {
    /// Ring all-gather: world - 1 steps, each passes one block to the right.
    #[verify(world in 1..=16)]
    #[postcondition(all_gather(input -> output))]
    pub fn ring_all_gather(input: &[T; n], output: &mut [T; n * world]) {
        copy input -> output.chunk(rank);
        for s in 0..world - 1 {
            batch {
                send output.chunk((rank - s) % world) to (rank + 1) % world;
                recv output.chunk((rank - s - 1) % world) from (rank - 1) % world;
            }
        }
    }
}

fn main() {
    let out = hcomm::host::run(4, |comm| {
        let input = [comm.rank() as i64 * 10, comm.rank() as i64 * 10 + 1];
        let mut output = [0_i64; 8];
        ring_all_gather(comm, &input, &mut output)?;
        Ok(output)
    })
    .unwrap();
    for output in out {
        assert_eq!(output, [0, 1, 10, 11, 20, 21, 30, 31]);
    }
    // The IR is there for tracing and run-time verification.
    assert_eq!(ring_all_gather::SCHEDULE.name, "ring_all_gather");
}
