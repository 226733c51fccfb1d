//! Schedule IR, evaluator, unroller and checker behind `comm_schedule!`.
//!
//! [`syntax`] parses a schedule (the tokens of a `comm_schedule!` macro, or a
//! text) and lowers it into the IR of [`ir`]; [`verify`] checks it; each
//! [`Diagnostic`] becomes a compile error (or, for a text, an error with its
//! line and column). The generated code embeds the schedule's source text,
//! parses it again at first use and, for world sizes outside the verify set,
//! checks it at run time through a [`VerifyCache`].
//!
//! Modules, in the order they depend on each other (each uses only those
//! before it; a unit test keeps it so): [`ir`] (the data) · [`eval`]
//! (integer semantics shared with the run time) · `lin` (linear forms in the
//! length variables) · [`diag`] (diagnostics) · [`resolve`] (names, scopes,
//! "did you mean", linearity, length binding) · `cexpr` (compiled
//! expressions and their evaluation) · `compile` (names to slots, and the
//! other world-independent checks of step 0) · `situation` (how messages
//! describe where) · `trace` (the per-rank event model) · `ranges` (steps 1
//! and 2, run while unrolling) · `unroll` (IR → events at one world size) ·
//! `contents` (symbolic final buffers) · `check::*` (steps 3-7) · `verify`
//! (the loop over world sizes and scalars) · [`predict`] (the final buffers
//! the symbolic execution computes) · [`plan`] (per-rank steps for device
//! backends) · [`timeline`] (a space-time model of a schedule for drawings)
//! · [`syntax`] (text → IR, then the checker).

