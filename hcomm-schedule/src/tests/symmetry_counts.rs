//! The rotation symmetry over count vectors (entry `i` of rank 0 read as
//! entry `i + r` of rank `r`, parts turned part by part) against the full
//! check: a symmetric all-gatherv is checked on rank 0 with the full
//! verdict, and one that differs on one rank, or is wrong on every rank
//! alike, or moves regions that are not whole parts, gets the full check's
//! diagnostics word for word.

use crate::check::{rotation, symmetry};
use crate::check_world;
use crate::compile::compile;
use crate::syntax;
use crate::verify::full_checks;

/// Whether the reduction passes the only item of `src` at `world`, and the
/// full check's diagnostics, which `check_world` must give word for word.
fn agrees(src: &str, world: i64) -> (bool, Vec<String>) {
    let input = syntax::parse_str(src).expect("the test's schedule parses");
    let front = syntax::front(&input.items[0]).expect("the test's schedule resolves");
    let s = &front.ir;
    let (prog, diags) = compile(s);
    assert!(diags.is_empty(), "{diags:?}");
    let full: Vec<String> = full_checks(&prog, world, &[], true)
        .iter()
        .map(ToString::to_string)
        .collect();
    let reduced = symmetry::passes(&prog, world, &[]);
    // rank 0 alone unrolled where the shape proves the others its images,
    // and every rank unrolled and compared: the same verdict
    assert_eq!(
        symmetry::reduced(&prog, world, &[], true),
        symmetry::reduced(&prog, world, &[], false),
        "at world {world} (proven from the shape: {})",
        rotation::units(&prog, world, &[]).is_some()
    );
    assert!(
        !reduced || full.is_empty(),
        "at world {world}: the reduction passed what the full check rejects: {full:?}"
    );
    let got: Vec<String> = check_world(s, world, &[]).iter().map(ToString::to_string).collect();
    assert_eq!(got, full, "at world {world}");
    (reduced, full)
}

/// An all-gatherv of `x` into `out` with `body` after the own part's copy.
fn all_gatherv(own: &str, body: &str) -> String {
    format!(
        "#[verify(world in 1..=16)]
         #[postcondition(all_gatherv(x -> out, counts))]
         fn f(counts: &[usize; world], x: &[T; counts[rank]], out: &mut [T; sum(counts)]) {{
             {own}
             {body}
         }}"
    )
}

const OWN: &str = "copy x -> out.part(counts, rank);";

/// Every rank sends `x` to every other, directly.
const DIRECT: &str = "for s in 1..world {
        batch {
            send x to (rank + s) % world;
            recv out.part(counts, (rank - s) % world) from (rank - s) % world;
        }
    }";

/// Each part goes around a ring, forwarded from `out`.
const RING: &str = "for s in 0..world - 1 {
        batch {
            send out.part(counts, (rank - s) % world) to (rank + 1) % world;
            recv out.part(counts, (rank - s - 1) % world) from (rank - 1) % world;
        }
    }";

#[test]
fn a_symmetric_all_gatherv_is_checked_on_one_rank_with_the_full_verdict() {
    for body in [DIRECT, RING] {
        let src = all_gatherv(OWN, body);
        for world in 1..=12 {
            let (reduced, full) = agrees(&src, world);
            assert!(full.is_empty(), "at world {world}: {full:?}");
            assert_eq!(reduced, world >= 2, "at world {world}:\n{body}");
        }
    }
}

#[test]
fn the_shape_proves_a_direct_and_a_ring_all_gatherv_symmetric() {
    let prove = |src: &str, world: i64| {
        let input = syntax::parse_str(src).expect("the test's schedule parses");
        let front = syntax::front(&input.items[0]).expect("the test's schedule resolves");
        let (prog, _) = compile(&front.ir);
        rotation::units(&prog, world, &[])
    };
    for world in 2..=9 {
        // `x` read whole (the same offsets), `out` by turned parts
        for body in [DIRECT, RING] {
            assert_eq!(
                prove(&all_gatherv(OWN, body), world),
                Some(vec![Some(false), Some(true)]),
                "{body}"
            );
        }
        // a part that does not turn with the rank, and a buffer of one
        // entry that is not the rank's: not proven
        let fixed_part = all_gatherv("copy x -> out.part(counts, rank); copy x -> out.part(counts, 0);", "");
        assert_eq!(prove(&fixed_part, world), None);
        let src = "#[verify(world in 2..=9)]
             fn f(counts: &[usize; world], x: &[T; counts[0]], out: &mut [T; sum(counts)]) {
                 copy x -> out.part(counts, 0);
             }";
        assert_eq!(prove(src, world), None);
    }
}

