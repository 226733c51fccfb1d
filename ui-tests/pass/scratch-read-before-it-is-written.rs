use hcomm::comm_schedule;

// Reading scratch before writing it is not an error: its contents are
// unspecified to the checker (they may not reach a postcondition's output),
// and every backend starts it zeroed, so the result is the same everywhere.
comm_schedule! {
    #[verify(world in 2..=4)]
    pub fn fresh_scratch(buf: &mut [T; n]) {
        let tmp = scratch[T; n];
        batch {
            send buf to (rank + 1) % world;
            recv tmp from (rank - 1) % world reduce max;
        }
        copy tmp -> buf;
    }
}

fn main() {
    let out = hcomm::host::run(3, |comm| {
        let mut buf = [comm.rank() as u32 + 100; 2];
        fresh_scratch(comm, &mut buf)?;
        Ok(buf)
    })
    .unwrap();
    assert_eq!(out, vec![[102, 102], [100, 100], [101, 101]]);
}
