use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 1..=4)]
    #[postcondition(shift(input -> output, from = (rank - 1) % world))]
    pub fn f(input: &[T; n], output: &mut [T; 2 * n]) {
        batch {
            send input to (rank + 1) % world;
            recv output[0..n] from (rank - 1) % world;
        }
    }
}

fn main() {}
