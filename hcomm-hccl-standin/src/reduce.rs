//! Reductions of the data types hcomm has no element for: int16 and uint16
//! (the others reduce in hcomm), on native-endian bytes.

use hcomm_sys::{HcclDataType, HcclReduceOp};

/// Whether `dtype` can be reduced (int128, fp8 and hif8 cannot).
pub(crate) fn reducible(dtype: HcclDataType) -> bool {
    matches!(dtype.0, 0..=11)
}

/// Integers (wrapping), two bytes each.
macro_rules! reduce_as {
    ($t:ty, $op:expr, $acc:expr, $src:expr) => {
        for (a, s) in $acc.chunks_exact_mut(2).zip($src.chunks_exact(2)) {
            let (x, y) = (<$t>::from_ne_bytes([a[0], a[1]]), <$t>::from_ne_bytes([s[0], s[1]]));
            let r = match $op {
                HcclReduceOp::HCCL_REDUCE_SUM => x.wrapping_add(y),
                HcclReduceOp::HCCL_REDUCE_PROD => x.wrapping_mul(y),
                HcclReduceOp::HCCL_REDUCE_MAX => x.max(y),
                _ => x.min(y),
            };
            a.copy_from_slice(&r.to_ne_bytes());
        }
    };
}

/// `acc[i] = acc[i] op src[i]` for every int16 or uint16 element; `acc` and
/// `src` have equal lengths. Other types are left alone (hcomm reduces them).
pub(crate) fn reduce_into(dtype: HcclDataType, op: HcclReduceOp, acc: &mut [u8], src: &[u8]) {
    match dtype {
        HcclDataType::HCCL_DATA_TYPE_INT16 => reduce_as!(i16, op, acc, src),
        HcclDataType::HCCL_DATA_TYPE_UINT16 => reduce_as!(u16, op, acc, src),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes<const N: usize>(v: [impl Into<i32>; N], signed: bool) -> Vec<u8> {
        v.into_iter()
            .flat_map(|x| {
                let x: i32 = x.into();
                if signed {
                    (x as i16).to_ne_bytes()
                } else {
                    (x as u16).to_ne_bytes()
                }
            })
            .collect()
    }

    #[test]
    fn reduces_int16_and_uint16() {
        let mut a = bytes([-5, 300], true);
        reduce_into(
            HcclDataType::HCCL_DATA_TYPE_INT16,
            HcclReduceOp::HCCL_REDUCE_MAX,
            &mut a,
            &bytes([7, -2], true),
        );
        assert_eq!(a, bytes([7, 300], true));

        let mut a = bytes([65_535, 3], false);
        reduce_into(
            HcclDataType::HCCL_DATA_TYPE_UINT16,
            HcclReduceOp::HCCL_REDUCE_SUM,
            &mut a,
            &bytes([1, 4], false),
        );
        assert_eq!(a, bytes([0, 7], false), "wraps");
        assert!(reducible(HcclDataType::HCCL_DATA_TYPE_UINT16));
        assert!(!reducible(HcclDataType::HCCL_DATA_TYPE_INT128));
    }
}
