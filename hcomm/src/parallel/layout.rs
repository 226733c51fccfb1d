//! The configuration of a parallel layout and the arithmetic of its axes.

use crate::error::{Error, Result};

/// How the data- and pipeline-parallel axes nest; the tensor-parallel index
/// always varies fastest, then the context-parallel one (as in Megatron-LM's
/// `tp-cp-ep-dp-pp`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Order {
    /// `rank = tp_i + tp * (cp_i + cp * (dp_i + dp * pp_i))`: tensor-parallel
    /// ranks are neighbours, then context-parallel ones, then data-parallel
    /// replicas, then pipeline stages (Megatron-LM's default).
    #[default]
    TpDpPp,
    /// `rank = tp_i + tp * (cp_i + cp * (pp_i + pp * dp_i))`: the pipeline
    /// axis varies before the data-parallel one.
    TpPpDp,
}

/// The sizes of the parallel axes; every rank passes the same one to
/// [`Context::init`](super::Context::init).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ParallelConfig {
    /// Tensor-parallel size.
    pub tp: usize,
    /// Pipeline-parallel size (number of stages).
    pub pp: usize,
    /// Data-parallel size.
    pub dp: usize,
    /// Expert-parallel size, carved out of the data-parallel axis; divides `dp`.
    pub ep: usize,
    /// How the axes nest.
    pub order: Order,
}

/// The axes beyond [`ParallelConfig`]'s, for
/// [`Context::init_with`](super::Context::init_with): context parallelism
/// and virtual pipeline stages. `Default` is 1 and 1 (neither).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ParallelExtras {
    /// Context-parallel size: the ranks that split one sequence (Megatron-LM's
    /// `context_parallel_size`); `tp * cp * pp * dp` is the world.
    pub cp: usize,
    /// Virtual pipeline stages (model chunks) per pipeline rank, Megatron-LM's
    /// interleaved schedule (`virtual_pipeline_model_parallel_size`); 1: no
    /// interleaving. Uses no group of its own.
    pub vpp: usize,
}

impl Default for ParallelExtras {
    fn default() -> Self {
        ParallelExtras { cp: 1, vpp: 1 }
    }
}

/// A configuration and its extras: the whole layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Layout {
    pub(super) tp: usize,
    pub(super) pp: usize,
    pub(super) dp: usize,
    pub(super) ep: usize,
    pub(super) order: Order,
    pub(super) cp: usize,
    pub(super) vpp: usize,
}

impl Default for ParallelConfig {
    fn default() -> Self {
        ParallelConfig {
            tp: 1,
            pp: 1,
            dp: 1,
            ep: 1,
            order: Order::TpDpPp,
        }
    }
}

/// A rank's index on each axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Coords {
    pub(super) tp: usize,
    pub(super) cp: usize,
    pub(super) pp: usize,
    pub(super) dp: usize,
}

impl Layout {
    pub(super) fn new(c: ParallelConfig, x: ParallelExtras) -> Layout {
        Layout {
            tp: c.tp,
            pp: c.pp,
            dp: c.dp,
            ep: c.ep,
            order: c.order,
            cp: x.cp,
            vpp: x.vpp,
        }
    }

    /// The configuration as words, for comparing it across ranks.
    pub(super) fn words(&self) -> [u64; 7] {
        let order = match self.order {
            Order::TpDpPp => 0,
            Order::TpPpDp => 1,
        };
        [
            self.tp as u64,
            self.pp as u64,
            self.dp as u64,
            self.ep as u64,
            order,
            self.cp as u64,
            self.vpp as u64,
        ]
    }

    /// Whether the configuration fits a communicator of `world` ranks.
    pub(super) fn validate(&self, world: usize) -> Result<()> {
        let Layout {
            tp,
            pp,
            dp,
            ep,
            cp,
            vpp,
            ..
        } = *self;
        for (name, size) in [("tp", tp), ("pp", pp), ("dp", dp), ("ep", ep), ("cp", cp), ("vpp", vpp)] {
            if size == 0 {
                return Err(Error::precondition(format!(
                    "parallel layout: {name} is 0; every size must be at least 1"
                )));
            }
        }
        let product = tp
            .checked_mul(pp)
            .and_then(|x| x.checked_mul(dp))
            .and_then(|x| x.checked_mul(cp));
        if product != Some(world) {
            let shown = product.map_or_else(|| "more than usize holds".to_owned(), |p| p.to_string());
            let cp = if cp == 1 { String::new() } else { format!(" × cp {cp}") };
            return Err(Error::precondition(format!(
                "parallel layout: tp {tp} × pp {pp} × dp {dp}{cp} = {shown}, but the communicator has {world} ranks"
            )));
        }
        if !dp.is_multiple_of(ep) {
            return Err(Error::precondition(format!(
                "parallel layout: ep {ep} does not divide dp {dp}; expert groups are carved out of the data-parallel axis"
            )));
        }
        Ok(())
    }

    /// The rank at `c`.
    pub(super) fn rank_of(&self, c: Coords) -> usize {
        let rest = match self.order {
            Order::TpDpPp => c.dp + self.dp * c.pp,
            Order::TpPpDp => c.pp + self.pp * c.dp,
        };
        c.tp + self.tp * (c.cp + self.cp * rest)
    }

