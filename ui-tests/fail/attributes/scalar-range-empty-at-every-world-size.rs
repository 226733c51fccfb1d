use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 1..=4, k in world..world)]
    pub fn f(buf: &mut [T; n], k: usize) {
        barrier;
    }
}

fn main() {}
