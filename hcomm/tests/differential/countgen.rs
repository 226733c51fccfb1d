//! All-gathervs over a count vector whose planted bug shows only when the
//! counts differ: part `j` is copied to `out` at `sum(counts[0..j]) -
//! counts[i] + counts[k]` (`i < j < k`), which is part `j`'s start when
//! `counts[i] = counts[k]` (every uniform vector) and lands elsewhere
//! otherwise. Two shapes: the collective into a scratch buffer then one
//! copy per part in a random order, and a ring whose rank `j` places its
//! own part so.

use proptest::prelude::RngExt;

use super::postgen::stream;

/// A planted misplacement: part `j` starts at `sum(counts[0..j]) -
/// counts[i] + counts[k]`.
#[derive(Clone, Copy, Debug)]
pub struct Misplaced {
    /// The part copied to the wrong place.
    pub j: usize,
    /// The entry its start leaves out.
    pub i: usize,
    /// The entry its start counts instead.
    pub k: usize,
}

impl Misplaced {
    /// The start of the region, as written in the schedule.
    fn start(self) -> String {
        let Misplaced { j, i, k } = self;
        format!("sum(counts[0..{j}]) - counts[{i}] + counts[{k}]")
    }

    /// The start at `counts`.
    pub fn at(self, counts: &[usize]) -> usize {
        counts[..self.j].iter().sum::<usize>() - counts[self.i] + counts[self.k]
    }
}

/// A generated case.
#[derive(Debug)]
pub struct CountCase {
    /// The number of ranks (the only world it is verified at).
    pub world: usize,
    /// The schedule's text (one schedule, `case`).
    pub source: String,
    /// The order in which the scratch shape copies the parts (empty for
    /// the ring).
    pub order: Vec<usize>,
    /// The planted bug, if any.
    pub planted: Option<Misplaced>,
    /// Counts to run at: not all equal, some zero when `world > 3`.
    pub counts: Vec<usize>,
}

impl CountCase {
    /// What the scratch shape leaves in `out` at `counts`, copying the
    /// parts in its order (`None` where nothing is copied); `parts[r]` is
    /// rank `r`'s contribution.
    pub fn scratch_model(&self, counts: &[usize], parts: &[Vec<u64>]) -> Vec<Option<u64>> {
        let mut out = vec![None; counts.iter().sum()];
        for &p in &self.order {
            let start = match self.planted {
                Some(b) if b.j == p => b.at(counts),
                _ => counts[..p].iter().sum(),
            };
            for (o, &v) in out[start..start + counts[p]].iter_mut().zip(&parts[p]) {
                *o = Some(v);
            }
        }
        out
    }
}

const HEAD: &str = "pub fn case(counts: &[usize; world], x: &[T; counts[rank]], out: &mut [T; sum(counts)])";

/// Case `index` of the run seeded with `seed`.
pub fn case(seed: u64, index: u64) -> CountCase {
    let mut rng = stream(seed, index, 0xc0);
    let world: usize = rng.random_range(3..=6);
    let mut counts: Vec<usize> = (0..world).map(|_| rng.random_range(0..=3)).collect();
    if counts.iter().all(|&c| c == counts[0]) {
        counts[0] = (counts[0] + 1) % 4;
    }
    let planted = (rng.random_range(0..2) == 1).then(|| {
        let j = rng.random_range(1..world - 1);
        Misplaced {
            j,
            i: rng.random_range(0..j),
            k: rng.random_range(j + 1..world),
        }
    });
    let place = |p: usize| match planted {
        Some(b) if b.j == p => format!("out[{s}..{s} + counts[{p}]]", s = b.start()),
        _ => format!("out.part(counts, {p})"),
    };
    let (order, body) = if rng.random_range(0..2) == 0 {
        let mut order: Vec<usize> = (0..world).collect();
        for a in (1..world).rev() {
            order.swap(a, rng.random_range(0..=a));
        }
        let copies = order
            .iter()
            .map(|&p| format!("copy all.part(counts, {p}) -> {};", place(p)))
            .collect::<Vec<_>>()
            .join("\n");
        (
            order,
            format!("let all = scratch[T; sum(counts)];\nall_gatherv(x -> all, counts);\n{copies}\n"),
        )
    } else {
        let own = match planted {
            Some(b) => format!(
                "if rank == {j} {{ copy x -> {}; }} else {{ copy x -> out.part(counts, rank); }}",
                place(b.j),
                j = b.j
            ),
            None => "copy x -> out.part(counts, rank);".to_owned(),
        };
        (
            Vec::new(),
            format!(
                "{own}
                for s in 0..world - 1 {{
                    batch {{
                        send out.part(counts, (rank - s) % world) to (rank + 1) % world;
                        recv out.part(counts, (rank - s - 1) % world) from (rank - 1) % world;
                    }}
                }}\n"
            ),
        )
    };
    let source = format!(
        "#[verify(world in [{world}])]\n#[postcondition(all_gatherv(x -> out, counts))]\n{HEAD} {{\n{body}}}\n"
    );
    CountCase {
        world,
        source,
        order,
        planted,
        counts,
    }
}
