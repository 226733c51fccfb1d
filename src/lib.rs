//! Communication schedules written in the `comm_schedule!` language, used by
//! the examples and checked against the runtime's built-in collectives in
//! `tests/`. Every schedule here is verified at compile time for its whole
//! `#[verify]` range.

pub mod all_gather;
pub mod collectives;
pub mod vcollectives;