    /// The indices of `rank` on each axis.
    pub(super) fn coords(&self, rank: usize) -> Coords {
        let tp = rank % self.tp;
        let cp = rank / self.tp % self.cp;
        let rest = rank / self.tp / self.cp;
        match self.order {
            Order::TpDpPp => Coords {
                tp,
                cp,
                dp: rest % self.dp,
                pp: rest / self.dp,
            },
            Order::TpPpDp => Coords {
                tp,
                cp,
                pp: rest % self.pp,
                dp: rest / self.pp,
            },
        }
    }

    /// The ranks of each group of rank `rank`, ordered by their index on the
    /// group's axis: tensor, pipeline, data, expert and context parallel, and
    /// the data- and context-parallel ranks together (ordered by rank).
    pub(super) fn groups(&self, rank: usize) -> [Vec<usize>; 6] {
        let c = self.coords(rank);
        let tp = (0..self.tp).map(|i| self.rank_of(Coords { tp: i, ..c })).collect();
        let pp = (0..self.pp).map(|i| self.rank_of(Coords { pp: i, ..c })).collect();
        let dp = (0..self.dp).map(|i| self.rank_of(Coords { dp: i, ..c })).collect();
        let first = c.dp / self.ep * self.ep;
        let ep = (first..first + self.ep)
            .map(|i| self.rank_of(Coords { dp: i, ..c }))
            .collect();
        let cp = (0..self.cp).map(|i| self.rank_of(Coords { cp: i, ..c })).collect();
        let mut dp_cp: Vec<usize> = (0..self.dp)
            .flat_map(|d| (0..self.cp).map(move |k| (d, k)))
            .map(|(d, k)| self.rank_of(Coords { dp: d, cp: k, ..c }))
            .collect();
        dp_cp.sort_unstable();
        [tp, pp, dp, ep, cp, dp_cp]
    }
}

#[cfg(test)]
mod tests {
    use super::{Layout, Order, ParallelConfig, ParallelExtras};

    /// Every group of every rank, as Megatron-LM's rank generator lays them
    /// out (`tp-cp-ep-dp-pp`), written out by hand for a few configurations.
    #[test]
    fn groups_follow_megatron_lm_with_context_parallelism() {
        let groups = |cfg: Layout, which: usize| -> Vec<Vec<usize>> {
            let world = cfg.tp * cfg.cp * cfg.pp * cfg.dp;
            let mut all: Vec<Vec<usize>> = (0..world).map(|r| cfg.groups(r)[which].clone()).collect();
            all.sort();
            all.dedup();
            all
        };
        let (tp, pp, dp, cp, dp_cp) = (0, 1, 2, 4, 5);
        // tp 2, cp 2, pp 2 on 8 ranks
        // (tp, cp, pp, dp)
        let layout = |tp, cp, pp, dp| {
            Layout::new(
                ParallelConfig {
                    tp,
                    pp,
                    dp,
                    ..ParallelConfig::default()
                },
                ParallelExtras { cp, vpp: 1 },
            )
        };
        let a = layout(2, 2, 2, 1);
        assert_eq!(groups(a, tp), [[0, 1], [2, 3], [4, 5], [6, 7]]);
        assert_eq!(groups(a, cp), [[0, 2], [1, 3], [4, 6], [5, 7]]);
        assert_eq!(groups(a, pp), [[0, 4], [1, 5], [2, 6], [3, 7]]);
        assert_eq!(groups(a, dp), [[0], [1], [2], [3], [4], [5], [6], [7]]);
        assert_eq!(groups(a, dp_cp), [[0, 2], [1, 3], [4, 6], [5, 7]]);
        // tp 2, cp 2, dp 2 on 8 ranks
        let b = layout(2, 2, 1, 2);
        assert_eq!(groups(b, cp), [[0, 2], [1, 3], [4, 6], [5, 7]]);
        assert_eq!(groups(b, dp), [[0, 4], [1, 5], [2, 6], [3, 7]]);
        assert_eq!(groups(b, dp_cp), [[0, 2, 4, 6], [1, 3, 5, 7]]);
        // tp 1, cp 4, dp 2, pp 2 on 16 ranks
        let c = layout(1, 4, 2, 2);
        assert_eq!(
            groups(c, cp),
            [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15]]
        );
        assert_eq!(groups(c, dp)[0], [0, 4]);
        assert_eq!(groups(c, pp)[0], [0, 8]);
        assert_eq!(
            groups(c, dp_cp),
            [[0, 1, 2, 3, 4, 5, 6, 7], [8, 9, 10, 11, 12, 13, 14, 15]]
        );
    }

    #[test]
    fn coordinates_and_ranks_are_inverse() {
        for order in [Order::TpDpPp, Order::TpPpDp] {
            let cfg = Layout::new(
                ParallelConfig {
                    tp: 2,
                    pp: 3,
                    dp: 4,
                    ep: 2,
                    order,
                },
                ParallelExtras { cp: 2, vpp: 1 },
            );
            for rank in 0..48 {
                assert_eq!(cfg.rank_of(cfg.coords(rank)), rank);
            }
        }
    }
}
