//! Expert parallelism: routing tokens to the ranks that hold their experts
//! and bringing the experts' outputs back.
//!
//! Experts are placed in contiguous blocks over the expert-parallel group
//! (usually [`Context::ep`](crate::parallel::Context::ep)): with `E`
//! experts over `ep` ranks, rank `j` holds experts
//! `j * E / ep .. (j + 1) * E / ep` (`E` must divide by `ep`).
//!
//! ```
//! use hcomm::ndarray::{array, Array2};
//!
//! hcomm::host::run(2, |comm| {
//!     let r = comm.rank() as f32;
//!     let tokens: Array2<f32> = array![[r, 1.0], [r, 2.0]];
//!     // Token 0 goes to experts 0 and 3, token 1 to expert 2 twice.
//!     let ids = array![[0usize, 3], [2, 2]];
//!     let weights = array![[0.5f32, 0.5], [0.25, 0.75]];
//!     let d = hcomm::moe::dispatch(comm, tokens.view(), ids.view(), weights.view(), 4)?;
//!     // Identity experts: the combined output is the input.
//!     let out = hcomm::moe::combine(comm, d.tokens.view(), &d)?;
//!     assert_eq!(out, tokens);
//!     Ok(())
//! })
//! .unwrap();
//! ```

use ndarray::{Array2, ArrayView2};
use num_traits::Float;

use crate::collective::Exchange;
use crate::comm::Comm;
use crate::element::Element;
use crate::error::{Error, Result};
use crate::parallel::all_ok;

/// The tokens routed to this rank's experts, and what [`combine`] needs to
/// send the experts' outputs home.
#[derive(Clone, Debug)]
pub struct Dispatch<T> {
    /// The tokens routed to this rank's experts, grouped by local expert
    /// (in expert order), within an expert by source rank, then by the
    /// order in which the source sent them. A token routed to two experts
    /// of this rank arrives twice, once per expert.
    pub tokens: Array2<T>,
    /// Rows of `tokens` per local expert, in expert order.
    pub tokens_per_expert: Vec<usize>,
    /// `(token, choice)` of every row this rank sent, in sending order.
    sent: Vec<(usize, usize)>,
    /// Rows this rank sent to each rank of the group.
    sent_rows: Vec<usize>,
    /// Rows received from rank `p` for local expert `e`, at `p * local + e`.
    received: Vec<usize>,
    /// The routing weights, `[tokens, k]`.
    weights: Array2<f32>,
}

impl<T> Dispatch<T> {
    /// The number of experts each rank holds.
    pub fn local_experts(&self) -> usize {
        self.tokens_per_expert.len()
    }

    /// The number of tokens this rank dispatched (rows of [`combine`]'s result).
    pub fn num_tokens(&self) -> usize {
        self.weights.nrows()
    }
}

