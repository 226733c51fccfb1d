use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 2..=4)]
    pub fn f(input: &[T; n], output: &mut [T; n * world]) {
        for s in 1..world {
            let r = irecv output.chunk((rank - s) % world) from (rank - s) % world;
            let h = isend input to (rank + s) % world;
            wait h;
        }
    }
}

fn main() {}
