use hcomm::comm_schedule;

comm_schedule! {
    pub fn f(counts: &[usize; world], a: &mut [T; counts[rank] * counts[rank]]) {
        barrier;
    }
}

fn main() {}
