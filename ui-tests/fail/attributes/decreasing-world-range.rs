use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 5..3)]
    pub fn f(buf: &mut [T; n]) {
        barrier;
    }
}

fn main() {}
