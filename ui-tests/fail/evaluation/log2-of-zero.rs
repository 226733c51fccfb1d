use hcomm::comm_schedule;

comm_schedule! {
    pub fn f(a: &mut [T; n]) {
        let steps = log2(world - world);
    }
}

fn main() {}
