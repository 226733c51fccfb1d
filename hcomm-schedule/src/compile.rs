//! Lowers the IR into the checker's program (names resolved to slots, the
//! shape every later pass walks) and runs the world-independent checks of
//! step 0: names, linearity, read-only writes, rank-dependent groups, what
//! may stand inside `batch`, scalar ranges and the verify set.

use crate::diag::{span_key, stmt_key, DiagKind, Diagnostic, Sink};
use crate::ir::{
    BinOp, BufKind, BufRef, Collective, Expr, ExprKind, Func, Ident, NameKind, OpExpr, PostKind, Region, RegionKind,
    Schedule, SpanId, Stmt, StmtKind, UnOp, WorldSet,
};

/// At most this many world sizes in a verify set.
pub(crate) const MAX_WORLDS: usize = 1 << 16;

/// Slot of `rank`.
pub(crate) const RANK: u32 = 0;
/// Slot of `world`.
pub(crate) const WORLD: u32 = 1;
/// Slot of the first scalar parameter.
pub(crate) const FIRST_SCALAR: u32 = 2;

/// A compiled expression.
#[derive(Debug)]
pub(crate) struct CExpr {
    pub(crate) kind: CK,
    pub(crate) span: SpanId,
    /// Whether a length variable occurs in it.
    pub(crate) has_len: bool,
    /// Register code (see [`crate::eval::codegen`]) for the roots of
    /// expressions and their largest subtrees without length variables;
    /// `None`: walk the tree.
    pub(crate) code: Option<crate::eval::Code>,
    /// How [`crate::eval::eval_fast`] evaluates it (kept in step with `kind`
    /// and `code`).
    pub(crate) fast: crate::eval::Fast,
}

/// [`CExpr`] shapes.
#[derive(Debug)]
pub(crate) enum CK {
    Int(i64),
    Slot(u32),
    Len(u32),
    Unary(UnOp, Box<CExpr>),
    Binary(BinOp, Box<CExpr>, Box<CExpr>),
    Call(Func, Vec<CExpr>),
}

impl CExpr {
    fn int(v: i64, span: SpanId) -> Self {
        Self {
            kind: CK::Int(v),
            span,
            has_len: false,
            code: None,
            fast: crate::eval::Fast::Int(v),
        }
    }

    pub(crate) fn new(kind: CK, span: SpanId, has_len: bool) -> Self {
        let mut e = Self {
            kind,
            span,
            has_len,
            code: None,
            fast: crate::eval::Fast::None,
        };
        e.fast = crate::eval::Fast::of(&e);
        e
    }

    /// Generates the evaluation code of this root: for the whole expression,
    /// or, when it has a length variable (evaluated as a linear form), for
    /// each largest subtree without one.
    pub(crate) fn attach_code(&mut self) {
        if !self.has_len {
            self.code = crate::eval::codegen(self);
            self.fast = crate::eval::Fast::of(self);
            return;
        }
        match &mut self.kind {
            CK::Int(_) | CK::Slot(_) | CK::Len(_) => {}
            CK::Unary(_, x) => x.attach_code(),
            CK::Binary(_, a, b) => {
                a.attach_code();
                b.attach_code();
            }
            CK::Call(_, args) => args.iter_mut().for_each(CExpr::attach_code),
        }
    }

    /// Every slot it reads, in order of appearance.
    fn slots(&self, out: &mut Vec<u32>) {
        match &self.kind {
            CK::Int(_) | CK::Len(_) => {}
            CK::Slot(s) => {
                if !out.contains(s) {
                    out.push(*s);
                }
            }
            CK::Unary(_, x) => x.slots(out),
            CK::Binary(_, a, b) => {
                a.slots(out);
                b.slots(out);
            }
            CK::Call(_, args) => args.iter().for_each(|a| a.slots(out)),
        }
    }
}

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
    pub(crate) len_names: Vec<String>,
    /// Name of each request handle slot.
    pub(crate) handle_names: Vec<&'s str>,
    pub(crate) post: Option<CPost<'s>>,
    /// Number of region nodes ([`CRegion::id`]).
    pub(crate) nregions: usize,
}

