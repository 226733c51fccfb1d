use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 1..=2)]
    pub fn f(a: &mut [T; 2 * n + 2]) {
        copy a[0..2] -> a[n..n + 2];
    }
}

fn main() {}
