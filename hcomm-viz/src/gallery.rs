//! Schedules kept to be looked at: patterns the built-ins do not use, and
//! mistakes that show only at some world sizes. Each mistake compiles
//! because its `#[verify]` set holds only sizes where it is right; drawn at
//! another size, the drawing shows the failure.

use hcomm::comm_schedule;

comm_schedule! {
    /// A pipelined ring of non-blocking operations: post the receive of the
    /// next block, send the current one, and overlap a local copy with both
    /// before waiting.
    #[verify(world in 1..=8)]
    pub fn nonblocking_ring(a: &[T; n], b: &mut [T; n], c: &mut [T; n]) {
        let r = irecv b from (rank - 1) % world;
        let s = isend a to (rank + 1) % world;
        copy a -> c;
        wait r, s;
    }

    /// Parity ordering (even ranks send first, odd ranks receive first) of a
    /// shift by two: right at odd world sizes, a deadlock at even ones,
    /// where even ranks only talk to even ranks.
    #[verify(world in [1, 3, 5, 7])]
    pub fn shift_by_two(a: &[T; n], b: &mut [T; n]) {
        if world > 1 {
            if rank % 2 == 0 {
                send a to (rank + 2) % world;
                recv b from (rank - 2) % world;
            } else {
                recv b from (rank - 2) % world;
                send a to (rank + 2) % world;
            }
        }
    }

    /// A ring of blocking sends: every rank sends before it receives, so at
    /// every world size above 1 all ranks wait for each other.
    #[verify(world in [1])]
    pub fn blocking_ring(a: &[T; n], b: &mut [T; n]) {
        if world > 1 {
            send a to (rank + 1) % world;
            recv b from (rank - 1) % world;
        }
    }

    /// Rank 0 sends to rank 1 before a barrier that rank 1 enters before
    /// receiving: a collective cannot complete while one member waits for
    /// a point-to-point step of another member already inside it.
    #[verify(world in [1])]
    pub fn send_versus_barrier(a: &mut [T; n]) {
        if rank == 0 && world > 1 {
            send a to 1;
            barrier;
        } else if rank == 1 {
            barrier;
            recv a from 0;
        } else {
            barrier;
        }
    }

    /// Rank 0 sends to rank 1, which never receives.
    #[verify(world in [1])]
    pub fn send_without_recv(a: &[T; n]) {
        if rank == 0 && world > 1 {
            send a to 1;
        }
    }

    /// A ring all-gather that stops one step early: each rank misses one
    /// block.
    #[verify(world in [1])]
    #[postcondition(all_gather(input -> output))]
    pub fn ring_stops_early(input: &[T; n], output: &mut [T; n * world]) {
        copy input -> output.chunk(rank);
        for s in 0..world - 2 {
            batch {
                send output.chunk((rank - s) % world) to (rank + 1) % world;
                recv output.chunk((rank - s - 1) % world) from (rank - 1) % world;
            }
        }
    }
}
