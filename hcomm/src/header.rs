//! What names a collective call across ranks: the collectives, the
//! library's own exchanges, and the consistency header every rank of a
//! collective sends with its first messages (backends compare it).

use crate::element::{DataType, ReduceOp};

/// The collective operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[non_exhaustive]
pub enum Collective {
    /// Every rank ends with the reduction of every rank's buffer.
    AllReduce,
    /// Every rank ends with every rank's block, in rank order.
    AllGather,
    /// Rank `r` ends with block `r` of the reduction.
    ReduceScatter,
    /// Rank `r` sends its block `j` to rank `j`, which stores it as block `r`.
    AllToAll,
    /// All-to-all with per-peer counts.
    AllToAllV,
    /// The root's buffer is copied to every rank.
    Broadcast,
    /// The root ends with the reduction of every rank's buffer.
    Reduce,
    /// The root ends with every rank's block, in rank order.
    Gather,
    /// Rank `r` receives block `r` of the root's buffer.
    Scatter,
    /// No rank leaves before every rank has entered.
    Barrier,
}

impl Collective {
    /// Every collective, in a fixed order.
    pub const ALL: [Collective; 10] = [
        Collective::AllReduce,
        Collective::AllGather,
        Collective::ReduceScatter,
        Collective::AllToAll,
        Collective::AllToAllV,
        Collective::Broadcast,
        Collective::Reduce,
        Collective::Gather,
        Collective::Scatter,
        Collective::Barrier,
    ];

    /// The name used in `HCOMM_ALGO` and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Collective::AllReduce => "all_reduce",
            Collective::AllGather => "all_gather",
            Collective::ReduceScatter => "reduce_scatter",
            Collective::AllToAll => "all_to_all",
            Collective::AllToAllV => "all_to_allv",
            Collective::Broadcast => "broadcast",
            Collective::Reduce => "reduce",
            Collective::Gather => "gather",
            Collective::Scatter => "scatter",
            Collective::Barrier => "barrier",
        }
    }

    /// Parses a name as [`Collective::name`] writes it.
    pub fn parse(name: &str) -> Option<Collective> {
        Collective::ALL.into_iter().find(|c| c.name() == name.trim())
    }

    pub(crate) fn index(self) -> usize {
        Collective::ALL.iter().position(|&c| c == self).unwrap_or(0)
    }
}

impl std::fmt::Display for Collective {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What one rank's collective call was: exchanged with the first messages of
/// the collective so ranks that disagree get an error instead of a hang or
/// wrong data (the host-side counterpart of HCCL's consistency check).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct CollHeader {
    /// The call's position among this communicator's collectives.
    pub(crate) seq: u64,
    pub(crate) kind: Collective,
    pub(crate) dtype: DataType,
    /// The per-rank count that must agree (`None` where counts may differ).
    pub(crate) count: Option<u64>,
    pub(crate) op: Option<ReduceOp>,
    pub(crate) root: Option<u32>,
    /// For an exchange of the library's own (split's, a layout's, a shape
    /// agreement's): which one; `None` for the user's collectives. Part of
    /// the agreement, so a user's collective never matches an exchange
    /// that another rank runs inside a library call.
    pub(crate) exchange: Option<Exchange>,
    /// The array shape a `tp` call passes (`None` for plain collectives):
    /// compared with the rest of the header, so shapes that disagree fail
    /// the call on every rank without a message of its own.
    pub(crate) shape: Option<ShapeNote>,
}

/// An array shape in a [`CollHeader`]: the first [`ShapeNote::SHOWN`]
/// dimensions in the clear (for the error message), and a digest of all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct ShapeNote {
    ndim: u32,
    dims: [u64; ShapeNote::SHOWN],
    digest: u64,
}

impl ShapeNote {
    /// How many dimensions travel in the clear.
    const SHOWN: usize = 6;

    #[cfg_attr(
        not(feature = "ndarray"),
        allow(dead_code, reason = "tp's ndarray operations are its callers")
    )]
    pub(crate) fn new(shape: &[usize]) -> ShapeNote {
        use std::hash::Hasher;
        let mut dims = [0u64; ShapeNote::SHOWN];
        for (slot, &d) in dims.iter_mut().zip(shape) {
            *slot = d as u64;
        }
        let mut h = crate::fnv::Fnv::default();
        for &d in shape {
            h.write_usize(d);
        }
        ShapeNote {
            ndim: shape.len() as u32,
            dims,
            digest: h.finish(),
        }
    }
}

impl std::fmt::Display for ShapeNote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = (self.ndim as usize).min(ShapeNote::SHOWN);
        write!(f, "{:?}", &self.dims[..shown])?;
        if shown < self.ndim as usize {
            write!(f, " (and {} more dimensions)", self.ndim as usize - shown)?;
        }
        Ok(())
    }
}

/// The library's own exchanges, run as collectives whose headers carry
/// this kind: a rank inside one of them while another is in a user's
/// collective (or in another exchange) is a [`CollHeader`] disagreement,
/// [`crate::Error::Mismatch`] on every rank, never data taken for the
/// other call's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub(crate) enum Exchange {
    /// `Comm::split`: every rank's color and key.
    Split,
    /// `parallel::Context::init`: every rank's layout.
    ParallelLayout,
    /// The group agreement of `tp`/`moe` calls: whether every rank's local
    /// checks passed and the settings that must agree.
    Agreement,
    /// The message lengths of a failed agreement.
    AgreementText,
    /// The shape agreement of `tp` calls.
    Shape,
    /// `all_gatherv`: every rank's count and counts digest.
    Counts,
    /// `moe::dispatch`: the per-expert token counts.
    ExpertCounts,
}

impl Exchange {
    /// The name used in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Exchange::Split => "split",
            Exchange::ParallelLayout => "parallel layout",
            Exchange::Agreement => "group agreement",
            Exchange::AgreementText => "group agreement messages",
            Exchange::Shape => "shape agreement",
            Exchange::Counts => "all_gatherv counts",
            Exchange::ExpertCounts => "moe expert counts",
        }
    }
}

impl CollHeader {
    /// Whether two ranks' calls are the same collective.
    pub(crate) fn agrees(&self, other: &CollHeader) -> bool {
        self.kind == other.kind
            && self.dtype == other.dtype
            && self.count == other.count
            && self.op == other.op
            && self.root == other.root
            && self.exchange == other.exchange
            && self.shape == other.shape
    }
}

impl std::fmt::Display for CollHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(exchange) = self.exchange {
            write!(f, "the {} exchange inside the library, ", exchange.name())?;
        }
        write!(f, "`{}`({}", self.kind, self.dtype)?;
        if let Some(count) = self.count {
            write!(f, " x {count}")?;
        }
        if let Some(op) = self.op {
            write!(f, ", {op}")?;
        }
        if let Some(root) = self.root {
            write!(f, ", root = {root}")?;
        }
        if let Some(shape) = self.shape {
            write!(f, ", array shape {shape}")?;
        }
        f.write_str(")")
    }
}
