use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 2..=4)]
    #[postcondition(shift(input -> output, from = rank - 1))]
    pub fn f(input: &[T; n], output: &mut [T; n]) {
        batch {
            send input to (rank + 1) % world;
            recv output from (rank - 1) % world;
        }
    }
}

fn main() {}
