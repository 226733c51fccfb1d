use hcomm::comm_schedule;

comm_schedule! {
    #[verify(world in 1..=8)]
    #[postcondition(all_gatherv(x -> out, counts))]
    pub fn f(counts: &[usize; world], x: &[T; counts[rank]], out: &mut [T; sum(counts)]) {
        copy x -> out.part(counts, rank);
        for s in 0..world - 2 {
            batch {
                send out.part(counts, (rank - s) % world) to (rank + 1) % world;
                recv out.part(counts, (rank - s - 1) % world) from (rank - 1) % world;
            }
        }
    }
}

fn main() {}
