use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 2..=3)]
    pub fn f(a: &mut [T; 2 * n], b: &mut [T; 2 * world * n]) {
        copy a[0..n + 1] -> a[n - 1..2 * n];
        if rank == 0 {
            all_reduce(a, sum);
        } else {
            all_gather(a -> b);
        }
    }
}

fn main() {}
