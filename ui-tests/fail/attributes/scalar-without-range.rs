use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 1..=8)]
    pub fn f(a: &mut [T; n], root: usize) {
        broadcast(a, root = root);
    }
}

fn main() {}
