//! trybuild cases of `comm_schedule!`: `fail/<category>/<behaviour>.rs` must
//! be rejected with the message in the `.stderr` beside it; `pass/*.rs` must
//! compile and run (on the host backend).
//!
//! Regenerate the snapshots with `TRYBUILD=overwrite cargo test -p ui-tests`
//! and review each one.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("fail/**/*.rs");
    t.pass("pass/*.rs");
}
