//! hcomm in one screen: a custom all-gather written in the schedule language
//! (checked at compile time for every world size from 1 to 64), then the
//! runtime's built-in all-reduce, a ring exchange and an all-to-all, on four
//! in-process ranks, or one rank per process when a launcher started it.
//!
//! `cargo run --release --example quickstart`, or one process per rank:
//! `hcomm-run -n 4 -- target/release/examples/quickstart`

use hcomm::{Collective, ReduceOp};

hcomm::comm_schedule! {
    /// Ring all-gather: `world - 1` steps, each passes one block to the right.
    /// Had a `send` no matching `recv`, or could the ring deadlock at any
    /// world size up to 64, this would not compile.
    #[verify(world in 1..=64)]
    #[postcondition(all_gather(input -> output))]
    fn ring_all_gather(input: &[T; n], output: &mut [T; n * world]) {
        copy input -> output.chunk(rank);
        for s in 0..world - 1 {
            batch {
                send output.chunk((rank - s) % world) to (rank + 1) % world;
                recv output.chunk((rank - s - 1) % world) from (rank - 1) % world;
            }
        }
    }
}

fn main() -> Result<(), hcomm::Report> {
    // HCOMM_TRACE=path records this run (the library installs no subscriber)
    let _trace = hcomm::trace::init_from_env();
    // Started by `hcomm-run` or torchrun: this process is one rank.
    if ["HCOMM_RANK", "RANK"].iter().any(|v| std::env::var_os(v).is_some()) {
        let comm = hcomm::init_from_env()?;
        for line in report(&comm)? {
            println!("rank {}: {line}", comm.rank());
        }
        return Ok(());
    }
    // `hcomm::run` starts the ranks on the backend `HCOMM_BACKEND` names
    // (the host backend, threads of this process, by default).
    let reports = hcomm::run(4, report)?;
    for (rank, lines) in reports.iter().enumerate() {
        for line in lines {
            println!("rank {rank}: {line}");
        }
    }
    Ok(())
}

/// What one rank does, as lines to print.
fn report(comm: &hcomm::Comm) -> hcomm::Result<Vec<String>> {
    let (rank, world) = (comm.rank(), comm.world());
    let mut lines = Vec::new();

    // The custom all-gather, checked against the built-in one.
    let mine = [rank as u32 * 10, rank as u32 * 10 + 1];
    let mut gathered = vec![0u32; 2 * world];
    ring_all_gather(comm, &mine, &mut gathered)?;
    let mut builtin = vec![0u32; 2 * world];
    comm.all_gather(&mine, &mut builtin)?;
    let agree = if gathered == builtin {
        "same as built-in"
    } else {
        "DIFFERS from built-in"
    };
    lines.push(format!("ring_all_gather -> {gathered:?} ({agree})"));

    // All-reduce: every rank contributes [rank, 10 * rank].
    let mut sums = [rank as f32, 10.0 * rank as f32];
    comm.all_reduce_in_place(&mut sums, ReduceOp::Sum)?;
    lines.push(format!(
        "all_reduce      -> {sums:?} ({})",
        comm.last_algorithm(Collective::AllReduce).map_or("-", |a| a.name())
    ));

    // Ring exchange: pass a token right, receive from the left, posted
    // together so the ring cannot deadlock.
    let token = [rank as i32 * 100];
    let mut from_left = [0i32];
    comm.send_recv(&token, (rank + 1) % world, &mut from_left, (rank + world - 1) % world)?;
    lines.push(format!(
        "ring exchange   -> got {} from rank {}",
        from_left[0],
        (rank + world - 1) % world
    ));

    // All-to-all: block j of rank r holds 10 * r + j and goes to rank j.
    let send: Vec<i64> = (0..world).map(|j| (10 * rank + j) as i64).collect();
    let mut recv = vec![0i64; world];
    comm.all_to_all(&send, &mut recv)?;
    lines.push(format!(
        "all_to_all      -> {recv:?} ({})",
        comm.last_algorithm(Collective::AllToAll).map_or("-", |a| a.name())
    ));
    Ok(lines)
}
