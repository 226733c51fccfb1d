use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 2..=4)]
    pub fn f(a: &[T; n], b: &mut [T; n]) {
        // every rank waits for its receive before any rank sends
        for s in 0..1 {
            let r = irecv b from (rank - 1) % world;
        }
        wait all;
        send a to (rank + 1) % world;
    }
}

fn main() {}
