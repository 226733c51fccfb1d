use hcomm::comm_schedule;

comm_schedule! {
    // Right for every value of the counts, but the scratch buffer's regions
    // start inside the line of counts (`counts[1] + counts[2]` is no prefix
    // sum), so the run with every entry 1 does not decide the other values:
    // the checker says so rather than sampling.
    #[verify(world in 3..=3)]
    #[postcondition(all_gatherv(x -> out, counts))]
    pub fn f(counts: &[usize; world], x: &[T; counts[rank]], out: &mut [T; sum(counts)]) {
        let all = scratch[T; sum(counts)];
        let rot = scratch[T; sum(counts)];
        all_gatherv(x -> all, counts);
        copy all.part(counts, 0) -> rot[counts[1] + counts[2]..sum(counts)];
        copy all.part(counts, 1) -> rot[0..counts[1]];
        copy all.part(counts, 2) -> rot[counts[1]..counts[1] + counts[2]];
        copy rot[counts[1] + counts[2]..sum(counts)] -> out.part(counts, 0);
        copy rot[0..counts[1]] -> out.part(counts, 1);
        copy rot[counts[1]..counts[1] + counts[2]] -> out.part(counts, 2);
    }
}

fn main() {}
