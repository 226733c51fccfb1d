//! `n in 0..`: an empty gradient bucket is an all-reduce with n = 0. The
//! schedules run with empty buffers (nothing moves, `Ok`) and with a
//! one-element header and an empty payload (the headers travel), exact
//! against the serial reference.

use hcomm::{comm_schedule, ReduceOp};

comm_schedule! {
    #[verify(world in 1..=8, n in 0..)]
    #[postcondition(all_reduce(buf, op))]
    pub fn ring_all_reduce(buf: &mut [T; n * world], op: ReduceOp) {
        for s in 0..world - 1 {
            batch {
                send buf.chunk((rank - s) % world) to (rank + 1) % world;
                recv buf.chunk((rank - s - 1) % world) from (rank - 1) % world reduce op;
            }
        }
        for s in 0..world - 1 {
            batch {
                send buf.chunk((rank + 1 - s) % world) to (rank + 1) % world;
                recv buf.chunk((rank - s) % world) from (rank - 1) % world;
            }
        }
    }

    #[verify(world in 1..=8, n in 0..)]
    #[postcondition(all_gather(input -> output))]
    pub fn headed_all_gather(input: &[T; n + 1], output: &mut [T; (n + 1) * world]) {
        copy input -> output.chunk(rank);
        for s in 0..world - 1 {
            batch {
                send output.chunk((rank - s) % world) to (rank + 1) % world;
                recv output.chunk((rank - s - 1) % world) from (rank - 1) % world;
            }
        }
    }
}

fn main() -> hcomm::Result<()> {
    for world in 1..=4 {
        let out = hcomm::host::run(world, |comm| {
            let mut empty: Vec<f32> = Vec::new();
            ring_all_reduce(comm, &mut empty, ReduceOp::Sum)?;
            let mut buf: Vec<i64> = (0..2 * world).map(|i| (comm.rank() * 10 + i) as i64).collect();
            ring_all_reduce(comm, &mut buf, ReduceOp::Sum)?;
            let input = [comm.rank() as i32 + 1];
            let mut output = vec![0_i32; world];
            headed_all_gather(comm, &input, &mut output)?;
            Ok((empty.len(), buf, output))
        })?;
        let sum: Vec<i64> = (0..2 * world)
            .map(|i| (0..world).map(|r| (r * 10 + i) as i64).sum())
            .collect();
        let heads: Vec<i32> = (1..=world as i32).collect();
        for (rank, (empty, buf, output)) in out.iter().enumerate() {
            assert_eq!(*empty, 0, "world {world}, rank {rank}");
            assert_eq!(buf, &sum, "world {world}, rank {rank}");
            assert_eq!(output, &heads, "world {world}, rank {rank}");
        }
    }
    Ok(())
}
