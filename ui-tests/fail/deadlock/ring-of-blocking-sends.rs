use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 2..=8)]
    pub fn f(a: &[T; n], b: &mut [T; n]) {
        send a to (rank + 1) % world;
        recv b from (rank - 1) % world;
    }
}

fn main() {}
