//! [`twogen`]'s broadcasts under declared length ranges: each of `n` and
//! `m` keeps the default `1..` or takes `0..`, `LO..=HI` or `LO..HI` in
//! `#[verify]`, so that empty buffers (`n = 0`, `m = 0`) and bounded boxes
//! are part of what the checker decides. A planted gap (`u > v + d`) is a
//! bug exactly when some point of the declared ranges shows it: a bounded
//! range may leave none, and the schedule is then right for its range.

use proptest::prelude::RngExt;
use proptest::test_runner::TestRng;

use super::postgen::stream;
use super::twogen::{self, TwoCase};

/// The values one length variable is declared to take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// The least value.
    pub lo: i64,
    /// The greatest, when bounded.
    pub hi: Option<i64>,
    /// Whether it is written in `#[verify]` (the default `1..` is not).
    pub declared: bool,
    /// Whether a bounded range is written `LO..HI` (exclusive).
    pub exclusive: bool,
}

impl Span {
    /// The range as written after `n in` (`None` for the default).
    pub fn text(self) -> Option<String> {
        self.declared.then(|| match (self.hi, self.exclusive) {
            (None, _) => format!("{}..", self.lo),
            (Some(hi), false) => format!("{}..={hi}", self.lo),
            (Some(hi), true) => format!("{}..{}", self.lo, hi + 1),
        })
    }

    /// The values a test runs: the range, an unbounded one cut at
    /// `lo + cut`.
    pub fn values(self, cut: i64) -> std::ops::RangeInclusive<i64> {
        self.lo..=self.hi.unwrap_or(self.lo + cut).min(self.lo + cut)
    }

    /// Values just outside a declared range, which a checked call refuses.
    pub fn outside(self) -> Vec<i64> {
        if !self.declared {
            return Vec::new();
        }
        let below = (self.lo > 0).then(|| self.lo - 1);
        below.into_iter().chain(self.hi.map(|hi| hi + 1)).collect()
    }

    fn random(rng: &mut TestRng) -> Span {
        let lo = rng.random_range(0..=2);
        let hi = Some(lo + rng.random_range(0..=3));
        let span = |lo, hi, declared, exclusive| Span {
            lo,
            hi,
            declared,
            exclusive,
        };
        match rng.random_range(0..4) {
            0 => span(1, None, false, false),
            1 => span(0, None, true, false),
            2 => span(lo, hi, true, false),
            _ => span(lo, hi, true, true),
        }
    }
}

/// A generated case with the ranges it declares.
#[derive(Debug)]
pub struct RangeCase {
    /// The schedule and the point it runs at.
    pub two: TwoCase,
    /// The ranges of `n` and `m`.
    pub spans: [Span; 2],
}

/// The widest an unbounded range is run: a gap `u > v + d` that shows
/// anywhere shows at `u = max(lo_u, lo_v + d + 1)` with `v = lo_v`, at
/// most `2 + 2 + 4 + 1` here.
pub const CUT: i64 = 12;

impl RangeCase {
    /// Whether the planted gap shows at some point of the declared ranges.
    pub fn wrong_somewhere(&self) -> bool {
        self.witness().is_some()
    }

    /// The first point of the declared ranges (unbounded ones cut at
    /// [`CUT`]) where the planted gap shows.
    pub fn witness(&self) -> Option<(i64, i64)> {
        let gap = self.two.gap?;
        let [sn, sm] = self.spans;
        sn.values(CUT)
            .flat_map(|n| sm.values(CUT).map(move |m| (n, m)))
            .find(|&(n, m)| gap.shows(n, m))
    }
}

/// Case `index` of the run seeded with `seed`.
///
/// # Panics
///
/// When the generated text does not parse or resolve (a generator bug).
pub fn case(seed: u64, index: u64) -> RangeCase {
    let mut rng = stream(seed, index, 0x3f);
    let world: i64 = rng.random_range(2..=5);
    let extra: i64 = rng.random_range(2..=4);
    let spans = [Span::random(&mut rng), Span::random(&mut rng)];
    let [n, m] = spans.map(|s| {
        let values = s.values(3);
        rng.random_range(values)
    });
    let verify: String = ["n", "m"]
        .iter()
        .zip(spans)
        .filter_map(|(name, s)| s.text().map(|t| format!(", {name} in {t}")))
        .collect();
    RangeCase {
        two: twogen::assemble(&mut rng, world, (n, m), extra, &verify, extra),
        spans,
    }
}
