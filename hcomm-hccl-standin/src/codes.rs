//! hcomm errors as HCCL and ACL codes: the one place that maps them.

use hcomm::Error;
use hcomm_sys::{aclError, HcclResult};

use crate::stream::AsyncError;

/// The code an HCCL call returns when hcomm fails synchronously (communicator
/// and sub-communicator creation).
pub(crate) fn hccl_code(e: &Error) -> HcclResult {
    match e {
        Error::BufferLength { .. } | Error::Precondition { .. } | Error::Mismatch { .. } | Error::Config { .. } => {
            HcclResult::HCCL_E_PARA
        }
        Error::Timeout { .. } => HcclResult::HCCL_E_TIMEOUT,
        _ => HcclResult::HCCL_E_INTERNAL,
    }
}

/// The stream failure an enqueued operation `symbol` reports when hcomm
/// failed while running it: a timeout is the ACL task timeout (HCCL's
/// execution timeout), anything else (ranks that disagree, a failed or aborted
/// peer) a runtime failure.
pub(crate) fn stream_failure(symbol: &str, e: &Error) -> AsyncError {
    match e {
        Error::Timeout {
            operation,
            rank,
            waited,
            limit,
        } => AsyncError {
            code: aclError::ACL_ERROR_RT_TASK_TIMEOUT,
            message: format!(
                "{symbol}: execution timeout: {operation} on rank {rank}: waited {waited:?} (execution timeout {limit:?})"
            ),
        },
        _ => AsyncError {
            code: aclError::ACL_ERROR_RT_FAILURE,
            message: format!("{symbol}: {e}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timeouts_are_task_timeouts_and_the_rest_failures() {
        let t = Error::Timeout {
            operation: "send".into(),
            rank: 1,
            waited: Duration::from_secs(2),
            limit: Duration::from_secs(2),
        };
        let f = stream_failure("HcclSend", &t);
        assert_eq!(f.code, aclError::ACL_ERROR_RT_TASK_TIMEOUT);
        assert!(
            f.message.starts_with("HcclSend: execution timeout: send on rank 1"),
            "{}",
            f.message
        );
        assert_eq!(hccl_code(&t), HcclResult::HCCL_E_TIMEOUT);
        let m = Error::Mismatch { message: "x".into() };
        assert_eq!(stream_failure("HcclRecv", &m).code, aclError::ACL_ERROR_RT_FAILURE);
        assert_eq!(hccl_code(&m), HcclResult::HCCL_E_PARA);
        let a = Error::Aborted { reason: "r".into() };
        assert_eq!(hccl_code(&a), HcclResult::HCCL_E_INTERNAL);
    }
}
