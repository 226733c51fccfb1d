use hcomm::comm_schedule;

comm_schedule! {
    /// A barrier by dissemination over a one-byte scratch buffer: no buffer
    /// parameter, so the generated function is not generic.
    #[verify(world in 1..=8)]
    pub fn dissemination_barrier() {
        let token = scratch[T; 1];
        let seen = scratch[T; 1];
        for k in 0..ceil_log2(world) {
            batch {
                send token to (rank + pow2(k)) % world;
                recv seen from (rank - pow2(k)) % world;
            }
        }
    }

    /// A scalar and a collective, no buffer.
    #[verify(world in 1..=8, root in 0..world)]
    pub fn rooted_sync(root: usize) {
        let s = scratch[T; 2];
        broadcast(s, root = root);
        barrier;
    }
}

fn main() {
    // no turbofish, and the functions coerce to plain function pointers
    let barrier: fn(&hcomm::Comm) -> hcomm::Result<()> = dissemination_barrier;
    let sync: fn(&hcomm::Comm, usize) -> hcomm::Result<()> = rooted_sync;
    let out = hcomm::host::run(5, |comm| {
        barrier(comm)?;
        sync(comm, 3)?;
        dissemination_barrier(comm)?;
        rooted_sync(comm, 0)?;
        Ok(comm.rank())
    })
    .unwrap();
    assert_eq!(out, vec![0, 1, 2, 3, 4]);
    // a scalar outside its range is still refused
    let err = hcomm::host::run(2, |comm| rooted_sync(comm, 2)).unwrap_err();
    assert!(matches!(err, hcomm::Error::Precondition { .. }), "{err}");
}
