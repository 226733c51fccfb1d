use hcomm::comm_schedule;

comm_schedule! {
    // `n in 0..` lets the buffers be empty; the last element of `a` does
    // not exist at n = 0.
    #[verify(world in 2..=4, n in 0..)]
    pub fn last_to_next(a: &[T; n], b: &mut [T; 1]) {
        batch {
            send a[n - 1..n] to (rank + 1) % world;
            recv b from (rank - 1) % world;
        }
    }
}

fn main() {}
