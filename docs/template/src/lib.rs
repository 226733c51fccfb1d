//! Schedules of a model crate, checked when the crate compiles.
//!
//! The tests below run them on in-process host ranks against a serial
//! reference and check the world size the production job runs on;
//! `tests/ui.rs` keeps the mistakes of `tests/ui/` rejected with their
//! messages.

hcomm::comm_schedule! {
    /// Ring all-gather: `world - 1` steps, each passing one block to the
    /// right neighbour.
    #[verify(world in 1..=32)]
    #[postcondition(all_gather(input -> output))]
    pub fn ring_all_gather(input: &[T; n], output: &mut [T; n * world]) {
        copy input -> output.chunk(rank);
        for s in 0..world - 1 {
            batch {
                send output.chunk((rank - s) % world) to (rank + 1) % world;
                recv output.chunk((rank - s - 1) % world) from (rank - 1) % world;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ring_all_gather;

    #[test]
    fn gathers_every_block_in_rank_order() {
        for world in 1..=6 {
            let out = hcomm::host::run(world, |comm| {
                let mine: Vec<i32> = (0..4).map(|i| 10 * comm.rank() as i32 + i).collect();
                let mut all = vec![0; 4 * comm.world()];
                ring_all_gather(comm, &mine, &mut all)?;
                Ok(all)
            })
            .unwrap();
            let want: Vec<i32> = (0..world as i32)
                .flat_map(|r| (0..4).map(move |i| 10 * r + i))
                .collect();
            assert!(out.iter().all(|all| *all == want), "world {world}");
        }
    }

    #[test]
    fn the_production_world_size_checks() {
        let errors = hcomm::checker::check_world(&ring_all_gather::SCHEDULE, 384, &[]);
        assert!(errors.is_empty(), "{errors:?}");
    }
}
