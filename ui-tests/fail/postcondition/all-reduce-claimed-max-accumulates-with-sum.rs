use hcomm::comm_schedule;

comm_schedule! {
    // A dissemination all-reduce that claims `max` but accumulates with a
    // hard-coded `sum`: the note names the accumulate, whose operator
    // replaced by `max` makes the schedule pass.
    #[verify(world in 1..=4)]
    #[postcondition(all_reduce(buf, max))]
    pub fn dissemination(buf: &mut [T; n]) {
        let tmp = scratch[T; n];
        for k in 0..ceil_log2(world) {
            batch {
                send buf to (rank + pow2(k)) % world;
                recv tmp from (rank - pow2(k)) % world;
            }
            accumulate tmp -> buf, sum;
        }
    }
}

fn main() {}