/// Sends every token to the ranks holding its `k` experts and groups what
/// arrives by local expert. Collective over `group`.
///
/// `tokens` is `[T, H]`; `topk_ids` and `topk_weights` are `[T, k]`. `T` and
/// `k` may differ between ranks; `H` and `num_experts` may not. An expert id
/// `>= num_experts` on any rank, or shapes that do not fit together, fail
/// on every rank of the group with an [`Error::Precondition`] naming the
/// rank, the token and the id.
#[allow(clippy::needless_pass_by_value)] // views are passed by value, as ndarray passes them
pub fn dispatch<T: Element>(
    group: &Comm,
    tokens: ArrayView2<'_, T>,
    topk_ids: ArrayView2<'_, usize>,
    topk_weights: ArrayView2<'_, f32>,
    num_experts: usize,
) -> Result<Dispatch<T>> {
    group.call("moe::dispatch", || {
        let span = tracing::debug_span!("moe_dispatch", comm.rank = group.rank(), tokens = tokens.nrows());
        let _e = span.enter();
        let ep = group.world();
        all_ok(
            group,
            "moe::dispatch",
            check_routing(&tokens, &topk_ids, &topk_weights, num_experts, ep),
            &[
                ("number of experts", num_experts as u64),
                ("hidden size", tokens.ncols() as u64),
            ],
        )?;
        let local = num_experts / ep;
        let hidden = tokens.ncols();

        // Rows in sending order: by expert, then by (token, choice).
        let mut per_expert = vec![0usize; num_experts];
        for &e in &topk_ids {
            per_expert[e] += 1;
        }
        let mut start: Vec<usize> = per_expert
            .iter()
            .scan(0, |at, &n| {
                *at += n;
                Some(*at - n)
            })
            .collect();
        let mut sent = vec![(0, 0); topk_ids.len()];
        for ((t, j), &e) in topk_ids.indexed_iter() {
            sent[start[e]] = (t, j);
            start[e] += 1;
        }
        let mut send = Vec::with_capacity((sent.len() * hidden).max(1));
        for &(t, _) in &sent {
            send.extend(tokens.row(t).iter().copied());
        }

        // Per-expert counts to the ranks holding the experts.
        let counts: Vec<u64> = per_expert.iter().map(|&n| n as u64).collect();
        let mut incoming = vec![0u64; num_experts];
        group.exchange_all_to_all(Exchange::ExpertCounts, &counts, &mut incoming)?;
        let received: Vec<usize> = incoming.iter().map(|&n| n as usize).collect();
        let sent_rows: Vec<usize> = per_expert.chunks(local.max(1)).map(|c| c.iter().sum()).collect();
        let recv_rows: Vec<usize> = received.chunks(local.max(1)).map(|c| c.iter().sum()).collect();

        let mut recv = zeros(recv_rows.iter().sum::<usize>() * hidden);
        group.all_to_allv(&send, &times(&sent_rows, hidden), &mut recv, &times(&recv_rows, hidden))?;

        // From source-major to expert-major order.
        let tokens_per_expert: Vec<usize> = (0..local)
            .map(|e| (0..ep).map(|p| received[p * local + e]).sum())
            .collect();
        let mut grouped = vec![T::ZERO; recv.len()];
        let mut from = 0;
        let offsets = expert_major_offsets(&received, &tokens_per_expert, ep);
        for p in 0..ep {
            for e in 0..local {
                let n = received[p * local + e] * hidden;
                let to = offsets[p * local + e] * hidden;
                grouped[to..to + n].copy_from_slice(&recv[from..from + n]);
                from += n;
            }
        }
        let rows = grouped
            .len()
            .checked_div(hidden)
            .unwrap_or(tokens_per_expert.iter().sum());
        let tokens = Array2::from_shape_vec((rows, hidden), grouped)
            .map_err(|e| Error::precondition(format!("moe::dispatch: {e}")))?;
        Ok(Dispatch {
            tokens,
            tokens_per_expert,
            sent,
            sent_rows,
            received,
            weights: topk_weights.to_owned(),
        })
    })
}

