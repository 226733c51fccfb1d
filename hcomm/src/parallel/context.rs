//! The parallel context: one rank's tensor-, pipeline-, data- and
//! expert-parallel communicators.

use super::layout::{Coords, Layout, ParallelConfig, ParallelExtras};
use crate::collective::Exchange;
use crate::comm::Comm;
use crate::error::{Error, Result};

/// One rank's place in a model-parallel layout and the communicators of its
/// groups.
///
/// The layout is Megatron-LM's: the tensor-parallel index varies fastest,
/// then (with [`Order::TpDpPp`](super::Order::TpDpPp), the default) the
/// data-parallel one, then the pipeline stage,
/// `rank = tp_i + tp * (dp_i + dp * pp_i)`. For tp = 2, pp = 2, dp = 2 over
/// 8 ranks the tensor-parallel groups are {0,1} {2,3} {4,5} {6,7}, the
/// data-parallel groups {0,2} {1,3} {4,6} {5,7} and the pipeline groups
/// {0,4} {1,5} {2,6} {3,7}. A group's ranks are ordered by their index on
/// its axis, so `ctx.pp().rank()` is the pipeline stage and `ctx.tp().rank()`
/// the tensor-parallel rank.
///
/// Expert-parallel groups are carved out of the data-parallel axis: the
/// group of a rank holds the `ep` ranks with its tensor and pipeline indices
/// whose data-parallel indices share `dp_i / ep`.
///
/// The groups are subgroups of the communicator the context was built from
/// and are cached on it: a second context with the same layout reuses them,
/// and they live while the context, a clone of one of them, or an operation
/// in flight on them uses them.
#[derive(Clone, Debug)]
pub struct Context {
    world: Comm,
    config: ParallelConfig,
    layout: Layout,
    coords: Coords,
    tp: Comm,
    pp: Comm,
    dp: Comm,
    ep: Comm,
    cp: Comm,
    dp_cp: Comm,
}

impl Context {
    /// Lays out `comm`'s ranks as `config` says. Collective over `comm`:
    /// every rank calls it with the same configuration.
    ///
    /// Every rank gets [`Error::Mismatch`] when ranks pass different
    /// configurations, and [`Error::Precondition`] when a size is 0,
    /// `tp * pp * dp` is not the communicator's size, or `ep` does not
    /// divide `dp`.
    pub fn init(comm: &Comm, config: ParallelConfig) -> Result<Context> {
        Context::init_with(comm, config, ParallelExtras::default())
    }

    /// [`Context::init`] with context-parallel groups and virtual pipeline
    /// stages ([`ParallelExtras`]): the tensor-parallel index varies
    /// fastest, then the context-parallel one, then the others as `config`'s
    /// order says (Megatron-LM's `tp-cp-ep-dp-pp`), and `tp * cp * pp * dp`
    /// must be the communicator's size.
    pub fn init_with(comm: &Comm, config: ParallelConfig, extras: ParallelExtras) -> Result<Context> {
        comm.call("parallel::Context::init", || {
            Context::init_now(comm, config, Layout::new(config, extras))
        })
    }

    fn init_now(comm: &Comm, config: ParallelConfig, layout: Layout) -> Result<Context> {
        let span = tracing::debug_span!(
            "parallel_context",
            comm.rank = comm.rank(),
            tp = config.tp,
            pp = config.pp,
            dp = config.dp,
            ep = config.ep
        );
        let _e = span.enter();
        let mine = layout.words();
        let mut all = vec![0u64; mine.len() * comm.world()];
        comm.exchange(Exchange::ParallelLayout, &mine, &mut all)?;
        let configs: Vec<&[u64]> = all.chunks(mine.len()).collect();
        if let Some(other) = configs.iter().position(|c| *c != configs[0]) {
            return Err(Error::mismatch(format!(
                "parallel layout: rank 0 passes {} but rank {other} passes {}; every rank must pass the same configuration",
                describe(configs[0]),
                describe(configs[other])
            )));
        }
        layout.validate(comm.world())?;
        let rank = comm.rank();
        let [tp, pp, dp, ep, cp, dp_cp] = layout.groups(rank);
        Ok(Context {
            world: comm.clone(),
            config,
            layout,
            coords: layout.coords(rank),
            tp: comm.subgroup("hcomm.parallel.tp", &tp)?,
            pp: comm.subgroup("hcomm.parallel.pp", &pp)?,
            dp: comm.subgroup("hcomm.parallel.dp", &dp)?,
            ep: comm.subgroup("hcomm.parallel.ep", &ep)?,
            cp: comm.subgroup("hcomm.parallel.cp", &cp)?,
            dp_cp: comm.subgroup("hcomm.parallel.dp_cp", &dp_cp)?,
        })
    }

    /// The tensor-parallel group of this rank.
    pub fn tp(&self) -> &Comm {
        &self.tp
    }

