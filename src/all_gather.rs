//! Custom all-gather variants written in the schedule language.
//!
//! The ring, recursive-doubling and Bruck all-gathers are the runtime's own
//! built-in algorithms, themselves schedules (see `hcomm::schedules`); they
//! are re-exported here beside the two variants below.

pub use hcomm::schedules::{bruck_all_gather, recursive_doubling_all_gather, ring_all_gather};

use hcomm::comm_schedule;

comm_schedule! {
    /// Two-level all-gather: gather inside groups of `local` consecutive
    /// ranks (a server), then across groups, one rank per server position.
    #[verify(world in 1..=12, local in 1..=world)]
    #[requires(world % local == 0)]
    #[postcondition(all_gather(input -> output))]
    pub fn two_level_all_gather(input: &[T; n], output: &mut [T; n * world], local: usize) {
        let node = scratch[T; n * local];
        all_gather(input -> node) over rank / local;
        all_gather(node -> output) over rank % local;
    }

    /// Sparse all-gather: only the first `active` ranks hold a segment, and
    /// only those segments travel; chunks of inactive ranks are left as they
    /// were.
    #[verify(world in 1..=8, active in 0..=world)]
    pub fn sparse_all_gather(input: &[T; n], output: &mut [T; n * world], active: usize) {
        if rank < active {
            copy input -> output.chunk(rank);
        }
        for s in 1..world {
            let to = (rank + s) % world;
            let from = (rank - s) % world;
            if rank < active && from < active {
                batch {
                    send input to to;
                    recv output.chunk(from) from from;
                }
            } else if rank < active {
                send input to to;
            } else if from < active {
                recv output.chunk(from) from from;
            }
        }
    }
}