#[test]
fn an_all_gatherv_different_on_one_rank_gets_the_full_diagnostic() {
    let odd = [
        // rank 2 copies its input into the next part
        (
            "if rank == 2 { copy x -> out.part(counts, (rank + 1) % world); } else { copy x -> out.part(counts, rank); }",
            DIRECT,
            "length mismatch: with world = 3, rank 2's `copy` reads counts[2] elements but writes counts[0]",
        ),
        // rank 2 leaves its own part out
        (
            "if rank != 2 { copy x -> out.part(counts, rank); }",
            DIRECT,
            "postcondition violated: with world = 3, counts = [1, 1, 1], rank 2 ends with out element 2 = \
             rank 2's initial out element 2, expected rank 2's x element 0",
        ),
        // rank 1 forwards the part it received last instead of its own
        (
            OWN,
            "for s in 0..world - 1 {
                batch {
                    if rank == 1 {
                        send out.part(counts, (rank - s - 1) % world) to (rank + 1) % world;
                    } else {
                        send out.part(counts, (rank - s) % world) to (rank + 1) % world;
                    }
                    recv out.part(counts, (rank - s - 1) % world) from (rank - 1) % world;
                }
            }",
            "",
        ),
    ];
    for (own, body, first) in odd {
        let src = all_gatherv(own, body);
        for world in 3..=9 {
            let (reduced, full) = agrees(&src, world);
            assert!(!reduced && !full.is_empty(), "at world {world}:\n{body}");
            if world == 3 {
                let head = full.first().map_or("", String::as_str);
                assert!(head.starts_with(first), "{head}");
            }
        }
    }
}

#[test]
fn an_all_gatherv_wrong_on_every_rank_gets_the_full_diagnostic() {
    // one step short; every rank's own part left out
    let short = "for s in 1..world - 1 {
            batch {
                send x to (rank + s) % world;
                recv out.part(counts, (rank - s) % world) from (rank - s) % world;
            }
        }";
    for (own, body) in [(OWN, short), ("", DIRECT)] {
        let src = all_gatherv(own, body);
        for world in 3..=9 {
            let (reduced, full) = agrees(&src, world);
            assert!(!reduced, "at world {world}:\n{body}");
            assert!(
                full.first().is_some_and(|d| d.starts_with("postcondition violated")),
                "at world {world}: {full:?}"
            );
        }
    }
}

#[test]
fn buffers_not_laid_out_by_whole_parts_take_the_full_check() {
    // symmetric, but `tmp` is one element longer than an entry: the run
    // with every count 1 does not decide its data flow, and the full check
    // says so
    let src = all_gatherv(
        OWN,
        "let tmp = scratch[T; counts[rank] + 1];
        copy x -> tmp[0..counts[rank]];
        for s in 1..world {
            batch {
                send tmp[0..counts[rank]] to (rank + s) % world;
                recv out.part(counts, (rank - s) % world) from (rank - s) % world;
            }
        }",
    );
    for world in 2..=6 {
        let (reduced, full) = agrees(&src, world);
        assert!(!reduced, "at world {world}");
        assert!(
            full.first()
                .is_some_and(|d| d.contains("not decided for every value of the counts")),
            "at world {world}: {full:?}"
        );
    }
}

/// A generated all-gatherv: own part at `rank + own`, steps `lo..world -
/// hi`, sending `x` or a part of `out`, receiving part `rank - s + b` from
/// `rank - s - c`, and on rank `odd - 1` (when `odd > 0`) sending the part
/// one further.
fn generated(own: u8, (lo, hi): (u8, u8), src: Option<u8>, (b, c): (u8, u8), odd: u8) -> String {
    let part = |a: u8| format!("out.part(counts, (rank - s + {a}) % world)");
    let send = |a: Option<u8>| {
        let region = a.map_or_else(|| "x".to_owned(), part);
        format!("send {region} to (rank + s + {c}) % world;")
    };
    let sends = if odd == 0 {
        send(src)
    } else {
        format!(
            "if rank == {} {{ {} }} else {{ {} }}",
            odd - 1,
            send(Some(src.map_or(1, |a| a + 1))),
            send(src)
        )
    };
    all_gatherv(
        &format!("copy x -> out.part(counts, (rank + {own}) % world);"),
        &format!(
            "for s in {lo}..world - {hi} {{
                batch {{
                    {sends}
                    recv {} from (rank - s - {c}) % world;
                }}
            }}",
            part(b)
        ),
    )
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(48))]

    /// Generated all-gathervs, right, wrong on every rank alike or on one
    /// rank: whatever the reduction passes the full check passes, and
    /// `check_world` gives the full check's diagnostics word for word.
    #[test]
    fn generated_all_gathervs_get_the_full_verdict(
        own in 0_u8..2,
        steps in (0_u8..2, 0_u8..2),
        src in proptest::option::of(0_u8..2),
        bc in (0_u8..2, 0_u8..2),
        odd in 0_u8..3,
    ) {
        let src_text = generated(own, steps, src, bc, odd);
        for world in 2..=5 {
            agrees(&src_text, world);
        }
    }
}

#[test]
fn the_generator_makes_a_right_all_gatherv_that_takes_the_reduction() {
    let src = generated(0, (1, 0), None, (0, 0), 0);
    for world in 2..=5 {
        let (reduced, full) = agrees(&src, world);
        assert!(reduced && full.is_empty(), "at world {world}: {full:?}\n{src}");
    }
}