    /// The pipeline group: the ranks of the same model shard, one per stage.
    pub fn pp(&self) -> &Comm {
        &self.pp
    }

    /// The data-parallel group.
    pub fn dp(&self) -> &Comm {
        &self.dp
    }

    /// The expert-parallel group.
    pub fn ep(&self) -> &Comm {
        &self.ep
    }

    /// The context-parallel group: the ranks that split one sequence
    /// (Megatron-LM's `get_context_parallel_group`).
    pub fn cp(&self) -> &Comm {
        &self.cp
    }

    /// The data- and context-parallel ranks together, ordered by rank
    /// (Megatron-LM's `get_data_parallel_group(with_context_parallel=True)`):
    /// where gradients are summed or averaged when `cp > 1`.
    pub fn dp_cp(&self) -> &Comm {
        &self.dp_cp
    }

    /// The communicator the context was built from (a [`Comm`]; its number
    /// of ranks is `ctx.world().world()`, also [`Context::world_size`]).
    pub fn world(&self) -> &Comm {
        &self.world
    }

    /// The configuration.
    pub fn config(&self) -> ParallelConfig {
        self.config
    }

    /// The context-parallel size and virtual stages.
    pub fn extras(&self) -> ParallelExtras {
        ParallelExtras {
            cp: self.layout.cp,
            vpp: self.layout.vpp,
        }
    }

    /// This rank's pipeline stage.
    pub fn stage(&self) -> usize {
        self.coords.pp
    }

    /// Whether this rank runs the first pipeline stage.
    pub fn is_first_stage(&self) -> bool {
        self.coords.pp == 0
    }

    /// Whether this rank runs the last pipeline stage.
    pub fn is_last_stage(&self) -> bool {
        self.coords.pp + 1 == self.config.pp
    }

    /// This rank's index on the tensor-parallel axis.
    pub fn tp_index(&self) -> usize {
        self.coords.tp
    }

    /// This rank's index on the data-parallel axis.
    pub fn dp_index(&self) -> usize {
        self.coords.dp
    }

    /// This rank's index on the context-parallel axis.
    pub fn cp_index(&self) -> usize {
        self.coords.cp
    }

    /// The number of ranks of the communicator the context was built from.
    pub fn world_size(&self) -> usize {
        self.world.world()
    }

    /// Model chunks per pipeline rank ([`ParallelExtras::vpp`](crate::parallel::ParallelExtras::vpp)).
    pub fn virtual_stages(&self) -> usize {
        self.layout.vpp
    }

    /// The virtual pipeline stage of this rank's model chunk `chunk`, as
    /// Megatron-LM's interleaved schedule numbers them: chunk `v` of
    /// pipeline rank `p` is stage `v * pp + p` of `pp * vpp`.
    pub fn virtual_stage(&self, chunk: usize) -> Result<usize> {
        self.check_chunk(chunk)?;
        Ok(chunk * self.config.pp + self.coords.pp)
    }

    /// Whether `chunk` of this rank is the model's first virtual stage.
    pub fn is_first_virtual_stage(&self, chunk: usize) -> Result<bool> {
        Ok(self.virtual_stage(chunk)? == 0)
    }

    /// Whether `chunk` of this rank is the model's last virtual stage.
    pub fn is_last_virtual_stage(&self, chunk: usize) -> Result<bool> {
        Ok(self.virtual_stage(chunk)? + 1 == self.config.pp * self.layout.vpp)
    }

    /// The layers of `chunk` of this rank when the model's `layers` layers
    /// are split evenly over the `pp * vpp` virtual stages in order (as
    /// Megatron-LM splits them). `layers` must divide by `pp * vpp`.
    pub fn chunk_layers(&self, layers: usize, chunk: usize) -> Result<std::ops::Range<usize>> {
        let stages = self.config.pp * self.layout.vpp;
        if !layers.is_multiple_of(stages) {
            return Err(Error::precondition(format!(
                "parallel layout: {layers} layers do not split evenly over pp {} × vpp {} = {stages} virtual stages",
                self.config.pp, self.layout.vpp
            )));
        }
        let per = layers / stages;
        let first = self.virtual_stage(chunk)? * per;
        Ok(first..first + per)
    }

    fn check_chunk(&self, chunk: usize) -> Result<()> {
        if chunk < self.layout.vpp {
            return Ok(());
        }
        Err(Error::precondition(format!(
            "parallel layout: model chunk {chunk} is out of range; each pipeline rank holds vpp = {} chunks",
            self.layout.vpp
        )))
    }
}

fn describe(words: &[u64]) -> String {
    let order = if words[4] == 0 { "TpDpPp" } else { "TpPpDp" };
    format!(
        "tp {} pp {} dp {} ep {} cp {} vpp {} order {order}",
        words[0], words[1], words[2], words[3], words[5], words[6]
    )
}
