use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 2..=4)]
    pub fn f(a: &[T; n], b: &mut [T; n], c: &mut [T; n]) {
        let h = irecv b from (rank - 1) % world;
        send a to (rank + 1) % world;
        copy b -> c;
        wait h;
    }
}

fn main() {}
