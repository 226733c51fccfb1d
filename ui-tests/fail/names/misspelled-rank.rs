use hcomm::comm_schedule;

comm_schedule! {
    pub fn f(a: &[T; n], b: &mut [T; n]) {
        batch {
            send a to (rnak + 1) % world;
            recv b from (rank - 1) % world;
        }
    }
}

fn main() {}
