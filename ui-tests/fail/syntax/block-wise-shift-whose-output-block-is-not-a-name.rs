use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 1..=4)]
    #[postcondition(shift(a.chunk(0, 2) -> b.chunk(1, 2), from = rank))]
    fn f(a: &[T; 2 * n], b: &mut [T; 2 * n]) {
        copy a -> b;
    }
}

fn main() {}
