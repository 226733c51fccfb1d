//! Element-wise reductions on raw bytes, per HCCL data type.

use half::{bf16, f16};
use hcomm_sys::{HcclDataType, HcclReduceOp};

/// Whether `dtype` can be reduced here.
pub(crate) fn reducible(dtype: HcclDataType) -> bool {
    matches!(dtype.0, 0..=11)
}

macro_rules! reduce_ints {
    ($t:ty, $op:expr, $acc:expr, $src:expr) => {{
        const N: usize = std::mem::size_of::<$t>();
        for (a, s) in $acc.chunks_exact_mut(N).zip($src.chunks_exact(N)) {
            let x = <$t>::from_ne_bytes(a.try_into().unwrap_or([0; N]));
            let y = <$t>::from_ne_bytes(s.try_into().unwrap_or([0; N]));
            let r = match $op {
                HcclReduceOp::HCCL_REDUCE_SUM => x.wrapping_add(y),
                HcclReduceOp::HCCL_REDUCE_PROD => x.wrapping_mul(y),
                HcclReduceOp::HCCL_REDUCE_MAX => x.max(y),
                _ => x.min(y),
            };
            a.copy_from_slice(&r.to_ne_bytes());
        }
    }};
}

macro_rules! reduce_floats {
    ($t:ty, $op:expr, $acc:expr, $src:expr) => {{
        const N: usize = std::mem::size_of::<$t>();
        for (a, s) in $acc.chunks_exact_mut(N).zip($src.chunks_exact(N)) {
            let x = <$t>::from_ne_bytes(a.try_into().unwrap_or([0; N]));
            let y = <$t>::from_ne_bytes(s.try_into().unwrap_or([0; N]));
            let r = match $op {
                HcclReduceOp::HCCL_REDUCE_SUM => x + y,
                HcclReduceOp::HCCL_REDUCE_PROD => x * y,
                HcclReduceOp::HCCL_REDUCE_MAX => x.max(y),
                _ => x.min(y),
            };
            a.copy_from_slice(&r.to_ne_bytes());
        }
    }};
}

macro_rules! reduce_halves {
    ($t:ty, $op:expr, $acc:expr, $src:expr) => {{
        for (a, s) in $acc.chunks_exact_mut(2).zip($src.chunks_exact(2)) {
            let x = <$t>::from_bits(u16::from_ne_bytes([a[0], a[1]])).to_f32();
            let y = <$t>::from_bits(u16::from_ne_bytes([s[0], s[1]])).to_f32();
            let r = match $op {
                HcclReduceOp::HCCL_REDUCE_SUM => x + y,
                HcclReduceOp::HCCL_REDUCE_PROD => x * y,
                HcclReduceOp::HCCL_REDUCE_MAX => x.max(y),
                _ => x.min(y),
            };
            a.copy_from_slice(&<$t>::from_f32(r).to_bits().to_ne_bytes());
        }
    }};
}

/// `acc[i] = acc[i] op src[i]` for every element; `acc` and `src` have equal lengths.
pub(crate) fn reduce_into(dtype: HcclDataType, op: HcclReduceOp, acc: &mut [u8], src: &[u8]) {
    match dtype {
        HcclDataType::HCCL_DATA_TYPE_INT8 => reduce_ints!(i8, op, acc, src),
        HcclDataType::HCCL_DATA_TYPE_INT16 => reduce_ints!(i16, op, acc, src),
        HcclDataType::HCCL_DATA_TYPE_INT32 => reduce_ints!(i32, op, acc, src),
        HcclDataType::HCCL_DATA_TYPE_INT64 => reduce_ints!(i64, op, acc, src),
        HcclDataType::HCCL_DATA_TYPE_UINT8 => reduce_ints!(u8, op, acc, src),
        HcclDataType::HCCL_DATA_TYPE_UINT16 => reduce_ints!(u16, op, acc, src),
        HcclDataType::HCCL_DATA_TYPE_UINT32 => reduce_ints!(u32, op, acc, src),
        HcclDataType::HCCL_DATA_TYPE_UINT64 => reduce_ints!(u64, op, acc, src),
        HcclDataType::HCCL_DATA_TYPE_FP32 => reduce_floats!(f32, op, acc, src),
        HcclDataType::HCCL_DATA_TYPE_FP64 => reduce_floats!(f64, op, acc, src),
        HcclDataType::HCCL_DATA_TYPE_FP16 => reduce_halves!(f16, op, acc, src),
        HcclDataType::HCCL_DATA_TYPE_BFP16 => reduce_halves!(bf16, op, acc, src),
        // Callers check `reducible` first.
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduces_each_type() {
        let mut a: Vec<u8> = [1.5f32, -2.0].iter().flat_map(|x| x.to_ne_bytes()).collect();
        let b: Vec<u8> = [2.0f32, 3.0].iter().flat_map(|x| x.to_ne_bytes()).collect();
        reduce_into(
            HcclDataType::HCCL_DATA_TYPE_FP32,
            HcclReduceOp::HCCL_REDUCE_SUM,
            &mut a,
            &b,
        );
        assert_eq!(
            a,
            [3.5f32, 1.0].iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>()
        );

        let mut a = (-5i32).to_ne_bytes().to_vec();
        reduce_into(
            HcclDataType::HCCL_DATA_TYPE_INT32,
            HcclReduceOp::HCCL_REDUCE_MAX,
            &mut a,
            &7i32.to_ne_bytes(),
        );
        assert_eq!(a, 7i32.to_ne_bytes());

        let mut a = bf16::from_f32(2.0).to_bits().to_ne_bytes().to_vec();
        let b = bf16::from_f32(3.0).to_bits().to_ne_bytes();
        reduce_into(
            HcclDataType::HCCL_DATA_TYPE_BFP16,
            HcclReduceOp::HCCL_REDUCE_PROD,
            &mut a,
            &b,
        );
        assert_eq!(a, bf16::from_f32(6.0).to_bits().to_ne_bytes());
        assert!(!reducible(HcclDataType::HCCL_DATA_TYPE_INT128));
    }
}
