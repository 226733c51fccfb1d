use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 2..=4)]
    pub fn f(counts: &[usize; world], out: &mut [T; sum(counts) + counts[0]]) {
        copy out.part(counts, 0) -> out[counts[1]..counts[1] + counts[0]];
    }
}

fn main() {}
