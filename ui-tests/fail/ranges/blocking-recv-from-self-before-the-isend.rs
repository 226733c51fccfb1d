use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 1..=2)]
    pub fn f(a: &[T; n], b: &mut [T; n]) {
        recv b from rank;
        let h = isend a to rank;
        wait h;
    }
}

fn main() {}
