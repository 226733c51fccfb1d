//! Issue 29's Rabenseifner, double tree and torus, as
//! `examples/catalogue.sched` has them (the schedules timed for the
//! compile-time target), pass over their own `#[verify]` sets.

use crate::syntax;

#[test]
fn the_catalogue_rabenseifner_double_tree_and_torus_pass_their_verify_sets() {
    let input = syntax::parse_str(include_str!("../../examples/catalogue.sched")).expect("the catalogue parses");
    let names = [
        "halving_doubling_all_reduce",
        "double_tree_broadcast",
        "torus_all_gather",
    ];
    let mut found = 0;
    for item in &input.items {
        let front = syntax::front(item).expect("a catalogue schedule resolves");
        if names.contains(&front.ir.name.as_str()) {
            found += 1;
            let verdict = syntax::check(&front).map_err(|r| r.errors.first().map(|(_, text)| text.clone()));
            assert_eq!(verdict, Ok(()), "`{}`", front.ir.name);
        }
    }
    assert_eq!(found, names.len());
}

/// The first error of the catalogue's schedule `name` with `from` replaced
/// by `to` in the text.
fn planted(name: &str, from: &str, to: &str) -> Option<String> {
    let text = include_str!("../../examples/catalogue.sched");
    assert!(text.contains(from), "{from}");
    let input = syntax::parse_str(&text.replace(from, to)).expect("the catalogue parses");
    let item = input
        .items
        .iter()
        .find(|i| syntax::front(i).is_ok_and(|f| f.ir.name == name))
        .expect("the schedule is in the catalogue");
    let front = syntax::front(item).expect("a catalogue schedule resolves");
    syntax::check(&front)
        .err()
        .and_then(|r| r.errors.first().map(|(_, text)| text.clone()))
}

#[test]
fn planted_bugs_in_the_double_tree_and_the_torus_are_rejected() {
    // the second tree receives into the first half
    assert_eq!(
        planted(
            "double_tree_broadcast",
            "recv buf[n..2 * n] from (root - u + d) % world;",
            "recv buf[0..n] from (root - u + d) % world;"
        )
        .as_deref(),
        Some(
            "postcondition violated: with world = 2, root = 0, rank 1 ends with buf element 0 = rank 0's initial \
             buf element 1, expected rank 0's initial buf element 0"
        )
    );
    // the column ring receives into the row block it sends
    assert_eq!(
        planted(
            "torus_all_gather",
            "recv output.chunk((row - s - 1) % rows, rows)",
            "recv output.chunk((row - s) % rows, rows)"
        )
        .as_deref(),
        Some(
            "buffer hazard: with world = 2, cols = 1, s = 0, rank 0's `batch` receives into `output[0..n]` and \
             sends from `output[0..n]`, which overlap\nhint: the operations of one `batch` run concurrently: use \
             disjoint regions"
        )
    );
}