/// Where an expression stands, which decides the names it may use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ctx {
    /// Statements: no length variables.
    Body,
    /// Region bounds and scratch lengths: everything, linearly.
    Bounds,
    /// A buffer parameter's length: `world`, scalars, length variables.
    ParamLen,
    /// `#[requires]` and postcondition roots: `world` and scalars.
    Attr,
    /// Scalar ranges: `world` only.
    Range,
}

impl Ctx {
    fn describe(self) -> &'static str {
        match self {
            Ctx::Body | Ctx::Bounds => "the body",
            Ctx::ParamLen => "a buffer length",
            Ctx::Attr => "an attribute",
            Ctx::Range => "a scalar range",
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum EntryKind {
    Var(u32),
    /// A scratch slot and the degree of its length in the length variables.
    Scratch(u32, u8),
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
    /// Degree (0 or 1) of each parameter's length.
    param_deg: Vec<u8>,
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
        param_deg: Vec::new(),
        nregions: 0,
    };
    c.slot_dep[RANK as usize] = true;

    if let Some(extra) = s.len_vars.get(crate::lin::MAX_LEN_VARS) {
        c.key = span_key(extra.span);
        c.error(
            DiagKind::SyntaxError,
            extra.span,
            format!(
                "`{}` is a length variable beyond the {} a schedule may use",
                extra.name,
                crate::lin::MAX_LEN_VARS
            ),
        );
    }
    let mut buf_len = Vec::with_capacity(s.buffers.len());
    for b in &s.buffers {
        c.key = span_key(b.span);
        let (e, d) = c.expr(&b.len, Ctx::ParamLen);
        c.param_deg.push(d);
        buf_len.push(e);
    }
    // attributes are evaluated on the IR (`verify.rs`); here their names
    // and shapes are checked
    c.ranges();
    c.verify_set();
    for r in &s.requires {
        c.key = span_key(r.span);
        c.expr(r, Ctx::Attr);
    }
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
        len_names: s.len_vars.iter().map(|v| v.name.clone()).collect(),
        handle_names: c.handle_names,
        post,
        nregions: c.nregions as usize,
    };
    (prog, c.sink.into_vec())
}

