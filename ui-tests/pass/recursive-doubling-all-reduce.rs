use hcomm::comm_schedule;

comm_schedule! {
    /// Recursive doubling: log2(world) exchanges with partners at distance 2^k.
    #[verify(world in [1, 2, 4, 8, 16])]
    #[requires(is_pow2(world))]
    #[postcondition(all_reduce(buf, sum))]
    pub fn all_reduce_rd(buf: &mut [T; n]) {
        let tmp = scratch[T; n];
        for k in 0..log2(world) {
            let peer = rank ^ pow2(k);
            batch {
                send buf to peer;
                recv tmp from peer;
            }
            accumulate tmp -> buf, sum;
        }
    }
}

fn main() {
    let out = hcomm::host::run(8, |comm| {
        let mut buf = [comm.rank() as f64, 1.0];
        all_reduce_rd(comm, &mut buf)?;
        Ok(buf)
    })
    .unwrap();
    for buf in out {
        assert_eq!(buf, [28.0, 8.0]);
    }
}
