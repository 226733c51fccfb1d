use hcomm::{comm_schedule, ReduceOp};

comm_schedule! {
    /// Ring all-reduce in place over any operator: a reduce-scatter ring
    /// (receives combine into the block with `op`), then an all-gather ring.
    /// The checker checks it for `sum`, `prod`, `max` and `min`.
    #[verify(world in 1..=8)]
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
}

fn input(rank: usize, world: usize) -> Vec<i64> {
    (0..2 * world).map(|i| ((rank * 7 + i * 3) % 5) as i64 - 2).collect()
}

fn combine(op: ReduceOp, a: i64, b: i64) -> i64 {
    match op {
        ReduceOp::Sum => a + b,
        ReduceOp::Prod => a * b,
        ReduceOp::Max => a.max(b),
        ReduceOp::Min => a.min(b),
        ReduceOp::Avg => panic!("the schedule language has no mean; no case passes it"),
    }
}

fn main() {
    for world in [1, 2, 3, 4, 6] {
        for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min] {
            let out = hcomm::host::run(world, |comm| {
                let mut buf = input(comm.rank(), world);
                ring_all_reduce(comm, &mut buf, op)?;
                Ok(buf)
            })
            .unwrap();
            let expected: Vec<i64> = (0..2 * world)
                .map(|i| (1..world).fold(input(0, world)[i], |acc, r| combine(op, acc, input(r, world)[i])))
                .collect();
            for buf in out {
                assert_eq!(buf, expected, "world {world}, {op:?}");
            }
        }
    }
}
