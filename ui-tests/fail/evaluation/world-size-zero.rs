use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 0..=4)]
    pub fn f(a: &mut [T; n]) {
        all_reduce(a, sum);
    }
}

fn main() {}
