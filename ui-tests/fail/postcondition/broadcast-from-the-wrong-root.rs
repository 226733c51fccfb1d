use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 2..=4)]
    #[postcondition(broadcast(a, root = 0))]
    pub fn f(a: &mut [T; n]) {
        broadcast(a, root = 1);
    }
}

fn main() {}
