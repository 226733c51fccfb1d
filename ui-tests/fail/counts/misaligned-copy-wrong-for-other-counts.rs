use hcomm::comm_schedule;

comm_schedule! {
    // Right when every count is 1; part 1 lands at the wrong offset
    // otherwise: the bounds mix parts, so other counts are sampled.
    #[verify(world in 3..=3)]
    #[postcondition(all_gatherv(x -> out, counts))]
    pub fn f(counts: &[usize; world], x: &[T; counts[rank]], out: &mut [T; sum(counts)]) {
        let all = scratch[T; sum(counts)];
        all_gatherv(x -> all, counts);
        copy all.part(counts, 0) -> out.part(counts, 0);
        copy all.part(counts, 2) -> out.part(counts, 2);
        copy all.part(counts, 1) -> out[counts[2]..counts[2] + counts[1]];
    }
}

fn main() {}
