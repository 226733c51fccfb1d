use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 1..=4)]
    #[postcondition(shift(a.chunk(j, 2) -> b.chunk(j, 2), from = rank))]
    fn f(a: &[T; 2 * n], b: &mut [T; 4 * n]) {
        copy a -> b[0..2 * n];
        copy a -> b[2 * n..4 * n];
    }
}

fn main() {}
