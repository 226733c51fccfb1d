use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 2..=4)]
    pub fn f(a: &[T; 2 * n], b: &mut [T; 2 * n]) {
        batch {
            send a[0..n] to (rank + 1) % world;
            send a[n..2 * n] to (rank + 1) % world;
            recv b[0..n] from (rank - 1) % world;
            recv b[n..2 * n] from (rank - 1) % world;
        }
    }
}

fn main() {}
