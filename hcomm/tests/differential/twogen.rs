//! Schedules over two length variables whose planted bug shows only at
//! some points `(n, m)`: a broadcast from rank 0 of `out: [T; n + m + C]`
//! in two messages per hop, along a binomial tree or a chain. Right, the
//! pieces meet at `v + a` (`v` one of `n`, `m`); planted, the first piece
//! ends at `v + a + d` and the second starts at `u + a` (`u` the other
//! variable), which leaves a gap exactly when `u > v + d`: right at
//! `n = m = 1` and wherever `u ≤ v + d`, wrong elsewhere in the box.

use proptest::prelude::RngExt;
use proptest::test_runner::TestRng;

use super::gen::Case;
use super::initial;
use super::postgen::{self, stream};

/// A generated case with its source and the values it runs at.
#[derive(Debug)]
pub struct TwoCase {
    /// The schedule, its world and `n`.
    pub case: Case,
    /// The second length variable's value for the run.
    pub m: i64,
    /// The constant of `out`'s length.
    pub extra: i64,
    /// The text it was read from.
    pub source: String,
    /// The planted bug, if any.
    pub planted: Option<String>,
    /// Where the planted bug shows.
    pub gap: Option<Gap>,
}

impl TwoCase {
    /// The lengths of `inp`, `out` and `acc` at `(n, m)`.
    pub fn sizes(&self, n: i64, m: i64) -> [usize; 3] {
        [n, n + m + self.extra, m].map(|x| usize::try_from(x).unwrap_or(0))
    }

    /// What every rank's `out` must hold at `(n, m)`: rank 0's.
    pub fn reference(&self, n: i64, m: i64) -> Vec<u64> {
        (0..self.sizes(n, m)[1] as u32)
            .map(|i| initial(0, super::build::OUT as u32, i))
            .collect()
    }
}

/// Where a planted case's pieces leave a gap: at the points where the
/// length variable `u` passes `v + d` (`0` is `n`, `1` is `m`).
#[derive(Clone, Copy, Debug)]
pub struct Gap {
    /// The variable that must pass the other.
    pub u: usize,
    /// The variable it passes.
    pub v: usize,
    /// By how much it must pass it.
    pub d: i64,
}

impl Gap {
    /// Whether the gap is there at `(n, m)`: the run is wrong there.
    pub fn shows(self, n: i64, m: i64) -> bool {
        let at = [n, m];
        at[self.u] > at[self.v] + self.d
    }
}

/// Case `index` of the run seeded with `seed`.
///
/// # Panics
///
/// When the generated text does not parse or resolve (a generator bug).
pub fn case(seed: u64, index: u64) -> TwoCase {
    let mut rng = stream(seed, index, 0x2e);
    let world: i64 = rng.random_range(2..=6);
    let (n, m): (i64, i64) = (rng.random_range(1..=4), rng.random_range(1..=4));
    let extra: i64 = rng.random_range(2..=4);
    assemble(&mut rng, world, (n, m), extra, "", extra + 1)
}

/// A case at `world` run at `(n, m)`, `out` of `n + m + extra` elements;
/// `verify` follows the world in `#[verify]` (`", n in 0.."`), and a
/// planted first piece ends at most `reach` past `v` (`reach <= extra`
/// keeps it inside `out` where the other variable may be 0).
///
/// # Panics
///
/// When the generated text does not parse or resolve (a generator bug).
pub fn assemble(rng: &mut TestRng, world: i64, (n, m): (i64, i64), extra: i64, verify: &str, reach: i64) -> TwoCase {
    let (v, u) = if rng.random_range(0..2) == 0 {
        ("n", "m")
    } else {
        ("m", "n")
    };
    let buggy = rng.random_range(0..2) == 1;
    let a: i64 = rng.random_range(0..=1);
    let (end, start, gap) = if buggy {
        let d: i64 = rng.random_range(0..=reach - a);
        let index = |x: &str| usize::from(x == "m");
        (
            format!("{v} + {}", a + d),
            format!("{u} + {a}"),
            Some(Gap {
                u: index(u),
                v: index(v),
                d,
            }),
        )
    } else {
        (format!("{v} + {a}"), format!("{v} + {a}"), None)
    };
    let len = format!("n + m + {extra}");
    let pieces = |verb: &str, dir: &str, peer: &str| {
        format!("{verb} out[0..{end}] {dir} {peer}; {verb} out[{start}..{len}] {dir} {peer};")
    };
    let body = if rng.random_range(0..2) == 0 {
        format!(
            "for k in 0..ceil_log2(world) {{
                if rank < pow2(k) && rank + pow2(k) < world {{ {} }}
                if rank >= pow2(k) && rank < 2 * pow2(k) {{ {} }}
            }}\n",
            pieces("send", "to", "rank + pow2(k)"),
            pieces("recv", "from", "rank - pow2(k)")
        )
    } else {
        format!(
            "if rank > 0 {{ {} }}\nif rank + 1 < world {{ {} }}\n",
            pieces("recv", "from", "rank - 1"),
            pieces("send", "to", "rank + 1")
        )
    };
    let source = format!(
        "#[verify(world in [{world}]{verify})]\n#[postcondition(broadcast(out, root = 0))]\n\
         fn case(inp: &[T; n], out: &mut [T; {len}], acc: &[T; m]) {{\n{body}}}\n"
    );
    let planted = gap.map(|g| {
        let name = |i: usize| ["n", "m"][i];
        format!("a gap between the pieces when {} > {} + {}", name(g.u), name(g.v), g.d)
    });
    TwoCase {
        case: postgen::text_case(&source, world, n, planted.is_some()),
        m,
        extra,
        source,
        planted,
        gap,
    }
}
