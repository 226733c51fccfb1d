use hcomm::comm_schedule;

comm_schedule! {
    // The scratch buffer's extra element leaves the lengths no common
    // factor; the checker moves runs of elements and still finds the half
    // of the final rotation that is missing.
    #[verify(world in [64])]
    #[postcondition(all_gather(input -> output))]
    pub fn bruck(input: &[T; 16384], output: &mut [T; 16384 * world]) {
        let tmp = scratch[T; 16384 * world + 1];
        copy input -> tmp[0..16384];
        for k in 0..log2(world - 1) + 1 {
            let d = pow2(k);
            let count = min(d, world - d);
            batch {
                send tmp[0..count * 16384] to (rank - d) % world;
                recv tmp[d * 16384..(d + count) * 16384] from (rank + d) % world;
            }
        }
        for i in 0..world / 2 {
            copy tmp[i * 16384..(i + 1) * 16384] -> output.chunk((rank + i) % world);
        }
    }
}

fn main() {}
