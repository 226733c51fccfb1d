//! Lowers the IR into the checker's program (names resolved to slots, the
//! shape every later pass walks) and runs the world-independent checks of
//! step 0: names, linearity, read-only writes, rank-dependent groups, what
//! may stand inside `batch`, scalar ranges and the verify set.

use crate::cexpr::{CCount, CExpr, CLine, CLineKind, CWhich, CK};
use crate::diag::{span_key, stmt_key, DiagKind, Diagnostic, Sink};
use crate::ir::{
    BinOp, BufKind, BufRef, Collective, Count, CountLine, Expr, ExprKind, Ident, LineKind, NameKind, OpExpr, PostKind,
    Region, RegionKind, Schedule, ShiftBlocks, SpanId, Stmt, StmtKind, WorldSet,
};
use crate::lin::LenVar;

/// At most this many world sizes in a verify set.
pub(crate) const MAX_WORLDS: usize = 1 << 16;

pub(crate) use crate::cexpr::{FIRST_SCALAR, RANK, WORLD};

/// Which buffer a region is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BufSlot {
    /// A parameter (index into `Schedule::buffers`).
    Param(u32),
    /// A scratch slot (the buffer created when its statement last ran).
    Scratch(u32),
}

/// A compiled region.
#[derive(Debug)]
pub(crate) struct CRegion<'s> {
    pub(crate) kind: CRKind<'s>,
    pub(crate) ir: &'s Region,
    pub(crate) buf: BufSlot,
    /// Index of this node among the program's region nodes (the unroller's
    /// memo tables are indexed by it), `< Prog::nregions`.
    pub(crate) id: u32,
}

/// [`CRegion`] shapes.
#[derive(Debug)]
pub(crate) enum CRKind<'s> {
    Whole,
    Slice {
        base: Box<CRegion<'s>>,
        start: CExpr,
        end: CExpr,
    },
    Chunk {
        base: Box<CRegion<'s>>,
        index: CExpr,
        parts: Option<CExpr>,
    },
    Part {
        base: Box<CRegion<'s>>,
        line: CLine,
        index: CExpr,
    },
}

/// A block: statements plus the request handles defined directly in it
/// (pending ones are unwaited when the block ends).
#[derive(Debug, Default)]
pub(crate) struct Block<'s> {
    pub(crate) stmts: Vec<CStmt<'s>>,
    pub(crate) handles: Vec<u32>,
    /// The body of a `batch` made of `send` and `recv` statements only (the
    /// unroller's straight path).
    pub(crate) flat: bool,
}

/// A compiled statement; `id` indexes [`Prog::stmts`].
#[derive(Debug)]
pub(crate) struct CStmt<'s> {
    pub(crate) id: u32,
    pub(crate) kind: CKind<'s>,
}

/// A point-to-point statement (`send`, `recv`, `isend`, `irecv`).
#[derive(Debug)]
pub(crate) struct P2pStmt<'s> {
    pub(crate) send: bool,
    pub(crate) region: CRegion<'s>,
    pub(crate) peer: CExpr,
    pub(crate) tag: Option<CExpr>,
    pub(crate) reduce: Option<OpExpr>,
    /// The handle slot of `isend`/`irecv`.
    pub(crate) handle: Option<u32>,
    /// Whether `peer` reads only `rank`, `world` and scalars (its value is
    /// the same all through one rank's unrolling).
    pub(crate) peer_fixed: bool,
}

/// The collectives, flattened.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum CollKind {
    AllReduce,
    AllGather,
    ReduceScatter,
    AllToAll,
    Broadcast,
    Reduce,
    AllGatherV,
    AllToAllV,
    Barrier,
}

impl CollKind {
    pub(crate) const fn name(self) -> &'static str {
        match self {
            CollKind::AllReduce => "all_reduce",
            CollKind::AllGather => "all_gather",
            CollKind::ReduceScatter => "reduce_scatter",
            CollKind::AllToAll => "all_to_all",
            CollKind::Broadcast => "broadcast",
            CollKind::Reduce => "reduce",
            CollKind::AllGatherV => "all_gatherv",
            CollKind::AllToAllV => "all_to_allv",
            CollKind::Barrier => "barrier",
        }
    }
}

