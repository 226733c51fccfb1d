//! Element types, reduction operators and the reduction kernels.

use half::{bf16, f16};

/// A reduction operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum ReduceOp {
    /// Sum.
    Sum,
    /// Product.
    Prod,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
    /// Mean: the sum over the ranks divided by their number, once, at the
    /// end. The division rounds to nearest in the element type (floats; the
    /// half types divide in `f32` and round once) and truncates toward zero
    /// for integers, after the sum (which wraps, as [`ReduceOp::Sum`] does).
    /// The host backend and HCCL (which has no mean) compute the sum with
    /// the collective's algorithm and divide; NCCL 2.10 and later run its
    /// own `ncclAvg`, which may round differently in its last bit.
    Avg,
}

impl ReduceOp {
    /// Every operator, in a fixed order.
    pub const ALL: [ReduceOp; 5] = [
        ReduceOp::Sum,
        ReduceOp::Prod,
        ReduceOp::Max,
        ReduceOp::Min,
        ReduceOp::Avg,
    ];

    /// The operator the pairwise kernels apply: [`ReduceOp::Sum`] for
    /// [`ReduceOp::Avg`] (whose division comes once, at the end), else
    /// the operator itself.
    pub(crate) fn pairwise(self) -> ReduceOp {
        match self {
            ReduceOp::Avg => ReduceOp::Sum,
            op => op,
        }
    }

    /// The operator's name as the schedule language writes it.
    pub fn name(self) -> &'static str {
        match self {
            ReduceOp::Sum => "sum",
            ReduceOp::Prod => "prod",
            ReduceOp::Max => "max",
            ReduceOp::Min => "min",
            ReduceOp::Avg => "avg",
        }
    }
}

impl std::fmt::Display for ReduceOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The element type of a buffer, as the backends see it.
#[allow(
    clippy::unsafe_derive_deserialize,
    reason = "every variant is a valid data type; the unsafe methods trust their pointer arguments, not the value"
)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum DataType {
    /// `i8`
    I8,
    /// `u8`
    U8,
    /// `i32`
    I32,
    /// `u32`
    U32,
    /// `i64`
    I64,
    /// `u64`
    U64,
    /// `half::f16`
    F16,
    /// `half::bf16`
    Bf16,
    /// `f32`
    F32,
    /// `f64`
    F64,
}

impl DataType {
    /// Every element type, floating-point first.
    pub const ALL: [DataType; 10] = [
        DataType::F32,
        DataType::F64,
        DataType::F16,
        DataType::Bf16,
        DataType::I8,
        DataType::U8,
        DataType::I32,
        DataType::U32,
        DataType::I64,
        DataType::U64,
    ];

    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            DataType::I8 | DataType::U8 => 1,
            DataType::F16 | DataType::Bf16 => 2,
            DataType::I32 | DataType::U32 | DataType::F32 => 4,
            DataType::I64 | DataType::U64 | DataType::F64 => 8,
        }
    }

    /// The Rust name of the type.
    pub fn name(self) -> &'static str {
        match self {
            DataType::I8 => "i8",
            DataType::U8 => "u8",
            DataType::I32 => "i32",
            DataType::U32 => "u32",
            DataType::I64 => "i64",
            DataType::U64 => "u64",
            DataType::F16 => "f16",
            DataType::Bf16 => "bf16",
            DataType::F32 => "f32",
            DataType::F64 => "f64",
        }
    }

    /// `dst[i] = dst[i] op src[i]` for `count` elements of this type.
    ///
    /// # Safety
    ///
    /// `dst` and `src` must be valid for `count` elements of this type,
    /// properly aligned, and `dst` must not overlap `src`.
    pub(crate) unsafe fn reduce_raw(self, op: ReduceOp, dst: *mut u8, src: *const u8, count: usize) {
        /// # Safety
        /// As for `reduce_raw`, with `T` the type named by the data type.
        unsafe fn typed<T: Element>(op: ReduceOp, dst: *mut u8, src: *const u8, count: usize) {
            // SAFETY: the caller guarantees validity, alignment and disjointness.
            let (d, s) = unsafe {
                (
                    std::slice::from_raw_parts_mut(dst.cast::<T>(), count),
                    std::slice::from_raw_parts(src.cast::<T>(), count),
                )
            };
            T::reduce_into(op, d, s);
        }
        // SAFETY: forwarded from the caller; each arm names the matching type.
        unsafe {
            match self {
                DataType::I8 => typed::<i8>(op, dst, src, count),
                DataType::U8 => typed::<u8>(op, dst, src, count),
                DataType::I32 => typed::<i32>(op, dst, src, count),
                DataType::U32 => typed::<u32>(op, dst, src, count),
                DataType::I64 => typed::<i64>(op, dst, src, count),
                DataType::U64 => typed::<u64>(op, dst, src, count),
                DataType::F16 => typed::<f16>(op, dst, src, count),
                DataType::Bf16 => typed::<bf16>(op, dst, src, count),
                DataType::F32 => typed::<f32>(op, dst, src, count),
                DataType::F64 => typed::<f64>(op, dst, src, count),
            }
        }
    }
}

