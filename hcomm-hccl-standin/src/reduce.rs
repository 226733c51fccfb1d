//! Reductions of every HCCL data type that can be reduced, on native-endian
//! bytes: integers wrap, floats follow IEEE, fp16 and bf16 accumulate in f32
//! and round once at the end.

use half::{bf16, f16};
use hcomm_sys::{HcclDataType, HcclReduceOp};

/// Whether `dtype` can be reduced (int128, fp8 and hif8 cannot).
pub(crate) fn reducible(dtype: HcclDataType) -> bool {
    matches!(dtype.0, 0..=11)
}

/// Folds `blocks` as elements of the integer type `$t` (wrapping).
macro_rules! fold_ints {
    ($t:ty, $op:expr, $blocks:expr) => {{
        let op: fn($t, $t) -> $t = match $op {
            HcclReduceOp::HCCL_REDUCE_SUM => <$t>::wrapping_add,
            HcclReduceOp::HCCL_REDUCE_PROD => <$t>::wrapping_mul,
            HcclReduceOp::HCCL_REDUCE_MAX => <$t as Ord>::max,
            _ => <$t as Ord>::min,
        };
        fold_with(
            $blocks,
            |b: &[u8]| <$t>::from_ne_bytes(b.try_into().unwrap_or_default()),
            |x: $t| x.to_ne_bytes(),
            op,
        )
    }};
}

/// Folds `blocks` as elements of the float type `$t`, accumulating in `$acc`
/// (`$widen` and `$narrow` convert).
macro_rules! fold_floats {
    ($t:ty as $acc:ty, $op:expr, $blocks:expr, $widen:expr, $narrow:expr) => {{
        let widen: fn($t) -> $acc = $widen;
        let narrow: fn($acc) -> $t = $narrow;
        let op: fn($acc, $acc) -> $acc = match $op {
            HcclReduceOp::HCCL_REDUCE_SUM => |a, b| a + b,
            HcclReduceOp::HCCL_REDUCE_PROD => |a, b| a * b,
            HcclReduceOp::HCCL_REDUCE_MAX => |a, b| if b > a { b } else { a },
            _ => |a, b| if b < a { b } else { a },
        };
        fold_with(
            $blocks,
            |b: &[u8]| widen(<$t>::from_ne_bytes(b.try_into().unwrap_or_default())),
            |x| narrow(x).to_ne_bytes(),
            op,
        )
    }};
}

/// Elementwise `op` over `blocks` (equal lengths, whole elements), folded in
/// block order: `((b0 op b1) op b2) ...`. `dtype` is reducible and `op` one
/// of the four operators (both checked when the call was made).
pub(crate) fn fold(dtype: HcclDataType, op: HcclReduceOp, blocks: &[&[u8]]) -> Vec<u8> {
    use HcclDataType as T;
    match dtype {
        T::HCCL_DATA_TYPE_INT8 => fold_ints!(i8, op, blocks),
        T::HCCL_DATA_TYPE_UINT8 => fold_ints!(u8, op, blocks),
        T::HCCL_DATA_TYPE_INT16 => fold_ints!(i16, op, blocks),
        T::HCCL_DATA_TYPE_UINT16 => fold_ints!(u16, op, blocks),
        T::HCCL_DATA_TYPE_INT32 => fold_ints!(i32, op, blocks),
        T::HCCL_DATA_TYPE_UINT32 => fold_ints!(u32, op, blocks),
        T::HCCL_DATA_TYPE_INT64 => fold_ints!(i64, op, blocks),
        T::HCCL_DATA_TYPE_UINT64 => fold_ints!(u64, op, blocks),
        T::HCCL_DATA_TYPE_FP32 => fold_floats!(f32 as f32, op, blocks, |x| x, |x| x),
        T::HCCL_DATA_TYPE_FP64 => fold_floats!(f64 as f64, op, blocks, |x| x, |x| x),
        T::HCCL_DATA_TYPE_FP16 => fold_floats!(f16 as f32, op, blocks, f16::to_f32, f16::from_f32),
        T::HCCL_DATA_TYPE_BFP16 => fold_floats!(bf16 as f32, op, blocks, bf16::to_f32, bf16::from_f32),
        _ => blocks.first().map(|b| b.to_vec()).unwrap_or_default(),
    }
}

