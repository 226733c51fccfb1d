//! Ranges of length variables in `#[verify]` (`n in 0..`, `n in 1..=16`):
//! every check decided over the declared values, read from text as the
//! macro and `hcomm::checker` read it.

use crate::syntax;

/// The hint of a malformed length range.
const HINT: &str = "\nhint: a length variable takes one range of values >= 0, e.g. `n in 0..` or `n in 1..=16`";

/// The errors of the first item of `src` (empty when it is accepted).
fn errors(src: &str) -> Vec<String> {
    let input = match syntax::parse_str(src) {
        Ok(input) => input,
        Err(e) => return e.into_iter().map(|e| e.to_string()).collect(),
    };
    let rejection = match syntax::front(&input.items[0]) {
        Err(r) => r,
        Ok(front) => match syntax::check(&front) {
            Ok(()) => return Vec::new(),
            Err(r) => r,
        },
    };
    rejection.errors.into_iter().map(|(_, text)| text).collect()
}

/// A ring all-gather under `verify` (the attribute's contents).
fn ring(verify: &str) -> String {
    format!(
        "#[verify({verify})]
        #[postcondition(all_gather(input -> output))]
        fn ring(input: &[T; n], output: &mut [T; n * world]) {{
            copy input -> output.chunk(rank);
            for s in 0..world - 1 {{
                batch {{
                    send output.chunk((rank - s) % world) to (rank + 1) % world;
                    recv output.chunk((rank - s - 1) % world) from (rank - 1) % world;
                }}
            }}
        }}"
    )
}

#[test]
fn a_ring_is_accepted_with_empty_buffers() {
    assert_eq!(errors(&ring("world in 1..=6, n in 0..")), Vec::<String>::new());
    assert_eq!(errors(&ring("world in 1..=6, n in 0..=3")), Vec::<String>::new());
    assert_eq!(errors(&ring("world in 1..=6, n in 2..")), Vec::<String>::new());
}

#[test]
fn a_region_that_needs_one_element_is_rejected_at_n_0() {
    let src = |verify: &str| {
        format!(
            "#[verify({verify})]
            fn f(a: &[T; n], b: &mut [T; 1]) {{
                batch {{
                    send a[n - 1..n] to (rank + 1) % world;
                    recv b from (rank - 1) % world;
                }}
            }}"
        )
    };
    assert_eq!(errors(&src("world in 2..=2")), Vec::<String>::new());
    assert_eq!(
        errors(&src("world in 2..=2, n in 0..")),
        [
            "region out of bounds: with world = 2, rank 0 uses `a[n - 1..n]` = elements n - 1..n of a region of \
          length n, which fails when n = 0"
        ]
    );
}

#[test]
fn forms_are_shown_in_the_written_variable() {
    let src = "#[verify(world in 2..=2, n in 0..)]
        fn f(a: &mut [T; n + 1], b: &mut [T; 2 * n]) {
            batch {
                send a to (rank + 1) % world;
                recv b from (rank - 1) % world;
            }
        }";
    // the checker's variable is n' = n + 1; the forms are shown in n
    assert_eq!(
        errors(src),
        [
            "length mismatch: with world = 2, rank 0 sends n + 1 elements to rank 1 but rank 1 receives 2 * n elements",
            "length mismatch: the matching `recv` of 2 * n elements is here"
        ]
    );
}

/// `all_reduce` of elements `0` and `n` of `a[0..n + 1]`: right at `n = 1`
/// alone; element 0 is reduced twice at `n = 0`.
fn two_elements(verify: &str) -> String {
    format!(
        "#[verify({verify})]
        #[postcondition(all_reduce(a, sum))]
        fn f(a: &mut [T; n + 1]) {{
            all_reduce(a[0..1], sum);
            all_reduce(a[n..n + 1], sum);
        }}"
    )
}

#[test]
fn the_postcondition_is_run_at_the_lower_bound() {
    assert_eq!(
        errors(&two_elements("world in 2..=2, n in 0..")),
        [
            "postcondition violated: with world = 2, n = 0, rank 0 ends with a element 0 = a `sum` of 4 contributions \
             (rank 0's initial a element 0, rank 1's initial a element 0, rank 0's initial a element 0, rank 1's \
             initial a element 0), expected the `sum` of every rank's a element 0, each once",
            "postcondition violated: the postcondition is declared here"
        ]
    );
    // from n = 1 the first wrong value is 2
    assert_eq!(
        errors(&two_elements("world in 2..=2")),
        [
            "postcondition violated: with world = 2, n = 2, rank 0 ends with a element 1 = rank 0's initial a element \
             1, expected the `sum` of every rank's a element 1, each once",
            "postcondition violated: no statement wrote it; the nearest element written, a element 0, was written \
             here"
        ]
    );
    assert_eq!(
        errors(&two_elements("world in 2..=2, n in 1..=1")),
        Vec::<String>::new()
    );
}