impl DataType {
    /// `dst[i] = dst[i] / n` for `count` elements of this type: the last
    /// step of [`ReduceOp::Avg`].
    ///
    /// # Safety
    ///
    /// `dst` must be valid for reads and writes of `count` properly aligned
    /// elements of this type.
    pub(crate) unsafe fn divide_raw(self, dst: *mut u8, count: usize, n: usize) {
        /// # Safety
        /// As for `divide_raw`, with `T` the type named by the data type.
        unsafe fn typed<T: Element>(dst: *mut u8, count: usize, n: usize) {
            // SAFETY: the caller guarantees validity and alignment.
            T::divide(unsafe { std::slice::from_raw_parts_mut(dst.cast::<T>(), count) }, n);
        }
        // SAFETY: forwarded from the caller; each arm names the matching type.
        unsafe {
            match self {
                DataType::I8 => typed::<i8>(dst, count, n),
                DataType::U8 => typed::<u8>(dst, count, n),
                DataType::I32 => typed::<i32>(dst, count, n),
                DataType::U32 => typed::<u32>(dst, count, n),
                DataType::I64 => typed::<i64>(dst, count, n),
                DataType::U64 => typed::<u64>(dst, count, n),
                DataType::F16 => typed::<f16>(dst, count, n),
                DataType::Bf16 => typed::<bf16>(dst, count, n),
                DataType::F32 => typed::<f32>(dst, count, n),
                DataType::F64 => typed::<f64>(dst, count, n),
            }
        }
    }
}

impl std::fmt::Display for DataType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A type that hcomm can send, receive and reduce.
///
/// Implemented for `f32`, `f64`, `i8`, `u8`, `i32`, `u32`, `i64`, `u64`,
/// [`half::f16`] and [`half::bf16`]; the half types reduce in `f32`.
/// The trait is sealed: backends move these types as plain bytes.
pub trait Element: sealed::Sealed + Copy + Send + Sync + PartialEq + std::fmt::Debug + 'static {
    /// The backend data type.
    const DTYPE: DataType;
    /// The value every element of a zero-initialised buffer holds.
    const ZERO: Self;

    /// `dst[i] = dst[i] op src[i]`.
    fn reduce_into(op: ReduceOp, dst: &mut [Self], src: &[Self]);

    /// `dst[i] = a[i] op b[i]`: the same bits as copying `a` into `dst`,
    /// then `reduce_into(op, dst, b)`, in one pass.
    fn reduce_pair(op: ReduceOp, dst: &mut [Self], a: &[Self], b: &[Self]) {
        for ((d, &x), &y) in dst.iter_mut().zip(a).zip(b) {
            *d = Self::combine(op, x, y);
        }
    }

    /// `a op b` for one pair.
    fn combine(op: ReduceOp, a: Self, b: Self) -> Self;

    /// `dst[i] = dst[i] / n`: the last step of [`ReduceOp::Avg`], rounded
    /// as it documents. `n` is at least 1.
    #[doc(hidden)]
    fn divide(dst: &mut [Self], n: usize);
}

macro_rules! integer_element {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DataType = DataType::$d;
            const ZERO: Self = 0;
            fn reduce_into(op: ReduceOp, dst: &mut [Self], src: &[Self]) {
                match op.pairwise() {
                    ReduceOp::Sum | ReduceOp::Avg => dst.iter_mut().zip(src).for_each(|(d, s)| *d = d.wrapping_add(*s)),
                    ReduceOp::Prod => dst.iter_mut().zip(src).for_each(|(d, s)| *d = d.wrapping_mul(*s)),
                    ReduceOp::Max => dst.iter_mut().zip(src).for_each(|(d, s)| *d = (*d).max(*s)),
                    ReduceOp::Min => dst.iter_mut().zip(src).for_each(|(d, s)| *d = (*d).min(*s)),
                }
            }
            fn reduce_pair(op: ReduceOp, dst: &mut [Self], a: &[Self], b: &[Self]) {
                let pairs = dst.iter_mut().zip(a.iter().zip(b));
                match op.pairwise() {
                    ReduceOp::Sum | ReduceOp::Avg => pairs.for_each(|(d, (x, y))| *d = x.wrapping_add(*y)),
                    ReduceOp::Prod => pairs.for_each(|(d, (x, y))| *d = x.wrapping_mul(*y)),
                    ReduceOp::Max => pairs.for_each(|(d, (x, y))| *d = (*x).max(*y)),
                    ReduceOp::Min => pairs.for_each(|(d, (x, y))| *d = (*x).min(*y)),
                }
            }
            fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
                match op.pairwise() {
                    ReduceOp::Sum | ReduceOp::Avg => a.wrapping_add(b),
                    ReduceOp::Prod => a.wrapping_mul(b),
                    ReduceOp::Max => a.max(b),
                    ReduceOp::Min => a.min(b),
                }
            }
            fn divide(dst: &mut [Self], n: usize) {
                // Divide in i128, which holds every value of every integer
                // element type and every rank count, so no `n` overflows
                // the type; the quotient's magnitude is at most the value's.
                let n = n.max(1) as i128;
                for d in dst.iter_mut() {
                    *d = (i128::from(*d) / n) as $t;
                }
            }
        }
    )*};
}