/// Edit distance with adjacent transpositions (optimal string alignment),
/// for "did you mean" suggestions: `rnak` is one edit from `rank`.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let w = b.len() + 1;
    let mut d = vec![0_usize; (a.len() + 1) * w];
    for i in 0..=a.len() {
        d[i * w] = i;
    }
    for (j, cell) in d.iter_mut().enumerate().take(w) {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[(i - 1) * w + j] + 1)
                .min(d[i * w + j - 1] + 1)
                .min(d[(i - 1) * w + j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[(i - 2) * w + j - 2] + 1);
            }
            d[i * w + j] = v;
        }
    }
    d[a.len() * w + b.len()]
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

    fn suggestion(&self, name: &str, ctx: Ctx) -> Option<String> {
        let mut candidates: Vec<&str> = vec!["world"];
        if matches!(ctx, Ctx::Body | Ctx::Bounds) {
            candidates.push("rank");
            candidates.extend(
                self.scope
                    .iter()
                    .filter(|e| matches!(e.kind, EntryKind::Var(_)))
                    .map(|e| e.name),
            );
        }
        if ctx != Ctx::Range {
            candidates.extend(self.s.scalars.iter().map(|x| x.name.as_str()));
        }
        let limit = (name.chars().count() / 3).max(1);
        candidates
            .into_iter()
            .filter(|c| *c != name)
            .map(|c| (distance(name, c), c))
            .filter(|(d, _)| *d <= limit)
            .min_by_key(|(d, _)| *d)
            .map(|(_, c)| format!("did you mean `{c}`?"))
    }

    /// Compiles an expression; the second value is its degree in the length
    /// variables (0 or 1; non-linear uses are reported here).
    fn expr(&mut self, e: &'s Expr, ctx: Ctx) -> (CExpr, u8) {
        let (mut c, d) = self.expr_node(e, ctx);
        c.attach_code();
        (c, d)
    }

    /// [`Self::expr`] without the evaluation code (generated once, at the
    /// root).
    fn expr_node(&mut self, e: &'s Expr, ctx: Ctx) -> (CExpr, u8) {
        let span = e.span;
        match &e.kind {
            ExprKind::Int(v) => (CExpr::int(*v, span), 0),
            ExprKind::Name(n) => self.name(n.kind, &n.text, span, ctx),
            ExprKind::Unary(op, x) => {
                let (cx, d) = self.expr_node(x, ctx);
                if d > 0 && *op == UnOp::Not {
                    self.nonlinear(span, "`!` of a length");
                }
                let has_len = cx.has_len;
                let k = CK::Unary(*op, Box::new(cx));
                (CExpr::new(k, span, has_len), d)
            }
            ExprKind::Binary(op, a, b) => {
                let (ca, da) = self.expr_node(a, ctx);
                let (cb, db) = self.expr_node(b, ctx);
                let d = match op {
                    BinOp::Add | BinOp::Sub => da.max(db),
                    BinOp::Mul => {
                        if da > 0 && db > 0 {
                            self.nonlinear(span, "a product of two length variables");
                        }
                        (da + db).min(1)
                    }
                    _ => {
                        if da > 0 || db > 0 {
                            let what = if matches!(op, BinOp::Div | BinOp::Rem) {
                                format!("`{}` involving a length variable", op.as_str())
                            } else {
                                format!("`{}` applied to a length variable", op.as_str())
                            };
                            self.nonlinear(span, &what);
                        }
                        0
                    }
                };
                let has_len = ca.has_len || cb.has_len;
                (
                    CExpr::new(CK::Binary(*op, Box::new(ca), Box::new(cb)), span, has_len),
                    d,
                )
            }
            ExprKind::Call(f, args) => {
                if args.len() != f.arity() {
                    let plural = if f.arity() == 1 { "" } else { "s" };
                    self.error(
                        DiagKind::SyntaxError,
                        span,
                        format!(
                            "`{}` takes {} argument{plural}, not {}",
                            f.as_str(),
                            f.arity(),
                            args.len()
                        ),
                    );
                }
                let mut cargs = Vec::with_capacity(args.len());
                let mut deg = 0;
                for a in args {
                    let (ca, d) = self.expr_node(a, ctx);
                    deg = deg.max(d);
                    cargs.push(ca);
                }
                if deg > 0 {
                    self.nonlinear(span, &format!("`{}` of a length variable", f.as_str()));
                }
                let has_len = cargs.iter().any(|a| a.has_len);
                (CExpr::new(CK::Call(*f, cargs), span, has_len), 0)
            }
        }
    }

    fn nonlinear(&mut self, span: SpanId, what: &str) {
        self.push(
            Diagnostic::new(
                DiagKind::NonLinearLength,
                span,
                format!("lengths and region bounds must be linear in the length variables, but this is {what}"),
            )
            .with_hint(
                "multiply length variables only by values that do not involve length variables, and do not divide them",
            ),
        );
    }

    /// Checks that an operator parameter names one.
    fn op(&mut self, op: OpExpr, span: SpanId) -> OpExpr {
        if let OpExpr::Param(i) = op {
            if !self.s.scalars.get(i).is_some_and(|x| x.op) {
                let name = self.s.scalars.get(i).map_or("?", |x| x.name.as_str());
                self.unknown(
                    span,
                    format!("`{name}` is not an operator parameter"),
                    Some("an operator is `sum`, `prod`, `max`, `min` or a parameter `NAME: ReduceOp`".to_owned()),
                );
            }
        }
        op
    }

    fn unknown(&mut self, span: SpanId, msg: String, hint: Option<String>) {
        let mut d = Diagnostic::new(DiagKind::UnknownName, span, msg);
        d.hint = hint;
        self.push(d);
    }

    fn name(&mut self, kind: NameKind, text: &'s str, span: SpanId, ctx: Ctx) -> (CExpr, u8) {
        let slot = |s: u32| (CExpr::new(CK::Slot(s), span, false), 0);
        let zero = (CExpr::int(0, span), 0);
        match kind {
            NameKind::World => slot(WORLD),
            NameKind::Rank => {
                if matches!(ctx, Ctx::Body | Ctx::Bounds) {
                    slot(RANK)
                } else {
                    self.unknown(
                        span,
                        format!("`rank` cannot be used in {}", ctx.describe()),
                        Some("only `world` and scalar parameters are known here".to_owned()),
                    );
                    zero
                }
            }
            NameKind::Scalar(i) => {
                if i >= self.s.scalars.len() {
                    self.unknown(span, format!("`{text}` is not a scalar parameter"), None);
                    zero
                } else if self.s.scalars[i].op {
                    self.unknown(
                        span,
                        format!("`{text}` is an operator parameter; it cannot be used in an expression"),
                        Some("an operator parameter may only be written where an operator is (`reduce OP`, `accumulate .., OP`, a collective's or postcondition's `OP`)".to_owned()),
                    );
                    zero
                } else if ctx == Ctx::Range {
                    self.unknown(
                        span,
                        format!("`{text}` cannot be used in a scalar range"),
                        Some("scalar ranges may only use `world`".to_owned()),
                    );
                    zero
                } else {
                    slot(FIRST_SCALAR + i as u32)
                }
            }
            NameKind::LenVar(i) => {
                if i >= self.s.len_vars.len() {
                    self.unknown(span, format!("`{text}` is not a length variable"), None);
                    zero
                } else if matches!(ctx, Ctx::Bounds | Ctx::ParamLen) {
                    (CExpr::new(CK::Len(i as u32), span, true), 1)
                } else {
                    let decl = self.s.len_vars[i].span;
                    self.push(
                        Diagnostic::new(
                            DiagKind::UnknownName,
                            span,
                            format!("`{text}` is a length variable, which may only appear in buffer lengths and region bounds"),
                        )
                        .with_note(decl, format!("`{text}` is a length variable bound from the buffer lengths here")),
                    );
                    zero
                }
            }
            NameKind::Var => {
                if matches!(ctx, Ctx::Body | Ctx::Bounds) {
                    if let Some(EntryKind::Var(s)) = self.lookup(text) {
                        return slot(s);
                    }
                }
                let hint = self.suggestion(text, ctx);
                self.unknown(span, format!("`{text}` is not defined here"), hint);
                zero
            }
        }
    }

    fn next_region(&mut self) -> u32 {
        self.nregions += 1;
        self.nregions - 1
    }

    fn region(&mut self, r: &'s Region) -> (CRegion<'s>, u8) {
        match &r.kind {
            RegionKind::Whole(b) => {
                let (buf, deg) = self.buffer(b);
                (
                    CRegion {
                        kind: CRKind::Whole,
                        ir: r,
                        buf,
                        id: self.next_region(),
                    },
                    deg,
                )
            }
            RegionKind::Slice { base, start, end } => {
                let (cb, _) = self.region(base);
                let (s, ds) = self.expr(start, Ctx::Bounds);
                let (e, de) = self.expr(end, Ctx::Bounds);
                let buf = cb.buf;
                (
                    CRegion {
                        kind: CRKind::Slice {
                            base: Box::new(cb),
                            start: s,
                            end: e,
                        },
                        ir: r,
                        buf,
                        id: self.next_region(),
                    },
                    ds.max(de),
                )
            }
            RegionKind::Chunk { base, index, parts } => {
                let (cb, dbase) = self.region(base);
                let (ci, di) = self.expr(index, Ctx::Bounds);
                let cp = parts.as_ref().map(|p| {
                    let (cp, dp) = self.expr(p, Ctx::Bounds);
                    if dp > 0 {
                        self.nonlinear(p.span, "a chunk count involving a length variable");
                    }
                    cp
                });
                if di > 0 && dbase > 0 {
                    self.nonlinear(
                        index.span,
                        "a chunk index involving a length variable, multiplied by a chunk length that involves one",
                    );
                }
                let buf = cb.buf;
                (
                    CRegion {
                        kind: CRKind::Chunk {
                            base: Box::new(cb),
                            index: ci,
                            parts: cp,
                        },
                        ir: r,
                        buf,
                        id: self.next_region(),
                    },
                    dbase.max(di),
                )
            }
        }
    }

    fn buffer(&mut self, b: &'s BufRef) -> (BufSlot, u8) {
        match b.kind {
            BufKind::Param(i) if i < self.s.buffers.len() => (BufSlot::Param(i as u32), self.param_deg[i]),
            BufKind::Param(_) => {
                self.unknown(b.span, format!("`{}` is not a buffer parameter", b.name), None);
                (BufSlot::Param(0), 0)
            }
            BufKind::Scratch => {
                if let Some(EntryKind::Scratch(slot, deg)) = self.lookup(&b.name) {
                    return (BufSlot::Scratch(slot), deg);
                }
                let mut hint = None;
                if let Some(p) = self.s.buffers.iter().find(|p| distance(&p.name, &b.name) <= 2) {
                    hint = Some(format!("did you mean `{}`?", p.name));
                }
                self.unknown(b.span, format!("no buffer `{}` is defined here", b.name), hint);
                (BufSlot::Param(0), 0)
            }
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
                let reduce = reduce.map(|op| self.op(op, st.span));
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
                let reduce = reduce.map(|op| self.op(op, st.span));
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
            StmtKind::Batch { body } => {
                let mut b = self.block(body, true);
                b.flat = b
                    .stmts
                    .iter()
                    .all(|s| matches!(&s.kind, CKind::P2p(p) if p.handle.is_none()));
                CKind::Batch(b)
            }
            StmtKind::Copy { src, dst } => {
                let (src, _) = self.region(src);
                let (dst, _) = self.region(dst);
                self.writes(&dst, "`copy`");
                CKind::Copy { src, dst, op: None }
            }
            StmtKind::Accumulate { src, dst, op } => {
                let (src, _) = self.region(src);
                let (dst, _) = self.region(dst);
                self.writes(&dst, "`accumulate`");
                CKind::Copy {
                    src,
                    dst,
                    op: Some(self.op(*op, st.span)),
                }
            }
            StmtKind::Let { name, value } => {
                let (v, _) = self.expr(value, Ctx::Body);
                let dep = self.expr_dep(&v);
                let slot = self.new_slot(&name.name, dep);
                self.scope.push(Entry {
                    name: &name.name,
                    kind: EntryKind::Var(slot),
                });
                CKind::Let { slot, value: v }
            }
            StmtKind::Scratch { name, len } => {
                let (l, d) = self.expr(len, Ctx::Bounds);
                let slot = self.nscratch;
                self.nscratch += 1;
                self.scope.push(Entry {
                    name: &name.name,
                    kind: EntryKind::Scratch(slot, d),
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
                let (s, _) = self.expr(start, Ctx::Body);
                let (e, _) = self.expr(end, Ctx::Body);
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
                    let (c, _) = self.expr(cond, Ctx::Body);
                    cb.push((c, self.block(body, in_batch)));
                }
                let else_body = else_body.as_ref().map(|b| self.block(b, in_batch));
                CKind::If {
                    branches: cb,
                    else_body,
                }
            }
            StmtKind::Collective { kind, over } => CKind::Coll(self.collective(kind, over.as_ref(), st.span)),
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
        let (region, _) = self.region(region);
        let (peer, _) = self.expr(peer, Ctx::Body);
        let tag = tag.map(|t| self.expr(t, Ctx::Body).0);
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

    fn collective(&mut self, kind: &'s Collective, over: Option<&'s Expr>, span: SpanId) -> CColl<'s> {
        let mut c = CColl {
            kind: CollKind::Barrier,
            op: None,
            src: None,
            dst: None,
            root: None,
            over: None,
        };
        match kind {
            Collective::AllReduce { src, dst, op } => {
                c.kind = CollKind::AllReduce;
                c.op = Some(self.op(*op, span));
                let s = self.region(src).0;
                match dst {
                    Some(d) => {
                        let d = self.region(d).0;
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
                    c.op = Some(self.op(*op, span));
                }
                if let Collective::Reduce { root, .. } = kind {
                    c.root = Some(self.expr(root, Ctx::Body).0);
                }
                c.src = Some(self.region(src).0);
                let d = self.region(dst).0;
                self.writes(&d, &format!("`{}`", kind.name()));
                c.dst = Some(d);
            }
            Collective::Broadcast { region, root } => {
                c.kind = CollKind::Broadcast;
                c.root = Some(self.expr(root, Ctx::Body).0);
                let r = self.region(region).0;
                self.writes(&r, "`broadcast`");
                c.src = Some(r);
            }
            Collective::Barrier => {}
        }
        if let Some(o) = over {
            let (e, _) = self.expr(o, Ctx::Body);
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

    fn ranges(&mut self) {
        let s = self.s;
        let mut out: Vec<bool> = vec![false; s.scalars.len()];
        for r in &s.verify.scalars {
            self.key = span_key(r.span);
            if r.scalar >= s.scalars.len() {
                self.unknown(
                    r.name.span,
                    format!("`{}` is not a scalar parameter", r.name.name),
                    None,
                );
                continue;
            }
            if s.scalars[r.scalar].op {
                self.error(
                    DiagKind::SyntaxError,
                    r.span,
                    format!(
                        "`{}` is an operator parameter and takes no range in `#[verify]`",
                        r.name.name
                    ),
                );
                continue;
            }
            self.expr(&r.lo, Ctx::Range);
            self.expr(&r.hi, Ctx::Range);
            if out[r.scalar] {
                self.error(
                    DiagKind::SyntaxError,
                    r.span,
                    format!("scalar `{}` has two ranges in `#[verify]`", r.name.name),
                );
                continue;
            }
            out[r.scalar] = true;
        }
        for (i, sc) in s.scalars.iter().enumerate() {
            if !out[i] && !sc.op {
                self.key = span_key(sc.span);
                self.push(
                    Diagnostic::new(
                        DiagKind::MissingRange,
                        sc.span,
                        format!("scalar parameter `{}` has no range in `#[verify]`", sc.name),
                    )
                    .with_hint(format!(
                        "add a range such as `#[verify(world in 1..=16, {} in 0..world)]`",
                        sc.name
                    )),
                );
            }
        }
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
        let param = |c: &mut Self, b: &BufRef| match b.kind {
            BufKind::Param(i) if i < c.s.buffers.len() => Some(i as u32),
            _ => {
                c.unknown(
                    b.span,
                    format!("`{}` is not a buffer parameter", b.name),
                    Some("a postcondition names buffer parameters".to_owned()),
                );
                None
            }
        };
        let (input, output, op, root) = match &p.kind {
            PostKind::AllGather { input, output } | PostKind::AllToAll { input, output } => {
                (param(self, input), param(self, output), None, None)
            }
            PostKind::AllReduce { input, output, op } | PostKind::ReduceScatter { input, output, op } => (
                param(self, input),
                param(self, output),
                Some(self.op(*op, p.span)),
                None,
            ),
            PostKind::Broadcast { buf, root } => {
                let b = param(self, buf);
                (b, b, None, Some(root))
            }
            PostKind::Reduce {
                input,
                output,
                op,
                root,
            } => (
                param(self, input),
                param(self, output),
                Some(self.op(*op, p.span)),
                Some(root),
            ),
        };
        let root = root.map(|r| self.expr(r, Ctx::Attr).0);
        Some(CPost {
            kind: &p.kind,
            span: p.span,
            input: input?,
            output: output?,
            op,
            root,
        })
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