//! # Finer points of the language
//!
//! * **Message format.** [`Diagnostic`]'s `Display` is `"{kind}: {message}"`
//!   plus `"\nhint: {hint}"`; messages start with the concrete situation
//!   (`with world = 4, root = 1, s = 2, rank 3 sends to 4 ..`): world size,
//!   scalar values, then the loop variables enclosing the statement. Length
//!   variables are named only when a postcondition fails at a value other
//!   than 1.
//! * **Name resolution.** [`resolve`] resolves every name: `rank`, `world`,
//!   scalars, operator parameters, length variables, and lexically (Rust
//!   scoping: visible to the end of the enclosing block, later definitions
//!   shadow earlier ones) loop variables, `let`s, scratch buffers and request
//!   handles. It reports `unknown name` (with "did you mean" when a close
//!   name exists) for what it cannot find, checks that lengths are linear and
//!   decides which buffer binds which length variable. `wait` of a handle
//!   that is not in scope is `unknown request` (step 6), as the reference
//!   says for undefined handles.
//! * **Request scope.** A pending request whose handle goes out of scope
//!   (end of its block, including each iteration of a loop body) or is
//!   redefined can only be completed by a later `wait all`; one still
//!   pending at the end of the schedule is an `unwaited request`, reported
//!   at its `isend`/`irecv`.
//! * **Booleans.** Comparisons, `&&`, `||`, `!` and `is_pow2` give 0 or 1;
//!   conditions hold when non-zero; `!x` is logical (1 when `x == 0`);
//!   `&&`/`||` short-circuit. `%` is Euclidean also for negative divisors
//!   (result in `0..|m|`); `<<`/`>>` by a negative amount is an evaluation
//!   error; `x << k` overflowing `i64` is an evaluation error;
//!   `pow2(k)` needs `0 <= k <= 62`.
//! * **Loop cap.** The 2^24 iterations are counted per rank (all loops of one
//!   rank's unrolling together); a loop that would pass the cap is rejected
//!   before it runs. Also `evaluation error`s, to keep the checker bounded:
//!   more than 2^28 steps on one rank, more than 2^20 scalar combinations at
//!   one world size, more than 2^16 world sizes in `#[verify]`.
//! * **Length variables.** At most 3 per schedule (a fourth is a
//!   `syntax error` at its declaration); linear forms are then small fixed
//!   arrays, which keeps the checker fast.
//! * **`batch` contents.** `send`, `recv` (with `reduce`), and `let`, `for`,
//!   `if` around them; anything else inside a `batch` is a `syntax error`.
//!   Within a batch, ops are posted in textual order (this fixes the
//!   non-overtaking order on a channel); operations a `for` or `if` inside
//!   the batch produces belong to that batch (messages to self included),
//!   and the batch rule counts them all.
//! * **`over` groups.** The group of each rank is computed once per distinct
//!   binding of the names the expression reads. A root names a rank *of the
//!   group* (0..group size).
//! * **`reduce` shapes.** Input and output lengths are compared on the root
//!   only, since other ranks neither read nor write their output.
//! * **Collective mismatch lengths.** Members of one collective must agree on
//!   the input length (and output length, except for `reduce`).
//! * **Overlap.** Regions overlap when they share an element for some value
//!   of the length variables: exact with one length variable (an interval),
//!   and with several by integer Fourier-Motzkin elimination (`lin.rs`;
//!   eliminations with a unit coefficient only, else "overlap"). Other
//!   length facts (bounds, even chunks, equal lengths) are exact for every
//!   value `>= 1`, or `>= LO` under `#[verify(n in LO..)]` (the checker's
//!   variable is `n - LO + 1`, `lin::LenVar`).
//! * **Deadlock report.** One diagnostic on the first blocking step of the
//!   cycle (starting from its lowest rank), listing up to six ranks; each
//!   other blocking statement of the cycle is a note with the same wording.
//! * **Postcondition.** Symbolic execution at length variables all 1, and
//!   (unless the only length variable scales every length and bound, with
//!   no constant terms: the run at `n = k` is then the run at `n = 1` with
//!   each element split in `k`): with one variable at every `n` up to
//!   `2 max(C + D, E) + 3` (constants of bounds, of the moves' shifts and
//!   of the expected blocks; the reference, section 7, gives the argument
//!   that this decides every `n`; past 64 an `evaluation error`); with
//!   several, at the values up to one past each variable's last crossing of
//!   two bound forms (their combinations when at most 64, a sample), then
//!   at `2, 3, ..` (variable `i` at `i + 2`). Under bounded ranges
//!   (`#[verify(n in 1..=16)]`) every point of the declared box.
//!   Each run moves groups of the lengths' common factor as one symbol.
//!   Multisets compared by count and
//!   two 64-bit additive fingerprints (for `max` and `min`, which are
//!   idempotent, a contribution may arrive more than once: their distinct
//!   contributions are compared). A reduction's operator must be the
//!   declared one; mixing operators or scratch data that was never written
//!   fails. A run needing more than 2^26 symbols, or one that cannot replay
//!   the events, is an `evaluation error` naming the world size (never a
//!   silent pass); so is a postcondition over counts whose regions are not
//!   whole parts, once the sampled counts pass.
//!   Messages say `block` for `all_gather`/`all_to_all`/`reduce_scatter` blocks and
//!   `element` otherwise, as in "rank 1 ends with output block 2 = rank 0's
//!   input block 0, expected rank 2's input".
//! * **Error selection.** At the smallest failing world size, the scalar
//!   combinations are compared by the earliest failing check; among equals,
//!   the first combination (lexicographic order) wins. A step-4 failure
//!   (deadlock, collective mismatch) comes with the step-5 hazards of other
//!   statements, since those do not depend on the execution.
//! * **Scratch.** Reading scratch data no statement wrote is a `buffer
//!   hazard`, found by the symbolic run of step 7 (which runs for every
//!   schedule with a scratch buffer, with or without a postcondition).
//! * **Symbolic witnesses.** A region out of bounds, or an overlap that
//!   holds only for small values of the length variables, names the
//!   smallest value where it fails ("which fails when n = 1").
//! * **Speed.** Expressions run as register code (the shapes `a op b` and
//!   `(a op b) op c` without an interpreter loop; `%` and `/` skip the
//!   division within one period), unrolling interns regions (chunks are
//!   memoized per region node on their index, in a dense table), channels
//!   are matched through a dense table and flat counts, the deadlock
//!   simulation wakes only the ranks waiting on one that moved, so a check
//!   costs O(events). Before simulating, [`verify`] tries a cheaper proof of
//!   step 4 for schedules without collectives: when every step waits only
//!   for partners posted at an event index no later than its own (a ring's
//!   batches), the ranks can advance in lockstep, nothing deadlocks, and the
//!   lockstep order is the execution the postcondition is judged on (the
//!   verdict is the simulation's: rendezvous waits are monotone). Before
//!   all that, a schedule that is the same on every rank up to a rotation
//!   of the ranks (a ring, a pairwise exchange: peers `rank + k`, chunks
//!   that turn with the rank) is checked on rank 0 alone: each rank is
//!   unrolled and compared with rank 0's image as it comes, without being
//!   kept, and matching, hazards and the postcondition's replay run on rank
//!   0 (what a peer sends is rank 0's own data, turned). It is tried
//!   without collectives, count parameters, reductions or scratch buffers,
//!   for an `all_gather` or `all_to_all` postcondition (or none; with a
//!   postcondition, only when no length variable or one that scales every
//!   length, since the bound on other values reads every rank); anything
//!   else, or anything it finds wrong, runs the full check, whose verdict
//!   and diagnostics are the answer. [`verify`] spreads large verify sets (24 sizes or more)
//!   over the available cores; the result is the same as checking the sizes
//!   in order.
//! * **World sizes.** A verify set containing a size below 1 is an
//!   `evaluation error` of step 0. Scalar ranges may use `world` only; their
//!   lower bound is raised to 0 (scalars are `usize`).
#![forbid(unsafe_code)]

pub mod diag;
pub mod eval;
pub mod ir;
pub mod plan;
pub mod predict;
pub mod timeline;

mod cexpr;
mod check;
mod compile;
mod contents;
mod counts;
mod lin;
mod peer_hint;
mod print;
mod ranges;
pub mod resolve;
mod situation;
pub mod syntax;
mod trace;
mod unroll;
mod verify;

pub use diag::{DiagKind, Diagnostic};
pub use ir::*;
pub use plan::PlanCache;
pub use verify::{check_static, check_world, check_world_unreduced, requires_holds, scalar_range, verify, VerifyCache};

#[cfg(test)]
mod tests;
