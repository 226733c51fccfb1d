use hcomm::comm_schedule;

comm_schedule! {
    pub fn f(a: &mut [T; n]) {
        let rounds = ceil_log2(world - 1);
    }
}

fn main() {}
