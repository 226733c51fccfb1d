//! Failures of enqueued operations as ACL codes: the one place that maps them.

use std::time::Duration;

use hcomm_sys::aclError;

use crate::stream::AsyncError;

/// The stream failure of `symbol` when its peers did not arrive in time:
/// HCCL's execution timeout, reported as the ACL task timeout.
pub(crate) fn timed_out(symbol: &str, what: &str, rank: usize, waited: Duration, limit: Duration) -> AsyncError {
    AsyncError {
        code: aclError::ACL_ERROR_RT_TASK_TIMEOUT,
        message: format!(
            "{symbol}: execution timeout: {what} on rank {rank}: waited {waited:?} (execution timeout {limit:?})"
        ),
    }
}

/// The stream failure of `symbol` for anything else (ranks that disagree, a
/// buffer freed while the operation was pending): a runtime failure.
pub(crate) fn failed(symbol: &str, message: &str) -> AsyncError {
    AsyncError {
        code: aclError::ACL_ERROR_RT_FAILURE,
        message: format!("{symbol}: {message}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_are_task_timeouts_and_the_rest_failures() {
        let t = timed_out(
            "HcclSend",
            "send to rank 0",
            1,
            Duration::from_secs(2),
            Duration::from_secs(2),
        );
        assert_eq!(t.code, aclError::ACL_ERROR_RT_TASK_TIMEOUT);
        assert_eq!(
            t.message,
            "HcclSend: execution timeout: send to rank 0 on rank 1: waited 2s (execution timeout 2s)"
        );
        let f = failed("HcclRecv", "collective mismatch: x");
        assert_eq!(f.code, aclError::ACL_ERROR_RT_FAILURE);
        assert_eq!(f.message, "HcclRecv: collective mismatch: x");
    }
}
