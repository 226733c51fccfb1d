//! Schedules whose planted bugs show only at worlds above 64: a ring
//! all-gather whose steps are capped at `min(world - 1, 63)`, a binomial
//! broadcast capped at 6 rounds, a chain broadcast guarded by `rank < 64`,
//! a shift whose destination wraps at 64 (`% min(world, 64)`), and a
//! block-wise shift whose block index wraps at 64 (`j % 64`). Each case is verified at a list of worlds that
//! holds small ones, where every bug is invisible, and its own world `W`
//! (64 to 72; 65 to 72 for a planted bug, so that the bug shows there).

use proptest::prelude::RngExt;
use proptest::test_runner::TestRng;

use super::postgen::{self, assemble, stream, Form, Parts, PostCase};

/// Case `index` of the run seeded with `seed`, verified at a small world
/// and at the world it runs at.
///
/// # Panics
///
/// When the generated text does not parse or resolve (a generator bug).
pub fn case(seed: u64, index: u64) -> PostCase {
    generate(seed, index, true)
}

/// The same case verified at its small world only: the world it runs at
/// is then checked at run time, at the first call.
///
/// # Panics
///
/// When the generated text does not parse or resolve (a generator bug).
pub fn case_verified_small(seed: u64, index: u64) -> PostCase {
    generate(seed, index, false)
}

fn generate(seed: u64, index: u64, list_world: bool) -> PostCase {
    let mut rng = stream(seed, index, 0x64);
    let buggy = rng.random_range(0..2) == 1;
    let world: i64 = rng.random_range(if buggy { 65..=72 } else { 64..=72 });
    let n: i64 = rng.random_range(1..=3);
    let small: i64 = rng.random_range(2..=16);
    let parts = match rng.random_range(0..5) {
        0 => ring_in_place(buggy),
        1 => tree_broadcast(buggy),
        2 => chain_broadcast(buggy),
        3 => shift_wait_all(&mut rng, buggy, world),
        _ => block_shift(&mut rng, buggy, world),
    };
    let verify = if list_world {
        format!("{small}, {world}")
    } else {
        small.to_string()
    };
    assemble(&verify, world, n, parts)
}

/// A ring all-gather in place on `out`; planted: at most 63 steps.
fn ring_in_place(buggy: bool) -> Parts {
    let steps = if buggy { "min(world - 1, 63)" } else { "world - 1" };
    let body = format!(
        "for s in 0..{steps} {{
            batch {{ send out.chunk((rank - s) % world) to (rank + 1) % world; recv out.chunk((rank - s - 1) % world) from (rank - 1) % world; }}
        }}\n"
    );
    let planted = buggy.then_some("at most 63 steps: short above 64 ranks");
    (Form::AllGatherInPlace, "all_gather(out)".to_owned(), body, planted)
}

/// A binomial-tree broadcast from rank 0; planted: at most 6 rounds.
fn tree_broadcast(buggy: bool) -> Parts {
    let rounds = if buggy {
        "min(ceil_log2(world), 6)"
    } else {
        "ceil_log2(world)"
    };
    let body = postgen::tree_broadcast_body(rounds);
    let planted = buggy.then_some("at most 6 rounds: short above 64 ranks");
    (Form::Broadcast, "broadcast(out, root = 0)".to_owned(), body, planted)
}

/// A broadcast from rank 0 along the chain of ranks; planted: a guard
/// `rank < 64` on both ends of every hop.
fn chain_broadcast(buggy: bool) -> Parts {
    let (guard, next) = if buggy {
        (" && rank < 64", " && rank + 1 < 64")
    } else {
        ("", "")
    };
    let body = format!(
        "if rank > 0{guard} {{ recv out from rank - 1; }}
        if rank + 1 < world{next} {{ send out to rank + 1; }}\n"
    );
    let planted = buggy.then_some("a guard `rank < 64`: ranks from 64 on never receive");
    (Form::Broadcast, "broadcast(out, root = 0)".to_owned(), body, planted)
}

/// The planted bug of [`shift_wait_all`]: its sends match no receive, so
/// the checker rejects it as unmatched rather than for its postcondition.
pub const PEER_WRAP: &str = "sends to `(rank + k) % min(world, 64)`: unmatched above 64 ranks";

/// A shift by `k`, block by block, over requests posted in a loop and
/// waited with `wait all`; planted: the destination wraps at 64.
fn shift_wait_all(rng: &mut TestRng, buggy: bool, world: i64) -> Parts {
    let k = rng.random_range(1..world);
    let wrap = if buggy { "min(world, 64)" } else { "world" };
    let body = format!(
        "for c in 0..world {{
            let r = irecv out.chunk(c) from (rank - {k}) % world tag c;
            let h = isend inp.chunk(c) to (rank + {k}) % {wrap} tag c;
        }}
        wait all;\n"
    );
    (
        Form::Shift { k },
        format!("shift(inp -> out, from = (rank - {k}) % world)"),
        body,
        buggy.then_some(PEER_WRAP),
    )
}

/// Block `j` of `out` from rank `rank + a j + b`'s input block `j + c`;
/// planted: the block sent is `j % 64 + c`, wrong from block 64 on.
fn block_shift(rng: &mut TestRng, buggy: bool, world: i64) -> Parts {
    let (a, b, c) = (
        rng.random_range(0..3),
        rng.random_range(0..world),
        rng.random_range(0..world),
    );
    let j = if buggy { "j % 64" } else { "j" };
    let body = format!(
        "for j in 0..world {{
            batch {{
                send inp.chunk(({j} + {c}) % world) to (rank - {a} * j - {b}) % world tag j;
                recv out.chunk(j) from (rank + {a} * j + {b}) % world tag j;
            }}
        }}\n"
    );
    let planted = buggy.then_some("block index wraps at 64: wrong from block 64 on");
    (
        Form::BlockShift { a, b, c },
        format!("shift(inp.chunk((j + {c}) % world) -> out.chunk(j), from = (rank + {a} * j + {b}) % world)"),
        body,
        planted,
    )
}
