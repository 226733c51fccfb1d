use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 2..=4)]
    pub fn f(a: &[T; n]) {
        if rank == 0 {
            send a to 1;
        }
    }
}

fn main() {}
