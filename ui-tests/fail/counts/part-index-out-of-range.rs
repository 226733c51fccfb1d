use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 1..=4)]
    pub fn f(counts: &[usize; world], out: &mut [T; sum(counts)]) {
        let next = rank + 1;
        copy out.part(counts, rank) -> out.part(counts, next);
    }
}

fn main() {}