/// A ring whose scratch buffer is 100 elements longer than a block: bounds
/// that cross at `n = 100`, past the values the checker runs unbounded.
fn long_scratch(verify: &str) -> String {
    format!(
        "#[verify({verify})]
        #[postcondition(all_gather(input -> output))]
        fn f(input: &[T; n], output: &mut [T; n * world]) {{
            let tmp = scratch[T; n + 100];
            copy input -> tmp[0..n];
            copy tmp[0..n] -> output.chunk(rank);
            batch {{
                send output.chunk(rank) to (rank + 1) % world;
                recv output.chunk((rank + 1) % world) from (rank + 1) % world;
            }}
        }}"
    )
}

#[test]
fn a_bounded_range_decides_what_the_unbounded_one_cannot() {
    assert_eq!(
        errors(&long_scratch("world in 2..=2")),
        [
            "evaluation error: with world = 2, the postcondition is not decided: deciding every value of `n` takes a \
          run at each `n` up to 203, and the checker runs at most 64\nhint: bound it: `#[verify(.., n in 1..=16)]` \
          runs every value of that range; or keep the constants in lengths and region bounds small next to the \
          length variable's coefficients"
        ]
    );
    assert_eq!(
        errors(&long_scratch("world in 2..=2, n in 1..=16")),
        Vec::<String>::new()
    );
    assert_eq!(
        errors(&long_scratch("world in 2..=2, n in 0..=63")),
        Vec::<String>::new()
    );
    assert_eq!(
        errors(&long_scratch("world in 2..=2, n in 1..=65")),
        [
            "evaluation error: with world = 2, the postcondition is not decided: deciding every value of `n` takes a \
          run at each `n` up to 65, and the checker runs at most 64\nhint: narrow the ranges of the length \
          variables in `#[verify]`, e.g. `n in 1..=16`"
        ]
    );
}

/// A ring that forwards only the first and the last element of each block.
fn ends_only(verify: &str) -> String {
    format!(
        "#[verify({verify})]
        #[postcondition(all_gather(input -> output))]
        fn f(input: &[T; n], output: &mut [T; n * world]) {{
            copy input -> output.chunk(rank);
            for s in 0..world - 1 {{
                batch {{
                    send output.chunk((rank - s) % world)[0..1] to (rank + 1) % world;
                    recv output.chunk((rank - s - 1) % world)[0..1] from (rank - 1) % world;
                }}
                batch {{
                    send output.chunk((rank - s) % world)[n - 1..n] to (rank + 1) % world;
                    recv output.chunk((rank - s - 1) % world)[n - 1..n] from (rank - 1) % world;
                }}
            }}
        }}"
    )
}

#[test]
fn a_bounded_box_is_exact_for_its_range() {
    // right for n = 1 and n = 2, which is all the range holds
    assert_eq!(errors(&ends_only("world in 2..=3, n in 1..=2")), Vec::<String>::new());
    assert_eq!(
        errors(&ends_only("world in 2..=3, n in 1..=5")),
        [
            "postcondition violated: with world = 2, n = 3, rank 0 ends with output block 1 element 1 = rank 0's \
             initial output block 1 element 1, expected rank 1's input block 0 element 1",
            "postcondition violated: no statement wrote it; the nearest element written, output block 1 element 0, \
             was written here"
        ]
    );
}

#[test]
fn malformed_ranges_are_refused_naming_the_cause() {
    let one = |verify: &str| errors(&ring(verify));
    assert_eq!(
        one("world in 1..=4, n in -1.."),
        [format!(
            "syntax error: the range `-1..` of length variable `n` starts below 0{HINT}"
        )]
    );
    assert_eq!(
        one("world in 1..=4, n in 3..=2"),
        [format!(
            "syntax error: the range `3..=2` of length variable `n` holds no value{HINT}"
        )]
    );
    assert_eq!(
        one("world in 1..=4, n in 0.., n in 1..=3"),
        [format!("syntax error: `n` has two ranges in `#[verify]`{HINT}")]
    );
    assert_eq!(
        one("world in 1..=4, n in world - 4.."),
        [
            "syntax error: the bounds of the range of length variable `n` in `#[verify]` must be integer constants\n\
          hint: write e.g. `n in 1..=16` or `n in 0..`"
        ]
    );
    assert_eq!(
        one("world in 1..=4, n in 0..world"),
        [
            "syntax error: the bounds of the range of length variable `n` in `#[verify]` must be integer constants\n\
          hint: write e.g. `n in 1..=16` or `n in 0..`"
        ]
    );
    assert_eq!(
        one("world in 1.., n in 0.."),
        [
            "syntax error: the world sizes in `#[verify]` have no upper bound\nhint: write `world in LO..=HI` or a \
          list `world in [2, 4, 8]`"
        ]
    );
    assert_eq!(
        one("world in 1..=4, m in 0.."),
        [
            "syntax error: `m` is not a length variable; an open range `LO..` in `#[verify]` is for one\nhint: did \
          you mean `n`?"
        ]
    );
    assert_eq!(
        one("world in 1..=4, root in 0..=3"),
        ["unknown name: `root` is not `world`, a scalar parameter or a length variable"]
    );
}

