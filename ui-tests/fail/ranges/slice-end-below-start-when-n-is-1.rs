use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 1..=2)]
    pub fn f(a: &[T; n], b: &mut [T; n]) {
        copy a[0..n - 2] -> b[2..n];
    }
}

fn main() {}
