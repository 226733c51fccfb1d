use hcomm::comm_schedule;

comm_schedule! {
    pub fn f(a: &mut [T; n]) {
        recv a from rank;
    }
}

fn main() {}
