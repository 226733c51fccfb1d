use hcomm::comm_schedule;

comm_schedule! {
    pub fn f(a: &[T; n], b: &mut [T; n]) {
        copy a[0..n / 2] -> b[0..n / 2];
    }
}

fn main() {}
