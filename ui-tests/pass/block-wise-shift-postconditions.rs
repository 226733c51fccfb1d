use hcomm::comm_schedule;

comm_schedule! {
    /// Periodic 1-D halo: the left halo is the left neighbour's right edge,
    /// the right halo the right neighbour's left edge. Left edges go left,
    /// then right edges go right.
    #[verify(world in 1..=8)]
    #[postcondition(shift(edges.chunk(1 - j, 2) -> halo.chunk(j, 2), from = (rank + 2 * j - 1) % world))]
    pub fn halo_exchange(edges: &[T; 2 * n], halo: &mut [T; 2 * n]) {
        batch {
            send edges.chunk(0, 2) to (rank - 1) % world;
            recv halo.chunk(1, 2) from (rank + 1) % world;
        }
        batch {
            send edges.chunk(1, 2) to (rank + 1) % world;
            recv halo.chunk(0, 2) from (rank - 1) % world;
        }
    }

    /// Top-2 dispatch: rank r's block k goes to expert r + 1 + k.
    #[verify(world in 1..=8)]
    #[postcondition(shift(tokens.chunk(j, 2) -> slots.chunk(j, 2), from = (rank - 1 - j) % world))]
    pub fn top2_dispatch(tokens: &[T; 2 * n], slots: &mut [T; 2 * n]) {
        for k in 0..2 {
            batch {
                send tokens.chunk(k, 2) to (rank + 1 + k) % world tag k;
                recv slots.chunk(k, 2) from (rank - 1 - k) % world tag k;
            }
        }
    }

    /// One block in, `world` blocks out (the input block count left out):
    /// an all-gather written as a block-wise shift.
    #[verify(world in 1..=6)]
    #[postcondition(shift(input.chunk(0, 1) -> output.chunk(j), from = j))]
    pub fn gather_as_shift(input: &[T; n], output: &mut [T; world * n]) {
        copy input -> output.chunk(rank);
        for s in 0..world - 1 {
            batch {
                send output.chunk((rank - s) % world) to (rank + 1) % world;
                recv output.chunk((rank - s - 1) % world) from (rank - 1) % world;
            }
        }
    }
}

fn main() -> hcomm::Result<()> {
    for world in [1_usize, 2, 3, 5] {
        for n in [1_usize, 3] {
            let out = hcomm::host::run(world, |comm| {
                let r = comm.rank();
                let mine = |b: usize| -> Vec<u32> { (0..n).map(|k| (r * 100 + b * 10 + k) as u32).collect() };
                let edges: Vec<u32> = [mine(0), mine(1)].concat();
                let mut halo = vec![0; 2 * n];
                halo_exchange(comm, &edges, &mut halo)?;
                let mut slots = vec![0; 2 * n];
                top2_dispatch(comm, &edges, &mut slots)?;
                let mut gathered = vec![0; world * n];
                gather_as_shift(comm, &mine(0), &mut gathered)?;
                Ok((halo, slots, gathered))
            })?;
            let block = |q: usize, b: usize| -> Vec<u32> { (0..n).map(|k| (q * 100 + b * 10 + k) as u32).collect() };
            for (r, (halo, slots, gathered)) in out.into_iter().enumerate() {
                let (left, right) = ((r + world - 1) % world, (r + 1) % world);
                assert_eq!(halo, [block(left, 1), block(right, 0)].concat(), "halo at rank {r}");
                let (a, b) = ((r + 2 * world - 1) % world, (r + 2 * world - 2) % world);
                assert_eq!(slots, [block(a, 0), block(b, 1)].concat(), "top-2 at rank {r}");
                let all: Vec<u32> = (0..world).flat_map(|q| block(q, 0)).collect();
                assert_eq!(gathered, all, "gather at rank {r}");
            }
        }
    }
    Ok(())
}
