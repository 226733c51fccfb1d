use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 2..=4)]
    pub fn f(input: &[T; n], output: &mut [T; n]) {
        if rank == 0 {
            send output to 1;
        } else if rank == 1 {
            recv input from 0;
        }
    }
}

fn main() {}