/// A compiled collective. `src` is the input (for `broadcast`, the region;
/// for in-place `all_reduce`, the region), `dst` the output when distinct.
#[derive(Debug)]
pub(crate) struct CColl<'s> {
    pub(crate) kind: CollKind,
    pub(crate) op: Option<OpExpr>,
    pub(crate) src: Option<CRegion<'s>>,
    pub(crate) dst: Option<CRegion<'s>>,
    pub(crate) root: Option<CExpr>,
    pub(crate) over: Option<COver>,
    /// The count parameter of `all_gatherv` and `all_to_allv`.
    pub(crate) counts: Option<u32>,
}

/// A block-wise `shift(IN.chunk(G, KI) -> OUT.chunk(j, KO), from = F)`.
#[derive(Debug)]
pub(crate) struct CShiftBlocks {
    /// The slot of the block variable `j`.
    pub(crate) slot: u32,
    /// `KO` (`world` when not written).
    pub(crate) out_parts: CExpr,
    /// `KI` (`world` when not written).
    pub(crate) in_parts: CExpr,
    /// `G`, reading `j`.
    pub(crate) block: CExpr,
    /// `F`, reading `j`.
    pub(crate) from: CExpr,
}

/// `over EXPR` with the variable slots it reads (the cache key of its
/// groups).
#[derive(Debug)]
pub(crate) struct COver {
    pub(crate) expr: CExpr,
    pub(crate) key_slots: Vec<u32>,
}

