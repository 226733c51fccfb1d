use hcomm::comm_schedule;

comm_schedule! {
    /// Ring all-gather in place: at step s, pass on the block received at
    /// step s - 1 (at step 0 the own block).
    #[verify(world in 1..=8)]
    #[postcondition(all_gather(buf))]
    pub fn ring_in_place(buf: &mut [T; world * n]) {
        for s in 0..world - 1 {
            batch {
                send buf.chunk((rank - s) % world) to (rank + 1) % world;
                recv buf.chunk((rank - s - 1) % world) from (rank - 1) % world;
            }
        }
    }

    /// Direct all-gather in place: every rank sends its own block to every
    /// other rank.
    #[verify(world in 1..=8)]
    #[postcondition(all_gather(buf))]
    pub fn direct_in_place(buf: &mut [T; world * n]) {
        for k in 1..world {
            batch {
                send buf.chunk(rank) to (rank + k) % world;
                recv buf.chunk((rank - k) % world) from (rank - k) % world;
            }
        }
    }
}

fn main() -> hcomm::Result<()> {
    for world in [1_usize, 3, 4] {
        for n in [1_usize, 3] {
            let out = hcomm::host::run(world, |comm| {
                let r = comm.rank();
                let mut a = vec![u32::MAX; world * n];
                let mut b = vec![u32::MAX; world * n];
                for k in 0..n {
                    a[r * n + k] = (r * 100 + k) as u32;
                    b[r * n + k] = (r * 100 + k) as u32;
                }
                ring_in_place(comm, &mut a)?;
                direct_in_place(comm, &mut b)?;
                Ok((a, b))
            })?;
            let want: Vec<u32> = (0..world).flat_map(|q| (0..n).map(move |k| (q * 100 + k) as u32)).collect();
            for (a, b) in out {
                assert_eq!(a, want);
                assert_eq!(b, want);
            }
        }
    }
    Ok(())
}
