use hcomm::comm_schedule;

comm_schedule! {
    pub fn f(a: &[T; 4 * n], b: &mut [T; n]) {
        copy a.chunk(0, 3) -> b;
    }
}

fn main() {}
