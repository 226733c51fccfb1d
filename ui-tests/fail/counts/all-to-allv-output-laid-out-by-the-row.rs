use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 2..=4)]
    pub fn f(sizes: &[[usize; world]; world], a: &[T; sum(sizes[rank])], b: &mut [T; sum(sizes[rank])]) {
        all_to_allv(a -> b, sizes);
    }
}

fn main() {}
