//! Which reductions HCCL accepts, per chip generation: the data types and
//! operators its reduction entry points (`HcclAllReduce`, `HcclReduce`,
//! `HcclReduceScatter`) take before they return `HCCL_E_NOT_SUPPORT`.
//!
//! From the public CANN sources (`hccl`: the operators' data type check,
//! which rejects unsigned 8-, 16- and 32-bit reductions and allows `prod`
//! for a short list) and the all-reduce documentation for Atlas A2 and A3
//! chips (Ascend 910B, `Ascend910_93`), which lists int8, int16, int32,
//! int64, fp16, fp32 and bf16 only:
//!
//! | reduction              | chip      | data types                                            | `prod` for                                  |
//! |------------------------|-----------|-------------------------------------------------------|---------------------------------------------|
//! | all-reduce             | A2, A3    | int8, int16, int32, int64, fp16, fp32, bf16           | int8, int32, int64, fp16, fp32              |
//! | all-reduce             | others    | every type but uint8, uint16, uint32                  | int8, int32, int64, uint64, fp16, fp32, fp64 |
//! | reduce, reduce-scatter | every chip | every type but uint8, uint16, uint32                 | int8, int32, int64, uint64, fp16, fp32, fp64 |
//!
//! Data movement (broadcast, all-gather, scatter, all-to-all, send and
//! receive) takes every type. Unknown chips get the A2/A3 rules, the
//! strictest.

use crate::codes::{HcclDataType, HcclReduceOp};

/// An Ascend chip generation, as far as HCCL's rules differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HcclChip {
    /// Atlas A2 (Ascend 910B) and A3 (`Ascend910_93`).
    A2A3,
    /// Other Atlas training and inference chips (Ascend 910, 310P).
    Other,
}

impl HcclChip {
    /// The chip of an `aclrtGetSocName` name (`"Ascend910B1"`,
    /// `"Ascend910_9391"`, `"Ascend910A"`, `"Ascend310P3"`); `None` (so the
    /// strictest rules) for names it does not know.
    #[must_use]
    pub fn from_soc_name(name: &str) -> Option<HcclChip> {
        if name.starts_with("Ascend910B") || name.starts_with("Ascend910_93") {
            Some(HcclChip::A2A3)
        } else if name.starts_with("Ascend910") || name.starts_with("Ascend310P") {
            Some(HcclChip::Other)
        } else {
            None
        }
    }
}

/// HCCL's reduction entry points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HcclReduction {
    /// `HcclAllReduce`.
    AllReduce,
    /// `HcclReduce`.
    Reduce,
    /// `HcclReduceScatter`.
    ReduceScatter,
}

/// Whether HCCL on `chip` (`None`: unknown, the strictest rules) runs the
/// reduction `what` of `dtype` with `op`; where not, it returns
/// `HCCL_E_NOT_SUPPORT`.
#[must_use]
pub fn hccl_reduction_supported(
    chip: Option<HcclChip>,
    what: HcclReduction,
    dtype: HcclDataType,
    op: HcclReduceOp,
) -> bool {
    use HcclDataType as T;
    let base = matches!(
        dtype,
        T::HCCL_DATA_TYPE_INT8
            | T::HCCL_DATA_TYPE_INT16
            | T::HCCL_DATA_TYPE_INT32
            | T::HCCL_DATA_TYPE_INT64
            | T::HCCL_DATA_TYPE_UINT64
            | T::HCCL_DATA_TYPE_FP16
            | T::HCCL_DATA_TYPE_FP32
            | T::HCCL_DATA_TYPE_FP64
            | T::HCCL_DATA_TYPE_BFP16
    );
    let prod_ok = matches!(
        dtype,
        T::HCCL_DATA_TYPE_INT8
            | T::HCCL_DATA_TYPE_INT32
            | T::HCCL_DATA_TYPE_INT64
            | T::HCCL_DATA_TYPE_UINT64
            | T::HCCL_DATA_TYPE_FP16
            | T::HCCL_DATA_TYPE_FP32
            | T::HCCL_DATA_TYPE_FP64
    );
    let a2a3_all_reduce = what == HcclReduction::AllReduce && chip != Some(HcclChip::Other);
    let listed = !a2a3_all_reduce || !matches!(dtype, T::HCCL_DATA_TYPE_UINT64 | T::HCCL_DATA_TYPE_FP64);
    base && listed && (op != HcclReduceOp::HCCL_REDUCE_PROD || prod_ok)
}

#[cfg(test)]
mod tests {
    use super::*;
    use HcclDataType as T;
    use HcclReduceOp as Op;

    #[test]
    fn the_matrix_of_the_cann_sources() {
        let sum = Op::HCCL_REDUCE_SUM;
        let prod = Op::HCCL_REDUCE_PROD;
        for chip in [None, Some(HcclChip::A2A3), Some(HcclChip::Other)] {
            for what in [
                HcclReduction::AllReduce,
                HcclReduction::Reduce,
                HcclReduction::ReduceScatter,
            ] {
                for t in [
                    T::HCCL_DATA_TYPE_UINT8,
                    T::HCCL_DATA_TYPE_UINT16,
                    T::HCCL_DATA_TYPE_UINT32,
                ] {
                    assert!(!hccl_reduction_supported(chip, what, t, Op::HCCL_REDUCE_MAX), "{t:?}");
                }
                assert!(hccl_reduction_supported(chip, what, T::HCCL_DATA_TYPE_BFP16, sum));
                assert!(!hccl_reduction_supported(chip, what, T::HCCL_DATA_TYPE_BFP16, prod));
                assert!(!hccl_reduction_supported(chip, what, T::HCCL_DATA_TYPE_INT16, prod));
                assert!(hccl_reduction_supported(chip, what, T::HCCL_DATA_TYPE_INT8, prod));
            }
        }
        // A2/A3 all-reduce: no uint64, no fp64; other reductions and chips take them
        for t in [T::HCCL_DATA_TYPE_UINT64, T::HCCL_DATA_TYPE_FP64] {
            assert!(!hccl_reduction_supported(
                Some(HcclChip::A2A3),
                HcclReduction::AllReduce,
                t,
                sum
            ));
            assert!(!hccl_reduction_supported(None, HcclReduction::AllReduce, t, sum));
            assert!(hccl_reduction_supported(
                Some(HcclChip::Other),
                HcclReduction::AllReduce,
                t,
                prod
            ));
            assert!(hccl_reduction_supported(
                Some(HcclChip::A2A3),
                HcclReduction::Reduce,
                t,
                sum
            ));
        }
        assert_eq!(HcclChip::from_soc_name("Ascend910B3"), Some(HcclChip::A2A3));
        assert_eq!(HcclChip::from_soc_name("Ascend910_9391"), Some(HcclChip::A2A3));
        assert_eq!(HcclChip::from_soc_name("Ascend910A"), Some(HcclChip::Other));
        assert_eq!(HcclChip::from_soc_name("Ascend310P3"), Some(HcclChip::Other));
        assert_eq!(HcclChip::from_soc_name("Ascend950"), None);
    }
}
