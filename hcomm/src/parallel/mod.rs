//! Model parallelism: the rank layout of tensor-, pipeline-, data- and
//! expert-parallel groups ([`Context`]), with Megatron-LM's conventions.
//!
//! ```
//! use hcomm::parallel::{Context, ParallelConfig};
//!
//! let stages = hcomm::host::run(8, |comm| {
//!     let ctx = Context::init(comm, ParallelConfig { tp: 2, pp: 2, dp: 2, ..Default::default() })?;
//!     Ok((ctx.tp().rank(), ctx.pp().rank(), ctx.is_first_stage()))
//! })
//! .unwrap();
//! assert_eq!(stages[5], (1, 1, false));
//! ```
//!
//! The operations on these groups are in [`crate::tp`], [`crate::pp`] and
//! [`crate::moe`].

#[cfg(feature = "ndarray")]
mod agree;
mod context;
mod layout;

#[cfg(feature = "ndarray")]
pub(crate) use agree::{all_ok, same_shape};
pub use context::Context;
pub use layout::{Order, ParallelConfig, ParallelExtras};
