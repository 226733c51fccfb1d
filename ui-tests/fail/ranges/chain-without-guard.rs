use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 2..=4)]
    pub fn f(a: &[T; n], b: &mut [T; n]) {
        if rank > 0 {
            recv b from rank - 1;
        }
        send a to rank + 1;
    }
}

fn main() {}
