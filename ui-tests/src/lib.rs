//! Compile-fail and pass cases of `comm_schedule!`, run by `tests/ui.rs`.
