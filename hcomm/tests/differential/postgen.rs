//! Random schedules with postconditions of the newer forms, written as text
//! and read with `hcomm_schedule::syntax`: `all_gather(out)` in place, the
//! whole-buffer `shift` over requests posted in a loop and waited with
//! `wait all`, the block-wise `shift`, and a `broadcast` whose rounds are
//! `ceil_log2(world)`. Half of the cases carry a planted bug, chosen among
//! bugs that show only at some values: at `n >= 3` (a ring forwarding only
//! the first and the last element of each block), at worlds that are not
//! powers of two (`log2` for `ceil_log2`), at worlds above 8 (a loop capped
//! at 3 rounds), at one block out of `world` (a wrong block index).
//!
//! Every case is verified at its own world only (`#[verify(world in
//! [W])]`, `W` up to 12), and [`PostCase::reference`] is the serial
//! reference of its postcondition: what `out` must hold at every rank.

use hcomm_schedule::syntax;
use proptest::prelude::RngExt;
use proptest::test_runner::{RngAlgorithm, TestRng};

use super::build::{INP, OUT};
use super::gen::{Case, Flavor};
use super::initial;

/// The postcondition a case declares, with what its reference needs.
#[derive(Clone, Copy, Debug)]
pub enum Form {
    /// `all_gather(out)`.
    AllGatherInPlace,
    /// `shift(inp -> out, from = (rank - k) % world)`.
    Shift { k: i64 },
    /// `shift(inp.chunk((j + c) % world) -> out.chunk(j), from = F)` with
    /// `F = (rank + a * j + b) % world`.
    BlockShift { a: i64, b: i64, c: i64 },
    /// `broadcast(out, root = 0)`.
    Broadcast,
}

/// A generated case with its source and postcondition.
#[derive(Debug)]
pub struct PostCase {
    /// The schedule, its world and `n` (the run's; the checker decides
    /// every `n`).
    pub case: Case,
    /// The text it was read from.
    pub source: String,
    /// Its postcondition.
    pub form: Form,
    /// The planted bug, if any.
    pub planted: Option<&'static str>,
}

impl PostCase {
    /// What rank `r`'s `out` must hold at the end, with `n` elements per
    /// block.
    pub fn reference(&self, r: usize, n: usize) -> Vec<u64> {
        let w = self.case.world as i64;
        let len = n * self.case.world;
        let at = |q: i64, b: usize, i: usize| initial(q.rem_euclid(w) as u32, b as u32, i as u32);
        (0..len)
            .map(|i| {
                let (j, k) = (i / n, i % n);
                match self.form {
                    Form::AllGatherInPlace => at(j as i64, OUT, i),
                    Form::Shift { k: d } => at(r as i64 - d, INP, i),
                    Form::BlockShift { a, b, c } => {
                        let g = (j as i64 + c).rem_euclid(w) as usize;
                        at(r as i64 + a * j as i64 + b, INP, g * n + k)
                    }
                    Form::Broadcast => at(0, OUT, i),
                }
            })
            .collect()
    }
}

const HEAD: &str = "fn case(inp: &[T; world * n], out: &mut [T; world * n], acc: &mut [T; world * n])";

/// The random stream of case `index` of the run seeded with `seed`, for
/// the generator `salt` names (distinct generators, distinct streams).
pub fn stream(seed: u64, index: u64, salt: u8) -> TestRng {
    let mut bytes = [0_u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..16].copy_from_slice(&index.to_le_bytes());
    bytes[16] = salt;
    TestRng::from_seed(RngAlgorithm::ChaCha, &bytes)
}

/// Case `index` of the run seeded with `seed`.
///
/// # Panics
///
/// When the generated text does not parse or resolve (a generator bug).
pub fn case(seed: u64, index: u64) -> PostCase {
    let mut rng = stream(seed, index, 0x9c);
    let world: i64 = rng.random_range(1..=12);
    let n: i64 = rng.random_range(1..=5);
    let buggy = rng.random_range(0..2) == 1;
    let (form, post, body, planted) = match rng.random_range(0..4) {
        0 => ring_in_place(&mut rng, buggy),
        1 => shift_wait_all(&mut rng, buggy, world),
        2 => block_shift(&mut rng, buggy, world),
        _ => tree_broadcast(&mut rng, buggy),
    };
    assemble(&world.to_string(), world, n, (form, post, body, planted))
}

/// The case of `parts` at `world` and `n`, verified at the worlds `verify`
/// (a list's entries, written as in `#[verify(world in [..])]`).
///
/// # Panics
///
/// When the generated text does not parse or resolve (a generator bug).
pub fn assemble(verify: &str, world: i64, n: i64, parts: Parts) -> PostCase {
    let (form, post, body, planted) = parts;
    let source = format!("#[verify(world in [{verify}])]\n#[postcondition({post})]\n{HEAD} {{\n{body}}}\n");
    PostCase {
        case: text_case(&source, world, n, planted.is_some()),
        source,
        form,
        planted,
    }
}

