use hcomm::comm_schedule;

comm_schedule! {
    pub fn f(a: &mut [T; n]) {
        let k = rank % 2 + 1;
        all_reduce(a, sum) over rank / k;
    }
}

fn main() {}
