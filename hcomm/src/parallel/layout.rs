//! The configuration of a parallel layout and the arithmetic of its axes.

use crate::error::{Error, Result};

/// How the data- and pipeline-parallel axes nest; the tensor-parallel index
/// always varies fastest.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Order {
    /// `rank = tp_i + tp * (dp_i + dp * pp_i)`: tensor-parallel ranks are
    /// neighbours, then data-parallel replicas, then pipeline stages
    /// (Megatron-LM's default).
    #[default]
    TpDpPp,
    /// `rank = tp_i + tp * (pp_i + pp * dp_i)`: the pipeline axis varies
    /// before the data-parallel one.
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
    pub(super) pp: usize,
    pub(super) dp: usize,
}

impl ParallelConfig {
    /// The configuration as words, for comparing it across ranks.
    pub(super) fn words(&self) -> [u64; 5] {
        let order = match self.order {
            Order::TpDpPp => 0,
            Order::TpPpDp => 1,
        };
        [self.tp as u64, self.pp as u64, self.dp as u64, self.ep as u64, order]
    }

    /// Whether the configuration fits a communicator of `world` ranks.
    pub(super) fn validate(&self, world: usize) -> Result<()> {
        let ParallelConfig { tp, pp, dp, ep, .. } = *self;
        for (name, size) in [("tp", tp), ("pp", pp), ("dp", dp), ("ep", ep)] {
            if size == 0 {
                return Err(Error::precondition(format!(
                    "parallel layout: {name} is 0; every size must be at least 1"
                )));
            }
        }
        let product = tp.checked_mul(pp).and_then(|x| x.checked_mul(dp));
        if product != Some(world) {
            let shown = product.map_or_else(|| "more than usize holds".to_owned(), |p| p.to_string());
            return Err(Error::precondition(format!(
                "parallel layout: tp {tp} × pp {pp} × dp {dp} = {shown}, but the communicator has {world} ranks"
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
        match self.order {
            Order::TpDpPp => c.tp + self.tp * (c.dp + self.dp * c.pp),
            Order::TpPpDp => c.tp + self.tp * (c.pp + self.pp * c.dp),
        }
    }

    /// The indices of `rank` on each axis.
    pub(super) fn coords(&self, rank: usize) -> Coords {
        let tp = rank % self.tp;
        let rest = rank / self.tp;
        match self.order {
            Order::TpDpPp => Coords {
                tp,
                dp: rest % self.dp,
                pp: rest / self.dp,
            },
            Order::TpPpDp => Coords {
                tp,
                pp: rest % self.pp,
                dp: rest / self.pp,
            },
        }
    }

    /// The ranks of each group of rank `rank`, ordered by their index on the
    /// group's axis: tensor, pipeline, data and expert parallel.
    pub(super) fn groups(&self, rank: usize) -> [Vec<usize>; 4] {
        let c = self.coords(rank);
        let tp = (0..self.tp).map(|i| self.rank_of(Coords { tp: i, ..c })).collect();
        let pp = (0..self.pp).map(|i| self.rank_of(Coords { pp: i, ..c })).collect();
        let dp = (0..self.dp).map(|i| self.rank_of(Coords { dp: i, ..c })).collect();
        let first = c.dp / self.ep * self.ep;
        let ep = (first..first + self.ep)
            .map(|i| self.rank_of(Coords { dp: i, ..c }))
            .collect();
        [tp, pp, dp, ep]
    }
}

#[cfg(test)]
mod tests {
    use super::{Order, ParallelConfig};

    #[test]
    fn coordinates_and_ranks_are_inverse() {
        for order in [Order::TpDpPp, Order::TpPpDp] {
            let cfg = ParallelConfig {
                tp: 2,
                pp: 3,
                dp: 4,
                ep: 2,
                order,
            };
            for rank in 0..24 {
                assert_eq!(cfg.rank_of(cfg.coords(rank)), rank);
            }
        }
    }
}
