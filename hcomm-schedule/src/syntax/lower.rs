//! AST → `hcomm-schedule` IR, names as text, plus the span table that maps
//! every IR [`SpanId`] back to the user's tokens.
//!
//! Lowering translates syntax only: every name stays the text the user wrote
//! ([`ir::NameKind::Var`], [`ir::BufKind::Scratch`], [`ir::OpExpr::Name`]);
//! `hcomm_schedule::resolve` decides what each refers to. What the IR cannot
//! hold is reported here: integer literals beyond `i64`, unknown functions,
//! world sizes that are not constants, scalar values that are not a range,
//! and postconditions over something other than whole buffers. Lowering never
//! stops at the first problem: it records a diagnostic (at most one per
//! statement, [`MAX_ERRORS`] in all) and goes on with a placeholder.

use syn::Ident;

use super::parse::{self, Attrs, CollCall, CollKind, Expr, Item, ParamKind, Region, Sp, Stmt, StmtKind, ValueSet};
use super::MAX_ERRORS;
use crate::diag::{DiagKind, Diagnostic};
use crate::eval;
use crate::ir;
use crate::ir::SpanId;
use crate::resolve::{len_ranges, suggest, UNRESOLVED};

/// The functions of the language.
const FUNCTIONS: [(&str, ir::Func); 6] = [
    ("log2", ir::Func::Log2),
    ("ceil_log2", ir::Func::CeilLog2),
    ("pow2", ir::Func::Pow2),
    ("is_pow2", ir::Func::IsPow2),
    ("min", ir::Func::Min),
    ("max", ir::Func::Max),
];

/// The user's tokens of every IR node, indexed by [`SpanId`].
#[derive(Clone, Debug)]
pub struct SpanTable {
    spans: Vec<Sp>,
    /// Used for a span id that is not in the table (never expected).
    fallback: Sp,
}

impl SpanTable {
    fn new(fallback: Sp) -> Self {
        SpanTable {
            spans: Vec::new(),
            fallback,
        }
    }

    /// A new id for `sp`.
    pub(crate) fn id(&mut self, sp: Sp) -> SpanId {
        let id = SpanId(u32::try_from(self.spans.len()).unwrap_or(u32::MAX));
        self.spans.push(sp);
        id
    }

    /// The tokens of `id`.
    pub fn get(&self, id: SpanId) -> Sp {
        usize::try_from(id.0)
            .ok()
            .and_then(|i| self.spans.get(i))
            .copied()
            .unwrap_or(self.fallback)
    }
}

/// The lowered item.
pub(crate) struct Lowered {
    /// The IR with names as text (see `hcomm_schedule::resolve`).
    pub(crate) ir: ir::Schedule,
    pub(crate) spans: SpanTable,
}

/// Lowers one item. Diagnostics go to `diags`; the result is meaningful only
/// when none were added.
pub(crate) fn lower(item: &Item, attrs: &Attrs, body: &[Stmt], diags: &mut Vec<Diagnostic>) -> Lowered {
    let sig = Sp {
        start: item.fn_token.span,
        end: item.params_close,
    };
    let mut cx = Lower {
        spans: SpanTable::new(Sp::one(item.name.span())),
        diags,
        reported: false,
    };
    let item_span = cx.spans.id(sig);
    let mut buffers = Vec::new();
    let mut scalars = Vec::new();
    let mut counts = Vec::new();
    for param in &item.params {
        cx.begin_stmt();
        let span = cx.spans.id(Sp::one(param.name.span()).to(param.ty_sp));
        let name = param.name.to_string();
        match &param.kind {
            ParamKind::Buffer { mutable } => {
                let len = match &param.len {
                    Some(len) => cx.expr(len),
                    None => ir::Expr {
                        kind: ir::ExprKind::Int(0),
                        span,
                    },
                };
                buffers.push(ir::Buffer {
                    name,
                    writable: *mutable,
                    len,
                    span,
                });
            }
            ParamKind::Scalar | ParamKind::Op => scalars.push(ir::Scalar {
                name,
                op: matches!(param.kind, ParamKind::Op),
                span,
            }),
            ParamKind::Counts { matrix } => counts.push(ir::CountParam {
                name,
                matrix: *matrix,
                span,
            }),
        }
    }
    let verify = cx.verify(attrs, item_span);
    let requires = attrs.requires.iter().map(|e| cx.expr(e)).collect();
    let postcondition = attrs
        .postcondition
        .as_ref()
        .and_then(|(sp, call)| cx.postcondition(*sp, call));
    let body = cx.block(body);
    let ir = ir::Schedule {
        name: item.name.to_string(),
        buffers,
        scalars,
        counts,
        len_vars: Vec::new(),
        verify,
        requires,
        postcondition,
        body,
        span: item_span,
    };
    Lowered { ir, spans: cx.spans }
}

