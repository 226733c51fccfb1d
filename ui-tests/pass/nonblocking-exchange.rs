use hcomm::comm_schedule;

// Messages to self are fine when they cannot block.
comm_schedule! {
    #[verify(world in 1..=8)]
    pub fn exchange(a: &[T; n], b: &mut [T; n], c: &mut [T; n]) {
        let r = irecv b from (rank - 1) % world tag 5;
        let s = isend a to (rank + 1) % world tag 5;
        wait r, s;
        copy b -> c;
    }
}

fn main() {
    let out = hcomm::host::run(3, |comm| {
        let a = [comm.rank() as u64 + 100; 2];
        let (mut b, mut c) = ([0_u64; 2], [0_u64; 2]);
        exchange(comm, &a, &mut b, &mut c)?;
        Ok(c)
    })
    .unwrap();
    assert_eq!(out, vec![[102, 102], [100, 100], [101, 101]]);
}
