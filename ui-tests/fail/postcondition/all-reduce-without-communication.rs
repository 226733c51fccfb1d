use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 1..=4)]
    #[postcondition(all_reduce(a -> b, sum))]
    pub fn f(a: &[T; n], b: &mut [T; n]) {
        copy a -> b;
    }
}

fn main() {}