struct Lower<'d> {
    spans: SpanTable,
    diags: &'d mut Vec<Diagnostic>,
    /// Whether the current statement already has an error.
    reported: bool,
}

impl Lower<'_> {
    // ------------------------------------------------------------ diagnostics

    fn begin_stmt(&mut self) {
        self.reported = false;
    }

    /// Records an error unless this statement has one or the limit is reached.
    fn report(&mut self, kind: DiagKind, sp: Sp, message: String, hint: Option<String>) {
        if self.reported || self.diags.len() >= MAX_ERRORS {
            return;
        }
        self.reported = true;
        let span = self.spans.id(sp);
        let mut diag = Diagnostic::new(kind, span, message);
        diag.hint = hint;
        self.diags.push(diag);
    }

    fn ident(&mut self, name: &Ident) -> ir::Ident {
        ir::Ident {
            name: name.to_string(),
            span: self.spans.id(Sp::one(name.span())),
        }
    }

    // ------------------------------------------------------------ expressions

    fn expr(&mut self, e: &Expr) -> ir::Expr {
        let span = self.spans.id(e.sp());
        let kind = match e {
            Expr::Int(lit) => {
                if let Ok(v) = lit.base10_parse::<i64>() {
                    ir::ExprKind::Int(v)
                } else {
                    let message = format!("the literal `{lit}` overflows `i64`");
                    self.report(DiagKind::EvaluationError, e.sp(), message, None);
                    ir::ExprKind::Int(0)
                }
            }
            Expr::Bool(b) => ir::ExprKind::Int(i64::from(b.value)),
            Expr::Name(name) => ir::ExprKind::Name(ir::Name {
                kind: ir::NameKind::Var,
                text: name.to_string(),
            }),
            Expr::Unary { op, expr, .. } => ir::ExprKind::Unary(*op, Box::new(self.expr(expr))),
            Expr::Binary { op, lhs, rhs, .. } => {
                let lhs = self.expr(lhs);
                let rhs = self.expr(rhs);
                ir::ExprKind::Binary(*op, Box::new(lhs), Box::new(rhs))
            }
            Expr::Call { func, args, .. } if func == "sum" => {
                if let [arg] = &args[..] {
                    self.sum(arg)
                } else {
                    self.report(
                        DiagKind::SyntaxError,
                        e.sp(),
                        "`sum` takes one line of counts: `sum(counts)`, `sum(sizes[i])`, `sum(col(sizes, j))` or a range of one, `sum(counts[a..b])`".to_owned(),
                        None,
                    );
                    ir::ExprKind::Int(0)
                }
            }
            Expr::Index {
                base, index, end: None, ..
            } => match self.line(base) {
                Some(line) => ir::ExprKind::Count(ir::Count::Entry(line, Box::new(self.expr(index)))),
                None => ir::ExprKind::Int(0),
            },
            Expr::Index { end: Some(_), .. } => {
                self.report(
                    DiagKind::SyntaxError,
                    e.sp(),
                    "a range of counts is a length only inside `sum(..)`".to_owned(),
                    Some("write `sum(counts[a..b])`".to_owned()),
                );
                ir::ExprKind::Int(0)
            }
            Expr::Call { func, args, .. } => {
                let args: Vec<ir::Expr> = args.iter().map(|a| self.expr(a)).collect();
                let text = func.to_string();
                if let Some((_, f)) = FUNCTIONS.iter().find(|(name, _)| *name == text) {
                    // a wrong argument count is reported by resolution
                    ir::ExprKind::Call(*f, args)
                } else {
                    let hint = suggest(&text, FUNCTIONS.map(|(name, _)| name)).map_or_else(
                        || "the functions are `log2`, `ceil_log2`, `pow2`, `is_pow2`, `min` and `max`".to_owned(),
                        |s| format!("did you mean `{s}`?"),
                    );
                    self.report(
                        DiagKind::UnknownName,
                        Sp::one(func.span()),
                        format!("`{text}` is not a function of the schedule language"),
                        Some(hint),
                    );
                    ir::ExprKind::Int(0)
                }
            }
            Expr::Paren { expr, .. } => {
                return ir::Expr {
                    kind: self.expr(expr).kind,
                    span,
                }
            }
        };
        ir::Expr { kind, span }
    }

    // ------------------------------------------------------------ counts

    /// A line of counts, by its syntax: `NAME` (a vector), `NAME[I]` (a row
    /// of a matrix) or `col(NAME, J)` (a column); `resolve` checks that
    /// `NAME` is a count parameter of that shape.
    fn line(&mut self, e: &Expr) -> Option<ir::CountLine> {
        let count = |cx: &mut Self, name: &Ident| ir::CountRef {
            name: name.to_string(),
            param: UNRESOLVED,
            span: cx.spans.id(Sp::one(name.span())),
        };
        match e {
            Expr::Paren { expr, .. } => self.line(expr),
            Expr::Name(name) => Some(ir::CountLine {
                count: count(self, name),
                kind: ir::LineKind::Vector,
            }),
            Expr::Index {
                base, index, end: None, ..
            } => {
                let Expr::Name(name) = &**base else {
                    return self.not_a_line(e);
                };
                let row = self.expr(index);
                Some(ir::CountLine {
                    count: count(self, name),
                    kind: ir::LineKind::Row(Box::new(row)),
                })
            }
            Expr::Call { func, args, .. } if func == "col" => {
                let [Expr::Name(name), index] = &args[..] else {
                    self.report(
                        DiagKind::SyntaxError,
                        e.sp(),
                        "`col` takes a count matrix and a column: `col(sizes, j)`".to_owned(),
                        None,
                    );
                    return None;
                };
                let col = self.expr(index);
                Some(ir::CountLine {
                    count: count(self, name),
                    kind: ir::LineKind::Col(Box::new(col)),
                })
            }
            _ => self.not_a_line(e),
        }
    }

    fn not_a_line(&mut self, e: &Expr) -> Option<ir::CountLine> {
        self.report(
            DiagKind::SyntaxError,
            e.sp(),
            "expected a line of counts: a count vector `counts`, a row `sizes[i]` or a column `col(sizes, j)`"
                .to_owned(),
            None,
        );
        None
    }

    /// `sum(LINE)` or `sum(LINE[A..B])`.
    fn sum(&mut self, arg: &Expr) -> ir::ExprKind {
        let (line, range) = match arg {
            Expr::Index {
                base,
                index,
                end: Some((inclusive, end)),
                ..
            } => {
                let Some(line) = self.line(base) else {
                    return ir::ExprKind::Int(0);
                };
                let start = self.expr(index);
                let mut end = self.expr(end);
                if *inclusive {
                    end = plus_one(end);
                }
                (line, Some((Box::new(start), Box::new(end))))
            }
            _ => match self.line(arg) {
                Some(line) => (line, None),
                None => return ir::ExprKind::Int(0),
            },
        };
        ir::ExprKind::Count(ir::Count::Sum(line, range))
    }

    // ------------------------------------------------------------ regions

    fn buf_ref(&mut self, name: &Ident) -> ir::BufRef {
        ir::BufRef {
            name: name.to_string(),
            kind: ir::BufKind::Scratch,
            span: self.spans.id(Sp::one(name.span())),
        }
    }

    fn region(&mut self, r: &Region) -> ir::Region {
        let span = self.spans.id(r.sp());
        let kind = match r {
            Region::Whole(buf) => ir::RegionKind::Whole(self.buf_ref(buf)),
            Region::Slice {
                base,
                start,
                end,
                inclusive,
                ..
            } => {
                let base = self.region(base);
                let start = self.expr(start);
                let mut end = self.expr(end);
                if *inclusive {
                    end = plus_one(end);
                }
                ir::RegionKind::Slice {
                    base: Box::new(base),
                    start,
                    end,
                }
            }
            Region::Chunk { base, index, parts, .. } => {
                let base = self.region(base);
                let index = self.expr(index);
                let parts = parts.as_ref().map(|p| self.expr(p));
                ir::RegionKind::Chunk {
                    base: Box::new(base),
                    index,
                    parts,
                }
            }
            Region::Part { base, line, index, .. } => {
                let base = self.region(base);
                let Some(line) = self.line(line) else {
                    return base;
                };
                let index = self.expr(index);
                ir::RegionKind::Part {
                    base: Box::new(base),
                    line,
                    index,
                }
            }
        };
        ir::Region { kind, span }
    }

    // ------------------------------------------------------------ attributes

    fn verify(&mut self, attrs: &Attrs, item_span: SpanId) -> ir::VerifySpec {
        let mut spec = ir::VerifySpec::default_for(item_span);
        let mut world_seen = false;
        let mut first = true;
        for entry in &attrs.verify {
            self.begin_stmt();
            let name = entry.name.to_string();
            let entry_sp = Sp::one(entry.name.span()).to(entry.set.sp());
            if first {
                spec.span = self.spans.id(entry_sp);
                first = false;
            }
            if name == "world" {
                if world_seen {
                    self.report(
                        DiagKind::SyntaxError,
                        entry_sp,
                        "`world` has two ranges in `#[verify]`".to_owned(),
                        None,
                    );
                }
                world_seen = true;
                if let Some(world) = self.world_set(&entry.set) {
                    spec.world = world;
                }
                continue;
            }
            let ValueSet::Range {
                start, end, inclusive, ..
            } = &entry.set
            else {
                self.report(
                    DiagKind::SyntaxError,
                    entry.set.sp(),
                    format!("the values of `{name}` must be a range"),
                    Some(format!("write `{name} in LO..HI` or `{name} in LO..=HI`")),
                );
                continue;
            };
            let lo = self.expr(start);
            let name_ident = self.ident(&entry.name);
            let span = self.spans.id(entry_sp);
            let Some(end) = end else {
                // `LO..`: a length variable's open range (resolution checks
                // that `name` is one)
                if let Some(lo) = len_ranges::constant(&lo) {
                    spec.lengths.push(ir::LenRange {
                        var: UNRESOLVED,
                        name: name_ident,
                        lo,
                        hi: None,
                        span,
                    });
                } else {
                    let (message, hint) = len_ranges::not_constant(&name);
                    self.report(DiagKind::SyntaxError, entry_sp, message, Some(hint));
                }
                continue;
            };
            let hi = self.expr(end);
            spec.scalars.push(ir::ScalarRange {
                scalar: UNRESOLVED,
                name: name_ident,
                lo,
                hi,
                inclusive: *inclusive,
                span,
            });
        }
        spec
    }

    /// The world sizes of `#[verify]`; a size below 1 is the checker's
    /// `evaluation error` (step 0), like every other fact about the values.
    fn world_set(&mut self, set: &ValueSet) -> Option<ir::WorldSet> {
        Some(match set {
            ValueSet::Range {
                start,
                end: Some(end),
                inclusive,
                ..
            } => ir::WorldSet::Range {
                lo: self.constant(start)?,
                hi: self.constant(end)?,
                inclusive: *inclusive,
            },
            ValueSet::Range { sp, .. } => {
                self.report(
                    DiagKind::SyntaxError,
                    *sp,
                    "the world sizes in `#[verify]` have no upper bound".to_owned(),
                    Some("write `world in LO..=HI` or a list `world in [2, 4, 8]`".to_owned()),
                );
                return None;
            }
            ValueSet::List { values, .. } => {
                ir::WorldSet::List(values.iter().map(|v| self.constant(v)).collect::<Option<_>>()?)
            }
        })
    }

    /// An integer constant of `#[verify(world in ..)]`: literals, `-`, `+`,
    /// `-`, `*`, `<<` and `pow2`, computed by the language's evaluator
    /// (overflow is not a constant).
    fn constant(&mut self, e: &Expr) -> Option<i64> {
        let value = match e {
            Expr::Int(lit) => lit.base10_parse::<i64>().ok(),
            Expr::Paren { expr, .. } => return self.constant(expr),
            Expr::Unary {
                op: ir::UnOp::Neg,
                expr,
                ..
            } => self.constant(expr).and_then(|x| eval::unary(ir::UnOp::Neg, x).ok()),
            Expr::Binary { op, lhs, rhs, .. }
                if matches!(op, ir::BinOp::Add | ir::BinOp::Sub | ir::BinOp::Mul | ir::BinOp::Shl) =>
            {
                let (a, b) = (self.constant(lhs)?, self.constant(rhs)?);
                eval::binary(*op, a, b).ok()
            }
            Expr::Call { func, args, .. } if func == "pow2" && args.len() == 1 => {
                let k = self.constant(&args[0])?;
                eval::call(ir::Func::Pow2, &[k]).ok()
            }
            _ => None,
        };
        if value.is_none() {
            self.report(
                DiagKind::SyntaxError,
                e.sp(),
                "world sizes in `#[verify]` must be integer constants".to_owned(),
                None,
            );
        }
        value
    }

    fn postcondition(&mut self, sp: Sp, call: &CollCall) -> Option<ir::Postcondition> {
        self.begin_stmt();
        let span = self.spans.id(sp);
        let buf = |cx: &mut Self, r: Option<&Region>| -> Option<ir::BufRef> {
            match r {
                Some(Region::Whole(name)) => Some(cx.buf_ref(name)),
                Some(r) => {
                    cx.report(
                        DiagKind::SyntaxError,
                        r.sp(),
                        "a postcondition names whole buffer parameters".to_owned(),
                        None,
                    );
                    None
                }
                None => None,
            }
        };
        if call.kind == CollKind::Shift {
            if let (Some(src @ Region::Chunk { .. }), Some(dst)) | (Some(src), Some(dst @ Region::Chunk { .. })) =
                (&call.src, &call.dst)
            {
                return self.block_shift(span, src, dst, call.root.as_ref()?);
            }
        }
        let input = buf(self, call.src.as_ref());
        let output = match &call.dst {
            Some(dst) => buf(self, Some(dst)),
            None => input.clone(),
        };
        let op = call.op.as_ref().map(|o| self.op(o));
        let root = call.root.as_ref().map(|r| self.expr(r));
        if let (Some(c), Some(input), Some(output)) = (&call.counts, input.clone(), output.clone()) {
            let counts = self.count_ref(c);
            let kind = if call.kind == CollKind::AllGatherV {
                ir::PostKind::AllGatherV { input, output, counts }
            } else {
                ir::PostKind::AllToAllV {
                    input,
                    output,
                    sizes: counts,
                }
            };
            return Some(ir::Postcondition { kind, span });
        }
        let kind = match (call.kind, input, output, op, root) {
            (CollKind::AllGather, Some(input), Some(output), _, _) => ir::PostKind::AllGather { input, output },
            (CollKind::AllReduce, Some(input), Some(output), Some(op), _) => {
                ir::PostKind::AllReduce { input, output, op }
            }
            (CollKind::ReduceScatter, Some(input), Some(output), Some(op), _) => {
                ir::PostKind::ReduceScatter { input, output, op }
            }
            (CollKind::AllToAll, Some(input), Some(output), _, _) => ir::PostKind::AllToAll { input, output },
            (CollKind::Broadcast, Some(buf), _, _, Some(root)) => ir::PostKind::Broadcast { buf, root },
            (CollKind::Shift, Some(input), Some(output), _, Some(from)) => ir::PostKind::Shift {
                input,
                output,
                from,
                blocks: None,
            },
            (CollKind::Reduce, Some(input), Some(output), Some(op), Some(root)) => ir::PostKind::Reduce {
                input,
                output,
                op,
                root,
            },
            _ => return None,
        };
        Some(ir::Postcondition { kind, span })
    }

    /// `shift(IN.chunk(G, KI) -> OUT.chunk(j, KO), from = F)`: both sides
    /// whole buffers cut into blocks, the output's block index a new name.
    fn block_shift(&mut self, span: ir::SpanId, src: &Region, dst: &Region, from: &Expr) -> Option<ir::Postcondition> {
        fn chunk(r: &Region) -> Option<(&Ident, &Expr, Option<&Expr>)> {
            match r {
                Region::Chunk { base, index, parts, .. } => match &**base {
                    Region::Whole(name) => Some((name, &**index, parts.as_deref())),
                    _ => None,
                },
                _ => None,
            }
        }
        let (Some((in_name, block, in_parts)), Some((out_name, var, out_parts))) = (chunk(src), chunk(dst)) else {
            self.report(
                DiagKind::SyntaxError,
                src.sp().to(dst.sp()),
                "a block-wise `shift` reads `IN.chunk(G, KI) -> OUT.chunk(j, KO)` over whole buffer parameters"
                    .to_owned(),
                Some("write `shift(input.chunk(j, 2) -> output.chunk(j, 2), from = ..)`, or whole buffers".to_owned()),
            );
            return None;
        };
        let Expr::Name(var) = var else {
            self.report(
                DiagKind::SyntaxError,
                var.sp(),
                "the output block of a block-wise `shift` is a new name, the block variable".to_owned(),
                Some("write `OUT.chunk(j, KO)` and use `j` in `from` and in the input's block".to_owned()),
            );
            return None;
        };
        let input = self.buf_ref(in_name);
        let output = self.buf_ref(out_name);
        let blocks = ir::ShiftBlocks {
            var: self.ident(var),
            out_parts: out_parts.map(|p| self.expr(p)),
            block: self.expr(block),
            in_parts: in_parts.map(|p| self.expr(p)),
        };
        let from = self.expr(from);
        Some(ir::Postcondition {
            kind: ir::PostKind::Shift {
                input,
                output,
                from,
                blocks: Some(Box::new(blocks)),
            },
            span,
        })
    }

    // ------------------------------------------------------------ statements

    fn block(&mut self, stmts: &[Stmt]) -> Vec<ir::Stmt> {
        stmts.iter().map(|s| self.stmt(s)).collect()
    }

    fn p2p_parts(&mut self, op: &parse::P2p) -> (ir::Region, ir::Expr, Option<ir::Expr>, Option<ir::OpExpr>) {
        let region = self.region(&op.region);
        let peer = self.expr(&op.peer);
        let tag = op.tag.as_ref().map(|t| self.expr(t));
        (region, peer, tag, op.reduce.as_ref().map(|o| self.op(o)))
    }

    fn stmt(&mut self, stmt: &Stmt) -> ir::Stmt {
        self.begin_stmt();
        let span = self.spans.id(stmt.sp);
        let kind = match &stmt.kind {
            StmtKind::Send(op) => {
                let (region, peer, tag, _) = self.p2p_parts(op);
                ir::StmtKind::Send { region, peer, tag }
            }
            StmtKind::Recv(op) => {
                let (region, peer, tag, reduce) = self.p2p_parts(op);
                ir::StmtKind::Recv {
                    region,
                    peer,
                    tag,
                    reduce,
                }
            }
            StmtKind::Isend { handle, op } => {
                let (region, peer, tag, _) = self.p2p_parts(op);
                ir::StmtKind::Isend {
                    handle: self.ident(handle),
                    region,
                    peer,
                    tag,
                }
            }
            StmtKind::Irecv { handle, op } => {
                let (region, peer, tag, reduce) = self.p2p_parts(op);
                ir::StmtKind::Irecv {
                    handle: self.ident(handle),
                    region,
                    peer,
                    tag,
                    reduce,
                }
            }
            StmtKind::Wait(handles) => ir::StmtKind::Wait {
                handles: handles.iter().map(|h| self.ident(h)).collect(),
            },
            StmtKind::WaitAll => ir::StmtKind::WaitAll,
            StmtKind::Batch(body) => ir::StmtKind::Batch { body: self.block(body) },
            StmtKind::Copy { src, dst } => ir::StmtKind::Copy {
                src: self.region(src),
                dst: self.region(dst),
            },
            StmtKind::Accumulate { src, dst, op } => ir::StmtKind::Accumulate {
                src: self.region(src),
                dst: self.region(dst),
                op: self.op(op),
            },
            StmtKind::Let { name, value } => {
                let value = self.expr(value);
                ir::StmtKind::Let {
                    name: self.ident(name),
                    value,
                }
            }
            StmtKind::Scratch { name, len } => {
                let len = self.expr(len);
                ir::StmtKind::Scratch {
                    name: self.ident(name),
                    len,
                }
            }
            StmtKind::For { var, range, body } => {
                let start = self.expr(&range.start);
                let end = self.expr(&range.end);
                let var = self.ident(var);
                ir::StmtKind::For {
                    var,
                    start,
                    end,
                    inclusive: range.inclusive,
                    reverse: range.rev,
                    body: self.block(body),
                }
            }
            StmtKind::If { branches, otherwise } => {
                let branches = branches
                    .iter()
                    .map(|(cond, body)| {
                        self.begin_stmt();
                        let cond = self.expr(cond);
                        (cond, self.block(body))
                    })
                    .collect();
                let else_body = otherwise.as_ref().map(|b| self.block(b));
                ir::StmtKind::If { branches, else_body }
            }
            StmtKind::Collective { call, over } => {
                let kind = self.collective(call);
                let over = over.as_ref().map(|o| self.expr(o));
                ir::StmtKind::Collective { kind, over }
            }
        };
        ir::Stmt { kind, span }
    }

    fn collective(&mut self, call: &CollCall) -> ir::Collective {
        let src = call.src.as_ref().map(|r| self.region(r));
        let dst = call.dst.as_ref().map(|r| self.region(r));
        let op = call.op.as_ref().map_or(ir::OpExpr::Lit(ir::Op::Sum), |o| self.op(o));
        let root = call.root.as_ref().map(|r| self.expr(r));
        let placeholder = || ir::Region {
            kind: ir::RegionKind::Whole(ir::BufRef {
                name: String::new(),
                kind: ir::BufKind::Scratch,
                span: SpanId(0),
            }),
            span: SpanId(0),
        };
        let zero = || ir::Expr {
            kind: ir::ExprKind::Int(0),
            span: SpanId(0),
        };
        let src_or = |r: Option<ir::Region>| r.unwrap_or_else(placeholder);
        match call.kind {
            CollKind::AllReduce => ir::Collective::AllReduce {
                src: src_or(src),
                dst,
                op,
            },
            CollKind::AllGather => ir::Collective::AllGather {
                src: src_or(src),
                dst: src_or(dst),
            },
            CollKind::ReduceScatter => ir::Collective::ReduceScatter {
                src: src_or(src),
                dst: src_or(dst),
                op,
            },
            CollKind::AllToAll => ir::Collective::AllToAll {
                src: src_or(src),
                dst: src_or(dst),
            },
            CollKind::Broadcast => ir::Collective::Broadcast {
                region: src_or(src),
                root: root.unwrap_or_else(zero),
            },
            CollKind::Reduce => ir::Collective::Reduce {
                src: src_or(src),
                dst: src_or(dst),
                op,
                root: root.unwrap_or_else(zero),
            },
            CollKind::AllGatherV | CollKind::AllToAllV => {
                let counts = call.counts.as_ref().map_or_else(
                    || ir::CountRef {
                        name: String::new(),
                        param: UNRESOLVED,
                        span: SpanId(0),
                    },
                    |c| self.count_ref(c),
                );
                if call.kind == CollKind::AllGatherV {
                    ir::Collective::AllGatherV {
                        src: src_or(src),
                        dst: src_or(dst),
                        counts,
                    }
                } else {
                    ir::Collective::AllToAllV {
                        src: src_or(src),
                        dst: src_or(dst),
                        sizes: counts,
                    }
                }
            }
            // `shift` parses only as a postcondition, never as a statement
            CollKind::Barrier | CollKind::Shift => ir::Collective::Barrier,
        }
    }

    /// The name of a count parameter, as written.
    fn count_ref(&mut self, name: &Ident) -> ir::CountRef {
        ir::CountRef {
            name: name.to_string(),
            param: UNRESOLVED,
            span: self.spans.id(Sp::one(name.span())),
        }
    }

    /// An operator: a keyword, or a name (an operator parameter, once
    /// resolved).
    fn op(&mut self, op: &parse::Op) -> ir::OpExpr {
        match op {
            parse::Op::Sum => ir::OpExpr::Lit(ir::Op::Sum),
            parse::Op::Prod => ir::OpExpr::Lit(ir::Op::Prod),
            parse::Op::Max => ir::OpExpr::Lit(ir::Op::Max),
            parse::Op::Min => ir::OpExpr::Lit(ir::Op::Min),
            parse::Op::Param(name) => ir::OpExpr::Name(self.ident(name)),
        }
    }
}

/// `e + 1` (the end of an inclusive range).
fn plus_one(e: ir::Expr) -> ir::Expr {
    let span = e.span;
    let one = ir::Expr {
        kind: ir::ExprKind::Int(1),
        span,
    };
    ir::Expr {
        kind: ir::ExprKind::Binary(ir::BinOp::Add, Box::new(e), Box::new(one)),
        span,
    }
}
