//! Element-wise reductions on raw bytes, per HCCL data type.

use std::ops::{Add, Mul};

use half::{bf16, f16};
use hcomm_sys::{HcclDataType, HcclReduceOp};

/// Whether `dtype` can be reduced here.
pub(crate) fn reducible(dtype: HcclDataType) -> bool {
    matches!(dtype.0, 0..=11)
}

/// An element type: how it is read from and written to native-endian bytes, and
/// how the four reduce ops combine two elements.
trait Element: Copy {
    const SIZE: usize;
    fn load(bytes: &[u8]) -> Self;
    fn store(self, bytes: &mut [u8]);
    fn apply(op: HcclReduceOp, x: Self, y: Self) -> Self;
}

/// Integers (wrapping) and floats: `$add` / `$mul` name the sum and product.
macro_rules! numeric_elements {
    ($add:ident, $mul:ident: $($t:ty),*) => {$(
        impl Element for $t {
            const SIZE: usize = std::mem::size_of::<$t>();

            fn load(bytes: &[u8]) -> Self {
                <$t>::from_ne_bytes(bytes.try_into().unwrap_or([0; Self::SIZE]))
            }

            fn store(self, bytes: &mut [u8]) {
                bytes.copy_from_slice(&self.to_ne_bytes());
            }

            fn apply(op: HcclReduceOp, x: Self, y: Self) -> Self {
                match op {
                    HcclReduceOp::HCCL_REDUCE_SUM => x.$add(y),
                    HcclReduceOp::HCCL_REDUCE_PROD => x.$mul(y),
                    HcclReduceOp::HCCL_REDUCE_MAX => x.max(y),
                    _ => x.min(y),
                }
            }
        }
    )*};
}

numeric_elements!(wrapping_add, wrapping_mul: i8, i16, i32, i64, u8, u16, u32, u64);
numeric_elements!(add, mul: f32, f64);

/// 16-bit floats: computed in `f32` and rounded back.
macro_rules! half_elements {
    ($($t:ty),*) => {$(
        impl Element for $t {
            const SIZE: usize = 2;

            fn load(bytes: &[u8]) -> Self {
                <$t>::from_bits(u16::from_ne_bytes([bytes[0], bytes[1]]))
            }

            fn store(self, bytes: &mut [u8]) {
                bytes.copy_from_slice(&self.to_bits().to_ne_bytes());
            }

            fn apply(op: HcclReduceOp, x: Self, y: Self) -> Self {
                <$t>::from_f32(f32::apply(op, x.to_f32(), y.to_f32()))
            }
        }
    )*};
}

half_elements!(f16, bf16);

/// `acc[i] = acc[i] op src[i]` for elements of type `T`.
fn reduce_as<T: Element>(op: HcclReduceOp, acc: &mut [u8], src: &[u8]) {
    for (a, s) in acc.chunks_exact_mut(T::SIZE).zip(src.chunks_exact(T::SIZE)) {
        T::apply(op, T::load(a), T::load(s)).store(a);
    }
}

/// `acc[i] = acc[i] op src[i]` for every element; `acc` and `src` have equal lengths.
pub(crate) fn reduce_into(dtype: HcclDataType, op: HcclReduceOp, acc: &mut [u8], src: &[u8]) {
    let reduce: fn(HcclReduceOp, &mut [u8], &[u8]) = match dtype {
        HcclDataType::HCCL_DATA_TYPE_INT8 => reduce_as::<i8>,
        HcclDataType::HCCL_DATA_TYPE_INT16 => reduce_as::<i16>,
        HcclDataType::HCCL_DATA_TYPE_INT32 => reduce_as::<i32>,
        HcclDataType::HCCL_DATA_TYPE_INT64 => reduce_as::<i64>,
        HcclDataType::HCCL_DATA_TYPE_UINT8 => reduce_as::<u8>,
        HcclDataType::HCCL_DATA_TYPE_UINT16 => reduce_as::<u16>,
        HcclDataType::HCCL_DATA_TYPE_UINT32 => reduce_as::<u32>,
        HcclDataType::HCCL_DATA_TYPE_UINT64 => reduce_as::<u64>,
        HcclDataType::HCCL_DATA_TYPE_FP32 => reduce_as::<f32>,
        HcclDataType::HCCL_DATA_TYPE_FP64 => reduce_as::<f64>,
        HcclDataType::HCCL_DATA_TYPE_FP16 => reduce_as::<f16>,
        HcclDataType::HCCL_DATA_TYPE_BFP16 => reduce_as::<bf16>,
        // Callers check `reducible` first.
        _ => return,
    };
    reduce(op, acc, src);
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