integer_element!(i8 => I8, u8 => U8, i32 => I32, u32 => U32, i64 => I64, u64 => U64);

macro_rules! float_element {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DataType = DataType::$d;
            const ZERO: Self = 0.0;
            fn reduce_into(op: ReduceOp, dst: &mut [Self], src: &[Self]) {
                match op.pairwise() {
                    ReduceOp::Sum | ReduceOp::Avg => dst.iter_mut().zip(src).for_each(|(d, s)| *d += *s),
                    ReduceOp::Prod => dst.iter_mut().zip(src).for_each(|(d, s)| *d *= *s),
                    ReduceOp::Max => dst.iter_mut().zip(src).for_each(|(d, s)| *d = d.max(*s)),
                    ReduceOp::Min => dst.iter_mut().zip(src).for_each(|(d, s)| *d = d.min(*s)),
                }
            }
            fn reduce_pair(op: ReduceOp, dst: &mut [Self], a: &[Self], b: &[Self]) {
                let pairs = dst.iter_mut().zip(a.iter().zip(b));
                match op.pairwise() {
                    ReduceOp::Sum | ReduceOp::Avg => pairs.for_each(|(d, (x, y))| *d = *x + *y),
                    ReduceOp::Prod => pairs.for_each(|(d, (x, y))| *d = *x * *y),
                    ReduceOp::Max => pairs.for_each(|(d, (x, y))| *d = x.max(*y)),
                    ReduceOp::Min => pairs.for_each(|(d, (x, y))| *d = x.min(*y)),
                }
            }
            fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
                match op.pairwise() {
                    ReduceOp::Sum | ReduceOp::Avg => a + b,
                    ReduceOp::Prod => a * b,
                    ReduceOp::Max => a.max(b),
                    ReduceOp::Min => a.min(b),
                }
            }
            fn divide(dst: &mut [Self], n: usize) {
                let n = n.max(1) as $t;
                for d in dst.iter_mut() {
                    *d /= n;
                }
            }
        }
    )*};
}

float_element!(f32 => F32, f64 => F64);

macro_rules! half_element {
    ($($t:ty => $d:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DataType = DataType::$d;
            const ZERO: Self = <$t>::ZERO;
            fn reduce_into(op: ReduceOp, dst: &mut [Self], src: &[Self]) {
                dst.iter_mut().zip(src).for_each(|(d, s)| *d = Self::combine(op, *d, *s));
            }
            fn combine(op: ReduceOp, a: Self, b: Self) -> Self {
                <$t>::from_f32(f32::combine(op, a.to_f32(), b.to_f32()))
            }
            fn divide(dst: &mut [Self], n: usize) {
                let n = n.max(1) as f32;
                for d in dst.iter_mut() {
                    *d = <$t>::from_f32(d.to_f32() / n);
                }
            }
        }
    )*};
}

half_element!(f16 => F16, bf16 => Bf16);

#[cfg(test)]
#[allow(clippy::float_cmp, reason = "the values are small integers, exact in every type")]
mod tests {
    use super::*;

    #[test]
    fn all_data_types_are_listed_once() {
        let names: std::collections::BTreeSet<_> = DataType::ALL.iter().map(|d| d.name()).collect();
        assert_eq!(names.len(), DataType::ALL.len());
        // A new variant must be added here, and so to `ALL`.
        for d in DataType::ALL {
            match d {
                DataType::I8
                | DataType::U8
                | DataType::I32
                | DataType::U32
                | DataType::I64
                | DataType::U64
                | DataType::F16
                | DataType::Bf16
                | DataType::F32
                | DataType::F64 => {}
            }
        }
    }

