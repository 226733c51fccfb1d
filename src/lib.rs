//! Shared helpers for the examples and integration tests.
