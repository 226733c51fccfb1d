use hcomm::comm_schedule;

comm_schedule! {
    /// Bruck's all-gather with `ceil_log2(world)` rounds, for every world
    /// size (not only powers of two): round k moves min(2^k, world - 2^k)
    /// blocks.
    #[verify(world in 1..=12)]
    #[postcondition(all_gather(input -> output))]
    pub fn bruck(input: &[T; n], output: &mut [T; n * world]) {
        let tmp = scratch[T; n * world];
        copy input -> tmp.chunk(0);
        for k in 0..ceil_log2(world) {
            let d = pow2(k);
            let count = min(d, world - d);
            batch {
                send tmp[0..count * n] to (rank - d) % world;
                recv tmp[d * n..(d + count) * n] from (rank + d) % world;
            }
        }
        for i in 0..world {
            copy tmp.chunk(i) -> output.chunk((rank + i) % world);
        }
    }
}

fn main() {
    for world in [1, 5, 6] {
        let out = hcomm::host::run(world, |comm| {
            let input = [comm.rank() as i32 * 10, comm.rank() as i32 * 10 + 1];
            let mut output = vec![-1_i32; 2 * comm.world()];
            bruck(comm, &input, &mut output)?;
            Ok(output)
        })
        .unwrap();
        let expected: Vec<i32> = (0..world as i32).flat_map(|r| [r * 10, r * 10 + 1]).collect();
        for output in out {
            assert_eq!(output, expected);
        }
    }
}
