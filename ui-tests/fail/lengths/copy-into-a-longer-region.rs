use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 1..=2)]
    pub fn f(a: &[T; n], b: &mut [T; 2 * n]) {
        copy a -> b;
    }
}

fn main() {}
