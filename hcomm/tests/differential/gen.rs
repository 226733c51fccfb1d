//! Random schedules in the IR, biased so that a good share is accepted and
//! a good share is rejected for each reason.
//!
//! A schedule is a few phases over the buffers `inp`, `out`, `acc` (each
//! `n * world` elements): ring shifts (blocking in several orders, `batch`,
//! `isend`/`irecv` waited at once or later), pairwise exchanges under rank
//! conditionals, gathers to a root in loops, tags received in another order
//! than sent, collectives with and without `over`, local copies, scratch
//! buffers, and loops of shifts. Each case has a flavour: clean, or steered
//! toward a deadlock (blocking orders that cycle, collectives some ranks
//! skip), unmatched operations (a wrong peer, tag or guard) or a buffer
//! hazard (touching a region an in-flight operation uses).

use hcomm_schedule::ir::{Collective, Expr, Op, Region, Schedule, Stmt};
use proptest::prelude::RngExt;
use proptest::test_runner::{RngAlgorithm, TestRng};

use super::build::{
    accumulate, add, batch, buf, chunk, chunk_of, coll, copy, div, eq, for_, if_, int, irecv, isend, left, let_, lt, n,
    ne, rank, recv, rem, right, schedule, scratch, scratch_buf, send, sub, var, wait, world, ACC, INP, OUT,
};

/// What the generator steered a case toward.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// No deliberate fault.
    Clean,
    /// Blocking orders that may cycle, collectives some ranks skip.
    Deadlock,
    /// A wrong peer, tag or guard.
    Unmatched,
    /// A region touched while an operation on it is in flight.
    Hazard,
}

/// One generated schedule with the world it runs on.
#[derive(Debug)]
pub struct Case {
    /// The schedule (verified at `world` only).
    pub schedule: Schedule,
    /// The number of ranks.
    pub world: usize,
    /// The length variable `n`.
    pub n: i64,
    /// What the generator aimed at.
    pub flavor: Flavor,
    /// A receive takes tags in another order than they were sent.
    pub tag_reorder: bool,
    /// A request is in flight across a collective.
    pub inflight_collective: bool,
}

