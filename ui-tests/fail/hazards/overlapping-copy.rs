use hcomm::comm_schedule;

comm_schedule! {
    pub fn f(a: &mut [T; 3 * n]) {
        copy a[0..2 * n] -> a[n..3 * n];
    }
}

fn main() {}
