use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 2..=4)]
    pub fn f(a: &mut [T; n]) {
        if rank == 0 {
            send a to 1;
            barrier;
        } else if rank == 1 {
            barrier;
            recv a from 0;
        } else {
            barrier;
        }
    }
}

fn main() {}
