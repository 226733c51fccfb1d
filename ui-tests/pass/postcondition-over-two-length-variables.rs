use hcomm::comm_schedule;

comm_schedule! {
    /// A ring all-gather of blocks of `n + m` elements forwarded in two
    /// pieces, [0..n + 1] and [n..n + m]: they cover every block for every
    /// (m, n), which the checker decides by running every point of the box
    /// that the crossing points of the bounds give (60 values of each at
    /// world 2; at world 3 the box, 120, passes the checker's 64).
    #[verify(world in 1..=2)]
    #[postcondition(all_gather(input -> output))]
    pub fn two_pieces(tail: &[T; m], input: &[T; n + m], output: &mut [T; (n + m) * world]) {
        copy input -> output.chunk(rank);
        for s in 0..world - 1 {
            batch {
                send output.chunk((rank - s) % world)[0..n + 1] to (rank + 1) % world;
                recv output.chunk((rank - s - 1) % world)[0..n + 1] from (rank - 1) % world;
            }
            batch {
                send output.chunk((rank - s) % world)[n..n + m] to (rank + 1) % world;
                recv output.chunk((rank - s - 1) % world)[n..n + m] from (rank - 1) % world;
            }
        }
    }
}

fn main() {
    // n = 2, m = 3 at world 2
    let out = hcomm::host::run(2, |comm| {
        let r = comm.rank() as i64;
        let input: Vec<i64> = (0..5).map(|i| 10 * r + i).collect();
        let mut output = [0_i64; 10];
        two_pieces(comm, &[0; 3], &input, &mut output)?;
        Ok(output)
    })
    .unwrap();
    for output in out {
        assert_eq!(output, [0, 1, 2, 3, 4, 10, 11, 12, 13, 14]);
    }
}