/// A case's postcondition, its text, its body and its planted bug.
pub type Parts = (Form, String, String, Option<&'static str>);

/// A ring all-gather in place on `out`.
fn ring_in_place(rng: &mut TestRng, buggy: bool) -> Parts {
    let bug = if buggy { rng.random_range(0..4) } else { 4 };
    let steps = if bug == 0 { "world - 2" } else { "world - 1" };
    let sent = if bug == 1 { "rank" } else { "(rank - s) % world" };
    let into = if bug == 2 {
        "(rank - s) % world"
    } else {
        "(rank - s - 1) % world"
    };
    let body = if bug == 3 {
        // the first and the last element of each block only: right at n <= 2
        format!(
            "for s in 0..world - 1 {{
                batch {{ send out.chunk({sent})[0..1] to (rank + 1) % world; recv out.chunk({into})[0..1] from (rank - 1) % world; }}
                batch {{ send out.chunk({sent})[n - 1..n] to (rank + 1) % world; recv out.chunk({into})[n - 1..n] from (rank - 1) % world; }}
            }}\n"
        )
    } else {
        format!(
            "for s in 0..{steps} {{
                batch {{ send out.chunk({sent}) to (rank + 1) % world; recv out.chunk({into}) from (rank - 1) % world; }}
            }}\n"
        )
    };
    let planted = [
        "one step short",
        "forwards its own block",
        "receives over the block it sends",
        "forwards the first and last elements only",
    ]
    .get(bug)
    .copied();
    (Form::AllGatherInPlace, "all_gather(out)".to_owned(), body, planted)
}

/// A shift by `k`, block by block, over requests posted in a loop and
/// waited with `wait all`.
fn shift_wait_all(rng: &mut TestRng, buggy: bool, world: i64) -> Parts {
    let k = rng.random_range(0..world.max(1));
    let bug = if buggy { rng.random_range(0..2) } else { 2 };
    // bug 0: an odd block's send reads the block before it; bug 1: the
    // shift is declared one rank off
    let sent = if bug == 0 { "c / 2 * 2" } else { "c" };
    let declared = if bug == 1 { k + 1 } else { k };
    let body = format!(
        "for c in 0..world {{
            let r = irecv out.chunk(c) from (rank - {k}) % world tag c;
            let h = isend inp.chunk({sent}) to (rank + {k}) % world tag c;
        }}
        wait all;\n"
    );
    let planted = ["odd blocks send the block before", "declared one rank off"]
        .get(bug)
        .copied();
    (
        Form::Shift { k: declared },
        format!("shift(inp -> out, from = (rank - {declared}) % world)"),
        body,
        planted,
    )
}

/// Block `j` of `out` from rank `rank + a j + b`'s block `j + c`, one
/// message per block with the block as its tag.
fn block_shift(rng: &mut TestRng, buggy: bool, world: i64) -> Parts {
    let (a, b, c) = (
        rng.random_range(0..3),
        rng.random_range(0..world.max(1)),
        rng.random_range(0..world.max(1)),
    );
    let bug = if buggy { rng.random_range(0..2) } else { 2 };
    // bug 0: an odd block sends the input block of the block before it;
    // bug 1: the declared input block is one off
    let sent = if bug == 0 {
        format!("(j / 2 * 2 + {c}) % world")
    } else {
        format!("(j + {c}) % world")
    };
    let declared_c = if bug == 1 { c + 1 } else { c };
    let body = format!(
        "for j in 0..world {{
            batch {{
                send inp.chunk({sent}) to (rank - {a} * j - {b}) % world tag j;
                recv out.chunk(j) from (rank + {a} * j + {b}) % world tag j;
            }}
        }}\n"
    );
    let planted = ["odd blocks send the wrong input block", "declared input block one off"]
        .get(bug)
        .copied();
    (
        Form::BlockShift { a, b, c: declared_c },
        format!("shift(inp.chunk((j + {declared_c}) % world) -> out.chunk(j), from = (rank + {a} * j + {b}) % world)"),
        body,
        planted,
    )
}

/// The case of a generated schedule text at `world` and length `n`: a
/// planted one is expected rejected, a clean one accepted.
///
/// # Panics
///
/// When the text does not parse or resolve (a generator bug).
pub fn text_case(source: &str, world: i64, n: i64, planted: bool) -> Case {
    let input = syntax::parse_str(source).unwrap_or_else(|e| panic!("{e}\n{source}"));
    let front = syntax::front(&input.items[0]).unwrap_or_else(|r| panic!("{:?}\n{source}", r.errors));
    Case {
        schedule: front.ir,
        world: world as usize,
        n,
        flavor: if planted { Flavor::Unmatched } else { Flavor::Clean },
        tag_reorder: false,
        inflight_collective: false,
    }
}

/// The body of a binomial-tree broadcast of `out` from rank 0 in `rounds`
/// rounds.
pub fn tree_broadcast_body(rounds: &str) -> String {
    format!(
        "for k in 0..{rounds} {{
            if rank < pow2(k) && rank + pow2(k) < world {{
                send out to rank + pow2(k);
            }}
            if rank >= pow2(k) && rank < 2 * pow2(k) {{
                recv out from rank - pow2(k);
            }}
        }}\n"
    )
}

/// A binomial-tree broadcast from rank 0 in `ceil_log2(world)` rounds.
fn tree_broadcast(rng: &mut TestRng, buggy: bool) -> Parts {
    let bug = if buggy { rng.random_range(0..2) } else { 2 };
    let rounds = ["log2(world)", "min(ceil_log2(world), 3)", "ceil_log2(world)"][bug];
    let body = tree_broadcast_body(rounds);
    let planted = [
        "log2 rounds: short at worlds not a power of two",
        "at most 3 rounds: short above 8 ranks",
    ]
    .get(bug)
    .copied();
    (Form::Broadcast, "broadcast(out, root = 0)".to_owned(), body, planted)
}
