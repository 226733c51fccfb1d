use hcomm::comm_schedule;

comm_schedule! {
    /// Sums within pairs of neighbouring ranks, then broadcasts from `root`.
    #[verify(world in [2, 4, 6], root in 0..world)]
    #[requires(world % 2 == 0)]
    pub fn pairs_then_broadcast(a: &mut [T; n], b: &mut [T; n], root: usize) {
        all_reduce(a, sum) over rank / 2;
        copy a -> b;
        broadcast(b, root = root);
    }
}

fn main() {
    let out = hcomm::host::run(4, |comm| {
        let mut a = [comm.rank() as i32 + 1];
        let mut b = [0];
        pairs_then_broadcast(comm, &mut a, &mut b, 2)?;
        Ok((a[0], b[0]))
    })
    .unwrap();
    assert_eq!(out, vec![(3, 7), (3, 7), (7, 7), (7, 7)]);

    // A scalar outside its range is a precondition error.
    let err = hcomm::host::run(2, |comm| pairs_then_broadcast(comm, &mut [0], &mut [0], 5)).unwrap_err();
    assert!(matches!(err, hcomm::Error::Precondition { .. }), "{err}");
}