/// Elementwise fold of `blocks`: each element of `N` bytes is loaded into the
/// accumulator type `A`, combined with `op` in block order, and stored back.
fn fold_with<A: Copy, const N: usize>(
    blocks: &[&[u8]],
    load: impl Fn(&[u8]) -> A,
    store: impl Fn(A) -> [u8; N],
    op: fn(A, A) -> A,
) -> Vec<u8> {
    let Some((first, rest)) = blocks.split_first() else {
        return Vec::new();
    };
    let mut acc: Vec<A> = first.chunks_exact(N).map(&load).collect();
    for block in rest {
        for (a, x) in acc.iter_mut().zip(block.chunks_exact(N)) {
            *a = op(*a, load(x));
        }
    }
    acc.into_iter().flat_map(store).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use HcclDataType as T;
    use HcclReduceOp as Op;

    fn bytes<E: Copy, const N: usize>(v: &[E], to: impl Fn(E) -> [u8; N]) -> Vec<u8> {
        v.iter().flat_map(|&x| to(x)).collect()
    }

    fn fold_of<E: Copy, const N: usize>(
        dtype: T,
        op: Op,
        blocks: &[&[E]],
        to: impl Fn(E) -> [u8; N] + Copy,
    ) -> Vec<u8> {
        let raw: Vec<Vec<u8>> = blocks.iter().map(|b| bytes(b, to)).collect();
        let refs: Vec<&[u8]> = raw.iter().map(Vec::as_slice).collect();
        fold(dtype, op, &refs)
    }

    #[test]
    fn integers_wrap_and_compare_by_their_signedness() {
        let i16s = |x: i16| x.to_ne_bytes();
        let got = fold_of(
            T::HCCL_DATA_TYPE_INT16,
            Op::HCCL_REDUCE_MAX,
            &[&[-5, 300], &[7, -2]],
            i16s,
        );
        assert_eq!(got, bytes(&[7i16, 300], i16s));
        let u16s = |x: u16| x.to_ne_bytes();
        let got = fold_of(
            T::HCCL_DATA_TYPE_UINT16,
            Op::HCCL_REDUCE_SUM,
            &[&[65_535, 3], &[1, 4]],
            u16s,
        );
        assert_eq!(got, bytes(&[0u16, 7], u16s), "wraps");
        let u8s = |x: u8| [x];
        let got = fold_of(
            T::HCCL_DATA_TYPE_UINT8,
            Op::HCCL_REDUCE_MIN,
            &[&[200, 3], &[100, 4]],
            u8s,
        );
        assert_eq!(got, [100, 3]);
        let i8s = |x: i8| x.to_ne_bytes();
        let got = fold_of(
            T::HCCL_DATA_TYPE_INT8,
            Op::HCCL_REDUCE_MIN,
            &[&[-100, 3], &[100, 4]],
            i8s,
        );
        assert_eq!(got, bytes(&[-100i8, 3], i8s));
        let i64s = |x: i64| x.to_ne_bytes();
        let got = fold_of(
            T::HCCL_DATA_TYPE_INT64,
            Op::HCCL_REDUCE_PROD,
            &[&[i64::MAX], &[2], &[-3]],
            i64s,
        );
        assert_eq!(got, bytes(&[i64::MAX.wrapping_mul(2).wrapping_mul(-3)], i64s));
        let u32s = |x: u32| x.to_ne_bytes();
        let got = fold_of(
            T::HCCL_DATA_TYPE_UINT32,
            Op::HCCL_REDUCE_MAX,
            &[&[1], &[u32::MAX], &[5]],
            u32s,
        );
        assert_eq!(got, bytes(&[u32::MAX], u32s));
    }

    #[test]
    fn floats_fold_in_block_order() {
        let f32s = |x: f32| x.to_ne_bytes();
        let got = fold_of(
            T::HCCL_DATA_TYPE_FP32,
            Op::HCCL_REDUCE_SUM,
            &[&[1e8], &[1.0], &[-1e8]],
            f32s,
        );
        assert_eq!(got, bytes(&[(1e8f32 + 1.0) - 1e8], f32s));
        let f64s = |x: f64| x.to_ne_bytes();
        let got = fold_of(
            T::HCCL_DATA_TYPE_FP64,
            Op::HCCL_REDUCE_MIN,
            &[&[0.5, 2.0], &[-1.5, 3.0]],
            f64s,
        );
        assert_eq!(got, bytes(&[-1.5f64, 2.0], f64s));
    }

    #[test]
    fn half_types_accumulate_in_f32_and_round_once() {
        // 2048 + 1 + 1 in fp16: rounding after each step loses both ones
        // (2049 is not an fp16); accumulating in f32 keeps them.
        let h = |x: f16| x.to_ne_bytes();
        let v = |x: f32| f16::from_f32(x);
        let got = fold_of(
            T::HCCL_DATA_TYPE_FP16,
            Op::HCCL_REDUCE_SUM,
            &[&[v(2048.0)], &[v(1.0)], &[v(1.0)]],
            h,
        );
        assert_eq!(got, bytes(&[v(2050.0)], h));
        let b = |x: bf16| x.to_ne_bytes();
        let v = |x: f32| bf16::from_f32(x);
        let got = fold_of(
            T::HCCL_DATA_TYPE_BFP16,
            Op::HCCL_REDUCE_MAX,
            &[&[v(-1.0), v(3.0)], &[v(2.0), v(1.0)]],
            b,
        );
        assert_eq!(got, bytes(&[v(2.0), v(3.0)], b));
        let got = fold_of(
            T::HCCL_DATA_TYPE_BFP16,
            Op::HCCL_REDUCE_PROD,
            &[&[v(1.5)], &[v(-4.0)]],
            b,
        );
        assert_eq!(got, bytes(&[v(-6.0)], b));
    }

    #[test]
    fn only_the_twelve_numeric_types_reduce() {
        assert!(reducible(T::HCCL_DATA_TYPE_UINT16));
        assert!(reducible(T::HCCL_DATA_TYPE_BFP16));
        assert!(!reducible(T::HCCL_DATA_TYPE_INT128));
        assert!(!reducible(T::HCCL_DATA_TYPE_FP8E4M3));
    }
}
