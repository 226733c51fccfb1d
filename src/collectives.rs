//! Classic collectives as schedules: ring all-reduce (one schedule over an
//! operator parameter), pairwise all-to-all and a binomial-tree broadcast from any
//! root. These are the runtime's built-in algorithms (`hcomm::schedules`),
//! re-exported so the examples can call one algorithm by name.

pub use hcomm::schedules::{binomial_broadcast, pairwise_all_to_all, ring_all_reduce};
