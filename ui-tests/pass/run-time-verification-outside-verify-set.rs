use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 1..=4)]
    pub fn shift(a: &[T; n], b: &mut [T; n]) {
        batch {
            send a to (rank + 1) % world;
            recv b from (rank - 1) % world;
        }
    }

    // Correct for world <= 4 only: rank 4 would send to rank 0 twice.
    #[verify(world in 1..=4)]
    pub fn small_only(a: &[T; n], b: &mut [T; n]) {
        batch {
            send a to min(rank + 1, 4) % world;
            recv b from (rank - 1) % world;
        }
    }
}

fn main() {
    // world = 6 lies outside the verify set: checked at run time, then run.
    let out = hcomm::host::run(6, |comm| {
        let mut b = [0_i64];
        shift(comm, &[comm.rank() as i64], &mut b)?;
        Ok(b[0])
    })
    .unwrap();
    assert_eq!(out, vec![5, 0, 1, 2, 3, 4]);

    // A schedule that is wrong at world = 6 is refused before communicating.
    let err = hcomm::host::run(6, |comm| small_only(comm, &[0_i64], &mut [0])).unwrap_err();
    assert!(matches!(err, hcomm::Error::Schedule { .. }), "{err}");

    // A buffer whose length does not fit is refused too.
    let err = hcomm::host::run(2, |comm| shift(comm, &[0_i64; 2], &mut [0; 3])).unwrap_err();
    assert!(matches!(err, hcomm::Error::BufferLength { .. }), "{err}");
}
