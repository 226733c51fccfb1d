use hcomm::comm_schedule;

comm_schedule! {
    // the second choice's block goes to the first expert
    #[verify(world in 1..=4)]
    #[postcondition(shift(tokens.chunk(j, 2) -> slots.chunk(j, 2), from = (rank - 1 - j) % world))]
    fn f(tokens: &[T; 2 * n], slots: &mut [T; 2 * n]) {
        for k in 0..2 {
            batch {
                send tokens.chunk(1 - k, 2) to (rank + 1 + k) % world tag k;
                recv slots.chunk(k, 2) from (rank - 1 - k) % world tag k;
            }
        }
    }
}

fn main() {}
