//! `hcomm-bench`: nccl-tests style benchmarks of hcomm's collectives.
//!
//! For each size of a sweep every rank runs warm-up iterations, then timed
//! iterations that each start at a barrier; a row reports the median over
//! iterations of the slowest rank's time, the algorithm and bus bandwidths
//! with the nccl-tests definitions of size and bus factor, and whether every
//! rank's result equals a serial reference. The `compare` module reads these
//! rows beside the Open MPI and memcpy baselines for `bench/compare.sh`.

mod chart;
pub mod compare;
pub mod data;
pub mod op;
pub mod plot;
pub mod predicted;
pub mod report;
pub mod run;
pub mod scaling;
pub mod size;

pub use op::{Op, Schedule, Shape};
pub use report::Row;
pub use run::{sweep, Config};