#[test]
fn an_overlap_only_at_n_0_is_named_there() {
    // `c[0..1]` and `c[n..n + 1]` share element 0 at n = 0 alone
    let src = |verify: &str| {
        format!(
            "#[verify({verify})]
            fn f(a: &[T; 1], c: &mut [T; n + 1]) {{
                batch {{
                    recv c[0..1] from (rank + 1) % world;
                    recv c[n..n + 1] from (rank - 1) % world;
                    send a to (rank - 1) % world;
                    send a to (rank + 1) % world;
                }}
            }}"
        )
    };
    assert_eq!(errors(&src("world in 3..=3")), Vec::<String>::new());
    assert_eq!(
        errors(&src("world in 3..=3, n in 0..")),
        [
            "buffer hazard: with world = 3, rank 0's `batch` receives into `c[0..1]` and `c[n..n + 1]`, which overlap \
          when n = 0\nhint: the operations of one `batch` run concurrently: use disjoint regions"
        ]
    );
}

/// Two length variables and a scratch buffer 40 elements longer than a
/// block: the box that decides every value is past the checker's limits.
fn two_variables(verify: &str) -> String {
    format!(
        "#[verify({verify})]
        #[postcondition(all_gather(input -> output))]
        fn two(tail: &[T; m], input: &[T; n + m], output: &mut [T; (n + m) * world]) {{
            let tmp = scratch[T; n + m + 40];
            copy input -> tmp[0..n + m];
            copy tmp[0..n + m] -> output.chunk(rank);
            batch {{
                send output.chunk(rank) to (rank + 1) % world;
                recv output.chunk((rank + 1) % world) from (rank + 1) % world;
            }}
        }}"
    )
}

#[test]
fn bounding_every_length_variable_decides_the_box() {
    let unbounded = errors(&two_variables("world in 2..=2"));
    assert_eq!(unbounded.len(), 1);
    assert!(
        unbounded[0].ends_with(
            "hint: bound them: `#[verify(.., m in 1..=8, n in 1..=8)]` runs every point of that box; or keep the \
             constants and coefficients in lengths and region bounds small"
        ),
        "{unbounded:?}"
    );
    assert_eq!(
        errors(&two_variables("world in 2..=2, m in 1..=8, n in 0..=7")),
        Vec::<String>::new()
    );
    // one bounded, the other not: the covering box, still past the limits
    let half = errors(&two_variables("world in 2..=2, m in 0..=3"));
    assert!(
        half[0].starts_with("evaluation error: with world = 2, the postcondition is not decided"),
        "{half:?}"
    );
}

/// A ring all-gather of blocks of `n + m` elements forwarded in two pieces,
/// `[0..n + 1]` and `[m - 1..m + n]`: they cover a block exactly when
/// `m <= n + 2`.
fn two_pieces(verify: &str) -> String {
    format!(
        "#[verify({verify})]
        #[postcondition(all_gather(input -> output))]
        fn pieces(input: &[T; n + m], output: &mut [T; (n + m) * world], tail: &[T; m]) {{
            copy input -> output.chunk(rank);
            for s in 0..world - 1 {{
                batch {{
                    send output.chunk((rank - s) % world)[0..n + 1] to (rank + 1) % world;
                    recv output.chunk((rank - s - 1) % world)[0..n + 1] from (rank - 1) % world;
                }}
                batch {{
                    send output.chunk((rank - s) % world)[m - 1..m + n] to (rank + 1) % world;
                    recv output.chunk((rank - s - 1) % world)[m - 1..m + n] from (rank - 1) % world;
                }}
            }}
        }}"
    )
}

#[test]
fn one_bounded_variable_cuts_the_covering_box() {
    let first = |verify: &str| errors(&two_pieces(verify)).first().cloned().unwrap_or_default();
    // every (n, m): wrong first at n = 1, m = 4
    let w = first("world in 2..=2");
    assert!(w.contains("with world = 2, n = 1, m = 4,"), "{w}");
    // every n >= 1 and m <= 3: m <= n + 2 always holds, decided by the
    // covering box cut at m = 3
    assert_eq!(errors(&two_pieces("world in 2..=2, m in 1..=3")), Vec::<String>::new());
    // m <= 4: the constraint's constant 4 makes the covering box 72 wide,
    // past the limit; bounding n too runs the declared box
    let w = first("world in 2..=2, m in 1..=4");
    assert!(w.contains("up to 72 in each of `n` and `m`"), "{w}");
    let w = first("world in 2..=2, n in 1..=8, m in 1..=4");
    assert!(w.contains("with world = 2, n = 1, m = 4,"), "{w}");
    // from n = 2, m <= 4 holds and m = 5 is the first wrong point
    assert_eq!(
        errors(&two_pieces("world in 2..=2, n in 2..=9, m in 1..=4")),
        Vec::<String>::new()
    );
    let w = first("world in 2..=2, n in 2..=9, m in 1..=5");
    assert!(w.contains("with world = 2, n = 2, m = 5,"), "{w}");
}
