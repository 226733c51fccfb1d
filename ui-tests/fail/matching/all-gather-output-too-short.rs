use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 2..=4)]
    pub fn f(a: &[T; n], b: &mut [T; n]) {
        all_gather(a -> b);
    }
}

fn main() {}
