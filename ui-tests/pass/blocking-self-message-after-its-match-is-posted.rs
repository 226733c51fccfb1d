use hcomm::comm_schedule;

comm_schedule! {
    /// A blocking `recv` from self after the matching `isend` is posted, and
    /// a blocking `send` to self after the matching `irecv` is posted: both
    /// complete.
    #[verify(world in 1..=3)]
    pub fn self_round_trip(a: &[T; n], b: &mut [T; n], c: &mut [T; n]) {
        let h = isend a to rank;
        recv b from rank;
        wait h;
        let g = irecv c from rank tag 1;
        send b to rank tag 1;
        wait g;
    }
}

fn main() {
    let out = hcomm::host::run(2, |comm| {
        let a = [comm.rank() as u32 + 10, 7];
        let (mut b, mut c) = ([0; 2], [0; 2]);
        self_round_trip(comm, &a, &mut b, &mut c)?;
        Ok((b, c))
    })
    .unwrap();
    assert_eq!(out, vec![([10, 7], [10, 7]), ([11, 7], [11, 7])]);
}