    #[test]
    fn half_types_reduce_in_f32() {
        let mut d = [f16::from_f32(1.5), f16::from_f32(-2.0)];
        f16::reduce_into(ReduceOp::Sum, &mut d, &[f16::from_f32(0.25), f16::from_f32(4.0)]);
        assert_eq!(d, [f16::from_f32(1.75), f16::from_f32(2.0)]);
        assert_eq!(
            bf16::combine(ReduceOp::Max, bf16::from_f32(3.0), bf16::from_f32(-1.0)),
            bf16::from_f32(3.0)
        );
    }

    #[test]
    fn integer_sum_wraps_instead_of_panicking() {
        let mut d = [i8::MAX];
        i8::reduce_into(ReduceOp::Sum, &mut d, &[1]);
        assert_eq!(d, [i8::MIN]);
    }

    /// `reduce_pair` ends with the bits of a copy followed by
    /// `reduce_into`, for every operator, on values whose float sums round
    /// (so a different order of operations would show).
    #[test]
    fn a_pair_reduces_to_the_bits_of_copy_then_reduce() {
        fn check<T: Element>(a: &[T], b: &[T]) {
            for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min] {
                let mut want = a.to_vec();
                T::reduce_into(op, &mut want, b);
                let mut got = vec![T::ZERO; a.len()];
                T::reduce_pair(op, &mut got, a, b);
                assert_eq!(got, want, "{op:?} on {}", T::DTYPE);
            }
        }
        let xs: Vec<f64> = (0..67).map(|i| f64::from(i) * 0.1 - 3.3).collect();
        let ys: Vec<f64> = (0..67).map(|i| 1.0 / (f64::from(i) + 0.7)).collect();
        check::<f64>(&xs, &ys);
        let f = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
        check::<f32>(&f(&xs), &f(&ys));
        let h = |v: &[f64]| v.iter().map(|&x| f16::from_f64(x)).collect::<Vec<f16>>();
        check::<f16>(&h(&xs), &h(&ys));
        let bh = |v: &[f64]| v.iter().map(|&x| bf16::from_f64(x)).collect::<Vec<bf16>>();
        check::<bf16>(&bh(&xs), &bh(&ys));
        let ints: Vec<i64> = (0..67).map(|i| i * 1_000_003 - 7).collect();
        check::<i64>(&ints, &ints.iter().rev().copied().collect::<Vec<_>>());
        check::<i8>(&[i8::MAX, -3, 0, 17], &[1, i8::MIN, 5, -17]);
        check::<u8>(&[u8::MAX, 3, 0], &[1, 200, 5]);
        check::<u32>(&[u32::MAX, 3], &[2, 7]);
        check::<i32>(&[i32::MIN, 3], &[-1, 7]);
        check::<u64>(&[u64::MAX, 3], &[2, 7]);
    }

    /// The mean's last step: floats divide once and round to nearest,
    /// integers truncate toward zero, and no integer sum near the type's
    /// end overflows when divided.
    #[test]
    fn avg_divides_once_rounding_as_documented() {
        let mut f = [7.0f32, -7.0, 1.0];
        f32::divide(&mut f, 3);
        assert_eq!(f, [7.0f32 / 3.0, -7.0f32 / 3.0, 1.0f32 / 3.0]);
        let mut i = [7i32, -7, i32::MIN];
        i32::divide(&mut i, 2);
        assert_eq!(i, [3, -3, i32::MIN / 2]);
        let mut u = [u8::MAX];
        u8::divide(&mut u, 300);
        assert_eq!(u, [0]);
        let mut h = [f16::from_f32(3.0)];
        f16::divide(&mut h, 4);
        assert_eq!(h, [f16::from_f32(0.75)]);
        let mut s = [1.0f64, 2.0];
        f64::reduce_into(ReduceOp::Avg, &mut s, &[3.0, 4.0]);
        assert_eq!(s, [4.0, 6.0], "avg accumulates as a sum");
        let mut d = [9i64, -9];
        // SAFETY: two aligned i64.
        unsafe { DataType::I64.divide_raw(d.as_mut_ptr().cast(), 2, 4) };
        assert_eq!(d, [2, -2]);
    }

    #[test]
    fn raw_reduce_dispatches_on_the_data_type() {
        let mut d = [1.0f64, 5.0];
        let s = [3.0f64, 2.0];
        // SAFETY: both arrays hold two f64 and do not overlap.
        unsafe { DataType::F64.reduce_raw(ReduceOp::Min, d.as_mut_ptr().cast(), s.as_ptr().cast(), 2) };
        assert_eq!(d, [1.0, 2.0]);
    }
}
