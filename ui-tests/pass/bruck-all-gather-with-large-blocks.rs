use hcomm::comm_schedule;

comm_schedule! {
    /// Bruck's all-gather of 16384-element blocks, checked at 64 ranks (135
    /// million elements in all, one symbol per block in the checker's run).
    #[verify(world in [64])]
    #[postcondition(all_gather(input -> output))]
    pub fn bruck(input: &[T; 16384], output: &mut [T; 16384 * world]) {
        let tmp = scratch[T; 16384 * world];
        copy input -> tmp.chunk(0);
        for k in 0..log2(world - 1) + 1 {
            let d = pow2(k);
            let count = min(d, world - d);
            batch {
                send tmp[0..count * 16384] to (rank - d) % world;
                recv tmp[d * 16384..(d + count) * 16384] from (rank + d) % world;
            }
        }
        for i in 0..world {
            copy tmp.chunk(i) -> output.chunk((rank + i) % world);
        }
    }
}

fn main() {
    // 3 ranks: outside the verify set, checked when it runs
    let out = hcomm::host::run(3, |comm| {
        let input = vec![comm.rank() as i32 + 1; 16384];
        let mut output = vec![0_i32; 3 * 16384];
        bruck(comm, &input, &mut output)?;
        Ok(output)
    })
    .unwrap();
    let expected: Vec<i32> = (1..=3).flat_map(|r| vec![r; 16384]).collect();
    for output in out {
        assert_eq!(output, expected);
    }
}
