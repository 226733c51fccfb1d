//! Variable-size collectives written as schedules over count parameters:
//! every fact the checker proves about them holds for every value of the
//! counts.

hcomm::comm_schedule! {
    /// Sparse all-gather: rank `r` contributes only its non-zero segment of
    /// `counts[r]` elements (possibly none), and a ring passes each rank's
    /// segment around, so every rank ends with all segments packed in rank
    /// order.
    #[verify(world in 1..=16)]
    #[postcondition(all_gatherv(segment -> packed, counts))]
    pub fn sparse_all_gather(
        counts: &[usize; world],
        segment: &[T; counts[rank]],
        packed: &mut [T; sum(counts)],
    ) {
        copy segment -> packed.part(counts, rank);
        for s in 0..world - 1 {
            batch {
                send packed.part(counts, (rank - s) % world) to (rank + 1) % world;
                recv packed.part(counts, (rank - s - 1) % world) from (rank - 1) % world;
            }
        }
    }
}

hcomm::comm_schedule! {
    /// MoE dispatch: rank `r` sends `sizes[r][j]` elements (its tokens
    /// routed to the experts on rank `j`, packed by destination) to rank
    /// `j`, which receives them packed by source. Rank `r` exchanges with
    /// `r + s` and `r - s` at step `s`, so every pair meets once.
    #[verify(world in 1..=16)]
    #[postcondition(all_to_allv(tokens -> routed, sizes))]
    pub fn moe_dispatch(
        sizes: &[[usize; world]; world],
        tokens: &[T; sum(sizes[rank])],
        routed: &mut [T; sum(col(sizes, rank))],
    ) {
        copy tokens.part(sizes[rank], rank) -> routed.part(col(sizes, rank), rank);
        for s in 1..world {
            batch {
                send tokens.part(sizes[rank], (rank + s) % world) to (rank + s) % world;
                recv routed.part(col(sizes, rank), (rank - s) % world) from (rank - s) % world;
            }
        }
    }
}

/// `MoE` combine: the experts' outputs go back to the ranks that own the
/// tokens, packed as they were sent. It is [`moe_dispatch()`] over the
/// transpose of the dispatch's `sizes` (what rank `i` returns to rank `j` is
/// what `j` sent to `i`), so the same checked schedule moves the data back:
/// `outputs` is laid out by this rank's column of `sizes`, `combined` by its
/// row.
pub fn moe_combine<T: hcomm::Element>(
    comm: &hcomm::Comm,
    sizes: &[usize],
    outputs: &[T],
    combined: &mut [T],
) -> hcomm::Result<()> {
    let w = comm.world();
    if sizes.len() != w * w {
        return Err(hcomm::Error::BufferLength {
            buffer: "sizes".to_owned(),
            actual: sizes.len(),
            expected: format!("world * world = {}", w * w),
        });
    }
    let back: Vec<usize> = (0..w * w).map(|k| sizes[(k % w) * w + k / w]).collect();
    moe_dispatch(comm, &back, outputs, combined)
}
