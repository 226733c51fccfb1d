//! Schedules over count parameters on the checker's fast paths: prefixes
//! decided on runs, parts memoized in the unroller, parts found by binary
//! search in the postcondition. Right schedules check over many world
//! sizes; bugs that show only at large sizes or on some ranks get the
//! exact message.

use super::forms::first_error;

/// A direct all-gatherv whose batches go `1..steps` ranks around.
fn all_gatherv(worlds: &str, steps: &str) -> String {
    format!(
        "#[verify(world in {worlds})]
         #[postcondition(all_gatherv(x -> out, counts))]
         fn f(counts: &[usize; world], x: &[T; counts[rank]], out: &mut [T; sum(counts)]) {{
             copy x -> out.part(counts, rank);
             for s in 1..{steps} {{
                 batch {{
                     send x to (rank + s) % world;
                     recv out.part(counts, (rank - s) % world) from (rank - s) % world;
                 }}
             }}
         }}"
    )
}

#[test]
fn a_direct_all_gatherv_checks_up_to_world_48() {
    assert_eq!(first_error(&all_gatherv("1..=48", "world")), None);
}

#[test]
fn an_all_gatherv_short_of_its_last_step_from_world_41_on_is_rejected_at_41() {
    let e = first_error(&all_gatherv("1..=48", "min(world, 40)"));
    let ones = vec!["1"; 41].join(", ");
    assert_eq!(
        e,
        Some(format!(
            "postcondition violated: with world = 41, counts = [{ones}], rank 0 ends with out element 1 = \
             rank 0's initial out element 1, expected rank 1's x element 0"
        ))
    );
}

#[test]
fn a_part_read_past_a_rank_dependent_buffer_is_rejected_on_the_rank_it_overruns() {
    // part 0 of `x` fits rank 0's `x` (its length is `counts[0]`), not rank
    // 1's: the part memoized on rank 0 must not stand for rank 1's
    let src = "#[verify(world in 2..=3)]
         fn f(counts: &[usize; world], x: &[T; counts[rank]], out: &mut [T; sum(counts)]) {
             copy x.part(counts, 0) -> out.part(counts, 0);
         }";
    assert_eq!(
        first_error(src),
        Some(
            "region out of bounds: with world = 2, rank 1 uses `x.part(counts, 0)` = elements 0..counts[0] \
             of a region of length counts[1]"
                .to_owned()
        )
    );
}