/// Sends every row of `expert_out` (one per row of `dispatch.tokens`, in
/// the same order) back to its token's rank and returns, for every token
/// this rank dispatched, in its original order, the sum over its `k`
/// choices of `weight × expert output` (accumulated in choice order).
/// Collective over `group`, which must be the group of the dispatch.
#[allow(clippy::needless_pass_by_value)] // views are passed by value, as ndarray passes them
pub fn combine<T: Element + Float>(
    group: &Comm,
    expert_out: ArrayView2<'_, T>,
    dispatch: &Dispatch<T>,
) -> Result<Array2<T>> {
    group.call("moe::combine", || {
        let span = tracing::debug_span!("moe_combine", comm.rank = group.rank(), rows = expert_out.nrows());
        let _e = span.enter();
        let d = dispatch;
        let rows = d.tokens.nrows();
        let local = d.local_experts();
        let ep = group.world();
        let shape_ok = if expert_out.nrows() == rows && d.received.len() == ep * local {
            Ok(())
        } else {
            Err(Error::precondition(format!(
                "expert output has {} rows, but {rows} tokens were dispatched to this rank",
                expert_out.nrows()
            )))
        };
        all_ok(
            group,
            "moe::combine",
            shape_ok,
            &[("expert output width", expert_out.ncols() as u64)],
        )?;
        let hidden = expert_out.ncols();

        // From expert-major back to source-major order.
        let offsets = expert_major_offsets(&d.received, &d.tokens_per_expert, ep);
        let mut send = Vec::with_capacity((rows * hidden).max(1));
        for p in 0..ep {
            for e in 0..local {
                let at = offsets[p * local + e];
                for row in at..at + d.received[p * local + e] {
                    send.extend(expert_out.row(row).iter().copied());
                }
            }
        }
        let recv_rows: Vec<usize> = d.received.chunks(local.max(1)).map(|c| c.iter().sum()).collect();
        let mut back = zeros(d.sent.len() * hidden);
        group.all_to_allv(
            &send,
            &times(&recv_rows, hidden),
            &mut back,
            &times(&d.sent_rows, hidden),
        )?;

        let (num_tokens, k) = d.weights.dim();
        let mut row_of = vec![0usize; num_tokens * k];
        for (i, &(t, j)) in d.sent.iter().enumerate() {
            row_of[t * k + j] = i;
        }
        let mut out = Array2::from_elem((num_tokens, hidden), T::zero());
        for t in 0..num_tokens {
            let mut acc = out.row_mut(t);
            for j in 0..k {
                let w = <T as num_traits::NumCast>::from(d.weights[[t, j]]).ok_or_else(|| {
                    Error::precondition(format!(
                        "moe::combine: weight {} does not fit the element type",
                        d.weights[[t, j]]
                    ))
                })?;
                let i = row_of[t * k + j];
                for (a, &y) in acc.iter_mut().zip(&back[i * hidden..(i + 1) * hidden]) {
                    *a = *a + w * y;
                }
            }
        }
        Ok(out)
    })
}

/// Why this rank's routing arguments are unusable, if they are.
fn check_routing<T>(
    tokens: &ArrayView2<'_, T>,
    ids: &ArrayView2<'_, usize>,
    weights: &ArrayView2<'_, f32>,
    num_experts: usize,
    ep: usize,
) -> Result<()> {
    if num_experts == 0 || !num_experts.is_multiple_of(ep) {
        return Err(Error::precondition(format!(
            "{num_experts} experts cannot be placed in equal blocks over {ep} ranks"
        )));
    }
    if ids.nrows() != tokens.nrows() {
        return Err(Error::precondition(format!(
            "topk_ids has {} rows but tokens has {}",
            ids.nrows(),
            tokens.nrows()
        )));
    }
    if weights.dim() != ids.dim() {
        return Err(Error::precondition(format!(
            "topk_weights has shape {:?} but topk_ids has {:?}",
            weights.shape(),
            ids.shape()
        )));
    }
    if let Some(((t, j), &e)) = ids.indexed_iter().find(|(_, &e)| e >= num_experts) {
        return Err(Error::precondition(format!(
            "expert id {e} (token {t}, choice {j}) is out of range for {num_experts} experts"
        )));
    }
    Ok(())
}

/// Where the rows from rank `p` for local expert `e` start in expert-major
/// order, at `p * local + e`.
fn expert_major_offsets(received: &[usize], per_expert: &[usize], ep: usize) -> Vec<usize> {
    let local = per_expert.len();
    let mut offsets = vec![0; received.len()];
    let mut expert_start = 0;
    for (e, &n) in per_expert.iter().enumerate() {
        let mut at = expert_start;
        for p in 0..ep {
            offsets[p * local + e] = at;
            at += received[p * local + e];
        }
        expert_start += n;
    }
    offsets
}

fn times(rows: &[usize], hidden: usize) -> Vec<usize> {
    rows.iter().map(|&r| r * hidden).collect()
}

/// `len` zeros in an allocation of its own even when empty: device libraries
/// reject an all-to-all whose send and receive buffers share an address,
/// which two empty vectors (both dangling) would.
fn zeros<T: Element>(len: usize) -> Vec<T> {
    let mut v = Vec::with_capacity(len.max(1));
    v.resize(len, T::ZERO);
    v
}
