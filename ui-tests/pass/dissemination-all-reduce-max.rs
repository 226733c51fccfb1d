use hcomm::comm_schedule;

comm_schedule! {
    /// Dissemination all-reduce: in round k every rank takes the data of the
    /// rank 2^k before it. When `world` is not a power of two some
    /// contributions arrive twice, which `max` (idempotent) allows.
    #[verify(world in 1..=9)]
    #[postcondition(all_reduce(buf, max))]
    pub fn dissemination_max(buf: &mut [T; n]) {
        let tmp = scratch[T; n];
        if world > 1 {
            for k in 0..log2(world - 1) + 1 {
                batch {
                    send buf to (rank + pow2(k)) % world;
                    recv tmp from (rank - pow2(k)) % world;
                }
                accumulate tmp -> buf, max;
            }
        }
    }
}

fn main() {
    for world in [3, 5, 6, 8] {
        let out = hcomm::host::run(world, |comm| {
            let r = comm.rank() as i64;
            // the largest first element is rank 1's, the largest second one rank 0's
            let mut buf = [-(r - 1) * (r - 1), -r];
            dissemination_max(comm, &mut buf)?;
            Ok(buf)
        })
        .unwrap();
        for buf in out {
            assert_eq!(buf, [0, 0], "world {world}");
        }
    }
}
