//! Choosing a backend: `HCOMM_BACKEND=host|hccl|nccl` and [`run`], so one
//! program runs unchanged on every backend. `ranks.rs` runs ranks as
//! threads (every backend's `run`), bound to cores by `bind.rs`; `device.rs` is what the HCCL and NCCL
//! entry points share. One process per rank: `env.rs` (the launcher's
//! variables), [`store`] (the rendezvous store), `process.rs`
//! ([`init_from_env`]).

pub(crate) mod bind;
mod device;
pub(crate) mod env;
pub mod hccl;
pub mod host;
pub mod nccl;
mod process;
pub(crate) mod ranks;
pub mod store;

pub use env::{JobEnv, StorePlace, Transport};
pub use process::{init_from_env, init_job, init_job_with};

use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::options::CommOptions;

/// The backends a program can run on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BackendKind {
    /// Threads of this process exchanging host memory ([`crate::host`]).
    #[default]
    Host,
    /// Huawei Ascend NPUs through HCCL and the ACL runtime ([`hccl`]).
    Hccl,
    /// NVIDIA GPUs through NCCL and the CUDA runtime ([`nccl`]).
    Nccl,
}

impl BackendKind {
    /// Parses `host`, `hccl` or `nccl` (case-insensitive).
    pub fn parse(text: &str) -> Option<BackendKind> {
        match text.trim().to_ascii_lowercase().as_str() {
            "host" => Some(BackendKind::Host),
            "hccl" => Some(BackendKind::Hccl),
            "nccl" => Some(BackendKind::Nccl),
            _ => None,
        }
    }

    /// `HCOMM_BACKEND`, [`BackendKind::Host`] when unset or empty; a value
    /// that is not UTF-8 is an [`Error::Config`] naming the variable.
    pub fn from_env() -> Result<BackendKind> {
        match env::var("HCOMM_BACKEND")? {
            Some(v) => BackendKind::parse(&v).ok_or_else(|| Error::Config {
                message: format!(
                    "`HCOMM_BACKEND={}`: expected `host`, `hccl` or `nccl`",
                    v.escape_debug()
                ),
            }),
            None => Ok(BackendKind::Host),
        }
    }

    /// The name as `HCOMM_BACKEND` spells it.
    pub fn name(self) -> &'static str {
        match self {
            BackendKind::Host => "host",
            BackendKind::Hccl => "hccl",
            BackendKind::Nccl => "nccl",
        }
    }
}

impl std::fmt::Display for BackendKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Runs `f` on `world` in-process ranks of the backend `HCOMM_BACKEND`
/// names (default `host`), with options from the environment, and returns
/// the ranks' results in rank order: [`crate::host::run`],
/// [`hccl::run`] or [`nccl::run`]. Failure semantics are those of
/// [`crate::host::run`] on every backend.
///
/// ```
/// // HCOMM_BACKEND unset: the host backend.
/// let ranks = hcomm::run(3, |comm| Ok(comm.rank())).unwrap();
/// assert_eq!(ranks, vec![0, 1, 2]);
/// ```
pub fn run<R, F>(world: usize, f: F) -> Result<Vec<R>>
where
    R: Send,
    F: Fn(&Comm) -> Result<R> + Sync,
{
    run_on(BackendKind::from_env()?, world, &CommOptions::from_env()?, f)
}

/// [`run`] on an explicit backend with explicit options.
pub fn run_on<R, F>(kind: BackendKind, world: usize, options: &CommOptions, f: F) -> Result<Vec<R>>
where
    R: Send,
    F: Fn(&Comm) -> Result<R> + Sync,
{
    match kind {
        BackendKind::Host => crate::host::run_with(world, options, f),
        BackendKind::Hccl => hccl::Hccl::load()?.run(world, options, f),
        BackendKind::Nccl => nccl::Nccl::load()?.run(world, options, f),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backend_names_parse() {
        assert_eq!(BackendKind::parse("HCCL"), Some(BackendKind::Hccl));
        assert_eq!(BackendKind::parse(" nccl "), Some(BackendKind::Nccl));
        assert_eq!(BackendKind::parse("host"), Some(BackendKind::Host));
        assert_eq!(BackendKind::parse("gloo"), None);
        for k in [BackendKind::Host, BackendKind::Hccl, BackendKind::Nccl] {
            assert_eq!(BackendKind::parse(k.name()), Some(k));
        }
    }
}
