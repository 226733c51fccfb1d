use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 2..=4)]
    #[postcondition(all_reduce(buf, max))]
    pub fn f(buf: &mut [T; n]) {
        let tmp = scratch[T; n];
        batch {
            send buf to (rank + 1) % world;
            recv tmp from (rank - 1) % world reduce max;
        }
        copy tmp -> buf;
    }
}

fn main() {}
