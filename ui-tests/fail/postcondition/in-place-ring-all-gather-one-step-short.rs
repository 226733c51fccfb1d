use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 1..=4)]
    #[postcondition(all_gather(buf))]
    fn f(buf: &mut [T; world * n]) {
        for s in 0..world - 2 {
            batch {
                send buf.chunk((rank - s) % world) to (rank + 1) % world;
                recv buf.chunk((rank - s - 1) % world) from (rank - 1) % world;
            }
        }
    }
}

fn main() {}
