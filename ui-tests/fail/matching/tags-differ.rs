use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 2..=4)]
    pub fn f(a: &[T; n], b: &mut [T; n]) {
        if rank == 0 {
            send a to 1 tag 1;
        } else if rank == 1 {
            recv b from 0 tag 2;
        }
    }
}

fn main() {}
