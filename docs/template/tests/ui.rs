//! The mistakes this crate wants rejected, each with its expected message.
//! Regenerate the `.stderr` files with `TRYBUILD=overwrite cargo test -p
//! schedule-template` and read the diff.

#[test]
fn mistakes_are_rejected_with_their_messages() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