/// Case `index` of the run seeded with `seed`: the same pair always gives
/// the same case.
pub fn case(seed: u64, index: u64) -> Case {
    let mut bytes = [0_u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    bytes[8..16].copy_from_slice(&index.to_le_bytes());
    let mut g = Gen {
        rng: TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
        w: 2,
        flavor: Flavor::Clean,
        pending: Vec::new(),
        handles: 0,
        tag_reorder: false,
        inflight_collective: false,
    };
    g.w = g.rng.random_range(2..=6);
    g.flavor = match g.rng.random_range(0..20) {
        0..=10 => Flavor::Clean,
        11..=13 => Flavor::Deadlock,
        14..=16 => Flavor::Unmatched,
        _ => Flavor::Hazard,
    };
    let n = g.rng.random_range(1..=2);
    let phases = g.rng.random_range(1..=4);
    let mut body = Vec::new();
    for _ in 0..phases {
        body.extend(g.phase());
    }
    // a clean schedule waits for everything; others forget a request now and then
    if !g.pending.is_empty() && (g.flavor == Flavor::Clean || g.rng.random_range(0..8) > 0) {
        let hs: Vec<String> = g.pending.drain(..).map(|(h, _)| h).collect();
        body.push(wait(&hs));
    }
    Case {
        schedule: schedule(&format!("case_{index}"), g.w, body),
        world: g.w as usize,
        n,
        flavor: g.flavor,
        tag_reorder: g.tag_reorder,
        inflight_collective: g.inflight_collective,
    }
}

struct Gen {
    rng: TestRng,
    w: i64,
    flavor: Flavor,
    /// Requests posted and not yet waited (top level only), with the
    /// region each one uses.
    pending: Vec<(String, Region)>,
    handles: u32,
    tag_reorder: bool,
    inflight_collective: bool,
}

const OPS: [Op; 4] = [Op::Sum, Op::Prod, Op::Max, Op::Min];

impl Gen {
    fn chance(&mut self, percent: u32) -> bool {
        self.rng.random_range(0..100) < percent
    }

    fn faulty(&mut self, flavor: Flavor, percent: u32) -> bool {
        self.flavor == flavor && self.chance(percent)
    }

    fn op(&mut self) -> Op {
        OPS[self.rng.random_range(0..OPS.len())]
    }

    fn handle(&mut self) -> String {
        self.handles += 1;
        format!("h{}", self.handles)
    }

    /// A chunk index: `rank`, a neighbour, or a constant.
    fn index(&mut self) -> Expr {
        match self.rng.random_range(0..4) {
            0 => rank(),
            1 => right(int(1)),
            _ => int(self.rng.random_range(0..self.w)),
        }
    }

    /// A region of `n` elements to read.
    fn source(&mut self) -> Region {
        let b = [INP, INP, OUT, ACC][self.rng.random_range(0..4)];
        let i = self.index();
        chunk(buf(b), i)
    }

    fn phase(&mut self) -> Vec<Stmt> {
        let mut out = Vec::new();
        if self.flavor == Flavor::Hazard && !self.pending.is_empty() && self.chance(60) {
            out.push(self.touch_pending());
        }
        match self.rng.random_range(0..22) {
            20 | 21 => out.extend(self.overlap()),
            0..=6 => {
                let k = int(self.rng.random_range(1..self.w));
                out.extend(self.shift(&k, true));
            }
            7..=10 => out.extend(self.collective()),
            11 => out.extend(self.local()),
            12 | 13 => out.extend(self.pairwise()),
            14 | 15 => out.extend(self.gather()),
            16 => out.extend(self.tag_reorder()),
            _ => out.push(self.shift_loop()),
        }
        out
    }

    /// A statement that writes (or reads) a region a pending request uses.
    fn touch_pending(&mut self) -> Stmt {
        let i = self.rng.random_range(0..self.pending.len());
        let r = self.pending[i].1.clone();
        if self.chance(50) {
            let src = self.source();
            copy(src, r)
        } else {
            copy(r, chunk(buf(ACC), rank()))
        }
    }

    /// Every rank sends to `(rank + k) % world` and receives from
    /// `(rank - k) % world`; `top` allows waits after the phase.
    fn shift(&mut self, k: &Expr, top: bool) -> Vec<Stmt> {
        let tag = if self.chance(30) {
            self.rng.random_range(1..4)
        } else {
            0
        };
        let mut rk = k.clone();
        let mut rtag = tag;
        if self.faulty(Flavor::Unmatched, 60) {
            if self.chance(50) {
                rk = add(k.clone(), int(1));
            } else {
                rtag = tag + 1;
            }
        }
        let src = self.source();
        let reduce = if self.chance(20) { Some(self.op()) } else { None };
        let dst_buf = if reduce.is_some() || self.chance(30) { ACC } else { OUT };
        let dst = chunk(buf(dst_buf), left(rk.clone()));
        let (to, from) = if self.chance(25) {
            (var("to"), var("from"))
        } else {
            (right(k.clone()), left(rk.clone()))
        };
        let mut out = Vec::new();
        if matches!(to.kind, hcomm_schedule::ir::ExprKind::Name(_)) {
            out.push(let_("to", right(k.clone())));
            out.push(let_("from", left(rk)));
        }
        let s = send(src.clone(), to.clone(), tag);
        let r = recv(dst.clone(), from.clone(), rtag, reduce);
        let mode = if self.flavor == Flavor::Deadlock && self.chance(60) {
            self.rng.random_range(0..2)
        } else {
            self.rng.random_range(2..7)
        };
        match mode {
            0 => out.extend([s, r]),
            1 => out.extend([r, s]),
            2 => out.push(if_(
                eq(rem(rank(), int(2)), int(0)),
                vec![s.clone(), r.clone()],
                Some(vec![r, s]),
            )),
            3 | 4 => out.push(batch(if self.chance(50) { vec![s, r] } else { vec![r, s] })),
            5 => {
                let h = self.handle();
                out.push(irecv(&h, dst, from, rtag, reduce));
                out.push(s);
                out.push(wait(&[h]));
            }
            _ => {
                let (hr, hs) = (self.handle(), self.handle());
                out.push(irecv(&hr, dst.clone(), from, rtag, reduce));
                out.push(isend(&hs, src.clone(), to, tag));
                if top && self.chance(50) {
                    self.pending.push((hr, dst));
                    self.pending.push((hs, src));
                } else {
                    out.push(wait(&[hr, hs]));
                }
            }
        }
        out
    }

    /// `for s in 0..L { shift by s + 1 }`.
    fn shift_loop(&mut self) -> Stmt {
        let count = if self.chance(30) {
            sub(world(), int(1))
        } else {
            int(self.rng.random_range(1..self.w))
        };
        let k = add(var("s"), int(1));
        let body = self.shift(&k, false);
        for_("s", int(0), count, self.chance(30), body)
    }

    /// Even ranks exchange with the next odd rank.
    fn pairwise(&mut self) -> Vec<Stmt> {
        let tag = self.rng.random_range(0..3);
        let (a, b) = (self.source(), self.source());
        let d1 = chunk(buf(OUT), rank());
        let d2 = chunk(buf(ACC), rank());
        let rtag = if self.faulty(Flavor::Unmatched, 60) {
            tag + 1
        } else {
            tag
        };
        let even = vec![
            send(a, add(rank(), int(1)), tag),
            recv(d1, add(rank(), int(1)), tag, None),
        ];
        let mut odd = vec![
            recv(d2, sub(rank(), int(1)), rtag, None),
            send(b, sub(rank(), int(1)), tag),
        ];
        if self.faulty(Flavor::Deadlock, 70) {
            odd.reverse();
        }
        let guard = if self.faulty(Flavor::Unmatched, 30) {
            int(1)
        } else {
            lt(add(rank(), int(1)), world())
        };
        vec![if_(
            eq(rem(rank(), int(2)), int(0)),
            vec![if_(guard, even, None)],
            Some(odd),
        )]
    }

    /// Every other rank sends one chunk to a root, which receives them in a
    /// loop (blocking or in one `batch`).
    fn gather(&mut self) -> Vec<Stmt> {
        let root = self.rng.random_range(0..self.w);
        let tag = self.rng.random_range(0..2);
        let skip_self = !self.faulty(Flavor::Unmatched, 50);
        let recv_p = recv(chunk(buf(ACC), var("p")), var("p"), tag, None);
        let body = if skip_self {
            vec![if_(ne(var("p"), int(root)), vec![recv_p], None)]
        } else {
            vec![recv_p]
        };
        let lp = for_("p", int(0), world(), self.chance(30), body);
        let at_root = if self.chance(40) {
            vec![batch(vec![lp])]
        } else {
            vec![lp]
        };
        let src = self.source();
        vec![if_(
            eq(rank(), int(root)),
            at_root,
            Some(vec![send(src, int(root), tag)]),
        )]
    }

    /// Two messages to one peer with tags 1 and 2, received 2 first.
    fn tag_reorder(&mut self) -> Vec<Stmt> {
        self.tag_reorder = true;
        let k = int(self.rng.random_range(1..self.w));
        let (h1, h2) = (self.handle(), self.handle());
        let (a, b) = (self.source(), self.source());
        let mut out = vec![isend(&h1, a, right(k.clone()), 1), isend(&h2, b, right(k.clone()), 2)];
        if self.chance(50) {
            out.push(recv(chunk(buf(OUT), rank()), left(k.clone()), 2, None));
            out.push(recv(chunk(buf(ACC), rank()), left(k), 1, None));
        } else {
            let t = self.handle();
            out.push(scratch(&t, n()));
            out.push(recv(scratch_buf(&t), left(k.clone()), 2, None));
            out.push(recv(chunk(buf(ACC), rank()), left(k), 1, None));
            out.push(copy(scratch_buf(&t), chunk(buf(OUT), rank())));
        }
        out.push(wait(&[h1, h2]));
        out
    }

    /// A shift whose requests stay in flight across a collective on other
    /// buffers.
    fn overlap(&mut self) -> Vec<Stmt> {
        self.inflight_collective = true;
        let k = int(self.rng.random_range(1..self.w));
        let (hr, hs) = (self.handle(), self.handle());
        let op = self.op();
        let c = if self.chance(50) {
            Collective::AllReduce {
                src: chunk(buf(INP), self.index()),
                dst: Some(chunk(buf(ACC), self.index())),
                op: op.into(),
            }
        } else {
            Collective::Barrier
        };
        vec![
            irecv(&hr, chunk(buf(OUT), left(k.clone())), left(k.clone()), 0, None),
            isend(&hs, chunk(buf(INP), rank()), right(k), 0),
            coll(c, None),
            wait(&[hr, hs]),
        ]
    }

    /// A local `copy` or `accumulate`.
    fn local(&mut self) -> Vec<Stmt> {
        let src = chunk(buf(INP), self.index());
        let dst = chunk(buf([OUT, ACC][self.rng.random_range(0..2)]), self.index());
        if self.chance(50) {
            vec![copy(src, dst)]
        } else {
            let op = self.op();
            vec![accumulate(src, dst, op)]
        }
    }

    /// A collective over everyone or over `rank % m` / `rank / (world / m)`
    /// subgroups.
    fn collective(&mut self) -> Vec<Stmt> {
        if !self.pending.is_empty() {
            self.inflight_collective = true;
        }
        let w = self.w;
        let divisors: Vec<i64> = (2..w).filter(|m| w % m == 0).collect();
        // (over, groups, group size when all groups have one)
        let (over, parts, uniform) = match self.rng.random_range(0..10) {
            0..=5 => (None, 1, true),
            6 | 7 if !divisors.is_empty() => {
                let m = divisors[self.rng.random_range(0..divisors.len())];
                let e = if self.chance(50) {
                    rem(rank(), int(m))
                } else {
                    div(rank(), div(world(), int(m)))
                };
                (Some(e), m, true)
            }
            _ => (Some(rem(rank(), int(2))), 2, w % 2 == 0),
        };
        let g = w / parts;
        let op = self.op();
        let mut kind = self.rng.random_range(0..if uniform { 7 } else { 4 });
        if kind == 2 && !self.pending.is_empty() {
            // the executor checks `reduce`'s output for hazards on every
            // rank, the checker on the root only (see the regression test)
            kind = 3;
        }
        let part = |b: usize, j: i64| {
            if parts == 1 {
                buf(b)
            } else {
                chunk_of(buf(b), int(j), int(parts))
            }
        };
        let j = self.rng.random_range(0..parts);
        let c = match kind {
            0 => {
                // out-of-place sources never lie in `out` (see the regression
                // test of identical input and output regions)
                let src = chunk(buf([INP, ACC][self.rng.random_range(0..2)]), self.index());
                if self.chance(30) {
                    Collective::AllReduce {
                        src: chunk(buf(ACC), self.index()),
                        dst: None,
                        op: op.into(),
                    }
                } else {
                    Collective::AllReduce {
                        src,
                        dst: Some(chunk(buf(OUT), self.index())),
                        op: op.into(),
                    }
                }
            }
            1 => Collective::Broadcast {
                region: chunk(buf(ACC), self.index()),
                root: int(self.rng.random_range(0..if uniform { g } else { w / 2 })),
            },
            2 => Collective::Reduce {
                src: chunk(buf([INP, ACC][self.rng.random_range(0..2)]), self.index()),
                dst: chunk(buf(OUT), self.index()),
                op: op.into(),
                root: int(self.rng.random_range(0..if uniform { g } else { w / 2 })),
            },
            3 => Collective::Barrier,
            4 => Collective::AllGather {
                src: chunk(buf(INP), self.index()),
                dst: part(OUT, j),
            },
            5 => Collective::ReduceScatter {
                src: part(INP, j),
                dst: chunk(buf(ACC), self.index()),
                op: op.into(),
            },
            _ => Collective::AllToAll {
                src: part(INP, j),
                dst: part(OUT, (j + 1) % parts),
            },
        };
        let stmt = coll(c, over);
        if self.faulty(Flavor::Deadlock, 50) {
            let skip = int(self.rng.random_range(0..w));
            return vec![if_(ne(rank(), skip), vec![stmt], None)];
        }
        vec![stmt]
    }
}
