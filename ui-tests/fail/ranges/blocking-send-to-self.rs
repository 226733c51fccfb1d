use hcomm::comm_schedule;

comm_schedule! {
    pub fn f(a: &[T; n]) {
        send a to rank;
    }
}

fn main() {}
