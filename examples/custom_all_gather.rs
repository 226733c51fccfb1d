//! The all-gather variants of `hcomm_examples::all_gather`, each written in
//! the schedule language, run on 6 in-process ranks and checked against the
//! runtime's built-in all-gather.
//!
//! `cargo run --release --example custom_all_gather`

use hcomm::Comm;
use hcomm_examples::all_gather;

type Variant = fn(&Comm, &[u32], &mut [u32]) -> hcomm::Result<()>;

fn main() {
    // HCOMM_TRACE=path records this run (the library installs no subscriber)
    let _trace = hcomm::trace::init_from_env();
    let world = 6;
    let variants: [(&str, Variant); 5] = [
        ("ring", |c, i, o| all_gather::ring_all_gather(c, i, o)),
        ("bruck", |c, i, o| all_gather::bruck_all_gather(c, i, o)),
        ("two-level (3 per server)", |c, i, o| {
            all_gather::two_level_all_gather(c, i, o, 3)
        }),
        ("sparse (4 active ranks)", |c, i, o| {
            all_gather::sparse_all_gather(c, i, o, 4)
        }),
        // 6 is not a power of two: the schedule's `#[requires]` refuses it.
        ("recursive doubling", |c, i, o| {
            all_gather::recursive_doubling_all_gather(c, i, o)
        }),
    ];
    for (name, variant) in variants {
        let outcome = hcomm::run(world, |comm| {
            let mine = [comm.rank() as u32 * 10, comm.rank() as u32 * 10 + 1];
            let mut ours = vec![u32::MAX; 2 * world];
            variant(comm, &mine, &mut ours)?;
            let mut builtin = vec![0; 2 * world];
            comm.all_gather(&mine, &mut builtin)?;
            Ok((ours, builtin))
        });
        match outcome {
            Ok(ranks) => {
                let (ours, builtin) = &ranks[0];
                let same = ours.iter().zip(builtin).filter(|(a, b)| a == b).count();
                println!(
                    "{name:<26} rank 0 -> {ours:?} ({same} of {} elements as built-in)",
                    ours.len()
                );
            }
            Err(e) => println!("{name:<26} refused: {e}"),
        }
    }
}
