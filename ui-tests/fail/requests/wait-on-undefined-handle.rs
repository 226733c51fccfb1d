use hcomm::comm_schedule;

comm_schedule! {
    pub fn f(a: &mut [T; n]) {
        wait h;
    }
}

fn main() {}
