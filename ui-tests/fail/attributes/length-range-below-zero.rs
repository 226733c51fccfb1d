use hcomm::comm_schedule;

comm_schedule! {
    // A length is never negative.
    #[verify(world in 1..=4, n in -1..)]
    pub fn rotate(a: &[T; n], b: &mut [T; n]) {
        batch {
            send a to (rank + 1) % world;
            recv b from (rank - 1) % world;
        }
    }
}

fn main() {}
