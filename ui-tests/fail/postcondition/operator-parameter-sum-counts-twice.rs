use hcomm::comm_schedule;

comm_schedule! {
    /// Dissemination all-reduce over any operator: when `world` is not a power
    /// of two some contributions arrive twice, which `max` and `min` allow but
    /// `sum` (the first operator checked) does not.
    #[verify(world in 1..=6)]
    #[postcondition(all_reduce(buf, op))]
    pub fn dissemination(buf: &mut [T; n], op: ReduceOp) {
        let tmp = scratch[T; n];
        if world > 1 {
            for k in 0..log2(world - 1) + 1 {
                batch {
                    send buf to (rank + pow2(k)) % world;
                    recv tmp from (rank - pow2(k)) % world;
                }
                accumulate tmp -> buf, op;
            }
        }
    }
}

fn main() {}
