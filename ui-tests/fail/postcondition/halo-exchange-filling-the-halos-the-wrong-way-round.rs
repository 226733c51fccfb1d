use hcomm::comm_schedule;

comm_schedule! {
    // the right neighbour's left edge lands in the left halo
    #[verify(world in 1..=4)]
    #[postcondition(shift(edges.chunk(1 - j, 2) -> halo.chunk(j, 2), from = (rank + 2 * j - 1) % world))]
    fn f(edges: &[T; 2 * n], halo: &mut [T; 2 * n]) {
        batch {
            send edges.chunk(0, 2) to (rank - 1) % world;
            recv halo.chunk(0, 2) from (rank + 1) % world;
        }
        batch {
            send edges.chunk(1, 2) to (rank + 1) % world;
            recv halo.chunk(1, 2) from (rank - 1) % world;
        }
    }
}

fn main() {}
