use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 2..=4)]
    #[postcondition(all_gather(buf))]
    fn f(buf: &mut [T; 2 * n + 1]) {
        barrier;
    }
}

fn main() {}
