use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 1..=4)]
    pub fn f(a: &mut [T; n]) {
        let block = world / (world - 1);
    }
}

fn main() {}
