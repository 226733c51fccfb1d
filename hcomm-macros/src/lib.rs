//! The `comm_schedule!` macro.
