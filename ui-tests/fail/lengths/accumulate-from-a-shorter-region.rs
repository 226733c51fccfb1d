use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 1..=2)]
    pub fn f(a: &[T; n], b: &mut [T; n + 1]) {
        accumulate a -> b, sum;
    }
}

fn main() {}
