//! Helpers shared by the integration tests: deterministic test values per
//! element type and a short-timeout host world.
#![allow(dead_code, unreachable_pub)]

use std::time::Duration;

use hcomm::{bf16, f16, CommOptions, Element};

/// Element types built from small integers, so every reduction order gives
/// the exact same result.
pub trait TestElem: Element {
    fn from_i(v: i64) -> Self;
}

macro_rules! test_elem {
    ($($t:ty: $conv:expr),* $(,)?) => {$(
        impl TestElem for $t {
            fn from_i(v: i64) -> Self {
                let f: fn(i64) -> $t = $conv;
                f(v)
            }
        }
    )*};
}

test_elem!(
    i8: |v| v as i8,
    u8: |v| v as u8,
    i32: |v| v as i32,
    u32: |v| v as u32,
    i64: |v| v,
    u64: |v| v as u64,
    f32: |v| v as f32,
    f64: |v| v as f64,
    f16: |v| f16::from_f32(v as f32),
    bf16: |v| bf16::from_f32(v as f32),
);

/// The value rank `rank` contributes at index `i` (small, and for products
/// only 1, 2 or -1 so no type overflows).
pub fn value<T: TestElem>(rank: usize, i: usize, op: hcomm::ReduceOp) -> T {
    let v = (rank as i64 * 7 + i as i64 * 3) % 11 - 5;
    match op {
        hcomm::ReduceOp::Prod => T::from_i([1, 2, -1][(rank + i) % 3]),
        _ => T::from_i(v),
    }
}

/// Options with a short timeout, so a broken test fails instead of hanging.
pub fn options() -> CommOptions {
    CommOptions::default().with_timeout(Duration::from_secs(20))
}
