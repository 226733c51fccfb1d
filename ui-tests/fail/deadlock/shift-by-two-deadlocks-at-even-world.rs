use hcomm::comm_schedule;

// Parity ordering breaks the cycle of a shift by one, not of a shift by two:
// with an even world, even ranks only talk to even ranks.
comm_schedule! {
    #[verify(world in 3..=6)]
    pub fn f(a: &[T; n], b: &mut [T; n]) {
        if rank % 2 == 0 {
            send a to (rank + 2) % world;
            recv b from (rank - 2) % world;
        } else {
            recv b from (rank - 2) % world;
            send a to (rank + 2) % world;
        }
    }
}

fn main() {}
