//! The postcondition forms `all_gather(BUF)` (in place) and the block-wise
//! `shift(IN.chunk(G, KI) -> OUT.chunk(j, KO), from = F)`, read from text:
//! right schedules check, planted bugs get the exact message.

use crate::syntax;

/// The first error of the only item of `src`, `None` when it checks.
pub(super) fn first_error(src: &str) -> Option<String> {
    let input = match syntax::parse_str(src) {
        Ok(input) => input,
        Err(e) => return Some(e.to_string()),
    };
    let rejection = match syntax::front(&input.items[0]) {
        Ok(front) => syntax::check(&front).err()?,
        Err(r) => r,
    };
    rejection.errors.first().map(|(_, text)| text.clone())
}

fn ring_in_place(steps: &str, send_block: &str) -> String {
    format!(
        "#[verify(world in 1..=7)]
         #[postcondition(all_gather(buf))]
         fn f(buf: &mut [T; world * n]) {{
             for s in 0..{steps} {{
                 batch {{
                     send buf.chunk({send_block}) to (rank + 1) % world;
                     recv buf.chunk((rank - s - 1) % world) from (rank - 1) % world;
                 }}
             }}
         }}"
    )
}

#[test]
fn an_in_place_ring_all_gather_checks() {
    assert_eq!(first_error(&ring_in_place("world - 1", "(rank - s) % world")), None);
}

#[test]
fn an_in_place_ring_one_step_short_is_rejected_at_the_first_wrong_block() {
    assert_eq!(
        first_error(&ring_in_place("world - 2", "(rank - s) % world")).as_deref(),
        Some(
            "postcondition violated: with world = 2, rank 0 ends with buf block 1 = rank 0's initial buf block 1, \
             expected rank 1's initial buf block 1"
        )
    );
}

#[test]
fn an_in_place_ring_forwarding_its_own_block_is_rejected() {
    assert_eq!(
        first_error(&ring_in_place("world - 1", "rank")).as_deref(),
        Some(
            "postcondition violated: with world = 3, rank 0 ends with buf block 1 = rank 2's initial buf block 2, \
             expected rank 1's initial buf block 1"
        )
    );
}

#[test]
fn an_in_place_all_gather_needs_a_length_divisible_by_the_world() {
    let src = "#[verify(world in 2..=3)]
        #[postcondition(all_gather(buf))]
        fn f(buf: &mut [T; 2 * n + 1]) { barrier; }";
    assert_eq!(
        first_error(src).as_deref(),
        Some("postcondition violated: with world = 2, `all_gather` in place needs `buf` (2 * n + 1 elements) divisible by 2")
    );
}

/// Only a postcondition may leave out the output of `all_gather`.
#[test]
fn the_all_gather_statement_still_names_its_output() {
    let src = "fn f(buf: &mut [T; world * n]) { all_gather(buf); }";
    assert_eq!(first_error(src).as_deref(), Some("syntax error: expected `->`"));
}

/// A periodic 1-D halo in two steps: left edges go left, then right edges
/// go right; `first` and `second` name the halo blocks the two steps fill.
fn halo(first: u8, second: u8) -> String {
    format!(
        "#[verify(world in 1..=8)]
         #[postcondition(shift(edges.chunk(1 - j, 2) -> halo.chunk(j, 2), from = (rank + 2 * j - 1) % world))]
         fn halo_exchange(edges: &[T; 2 * n], halo: &mut [T; 2 * n]) {{
             batch {{
                 send edges.chunk(0, 2) to (rank - 1) % world;
                 recv halo.chunk({first}, 2) from (rank + 1) % world;
             }}
             batch {{
                 send edges.chunk(1, 2) to (rank + 1) % world;
                 recv halo.chunk({second}, 2) from (rank - 1) % world;
             }}
         }}"
    )
}

#[test]
fn a_halo_exchange_checks_as_a_block_wise_shift() {
    assert_eq!(first_error(&halo(1, 0)), None);
}

#[test]
fn a_halo_exchange_filling_the_halos_the_wrong_way_round_is_rejected() {
    assert_eq!(
        first_error(&halo(0, 1)).as_deref(),
        Some(
            "postcondition violated: with world = 1, rank 0 ends with halo element 0 = rank 0's edges element 0, \
             expected rank 0's edges element 1"
        )
    );
}

fn top2(send_block: &str) -> String {
    format!(
        "#[verify(world in 1..=8)]
         #[postcondition(shift(tokens.chunk(j, 2) -> slots.chunk(j, 2), from = (rank - 1 - j) % world))]
         fn top2_dispatch(tokens: &[T; 2 * n], slots: &mut [T; 2 * n]) {{
             for k in 0..2 {{
                 batch {{
                     send tokens.chunk({send_block}, 2) to (rank + 1 + k) % world tag k;
                     recv slots.chunk(k, 2) from (rank - 1 - k) % world tag k;
                 }}
             }}
         }}"
    )
}

#[test]
fn a_top2_dispatch_checks_and_swapped_blocks_are_rejected() {
    assert_eq!(first_error(&top2("k")), None);
    assert_eq!(
        first_error(&top2("1 - k")).as_deref(),
        Some(
            "postcondition violated: with world = 1, rank 0 ends with slots element 0 = rank 0's tokens element 1, \
             expected rank 0's tokens element 0"
        )
    );
}

#[test]
fn a_block_wise_shift_names_a_block_out_of_range() {
    let src = "#[verify(world in 1..=4)]
        #[postcondition(shift(a.chunk(j + 1, 2) -> b.chunk(j, 2), from = rank))]
        fn f(a: &[T; 2 * n], b: &mut [T; 2 * n]) { copy a -> b; }";
    assert_eq!(
        first_error(src).as_deref(),
        Some(
            "postcondition violated: with world = 1, at rank 0, block 1 the input block of `shift` is 2, \
             which is not in `0..2`"
        )
    );
}

#[test]
fn a_block_wise_shift_needs_blocks_of_one_length() {
    let src = "#[verify(world in 1..=4)]
        #[postcondition(shift(a.chunk(j, 2) -> b.chunk(j, 2), from = rank))]
        fn f(a: &[T; 2 * n], b: &mut [T; 4 * n]) { copy a -> b[0..2 * n]; copy a -> b[2 * n..4 * n]; }";
    assert_eq!(
        first_error(src).as_deref(),
        Some(
            "postcondition violated: with world = 1, a block-wise `shift` needs `a` (2 * n elements) in 2 blocks and \
             `b` (4 * n elements) in 2 blocks, all of one length"
        )
    );
}

#[test]
fn the_output_block_of_a_block_wise_shift_is_a_name() {
    let src = "#[postcondition(shift(a.chunk(0, 2) -> b.chunk(1, 2), from = rank))]
        fn f(a: &[T; 2 * n], b: &mut [T; 2 * n]) { copy a -> b; }";
    assert_eq!(
        first_error(src).as_deref(),
        Some(
            "syntax error: the output block of a block-wise `shift` is a new name, the block variable\n\
             hint: write `OUT.chunk(j, KO)` and use `j` in `from` and in the input's block"
        )
    );
}
