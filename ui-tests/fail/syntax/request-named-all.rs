use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 2..=4)]
    pub fn f(a: &[T; n], b: &mut [T; n]) {
        let all = isend a to (rank + 1) % world;
        recv b from (rank - 1) % world;
        wait all;
    }
}

fn main() {}
