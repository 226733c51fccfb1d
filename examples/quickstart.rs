//! Four in-process ranks: an all-reduce, a ring exchange and an all-to-all,
//! printing what each rank got and which algorithms ran.
//!
//! `cargo run --release --example quickstart`

use hcomm::{Collective, ReduceOp};

fn main() -> hcomm::Result<()> {
    let world = 4;
    let reports = hcomm::host::run(world, |comm| {
        let (rank, world) = (comm.rank(), comm.world());
        let mut lines = Vec::new();

        // All-reduce: every rank contributes [rank, 10 * rank].
        let mut sums = [rank as f32, 10.0 * rank as f32];
        comm.all_reduce_in_place(&mut sums, ReduceOp::Sum)?;
        lines.push(format!(
            "all_reduce   -> {sums:?} ({})",
            comm.last_algorithm(Collective::AllReduce).map_or("-", |a| a.name())
        ));

        // Ring exchange: pass a token to the right, receive from the left,
        // posted together so the ring cannot deadlock.
        let token = [rank as i32 * 100];
        let mut from_left = [0i32];
        comm.send_recv(&token, (rank + 1) % world, &mut from_left, (rank + world - 1) % world)?;
        lines.push(format!(
            "ring         -> got {} from rank {}",
            from_left[0],
            (rank + world - 1) % world
        ));

        // All-to-all: block j of rank r holds 10 * r + j and goes to rank j.
        let send: Vec<i64> = (0..world).map(|j| (10 * rank + j) as i64).collect();
        let mut recv = vec![0i64; world];
        comm.all_to_all(&send, &mut recv)?;
        lines.push(format!(
            "all_to_all   -> {recv:?} ({})",
            comm.last_algorithm(Collective::AllToAll).map_or("-", |a| a.name())
        ));
        Ok(lines)
    })?;
    for (rank, lines) in reports.iter().enumerate() {
        for line in lines {
            println!("rank {rank}: {line}");
        }
    }
    Ok(())
}
