//! The `comm_schedule!` macro of `hcomm`: parse a schedule, check it at compile
//! time with `hcomm-schedule`, and expand it into calls on
//! `::hcomm::__private`. Use it through `hcomm::comm_schedule`.
//!
//! Phases: `hcomm_schedule::syntax` (parse, lower into the IR, resolve
//! names, check; shared with `hcomm::checker`, which reads schedules from
//! text) → `expand` (IR → Rust). Errors of any phase
//! become `compile_error!`s on the user's tokens (`expand::fallback`), plus a fallback
//! item with the function's signature so that callers see one error, not a
//! cascade.
#![forbid(unsafe_code)]

mod expand;
#[cfg(test)]
mod tests;

/// Defines communication schedules, checked at compile time.
///
/// The language reference is the page `hcomm::docs::language` (the file
/// `docs/language.md` of the repository), and `hcomm::docs::guide` walks
/// through writing, checking and running a schedule; this page lists what the
/// generated code looks like and the finer points of the language.
///
/// ```ignore
/// use hcomm::comm_schedule;
///
/// comm_schedule! {
///     /// Ring all-gather.
///     #[verify(world in 1..=64)]
///     #[postcondition(all_gather(input -> output))]
///     pub fn ring_all_gather(input: &[T; n], output: &mut [T; n * world]) {
///         copy input -> output.chunk(rank);
///         for s in 0..world - 1 {
///             batch {
///                 send output.chunk((rank - s) % world) to (rank + 1) % world;
///                 recv output.chunk((rank - s - 1) % world) from (rank - 1) % world;
///             }
///         }
///     }
/// }
/// ```
///
/// # Generated items
///
/// For `VIS fn NAME(a: &[T; LEN], b: &mut [T; LEN], k: usize)`:
///
/// * `VIS fn NAME<T: hcomm::Element>(comm: &hcomm::Comm, a: &[T], b: &mut [T], k: usize)
///   -> hcomm::Result<()>`, with the item's doc comments (and any attribute
///   other than `verify`, `requires` and `postcondition`); without a buffer
///   parameter (and without an explicit `fn NAME<T>`) the function is not
///   generic, `VIS fn NAME(comm: &hcomm::Comm, k: usize)`, so callers need no
///   turbofish;
/// * `VIS mod NAME { pub const SOURCE: &str; pub static SCHEDULE:
///   LazyLock<hcomm_schedule::ir::Schedule> }`: the item's text (what
///   `hcomm::checker::parse_schedules` reads) and, parsed from it at first use,
///   the checked IR, for run-time verification, tracing and drawing. (A function
///   and a module may share a name: they live in different namespaces.) The
///   module is `#[doc(hidden)]`; the function's documentation names it.
///
/// An operator parameter `op: ReduceOp` becomes `op: hcomm::ReduceOp`; it may
/// be written wherever an operator is (`recv .. reduce op`,
/// `accumulate a -> b, op`, `all_reduce(x, op)`, `reduce_scatter(a -> b, op)`,
/// `reduce(a -> b, op, root = ..)`, and postconditions such as
/// `#[postcondition(all_reduce(x, op))]`) and is checked for every operator
/// (`sum`, `prod`, `max`, `min`); a diagnostic names the one that fails
/// (`op = sum`).
///
/// A count parameter `counts: &[usize; world]` (or a matrix `sizes: &[[usize;
/// world]; world]`) becomes `counts: &[usize]` (`world * world` entries,
/// row-major, for a matrix); its entries are lengths checked for every value
/// (`x: &[T; counts[rank]]`, `out.part(counts, r)`, `all_gatherv(x -> out,
/// counts)`, `all_to_allv(a -> b, sizes)`: the language reference, section
/// 10).
///
/// At entry the function evaluates `#[requires]`, binds the length variables
/// from the buffer lengths and checks every length, checks each scalar against
/// its range, and verifies the schedule at run time when `comm.world()` is
/// outside the `#[verify]` set; then it runs the body's steps in order.
///
/// Run-time verification happens once per process for each (world size,
/// scalars): the first rank thread to call checks, the other rank threads of
/// the process wait for its verdict, and all of them verify before their
/// first communication, so no rank waits on a peer (and no operation timeout
/// runs) while the check does. Ranks in other processes verify the same key
/// concurrently; their start differs by the difference between the two
/// checks' durations, which the operation timeout must cover.
///
/// # Finer points
///
/// * `fn NAME<T>(..)` is accepted; `T` is the generic element type (kept
///   generic by `<T>` even without buffer parameters).
/// * `let`, `for` and `if` may appear inside `batch` around its `send` and
///   `recv` statements (e.g. a loop over peers); nothing else may.
/// * Bindings are scoped like Rust `let`s: a `let`, `scratch` buffer, loop
///   variable or request handle is visible from the next statement to the end
///   of its block, and may be shadowed. `rank` and `world` cannot be rebound,
///   and no parameter may be called `comm`, `rank` or `world`.
/// * `true` and `false` are `1` and `0`; a condition holds when non-zero.
///   Comparisons do not chain (`a < b < c` is a syntax error), as in Rust.
/// * `buf[a..=b]` is accepted and means `buf[a..b + 1]`; a slice may follow a
///   chunk (`buf.chunk(i)[0..n]`, relative to the chunk); `for i in (a..b)`
///   (parenthesized, without `.rev()`) is a plain range.
/// * `barrier()` is accepted as well as `barrier`.
/// * In `broadcast(.., root = E) over G` and `reduce(.., root = E) over G`,
///   `E` is a rank *of the subgroup* (numbered in increasing global rank
///   order), like the peers of the subgroup's own communicator.
/// * `#[verify(world in ..)]` bounds are integer constants (`+ - * <<` and
///   `pow2` of constants allowed); a world size must be at least 1. Several
///   `#[verify]` attributes are merged. Scalar ranges are `LO..HI` or
///   `LO..=HI` over `world` and literals.
/// * A `scratch` buffer's contents are unspecified until a statement writes
///   them: reading them first is not an error, but the postcondition check
///   treats such data as a symbol of its own, so a schedule whose output
///   depends on it fails its postcondition. Every backend starts scratch
///   zeroed, so such a schedule still computes the same data everywhere.
/// * A blocking `send` to the calling rank (`recv` from it) is accepted when
///   the matching `irecv` (`isend`) on that channel was posted before it;
///   otherwise it is `send to self` (`recv from self`).
/// * An empty verify set (a range such as `5..3`, a list that `#[requires]`
///   filters out entirely, a scalar range empty at every world size) is an
///   `empty verify set` error saying which.
/// * A deadlock or collective mismatch is reported together with the buffer
///   hazards of other statements (one error per statement, at most 8).
/// * Each length variable is bound from the first buffer (in declaration
///   order) whose length uses it alone among the unbound ones, preferring a
///   literal coefficient; lengths that do not determine every length variable
///   (`a: &[T; n + m]` alone) are a `non-linear length` error.
#[proc_macro]
pub fn comm_schedule(input: proc_macro::TokenStream) -> proc_macro::TokenStream {
    let ast = syn::parse_macro_input!(input as hcomm_schedule::syntax::Input);
    expand::schedule(&ast).into()
}
