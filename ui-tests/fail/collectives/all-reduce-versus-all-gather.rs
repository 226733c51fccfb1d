use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 2..=4)]
    pub fn f(a: &[T; n], b: &mut [T; n * world]) {
        if rank == 0 {
            all_reduce(b, sum);
        } else {
            all_gather(a -> b);
        }
    }
}

fn main() {}
