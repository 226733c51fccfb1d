use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 1..=6)]
    #[postcondition(shift(a -> a, from = 0))]
    pub fn f(a: &mut [T; n]) {
        if rank > 0 && rank + 1 < world {
            recv a from rank - 1;
        }
        if rank + 2 < world {
            send a to rank + 1;
        }
    }
}

fn main() {}
