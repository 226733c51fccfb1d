use hcomm::comm_schedule;

// Blocking sends around a ring deadlock; even ranks sending first and odd
// ranks receiving first does not, when the world size is even.
comm_schedule! {
    #[verify(world in [2, 4, 6, 8])]
    #[requires(world % 2 == 0)]
    pub fn shift_right(a: &[T; n], b: &mut [T; n]) {
        if rank % 2 == 0 {
            send a to (rank + 1) % world;
            recv b from (rank - 1) % world;
        } else {
            recv b from (rank - 1) % world;
            send a to (rank + 1) % world;
        }
    }
}

fn main() {
    let out = hcomm::host::run(4, |comm| {
        let a = [comm.rank() as f32; 3];
        let mut b = [0.0_f32; 3];
        shift_right(comm, &a, &mut b)?;
        Ok(b[0])
    })
    .unwrap();
    assert_eq!(out, vec![3.0, 0.0, 1.0, 2.0]);

    // An odd world fails `#[requires]` before any communication.
    let err = hcomm::host::run(3, |comm| shift_right(comm, &[1.0_f32], &mut [0.0])).unwrap_err();
    assert!(matches!(err, hcomm::Error::Precondition { .. }), "{err}");
}
