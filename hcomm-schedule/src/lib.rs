//! Schedule IR, evaluator, unroller and checker behind `comm_schedule!`.
