use hcomm::comm_schedule;

comm_schedule! {
    pub fn f(a: &mut [T; n]) {
        transmit a to 0;
    }
}

fn main() {}
