use hcomm::comm_schedule;

comm_schedule! {
    /// Every rank passes its buffer `k` ranks on.
    #[verify(world in 1..=8, k in 0..world)]
    #[postcondition(shift(input -> output, from = (rank - k) % world))]
    pub fn shift_by(input: &[T; n], output: &mut [T; n], k: usize) {
        batch {
            send input to (rank + k) % world;
            recv output from (rank - k) % world;
        }
    }

    /// A pipeline: rank 0's data travels down the chain.
    #[verify(world in 1..=8)]
    #[postcondition(shift(a -> a, from = 0))]
    pub fn pipeline(a: &mut [T; 2 * n]) {
        for c in 0..2 {
            if rank > 0 {
                recv a.chunk(c, 2) from rank - 1;
            }
            if rank + 1 < world {
                send a.chunk(c, 2) to rank + 1;
            }
        }
    }

    /// Pairs swap their buffers: a permutation.
    #[verify(world in 2..=8)]
    #[requires(world % 2 == 0)]
    #[postcondition(shift(input -> output, from = rank ^ 1))]
    pub fn pair_swap(input: &[T; n], output: &mut [T; n]) {
        let r = irecv output from rank ^ 1;
        let s = isend input to rank ^ 1;
        wait all;
    }
}

fn main() {
    let out = hcomm::host::run(5, |comm| {
        let r = comm.rank() as i32;
        let mut got = [0_i32; 3];
        shift_by(comm, &[r, 10 + r, 20 + r], &mut got, 2)?;
        let mut a = [100 + r, 200 + r];
        pipeline(comm, &mut a)?;
        Ok((got, a))
    })
    .unwrap();
    for (r, (got, a)) in out.into_iter().enumerate() {
        let q = (r as i32 + 3) % 5;
        assert_eq!(got, [q, 10 + q, 20 + q], "rank {r}");
        assert_eq!(a, [100, 200], "rank {r}");
    }
    let out = hcomm::host::run(4, |comm| {
        let mut got = [0_u8; 2];
        pair_swap(comm, &[comm.rank() as u8; 2], &mut got)?;
        Ok(got[0])
    })
    .unwrap();
    assert_eq!(out, vec![1, 0, 3, 2]);
}
