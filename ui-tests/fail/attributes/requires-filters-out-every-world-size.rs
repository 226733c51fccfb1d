use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in [3, 5, 6])]
    #[requires(is_pow2(world))]
    pub fn f(buf: &mut [T; n]) {
        barrier;
    }
}

fn main() {}
