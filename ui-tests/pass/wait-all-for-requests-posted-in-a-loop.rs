use hcomm::comm_schedule;

comm_schedule! {
    /// Direct all-gather: a receive from and a send to every other rank,
    /// posted in a loop and waited together.
    #[verify(world in 1..=8)]
    #[postcondition(all_gather(input -> output))]
    pub fn direct_all_gather(input: &[T; n], output: &mut [T; n * world]) {
        copy input -> output.chunk(rank);
        for s in 1..world {
            let r = irecv output.chunk((rank - s) % world) from (rank - s) % world;
            let h = isend input to (rank + s) % world;
        }
        wait all;
    }

    /// Halo exchange with tags, some handles waited by name and the rest by
    /// `wait all`; a `wait all` with nothing in flight is fine.
    #[verify(world in 1..=6)]
    pub fn halo(interior: &[T; 2 * n], left: &mut [T; n], right: &mut [T; n]) {
        wait all;
        let a = irecv left from (rank - 1) % world tag 1;
        let b = irecv right from (rank + 1) % world tag 2;
        let c = isend interior.chunk(0, 2) to (rank - 1) % world tag 2;
        wait c;
        let d = isend interior.chunk(1, 2) to (rank + 1) % world tag 1;
        wait all;
    }
}

fn main() {
    for world in [1, 3, 5] {
        let out = hcomm::host::run(world, |comm| {
            let mut all = vec![0_u32; 2 * comm.world()];
            let r = comm.rank() as u32;
            direct_all_gather(comm, &[r, 100 + r], &mut all)?;
            Ok(all)
        })
        .unwrap();
        let expected: Vec<u32> = (0..world as u32).flat_map(|r| [r, 100 + r]).collect();
        for all in out {
            assert_eq!(all, expected);
        }
    }
    let out = hcomm::host::run(4, |comm| {
        let r = comm.rank() as i64;
        let (mut left, mut right) = ([0_i64; 2], [0_i64; 2]);
        halo(comm, &[10 * r, 10 * r + 1, 10 * r + 2, 10 * r + 3], &mut left, &mut right)?;
        Ok((left, right))
    })
    .unwrap();
    for (r, (left, right)) in out.into_iter().enumerate() {
        let (l, rr) = ((r as i64 + 3) % 4, (r as i64 + 1) % 4);
        // the left neighbour's upper half, the right neighbour's lower half
        assert_eq!(left, [10 * l + 2, 10 * l + 3], "rank {r}");
        assert_eq!(right, [10 * rr, 10 * rr + 1], "rank {r}");
    }
}
