use hcomm::comm_schedule;

comm_schedule! {
    // Bruck's all-gather of 16384-element blocks whose final rotation copies
    // only half the blocks: 64 ranks hold 135 million elements in all, which
    // the checker once skipped; it runs one symbol per 16384 elements.
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
        for i in 0..world / 2 {
            copy tmp.chunk(i) -> output.chunk((rank + i) % world);
        }
    }
}

fn main() {}
