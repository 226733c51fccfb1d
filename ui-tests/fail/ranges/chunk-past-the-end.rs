use hcomm::comm_schedule;

comm_schedule! {
    pub fn f(input: &[T; n], output: &mut [T; n * world]) {
        copy input -> output.chunk(world);
    }
}

fn main() {}
