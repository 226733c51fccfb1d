use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 2..=4)]
    pub fn shift(buf: &mut [T; n], op: ReduceOp) {
        send buf to (rank + op) % world;
        recv buf from (rank - 1) % world reduce op;
    }
}

fn main() {}