/// Compiled statement kinds.
#[derive(Debug)]
// Statements are built once per compilation and walked by reference; the
// size of the largest variant costs nothing measurable.
#[allow(clippy::large_enum_variant)]
pub(crate) enum CKind<'s> {
    P2p(P2pStmt<'s>),
    Wait(Vec<(Option<u32>, &'s Ident)>),
    /// `wait all`.
    WaitAll,
    Batch(Block<'s>),
    Copy {
        src: CRegion<'s>,
        dst: CRegion<'s>,
        op: Option<OpExpr>,
    },
    Let {
        slot: u32,
        value: CExpr,
    },
    Scratch {
        slot: u32,
        len: CExpr,
        name: &'s Ident,
    },
    For {
        slot: u32,
        start: CExpr,
        end: CExpr,
        inclusive: bool,
        reverse: bool,
        body: Block<'s>,
    },
    If {
        branches: Vec<(CExpr, Block<'s>)>,
        else_body: Option<Block<'s>>,
    },
    Coll(CColl<'s>),
}

/// What messages need to know about a statement.
#[derive(Debug)]
pub(crate) struct StmtInfo<'s> {
    pub(crate) stmt: &'s Stmt,
    /// Enclosing loop variables, outermost first.
    pub(crate) loops: Vec<(&'s str, u32)>,
}

/// A compiled postcondition.
#[derive(Debug)]
pub(crate) struct CPost<'s> {
    pub(crate) kind: &'s PostKind,
    pub(crate) span: SpanId,
    pub(crate) input: u32,
    pub(crate) output: u32,
    pub(crate) op: Option<OpExpr>,
    pub(crate) root: Option<CExpr>,
    /// The count parameter of `all_gatherv` and `all_to_allv`.
    pub(crate) counts: Option<u32>,
    /// A block-wise `shift`.
    pub(crate) shift_blocks: Option<CShiftBlocks>,
}

/// The compiled schedule.
#[derive(Debug)]
pub(crate) struct Prog<'s> {
    pub(crate) s: &'s Schedule,
    pub(crate) nslots: usize,
    pub(crate) nhandles: usize,
    pub(crate) nscratch: usize,
    pub(crate) body: Block<'s>,
    pub(crate) stmts: Vec<StmtInfo<'s>>,
    pub(crate) buf_len: Vec<CExpr>,
    /// The length variables: names and ranges (the checker's variables are
    /// `n' = n - LO + 1`, see [`LenVar`]).
    pub(crate) len_names: Vec<LenVar>,
    /// Name of each request handle slot.
    pub(crate) handle_names: Vec<&'s str>,
    pub(crate) post: Option<CPost<'s>>,
    /// Number of region nodes ([`CRegion::id`]).
    pub(crate) nregions: usize,
    /// Whether some parameter's length reads `rank` (through a count).
    pub(crate) rank_lens: bool,
}

#[derive(Clone, Copy, Debug)]
enum EntryKind {
    Var(u32),
    /// A scratch slot.
    Scratch(u32),
    Handle(u32),
}

#[derive(Debug)]
struct Entry<'s> {
    name: &'s str,
    kind: EntryKind,
}

struct Compiler<'s> {
    s: &'s Schedule,
    sink: Sink,
    key: u64,
    nslots: u32,
    nhandles: u32,
    nscratch: u32,
    scope: Vec<Entry<'s>>,
    slot_dep: Vec<bool>,
    slot_names: Vec<&'s str>,
    stmts: Vec<StmtInfo<'s>>,
    loops: Vec<(&'s str, u32)>,
    handle_names: Vec<&'s str>,
    /// Region nodes numbered so far.
    nregions: u32,
}

/// Compiles `s`; the second value holds the step-0 diagnostics (the program
/// must not be unrolled when there are any).
pub(crate) fn compile(s: &Schedule) -> (Prog<'_>, Vec<Diagnostic>) {
    let nscalars = s.scalars.len() as u32;
    let mut slot_names = vec!["rank", "world"];
    slot_names.extend(s.scalars.iter().map(|x| x.name.as_str()));
    let mut c = Compiler {
        s,
        sink: Sink::default(),
        key: span_key(s.span),
        nslots: FIRST_SCALAR + nscalars,
        nhandles: 0,
        nscratch: 0,
        scope: Vec::new(),
        slot_dep: vec![false; (FIRST_SCALAR + nscalars) as usize],
        slot_names,
        stmts: Vec::new(),
        loops: Vec::new(),
        handle_names: Vec::new(),
        nregions: 0,
    };
    c.slot_dep[RANK as usize] = true;

    let buf_len: Vec<CExpr> = s.buffers.iter().map(|b| c.expr(&b.len)).collect();
    let rank_lens = buf_len.iter().any(CExpr::reads_rank);
    // attributes are evaluated on the IR (`verify.rs`) and resolved by
    // `resolve`; here the verify set is checked
    c.verify_set();
    let post = s.postcondition.as_ref().and_then(|p| c.post(p));
    let body = c.block(&s.body, false);

    let prog = Prog {
        s,
        nslots: c.nslots as usize,
        nhandles: c.nhandles as usize,
        nscratch: c.nscratch as usize,
        body,
        stmts: c.stmts,
        buf_len,
        len_names: s
            .len_vars
            .iter()
            .enumerate()
            .map(|(i, v)| LenVar::new(&v.name, s.verify.len_range(i)))
            .collect(),
        handle_names: c.handle_names,
        post,
        nregions: c.nregions as usize,
        rank_lens,
    };
    let names = crate::resolve::check(s);
    if names.is_empty() {
        (prog, c.sink.into_vec())
    } else {
        (prog, names)
    }
}

impl<'s> Compiler<'s> {
    fn error(&mut self, kind: DiagKind, span: SpanId, msg: impl Into<String>) {
        self.sink.push(self.key, Diagnostic::new(kind, span, msg));
    }

    fn push(&mut self, d: Diagnostic) {
        self.sink.push(self.key, d);
    }

    fn new_slot(&mut self, name: &'s str, dep: bool) -> u32 {
        let slot = self.nslots;
        self.nslots += 1;
        self.slot_dep.push(dep);
        self.slot_names.push(name);
        slot
    }

    fn lookup(&self, name: &str) -> Option<EntryKind> {
        self.scope.iter().rev().find(|e| e.name == name).map(|e| e.kind)
    }

    /// Compiles an expression (names resolved; see [`crate::resolve`]).
    fn expr(&mut self, e: &'s Expr) -> CExpr {
        let mut c = self.expr_node(e);
        c.attach_code();
        c
    }

    /// [`Self::expr`] without the evaluation code (generated once, at the
    /// root).
    fn expr_node(&mut self, e: &'s Expr) -> CExpr {
        let span = e.span;
        match &e.kind {
            ExprKind::Int(v) => CExpr::int(*v, span),
            ExprKind::Name(n) => self.name(n.kind, &n.text, span),
            ExprKind::Unary(op, x) => {
                let cx = self.expr_node(x);
                let has_len = cx.has_len;
                CExpr::new(CK::Unary(*op, Box::new(cx)), span, has_len)
            }
            ExprKind::Binary(op, a, b) => {
                let (ca, cb) = (self.expr_node(a), self.expr_node(b));
                let has_len = ca.has_len || cb.has_len;
                CExpr::new(CK::Binary(*op, Box::new(ca), Box::new(cb)), span, has_len)
            }
            ExprKind::Call(f, args) => {
                let cargs: Vec<CExpr> = args.iter().map(|a| self.expr_node(a)).collect();
                let has_len = cargs.iter().any(|a| a.has_len);
                CExpr::new(CK::Call(*f, cargs), span, has_len)
            }
            ExprKind::Count(c) => self.count(c, span),
        }
    }

    /// A count (resolved and admitted where it stands by
    /// [`crate::resolve`]).
    fn count(&mut self, c: &'s Count, span: SpanId) -> CExpr {
        let (line, which) = match c {
            Count::Entry(line, i) => (line, CWhich::Entry(Box::new(self.expr(i)))),
            Count::Sum(line, None) => (line, CWhich::Sum(None)),
            Count::Sum(line, Some((a, b))) => (line, CWhich::Sum(Some(Box::new((self.expr(a), self.expr(b)))))),
        };
        let line = self.line(line);
        CExpr::new(CK::Count(Box::new(CCount { line, which })), span, true)
    }

    fn line(&mut self, line: &'s CountLine) -> CLine {
        let kind = match &line.kind {
            LineKind::Vector => CLineKind::Vector,
            LineKind::Row(i) => CLineKind::Row(Box::new(self.expr(i))),
            LineKind::Col(j) => CLineKind::Col(Box::new(self.expr(j))),
        };
        CLine {
            param: line.count.param as u32,
            kind,
        }
    }

    /// A resolved name as a slot or length variable (a name resolution
    /// rejected becomes 0: such a program is never run).
    fn name(&mut self, kind: NameKind, text: &'s str, span: SpanId) -> CExpr {
        let slot = |s: u32| CExpr::new(CK::Slot(s), span, false);
        match kind {
            NameKind::World => slot(WORLD),
            NameKind::Rank => slot(RANK),
            NameKind::Scalar(i) if i < self.s.scalars.len() => slot(FIRST_SCALAR + i as u32),
            NameKind::LenVar(i) if i < self.s.len_vars.len() => {
                // `n = n' + LO - 1` with `n' >= 1` (reference, section 7,
                // "For every length"): the checker decides over `n'`
                let var = CExpr::new(CK::Len(i as u32), span, true);
                match self.s.verify.len_range(i).0 - 1 {
                    0 => var,
                    shift => CExpr::new(
                        CK::Binary(BinOp::Add, Box::new(var), Box::new(CExpr::int(shift, span))),
                        span,
                        true,
                    ),
                }
            }
            NameKind::Var => match self.lookup(text) {
                Some(EntryKind::Var(s)) => slot(s),
                _ => CExpr::int(0, span),
            },
            NameKind::Scalar(_) | NameKind::LenVar(_) => CExpr::int(0, span),
        }
    }

    fn next_region(&mut self) -> u32 {
        self.nregions += 1;
        self.nregions - 1
    }

    fn region(&mut self, r: &'s Region) -> CRegion<'s> {
        let (kind, buf) = match &r.kind {
            RegionKind::Whole(b) => (CRKind::Whole, self.buffer(b)),
            RegionKind::Slice { base, start, end } => {
                let base = self.region(base);
                let buf = base.buf;
                let kind = CRKind::Slice {
                    base: Box::new(base),
                    start: self.expr(start),
                    end: self.expr(end),
                };
                (kind, buf)
            }
            RegionKind::Chunk { base, index, parts } => {
                let base = self.region(base);
                let buf = base.buf;
                let kind = CRKind::Chunk {
                    base: Box::new(base),
                    index: self.expr(index),
                    parts: parts.as_ref().map(|p| self.expr(p)),
                };
                (kind, buf)
            }
            RegionKind::Part { base, line, index } => {
                let base = self.region(base);
                let buf = base.buf;
                let kind = CRKind::Part {
                    base: Box::new(base),
                    line: self.line(line),
                    index: self.expr(index),
                };
                (kind, buf)
            }
        };
        CRegion {
            kind,
            ir: r,
            buf,
            id: self.next_region(),
        }
    }

    fn buffer(&mut self, b: &'s BufRef) -> BufSlot {
        match b.kind {
            BufKind::Param(i) => BufSlot::Param(i as u32),
            BufKind::Scratch => match self.lookup(&b.name) {
                Some(EntryKind::Scratch(slot)) => BufSlot::Scratch(slot),
                _ => BufSlot::Param(0),
            },
        }
    }

    /// Reports a write to a read-only parameter.
    fn writes(&mut self, r: &CRegion<'s>, what: &str) {
        if let BufSlot::Param(i) = r.buf {
            let Some(b) = self.s.buffers.get(i as usize) else {
                return;
            };
            if !b.writable {
                self.push(
                    Diagnostic::new(
                        DiagKind::WriteToReadOnly,
                        r.ir.span,
                        format!("{what} writes `{}`, which is declared `&[T; {}]`", b.name, b.len),
                    )
                    .with_hint(format!("declare it as `{}: &mut [T; {}]`", b.name, b.len)),
                );
            }
        }
    }

    fn expr_dep(&self, e: &CExpr) -> bool {
        let mut slots = Vec::new();
        e.slots(&mut slots);
        slots.iter().any(|&s| self.slot_dep[s as usize])
    }

    fn block(&mut self, stmts: &'s [Stmt], in_batch: bool) -> Block<'s> {
        let mark = self.scope.len();
        let mut block = Block::default();
        for st in stmts {
            if let Some(cs) = self.stmt(st, in_batch, &mut block.handles) {
                block.stmts.push(cs);
            }
        }
        self.scope.truncate(mark);
        block
    }

    fn stmt(&mut self, st: &'s Stmt, in_batch: bool, handles: &mut Vec<u32>) -> Option<CStmt<'s>> {
        let id = self.stmts.len() as u32;
        self.stmts.push(StmtInfo {
            stmt: st,
            loops: self.loops.clone(),
        });
        self.key = stmt_key(id);
        if in_batch
            && !matches!(
                st.kind,
                StmtKind::Send { .. }
                    | StmtKind::Recv { .. }
                    | StmtKind::Let { .. }
                    | StmtKind::For { .. }
                    | StmtKind::If { .. }
            )
        {
            self.push(
                Diagnostic::new(
                    DiagKind::SyntaxError,
                    st.span,
                    format!("`{}` is not allowed inside `batch`", stmt_keyword(&st.kind)),
                )
                .with_hint("a `batch` holds `send` and `recv` steps, and `let`, `for` and `if` around them"),
            );
            return None;
        }
        let kind = match &st.kind {
            StmtKind::Send { region, peer, tag } => CKind::P2p(self.p2p(true, region, peer, tag.as_ref(), None, None)),
            StmtKind::Recv {
                region,
                peer,
                tag,
                reduce,
            } => {
                let reduce = reduce.clone();
                let p = self.p2p(false, region, peer, tag.as_ref(), reduce, None);
                self.writes(&p.region, "`recv`");
                CKind::P2p(p)
            }
            StmtKind::Isend {
                handle,
                region,
                peer,
                tag,
            } => {
                let p = self.p2p(true, region, peer, tag.as_ref(), None, Some(handle));
                if let Some(h) = p.handle {
                    handles.push(h);
                }
                CKind::P2p(p)
            }
            StmtKind::Irecv {
                handle,
                region,
                peer,
                tag,
                reduce,
            } => {
                let reduce = reduce.clone();
                let p = self.p2p(false, region, peer, tag.as_ref(), reduce, Some(handle));
                self.writes(&p.region, "`irecv`");
                if let Some(h) = p.handle {
                    handles.push(h);
                }
                CKind::P2p(p)
            }
            StmtKind::Wait { handles: hs } => CKind::Wait(
                hs.iter()
                    .map(|h| match self.lookup(&h.name) {
                        Some(EntryKind::Handle(slot)) => (Some(slot), h),
                        _ => (None, h),
                    })
                    .collect(),
            ),
            StmtKind::WaitAll => CKind::WaitAll,
            StmtKind::Batch { body } => {
                let mut b = self.block(body, true);
                b.flat = b
                    .stmts
                    .iter()
                    .all(|s| matches!(&s.kind, CKind::P2p(p) if p.handle.is_none()));
                CKind::Batch(b)
            }
            StmtKind::Copy { src, dst } => {
                let src = self.region(src);
                let dst = self.region(dst);
                self.writes(&dst, "`copy`");
                CKind::Copy { src, dst, op: None }
            }
            StmtKind::Accumulate { src, dst, op } => {
                let src = self.region(src);
                let dst = self.region(dst);
                self.writes(&dst, "`accumulate`");
                CKind::Copy {
                    src,
                    dst,
                    op: Some(op.clone()),
                }
            }
            StmtKind::Let { name, value } => {
                let v = self.expr(value);
                let dep = self.expr_dep(&v);
                let slot = self.new_slot(&name.name, dep);
                self.scope.push(Entry {
                    name: &name.name,
                    kind: EntryKind::Var(slot),
                });
                CKind::Let { slot, value: v }
            }
            StmtKind::Scratch { name, len } => {
                let l = self.expr(len);
                let slot = self.nscratch;
                self.nscratch += 1;
                self.scope.push(Entry {
                    name: &name.name,
                    kind: EntryKind::Scratch(slot),
                });
                CKind::Scratch { slot, len: l, name }
            }
            StmtKind::For {
                var,
                start,
                end,
                inclusive,
                reverse,
                body,
            } => {
                let s = self.expr(start);
                let e = self.expr(end);
                let dep = self.expr_dep(&s) || self.expr_dep(&e);
                let slot = self.new_slot(&var.name, dep);
                let mark = self.scope.len();
                self.scope.push(Entry {
                    name: &var.name,
                    kind: EntryKind::Var(slot),
                });
                self.loops.push((&var.name, slot));
                let body = self.block(body, in_batch);
                self.loops.pop();
                self.scope.truncate(mark);
                CKind::For {
                    slot,
                    start: s,
                    end: e,
                    inclusive: *inclusive,
                    reverse: *reverse,
                    body,
                }
            }
            StmtKind::If { branches, else_body } => {
                let mut cb = Vec::with_capacity(branches.len());
                for (cond, body) in branches {
                    self.key = stmt_key(id);
                    let c = self.expr(cond);
                    cb.push((c, self.block(body, in_batch)));
                }
                let else_body = else_body.as_ref().map(|b| self.block(b, in_batch));
                CKind::If {
                    branches: cb,
                    else_body,
                }
            }
            StmtKind::Collective { kind, over } => CKind::Coll(self.collective(kind, over.as_ref())),
        };
        Some(CStmt { id, kind })
    }

    fn p2p(
        &mut self,
        send: bool,
        region: &'s Region,
        peer: &'s Expr,
        tag: Option<&'s Expr>,
        reduce: Option<OpExpr>,
        handle: Option<&'s Ident>,
    ) -> P2pStmt<'s> {
        let region = self.region(region);
        let peer = self.expr(peer);
        let tag = tag.map(|t| self.expr(t));
        let handle = handle.map(|h| {
            let slot = self.nhandles;
            self.nhandles += 1;
            self.handle_names.push(&h.name);
            self.scope.push(Entry {
                name: &h.name,
                kind: EntryKind::Handle(slot),
            });
            slot
        });
        let mut slots = Vec::new();
        peer.slots(&mut slots);
        let first_var = FIRST_SCALAR + self.s.scalars.len() as u32;
        let peer_fixed = !peer.has_len && slots.iter().all(|&s| s < first_var);
        P2pStmt {
            send,
            region,
            peer,
            tag,
            reduce,
            handle,
            peer_fixed,
        }
    }

    fn collective(&mut self, kind: &'s Collective, over: Option<&'s Expr>) -> CColl<'s> {
        let mut c = CColl {
            kind: CollKind::Barrier,
            op: None,
            src: None,
            dst: None,
            root: None,
            over: None,
            counts: None,
        };
        match kind {
            Collective::AllReduce { src, dst, op } => {
                c.kind = CollKind::AllReduce;
                c.op = Some(op.clone());
                let s = self.region(src);
                match dst {
                    Some(d) => {
                        let d = self.region(d);
                        self.writes(&d, "`all_reduce`");
                        c.dst = Some(d);
                    }
                    None => self.writes(&s, "`all_reduce`"),
                }
                c.src = Some(s);
            }
            Collective::AllGather { src, dst }
            | Collective::AllToAll { src, dst }
            | Collective::ReduceScatter { src, dst, .. }
            | Collective::Reduce { src, dst, .. } => {
                c.kind = match kind {
                    Collective::AllGather { .. } => CollKind::AllGather,
                    Collective::AllToAll { .. } => CollKind::AllToAll,
                    Collective::ReduceScatter { .. } => CollKind::ReduceScatter,
                    _ => CollKind::Reduce,
                };
                if let Collective::ReduceScatter { op, .. } | Collective::Reduce { op, .. } = kind {
                    c.op = Some(op.clone());
                }
                if let Collective::Reduce { root, .. } = kind {
                    c.root = Some(self.expr(root));
                }
                c.src = Some(self.region(src));
                let d = self.region(dst);
                self.writes(&d, &format!("`{}`", kind.name()));
                c.dst = Some(d);
            }
            Collective::Broadcast { region, root } => {
                c.kind = CollKind::Broadcast;
                c.root = Some(self.expr(root));
                let r = self.region(region);
                self.writes(&r, "`broadcast`");
                c.src = Some(r);
            }
            Collective::AllGatherV { src, dst, counts }
            | Collective::AllToAllV {
                src,
                dst,
                sizes: counts,
            } => {
                let matrix = matches!(kind, Collective::AllToAllV { .. });
                c.kind = if matrix {
                    CollKind::AllToAllV
                } else {
                    CollKind::AllGatherV
                };
                c.counts = Some(counts.param as u32);
                c.src = Some(self.region(src));
                let d = self.region(dst);
                self.writes(&d, &format!("`{}`", kind.name()));
                c.dst = Some(d);
                if let Some(o) = over {
                    self.error(
                        DiagKind::SyntaxError,
                        o.span,
                        format!("`{}` runs over the whole communicator", kind.name()),
                    );
                }
            }
            Collective::Barrier => {}
        }
        if let Some(o) = over {
            let e = self.expr(o);
            let mut slots = Vec::new();
            e.slots(&mut slots);
            if let Some(&bad) = slots.iter().find(|&&s| s != RANK && self.slot_dep[s as usize]) {
                let name = self.slot_names[bad as usize];
                self.push(
                    Diagnostic::new(
                        DiagKind::RankDependentGroup,
                        o.span,
                        format!("`over {o}` uses `{name}`, whose value depends on `rank`"),
                    )
                    .with_hint("an `over` expression may use `rank` itself, but not values computed from it"),
                );
            }
            let key_slots = slots
                .into_iter()
                .filter(|&s| s >= FIRST_SCALAR + self.s.scalars.len() as u32)
                .collect();
            c.over = Some(COver { expr: e, key_slots });
        }
        c
    }

    fn verify_set(&mut self) {
        let v = &self.s.verify;
        if let WorldSet::Range { lo, hi, inclusive } = &v.world {
            let size = i128::from(*hi) - i128::from(*lo) + i128::from(*inclusive);
            if size > MAX_WORLDS as i128 {
                self.key = span_key(v.span);
                self.error(
                    DiagKind::EvaluationError,
                    v.span,
                    format!("`#[verify]` holds {size} world sizes; at most {MAX_WORLDS} can be checked"),
                );
            }
        }
        if let WorldSet::Range { lo, hi, inclusive } = &v.world {
            let empty = if *inclusive { lo > hi } else { lo >= hi };
            if empty {
                let dots = if *inclusive { "..=" } else { ".." };
                self.key = span_key(v.span);
                self.error(
                    DiagKind::EmptyVerifySet,
                    v.span,
                    format!("`world in {lo}{dots}{hi}` holds no world size, so nothing would be checked"),
                );
            }
        }
        let bad = match &v.world {
            WorldSet::Range { lo, hi, inclusive } => {
                let nonempty = if *inclusive { lo <= hi } else { lo < hi };
                (nonempty && *lo < 1).then_some(*lo)
            }
            WorldSet::List(l) => l.iter().copied().find(|&w| w < 1),
        };
        if let Some(w) = bad {
            self.key = span_key(v.span);
            self.error(
                DiagKind::EvaluationError,
                v.span,
                format!("`#[verify]` includes world = {w}, but a communicator has at least 1 rank"),
            );
        }
    }

    fn post(&mut self, p: &'s crate::ir::Postcondition) -> Option<CPost<'s>> {
        self.key = span_key(p.span);
        // resolution reports a postcondition buffer that is not a parameter
        let param = |_: &mut Self, b: &BufRef| match b.kind {
            BufKind::Param(i) if i < self.s.buffers.len() => Some(i as u32),
            _ => None,
        };
        let mut counts = None;
        let mut shift_blocks = None;
        let (input, output, op, root) = match &p.kind {
            PostKind::AllGather { input, output } | PostKind::AllToAll { input, output } => {
                (param(self, input), param(self, output), None, None)
            }
            PostKind::AllGatherV {
                input,
                output,
                counts: c,
            }
            | PostKind::AllToAllV {
                input,
                output,
                sizes: c,
            } => {
                counts = Some(c.param as u32);
                (param(self, input), param(self, output), None, None)
            }
            PostKind::AllReduce { input, output, op } | PostKind::ReduceScatter { input, output, op } => {
                (param(self, input), param(self, output), Some(op.clone()), None)
            }
            PostKind::Broadcast { buf, root } => {
                let b = param(self, buf);
                (b, b, None, Some(root))
            }
            PostKind::Shift {
                input,
                output,
                from,
                blocks,
            } => {
                // the block-wise form's `from` reads the block variable
                let root = match blocks {
                    Some(b) => {
                        shift_blocks = Some(self.shift_blocks(b, from));
                        None
                    }
                    None => Some(from),
                };
                (param(self, input), param(self, output), None, root)
            }
            PostKind::Reduce {
                input,
                output,
                op,
                root,
            } => (param(self, input), param(self, output), Some(op.clone()), Some(root)),
        };
        let root = root.map(|r| self.expr(r));
        Some(CPost {
            kind: &p.kind,
            span: p.span,
            input: input?,
            output: output?,
            op,
            root,
            counts,
            shift_blocks,
        })
    }

    /// The block variable's slot and the expressions of a block-wise
    /// `shift` (`from` and the input block read the variable).
    fn shift_blocks(&mut self, b: &'s ShiftBlocks, from: &'s Expr) -> CShiftBlocks {
        let world = || CExpr::new(CK::Slot(WORLD), b.var.span, false);
        let out_parts = b.out_parts.as_ref().map_or_else(world, |e| self.expr(e));
        let in_parts = b.in_parts.as_ref().map_or_else(world, |e| self.expr(e));
        let slot = self.new_slot(&b.var.name, true);
        let mark = self.scope.len();
        self.scope.push(Entry {
            name: &b.var.name,
            kind: EntryKind::Var(slot),
        });
        let block = self.expr(&b.block);
        let from = self.expr(from);
        self.scope.truncate(mark);
        CShiftBlocks {
            slot,
            out_parts,
            in_parts,
            block,
            from,
        }
    }
}

/// The DSL keyword of a statement, for messages.
pub(crate) fn stmt_keyword(k: &StmtKind) -> &'static str {
    match k {
        StmtKind::Send { .. } => "send",
        StmtKind::Recv { .. } => "recv",
        StmtKind::Isend { .. } => "isend",
        StmtKind::Irecv { .. } => "irecv",
        StmtKind::Wait { .. } => "wait",
        StmtKind::WaitAll => "wait all",
        StmtKind::Batch { .. } => "batch",
        StmtKind::Copy { .. } => "copy",
        StmtKind::Accumulate { .. } => "accumulate",
        StmtKind::Let { .. } => "let",
        StmtKind::Scratch { .. } => "scratch",
        StmtKind::For { .. } => "for",
        StmtKind::If { .. } => "if",
        StmtKind::Collective { kind, .. } => kind.name(),
    }
}
