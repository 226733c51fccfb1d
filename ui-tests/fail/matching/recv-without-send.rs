use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 2..=4)]
    pub fn f(a: &mut [T; n]) {
        if rank == 1 {
            recv a from 0;
        }
    }
}

fn main() {}
