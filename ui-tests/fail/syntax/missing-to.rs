use hcomm::comm_schedule;

comm_schedule! {
    pub fn f(a: &mut [T; n]) {
        send a rank + 1;
    }
}

fn main() {}
