//! AST → `hcomm-schedule` IR: name resolution, constant attributes, and the
//! span table that maps every IR [`SpanId`] back to the user's tokens.
//!
//! Lowering never stops at the first problem: it records a diagnostic (at most
//! one per statement, [`MAX_ERRORS`] in all) and goes on with a placeholder.

use hcomm_schedule::diag::{DiagKind, Diagnostic};
use hcomm_schedule::ir;
use hcomm_schedule::ir::SpanId;
use syn::Ident;

use crate::errors::{DID_YOU_MEAN, LEN_VAR_NOTE, MAX_ERRORS};
use crate::parse::{self, Attrs, CollCall, CollKind, Expr, Item, ParamKind, Region, Sp, Stmt, StmtKind, ValueSet};

/// Names the language gives a meaning to; they cannot be rebound.
const RESERVED: [&str; 2] = ["rank", "world"];

/// The user's tokens of every IR node, indexed by [`SpanId`].
pub(crate) struct SpanTable {
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
    pub(crate) fn get(&self, id: SpanId) -> Sp {
        usize::try_from(id.0)
            .ok()
            .and_then(|i| self.spans.get(i))
            .copied()
            .unwrap_or(self.fallback)
    }
}

/// The lowered item.
pub(crate) struct Lowered {
    pub(crate) ir: ir::Schedule,
    pub(crate) spans: SpanTable,
    /// How the generated code binds the length variables (see [`LenBinding`]).
    pub(crate) len_bindings: Vec<LenBinding>,
}

/// One length variable bound from one buffer's actual length:
/// `len(buffer) == coef * var + constant`.
pub(crate) struct LenBinding {
    /// Index into [`ir::Schedule::len_vars`].
    pub(crate) var: usize,
    /// Index into [`ir::Schedule::buffers`].
    pub(crate) buffer: usize,
    /// The coefficient, over `world`, scalars and literals.
    pub(crate) coef: ir::Expr,
    /// The rest, over `world`, scalars, literals and length variables bound
    /// earlier.
    pub(crate) constant: ir::Expr,
}

/// Where an expression stands, which decides the names it may use.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    /// Statement expressions: `rank`, `world`, scalars, loop variables, `let`s.
    Body,
    /// Region bounds and `scratch` lengths: also length variables.
    Bound,
    /// A parameter's `LEN`: `world`, scalars; any other name is a length variable.
    Len,
    /// Attribute expressions (`#[requires]`, `root = ..` of a postcondition):
    /// `world` and scalars.
    Attr,
    /// Bounds of a scalar range in `#[verify]`: `world` only.
    WorldOnly,
}

/// What a name in scope is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Local {
    Int,
    Scratch,
    Handle,
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
        buffers: Vec::new(),
        scalars: Vec::new(),
        op_params: Vec::new(),
        len_vars: Vec::new(),
        scopes: vec![Vec::new()],
    };
    let item_span = cx.spans.id(sig);
    let mut ir_buffers = Vec::new();
    let mut ir_scalars = Vec::new();

    // Parameters: names first (so that lengths can use scalars declared later).
    for param in &item.params {
        let name = param.name.to_string();
        cx.begin_stmt();
        if RESERVED.contains(&name.as_str()) || name == "comm" || name.starts_with("__") {
            cx.report(
                DiagKind::SyntaxError,
                Sp::one(param.name.span()),
                format!("`{name}` is reserved and cannot name a parameter"),
                Some(if name == "comm" {
                    "the generated function's first parameter is `comm: &hcomm::Comm`".to_owned()
                } else if name.starts_with("__") {
                    "names starting with `__` belong to the generated code".to_owned()
                } else {
                    format!("`{name}` is given by the communicator")
                }),
            );
        } else if cx.buffers.iter().chain(&cx.scalars).any(|n| *n == name) {
            cx.report(
                DiagKind::SyntaxError,
                Sp::one(param.name.span()),
                format!("duplicate parameter `{name}`"),
                None,
            );
        }
        match param.kind {
            ParamKind::Buffer { .. } => cx.buffers.push(name),
            ParamKind::Scalar | ParamKind::Op => {
                cx.scalars.push(name);
                cx.op_params.push(matches!(param.kind, ParamKind::Op));
            }
        }
    }
    for param in &item.params {
        cx.begin_stmt();
        let span = cx.spans.id(Sp::one(param.name.span()).to(param.ty_sp));
        match &param.kind {
            ParamKind::Buffer { mutable, len } => {
                let len = cx.expr(len, Ctx::Len);
                ir_buffers.push(ir::Buffer {
                    name: param.name.to_string(),
                    writable: *mutable,
                    len,
                    span,
                });
            }
            ParamKind::Scalar | ParamKind::Op => ir_scalars.push(ir::Scalar {
                name: param.name.to_string(),
                op: matches!(param.kind, ParamKind::Op),
                span,
            }),
        }
    }

    let verify = cx.verify(attrs, item_span);
    for (i, scalar) in ir_scalars.iter().enumerate() {
        if !scalar.op && !verify.scalars.iter().any(|r| r.scalar == i) {
            cx.begin_stmt();
            let sp = cx.spans.get(scalar.span);
            let name = &scalar.name;
            cx.report(
                DiagKind::MissingRange,
                sp,
                format!("scalar parameter `{name}` has no range in `#[verify]`"),
                Some(format!(
                    "add `{name} in LO..HI` to `#[verify(..)]`, e.g. `#[verify(world in 1..=16, {name} in 0..world)]`"
                )),
            );
        }
    }
    let requires = attrs.requires.iter().map(|e| cx.expr(e, Ctx::Attr)).collect();
    let postcondition = attrs
        .postcondition
        .as_ref()
        .and_then(|(sp, call)| cx.postcondition(*sp, call));
    let len_bindings = cx.len_bindings(&ir_buffers, item);
    let body = cx.block(body);

    let ir = ir::Schedule {
        name: item.name.to_string(),
        buffers: ir_buffers,
        scalars: ir_scalars,
        len_vars: cx
            .len_vars
            .iter()
            .map(|(name, span)| ir::Ident {
                name: name.clone(),
                span: *span,
            })
            .collect(),
        verify,
        requires,
        postcondition,
        body,
        span: item_span,
    };
    Lowered {
        ir,
        spans: cx.spans,
        len_bindings,
    }
}

struct Lower<'d> {
    spans: SpanTable,
    diags: &'d mut Vec<Diagnostic>,
    /// Whether the current statement already has an error.
    reported: bool,
    buffers: Vec<String>,
    scalars: Vec<String>,
    /// Which of `scalars` are operator parameters (`NAME: ReduceOp`).
    op_params: Vec<bool>,
    len_vars: Vec<(String, SpanId)>,
    /// Lexical scopes of `let`s, loop variables, scratch buffers and handles.
    scopes: Vec<Vec<(String, Local)>>,
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

    // ------------------------------------------------------------ scopes

    fn lookup(&self, name: &str) -> Option<Local> {
        self.scopes
            .iter()
            .rev()
            .flat_map(|s| s.iter().rev())
            .find(|(n, _)| n == name)
            .map(|(_, l)| *l)
    }

    fn bind(&mut self, name: &Ident, local: Local) {
        let text = name.to_string();
        if RESERVED.contains(&text.as_str()) {
            self.report(
                DiagKind::SyntaxError,
                Sp::one(name.span()),
                format!("`{text}` is reserved and cannot be rebound"),
                Some("choose another name".to_owned()),
            );
        }
        if let Some(scope) = self.scopes.last_mut() {
            scope.push((text, local));
        }
    }

    fn ident(&mut self, name: &Ident) -> ir::Ident {
        ir::Ident {
            name: name.to_string(),
            span: self.spans.id(Sp::one(name.span())),
        }
    }

    /// Every name visible in `ctx`, for suggestions.
    fn candidates(&self, ctx: Ctx) -> Vec<String> {
        let mut names: Vec<String> = vec!["world".to_owned()];
        if ctx == Ctx::WorldOnly {
            return names;
        }
        names.extend(self.scalars.iter().cloned());
        if matches!(ctx, Ctx::Body | Ctx::Bound) {
            names.push("rank".to_owned());
            for (name, local) in self.scopes.iter().flatten() {
                if *local == Local::Int {
                    names.push(name.clone());
                }
            }
        }
        if ctx == Ctx::Bound {
            names.extend(self.len_vars.iter().map(|(n, _)| n.clone()));
        }
        names
    }

    // ------------------------------------------------------------ expressions

    fn expr(&mut self, e: &Expr, ctx: Ctx) -> ir::Expr {
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
            Expr::Name(name) => ir::ExprKind::Name(self.name(name, ctx)),
            Expr::Unary { op, expr, .. } => {
                let op = match op {
                    parse::UnOp::Neg => ir::UnOp::Neg,
                    parse::UnOp::Not => ir::UnOp::Not,
                };
                ir::ExprKind::Unary(op, Box::new(self.expr(expr, ctx)))
            }
            Expr::Binary { op, lhs, rhs, .. } => {
                let lhs = self.expr(lhs, ctx);
                let rhs = self.expr(rhs, ctx);
                ir::ExprKind::Binary(binop(*op), Box::new(lhs), Box::new(rhs))
            }
            Expr::Call { func, args, .. } => {
                let args: Vec<ir::Expr> = args.iter().map(|a| self.expr(a, ctx)).collect();
                let text = func.to_string();
                let f = match text.as_str() {
                    "log2" => Some(ir::Func::Log2),
                    "pow2" => Some(ir::Func::Pow2),
                    "is_pow2" => Some(ir::Func::IsPow2),
                    "min" => Some(ir::Func::Min),
                    "max" => Some(ir::Func::Max),
                    _ => None,
                };
                match f {
                    Some(f) if f.arity() == args.len() => ir::ExprKind::Call(f, args),
                    Some(f) => {
                        let n = f.arity();
                        self.report(
                            DiagKind::SyntaxError,
                            e.sp(),
                            format!(
                                "`{text}` takes {n} argument{}, not {}",
                                if n == 1 { "" } else { "s" },
                                args.len()
                            ),
                            None,
                        );
                        ir::ExprKind::Int(0)
                    }
                    None => {
                        let funcs = ["log2", "pow2", "is_pow2", "min", "max"].map(str::to_owned);
                        let hint = suggest(&text, &funcs).map(|s| format!("{DID_YOU_MEAN} `{s}`?"));
                        self.report(
                            DiagKind::UnknownName,
                            Sp::one(func.span()),
                            format!("`{text}` is not a function of the schedule language"),
                            Some(hint.unwrap_or_else(|| {
                                "the functions are `log2`, `pow2`, `is_pow2`, `min` and `max`".to_owned()
                            })),
                        );
                        ir::ExprKind::Int(0)
                    }
                }
            }
            Expr::Paren { expr, .. } => {
                return ir::Expr {
                    kind: self.expr(expr, ctx).kind,
                    span,
                }
            }
        };
        ir::Expr { kind, span }
    }

    fn name(&mut self, name: &Ident, ctx: Ctx) -> ir::Name {
        let text = name.to_string();
        let kind = self.resolve(name, &text, ctx);
        ir::Name { kind, text }
    }

    fn resolve(&mut self, name: &Ident, text: &str, ctx: Ctx) -> ir::NameKind {
        let sp = Sp::one(name.span());
        if text == "world" {
            return ir::NameKind::World;
        }
        if text == "rank" {
            if matches!(ctx, Ctx::Body | Ctx::Bound) {
                return ir::NameKind::Rank;
            }
            let place = match ctx {
                Ctx::Len => "a buffer length",
                Ctx::WorldOnly => "a scalar range",
                _ => "an attribute",
            };
            self.report(
                DiagKind::UnknownName,
                sp,
                format!("`rank` cannot appear in {place}"),
                Some("it must have the same value on every rank".to_owned()),
            );
            return ir::NameKind::World;
        }
        if matches!(ctx, Ctx::Body | Ctx::Bound) {
            match self.lookup(text) {
                Some(Local::Int) => return ir::NameKind::Var,
                Some(local) => {
                    let what = if local == Local::Handle {
                        "a request handle"
                    } else {
                        "a scratch buffer"
                    };
                    self.report(
                        DiagKind::UnknownName,
                        sp,
                        format!("`{text}` is {what}, not an integer"),
                        None,
                    );
                    return ir::NameKind::Var;
                }
                None => {}
            }
        }
        if ctx != Ctx::WorldOnly {
            if let Some(i) = self.scalars.iter().position(|s| s == text) {
                if self.op_params[i] {
                    self.report(
                        DiagKind::UnknownName,
                        sp,
                        format!("`{text}` is an operator parameter, not an integer"),
                        Some(OP_PARAM_NOTE.to_owned()),
                    );
                }
                return ir::NameKind::Scalar(i);
            }
        }
        if let Some(i) = self.len_vars.iter().position(|(s, _)| s == text) {
            if matches!(ctx, Ctx::Len | Ctx::Bound) {
                return ir::NameKind::LenVar(i);
            }
            self.report(
                DiagKind::UnknownName,
                sp,
                format!("`{text}` is a length variable and cannot appear here"),
                Some(LEN_VAR_NOTE.to_owned()),
            );
            return ir::NameKind::LenVar(i);
        }
        if ctx == Ctx::Len {
            let span = self.spans.id(sp);
            self.len_vars.push((text.to_owned(), span));
            return ir::NameKind::LenVar(self.len_vars.len() - 1);
        }
        let candidates = self.candidates(ctx);
        let hint = suggest(text, &candidates).map(|s| format!("{DID_YOU_MEAN} `{s}`?"));
        let what = if self.buffers.iter().any(|b| b == text) {
            format!("`{text}` is a buffer, not an integer")
        } else if ctx == Ctx::WorldOnly && self.scalars.iter().any(|s| s == text) {
            format!("`{text}`: the range of a scalar may depend on `world` only")
        } else {
            format!("`{text}` is not defined here")
        };
        self.report(DiagKind::UnknownName, sp, what, hint);
        ir::NameKind::Var
    }

    // ------------------------------------------------------------ regions

    fn buf_ref(&mut self, name: &Ident) -> ir::BufRef {
        let text = name.to_string();
        let span = self.spans.id(Sp::one(name.span()));
        match self.lookup(&text) {
            Some(Local::Scratch) => {
                return ir::BufRef {
                    name: text,
                    kind: ir::BufKind::Scratch,
                    span,
                }
            }
            Some(local) => {
                let what = if local == Local::Handle {
                    "a request handle"
                } else {
                    "an integer"
                };
                self.report(
                    DiagKind::UnknownName,
                    Sp::one(name.span()),
                    format!("`{text}` is {what}, not a buffer"),
                    None,
                );
                return ir::BufRef {
                    name: text,
                    kind: ir::BufKind::Scratch,
                    span,
                };
            }
            None => {}
        }
        if let Some(i) = self.buffers.iter().position(|b| *b == text) {
            return ir::BufRef {
                name: text,
                kind: ir::BufKind::Param(i),
                span,
            };
        }
        let mut candidates = self.buffers.clone();
        for (n, local) in self.scopes.iter().flatten() {
            if *local == Local::Scratch {
                candidates.push(n.clone());
            }
        }
        let hint = suggest(&text, &candidates).map(|s| format!("{DID_YOU_MEAN} `{s}`?"));
        let message = if self.scalars.contains(&text) || RESERVED.contains(&text.as_str()) {
            format!("`{text}` is an integer, not a buffer")
        } else {
            format!("there is no buffer `{text}`")
        };
        self.report(DiagKind::UnknownName, Sp::one(name.span()), message, hint);
        ir::BufRef {
            name: text,
            kind: ir::BufKind::Scratch,
            span,
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
                let start = self.expr(start, Ctx::Bound);
                let mut end = self.expr(end, Ctx::Bound);
                if *inclusive {
                    let one = ir::Expr {
                        kind: ir::ExprKind::Int(1),
                        span: end.span,
                    };
                    let end_span = end.span;
                    end = ir::Expr {
                        kind: ir::ExprKind::Binary(ir::BinOp::Add, Box::new(end), Box::new(one)),
                        span: end_span,
                    };
                }
                ir::RegionKind::Slice {
                    base: Box::new(base),
                    start,
                    end,
                }
            }
            Region::Chunk { base, index, parts, .. } => {
                let base = self.region(base);
                let index = self.expr(index, Ctx::Bound);
                let parts = parts.as_ref().map(|p| self.expr(p, Ctx::Bound));
                ir::RegionKind::Chunk {
                    base: Box::new(base),
                    index,
                    parts,
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
            let Some(scalar) = self.scalars.iter().position(|s| *s == name) else {
                let mut candidates = self.scalars.clone();
                candidates.push("world".to_owned());
                let hint = suggest(&name, &candidates).map(|s| format!("{DID_YOU_MEAN} `{s}`?"));
                let message = if self.buffers.contains(&name) {
                    format!("`{name}` is a buffer; `#[verify]` gives ranges to `world` and scalar parameters")
                } else {
                    format!("`{name}` is not `world` or a scalar parameter")
                };
                self.report(DiagKind::UnknownName, Sp::one(entry.name.span()), message, hint);
                continue;
            };
            if self.op_params[scalar] {
                self.report(
                    DiagKind::SyntaxError,
                    entry_sp,
                    format!("`{name}` is an operator parameter and takes no range in `#[verify]`"),
                    Some("every operator (`sum`, `prod`, `max`, `min`) is checked".to_owned()),
                );
                continue;
            }
            if spec.scalars.iter().any(|r| r.scalar == scalar) {
                self.report(
                    DiagKind::SyntaxError,
                    entry_sp,
                    format!("`{name}` has two ranges in `#[verify]`"),
                    None,
                );
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
            let lo = self.expr(start, Ctx::WorldOnly);
            let hi = self.expr(end, Ctx::WorldOnly);
            let name_ident = self.ident(&entry.name);
            let span = self.spans.id(entry_sp);
            spec.scalars.push(ir::ScalarRange {
                scalar,
                name: name_ident,
                lo,
                hi,
                inclusive: *inclusive,
                span,
            });
        }
        spec
    }

    fn world_set(&mut self, set: &ValueSet) -> Option<ir::WorldSet> {
        let (world, values) = match set {
            ValueSet::Range {
                start, end, inclusive, ..
            } => {
                let lo = self.constant(start)?;
                let hi = self.constant(end)?;
                (
                    ir::WorldSet::Range {
                        lo,
                        hi,
                        inclusive: *inclusive,
                    },
                    vec![(lo, start.sp())],
                )
            }
            ValueSet::List { values, .. } => {
                let mut list = Vec::new();
                let mut checked = Vec::new();
                for v in values {
                    let c = self.constant(v)?;
                    list.push(c);
                    checked.push((c, v.sp()));
                }
                (ir::WorldSet::List(list), checked)
            }
        };
        for (v, sp) in values {
            if v < 1 {
                self.report(
                    DiagKind::SyntaxError,
                    sp,
                    format!("a world size must be at least 1, not {v}"),
                    None,
                );
                return None;
            }
        }
        Some(world)
    }

    /// An integer constant of `#[verify(world in ..)]`.
    fn constant(&mut self, e: &Expr) -> Option<i64> {
        let value = match e {
            Expr::Int(lit) => lit.base10_parse::<i64>().ok(),
            Expr::Paren { expr, .. } => return self.constant(expr),
            Expr::Unary {
                op: parse::UnOp::Neg,
                expr,
                ..
            } => self.constant(expr)?.checked_neg(),
            Expr::Binary { op, lhs, rhs, .. } => {
                let (a, b) = (self.constant(lhs)?, self.constant(rhs)?);
                match op {
                    parse::BinOp::Add => a.checked_add(b),
                    parse::BinOp::Sub => a.checked_sub(b),
                    parse::BinOp::Mul => a.checked_mul(b),
                    parse::BinOp::Shl => u32::try_from(b).ok().and_then(|b| a.checked_shl(b)),
                    _ => None,
                }
            }
            Expr::Call { func, args, .. } if func == "pow2" && args.len() == 1 => {
                let k = self.constant(&args[0])?;
                u32::try_from(k)
                    .ok()
                    .and_then(|k| 1_i64.checked_shl(k))
                    .filter(|v| *v > 0)
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
                Some(Region::Whole(name)) => {
                    let b = cx.buf_ref(name);
                    if matches!(b.kind, ir::BufKind::Param(_)) {
                        Some(b)
                    } else {
                        None
                    }
                }
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
        let input = buf(self, call.src.as_ref());
        let output = match &call.dst {
            Some(dst) => buf(self, Some(dst)),
            None => input.clone(),
        };
        let op = call.op.as_ref().map(|o| self.op(o));
        let root = call.root.as_ref().map(|r| self.expr(r, Ctx::Attr));
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

    // ------------------------------------------------------------ lengths

    /// Decides from which buffer each length variable is bound at run time.
    fn len_bindings(&mut self, buffers: &[ir::Buffer], item: &Item) -> Vec<LenBinding> {
        let mut forms = Vec::new();
        for (b, buffer) in buffers.iter().enumerate() {
            self.begin_stmt();
            match linear(&buffer.len) {
                Ok(form) => forms.push((b, form)),
                Err(at) => {
                    let sp = self.spans.get(at);
                    self.report(
                        DiagKind::NonLinearLength,
                        sp,
                        format!("the length of `{}` is not linear in its length variables", buffer.name),
                        Some("use only sums of length variables times expressions over `world` and scalars".to_owned()),
                    );
                }
            }
        }
        let mut bound = vec![false; self.len_vars.len()];
        let mut bindings = Vec::new();
        while bindings.len() < bound.len() {
            // Prefer a buffer whose only unbound variable has a literal coefficient.
            let mut pick: Option<(usize, usize, bool)> = None;
            for (b, form) in &forms {
                let unbound: Vec<usize> = form.coefs.iter().map(|(v, _)| *v).filter(|v| !bound[*v]).collect();
                if let [v] = unbound[..] {
                    let literal = form
                        .coefs
                        .iter()
                        .any(|(w, c)| *w == v && matches!(c.kind, ir::ExprKind::Int(_)));
                    if pick.is_none_or(|(_, _, l)| literal && !l) {
                        pick = Some((*b, v, literal));
                    }
                }
            }
            let Some((b, v, _)) = pick else { break };
            let Some((_, form)) = forms.iter().find(|(fb, _)| *fb == b) else {
                break;
            };
            let Some(coef) = form.coefs.iter().find(|(w, _)| *w == v).map(|(_, c)| c.clone()) else {
                break;
            };
            let mut constant = form.constant.clone();
            for (w, c) in &form.coefs {
                if *w != v {
                    let var = ir::Expr {
                        kind: ir::ExprKind::Name(ir::Name {
                            kind: ir::NameKind::LenVar(*w),
                            text: self.len_vars[*w].0.clone(),
                        }),
                        span: c.span,
                    };
                    constant = add(constant, mul(c.clone(), var));
                }
            }
            bound[v] = true;
            bindings.push(LenBinding {
                var: v,
                buffer: b,
                coef,
                constant,
            });
        }
        if bindings.len() < bound.len() && self.diags.is_empty() {
            let names: Vec<String> = (0..bound.len())
                .filter(|v| !bound[*v])
                .map(|v| format!("`{}`", self.len_vars[v].0))
                .collect();
            let sp = Sp {
                start: item.name.span(),
                end: item.params_close,
            };
            self.begin_stmt();
            self.report(
                DiagKind::NonLinearLength,
                sp,
                format!(
                    "the buffer lengths do not determine the length variable{} {}",
                    if names.len() == 1 { "" } else { "s" },
                    names.join(", ")
                ),
                Some(
                    "give each length variable a buffer whose length uses it and already-determined variables only"
                        .to_owned(),
                ),
            );
        }
        bindings
    }

    // ------------------------------------------------------------ statements

    fn block(&mut self, stmts: &[Stmt]) -> Vec<ir::Stmt> {
        self.scopes.push(Vec::new());
        let out = stmts.iter().map(|s| self.stmt(s)).collect();
        self.scopes.pop();
        out
    }

    fn p2p_parts(&mut self, op: &parse::P2p) -> (ir::Region, ir::Expr, Option<ir::Expr>, Option<ir::OpExpr>) {
        let region = self.region(&op.region);
        let peer = self.expr(&op.peer, Ctx::Body);
        let tag = op.tag.as_ref().map(|t| self.expr(t, Ctx::Body));
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
                let h = self.ident(handle);
                self.bind(handle, Local::Handle);
                ir::StmtKind::Isend {
                    handle: h,
                    region,
                    peer,
                    tag,
                }
            }
            StmtKind::Irecv { handle, op } => {
                let (region, peer, tag, reduce) = self.p2p_parts(op);
                let h = self.ident(handle);
                self.bind(handle, Local::Handle);
                ir::StmtKind::Irecv {
                    handle: h,
                    region,
                    peer,
                    tag,
                    reduce,
                }
            }
            StmtKind::Wait(handles) => {
                // A handle that is not in scope is the checker's `unknown request`.
                ir::StmtKind::Wait {
                    handles: handles.iter().map(|h| self.ident(h)).collect(),
                }
            }
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
                let value = self.expr(value, Ctx::Body);
                let n = self.ident(name);
                self.bind(name, Local::Int);
                ir::StmtKind::Let { name: n, value }
            }
            StmtKind::Scratch { name, len } => {
                let len = self.expr(len, Ctx::Bound);
                let n = self.ident(name);
                self.bind(name, Local::Scratch);
                ir::StmtKind::Scratch { name: n, len }
            }
            StmtKind::For { var, range, body } => {
                let start = self.expr(&range.start, Ctx::Body);
                let end = self.expr(&range.end, Ctx::Body);
                let v = self.ident(var);
                self.scopes.push(Vec::new());
                self.bind(var, Local::Int);
                let body = self.block(body);
                self.scopes.pop();
                ir::StmtKind::For {
                    var: v,
                    start,
                    end,
                    inclusive: range.inclusive,
                    reverse: range.rev,
                    body,
                }
            }
            StmtKind::If { branches, otherwise } => {
                let branches = branches
                    .iter()
                    .map(|(cond, body)| {
                        self.begin_stmt();
                        let cond = self.expr(cond, Ctx::Body);
                        (cond, self.block(body))
                    })
                    .collect();
                let else_body = otherwise.as_ref().map(|b| self.block(b));
                ir::StmtKind::If { branches, else_body }
            }
            StmtKind::Collective { call, over } => {
                let kind = self.collective(call);
                let over = over.as_ref().map(|o| self.expr(o, Ctx::Body));
                ir::StmtKind::Collective { kind, over }
            }
        };
        ir::Stmt { kind, span }
    }

    fn collective(&mut self, call: &CollCall) -> ir::Collective {
        let src = call.src.as_ref().map(|r| self.region(r));
        let dst = call.dst.as_ref().map(|r| self.region(r));
        let op = call.op.as_ref().map_or(ir::OpExpr::Lit(ir::Op::Sum), |o| self.op(o));
        let root = call.root.as_ref().map(|r| self.expr(r, Ctx::Body));
        let placeholder = || ir::Region {
            kind: ir::RegionKind::Whole(ir::BufRef {
                name: String::new(),
                kind: ir::BufKind::Scratch,
                span: SpanId(0),
            }),
            span: SpanId(0),
        };
        let zero = || int(0, SpanId(0));
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
            CollKind::Barrier => ir::Collective::Barrier,
        }
    }
}

/// Where operator parameters may be written.
const OP_PARAM_NOTE: &str =
    "an operator parameter is written where an operator is: `reduce OP`, `accumulate .., OP`, a collective's `OP`";

impl Lower<'_> {
    /// An operator: a keyword, or the name of an operator parameter.
    fn op(&mut self, op: &parse::Op) -> ir::OpExpr {
        let name = match op {
            parse::Op::Sum => return ir::OpExpr::Lit(ir::Op::Sum),
            parse::Op::Prod => return ir::OpExpr::Lit(ir::Op::Prod),
            parse::Op::Max => return ir::OpExpr::Lit(ir::Op::Max),
            parse::Op::Min => return ir::OpExpr::Lit(ir::Op::Min),
            parse::Op::Param(name) => name,
        };
        let text = name.to_string();
        if let Some(i) = self.scalars.iter().position(|s| *s == text) {
            if self.op_params[i] {
                return ir::OpExpr::Param(i);
            }
        }
        let mut candidates: Vec<String> = vec!["sum".into(), "prod".into(), "max".into(), "min".into()];
        candidates.extend(
            self.scalars
                .iter()
                .zip(&self.op_params)
                .filter(|(_, op)| **op)
                .map(|(s, _)| s.clone()),
        );
        let hint = suggest(&text, &candidates).map_or_else(
            || Some("declare it as a parameter `NAME: ReduceOp`".to_owned()),
            |s| Some(format!("{DID_YOU_MEAN} `{s}`?")),
        );
        self.report(
            DiagKind::UnknownName,
            Sp::one(name.span()),
            format!("`{text}` is not an operator (`sum`, `prod`, `max`, `min`) or an operator parameter"),
            hint,
        );
        ir::OpExpr::Lit(ir::Op::Sum)
    }
}

fn binop(op: parse::BinOp) -> ir::BinOp {
    use parse::BinOp as P;
    match op {
        P::Add => ir::BinOp::Add,
        P::Sub => ir::BinOp::Sub,
        P::Mul => ir::BinOp::Mul,
        P::Div => ir::BinOp::Div,
        P::Rem => ir::BinOp::Rem,
        P::Shl => ir::BinOp::Shl,
        P::Shr => ir::BinOp::Shr,
        P::BitAnd => ir::BinOp::BitAnd,
        P::BitOr => ir::BinOp::BitOr,
        P::BitXor => ir::BinOp::BitXor,
        P::Eq => ir::BinOp::Eq,
        P::Ne => ir::BinOp::Ne,
        P::Lt => ir::BinOp::Lt,
        P::Le => ir::BinOp::Le,
        P::Gt => ir::BinOp::Gt,
        P::Ge => ir::BinOp::Ge,
        P::And => ir::BinOp::And,
        P::Or => ir::BinOp::Or,
    }
}

// ---------------------------------------------------------------- linear forms

/// `constant + Σ coef·var` over length variables; coefficients and the
/// constant are expressions without length variables.
struct Linear {
    coefs: Vec<(usize, ir::Expr)>,
    constant: ir::Expr,
}

fn int(v: i64, span: SpanId) -> ir::Expr {
    ir::Expr {
        kind: ir::ExprKind::Int(v),
        span,
    }
}

fn add(a: ir::Expr, b: ir::Expr) -> ir::Expr {
    let span = a.span;
    ir::Expr {
        kind: ir::ExprKind::Binary(ir::BinOp::Add, Box::new(a), Box::new(b)),
        span,
    }
}

fn mul(a: ir::Expr, b: ir::Expr) -> ir::Expr {
    let span = a.span;
    ir::Expr {
        kind: ir::ExprKind::Binary(ir::BinOp::Mul, Box::new(a), Box::new(b)),
        span,
    }
}

fn neg(a: ir::Expr) -> ir::Expr {
    let span = a.span;
    ir::Expr {
        kind: ir::ExprKind::Unary(ir::UnOp::Neg, Box::new(a)),
        span,
    }
}

fn has_len_var(e: &ir::Expr) -> bool {
    match &e.kind {
        ir::ExprKind::Int(_) => false,
        ir::ExprKind::Name(n) => matches!(n.kind, ir::NameKind::LenVar(_)),
        ir::ExprKind::Unary(_, a) => has_len_var(a),
        ir::ExprKind::Binary(_, a, b) => has_len_var(a) || has_len_var(b),
        ir::ExprKind::Call(_, args) => args.iter().any(has_len_var),
    }
}

impl Linear {
    fn constant(e: ir::Expr) -> Self {
        Linear {
            coefs: Vec::new(),
            constant: e,
        }
    }

    fn plus(mut self, other: Linear) -> Self {
        self.constant = add(self.constant, other.constant);
        for (v, c) in other.coefs {
            if let Some(slot) = self.coefs.iter_mut().find(|(w, _)| *w == v) {
                let old = std::mem::replace(&mut slot.1, int(0, c.span));
                slot.1 = add(old, c);
            } else {
                self.coefs.push((v, c));
            }
        }
        self
    }

    fn scale(self, k: &ir::Expr) -> Self {
        Linear {
            constant: mul(k.clone(), self.constant),
            coefs: self.coefs.into_iter().map(|(v, c)| (v, mul(k.clone(), c))).collect(),
        }
    }

    fn negate(self) -> Self {
        Linear {
            constant: neg(self.constant),
            coefs: self.coefs.into_iter().map(|(v, c)| (v, neg(c))).collect(),
        }
    }
}

/// The linear form of a length, or the span of the non-linear part.
fn linear(e: &ir::Expr) -> Result<Linear, SpanId> {
    if !has_len_var(e) {
        return Ok(Linear::constant(e.clone()));
    }
    match &e.kind {
        ir::ExprKind::Name(ir::Name {
            kind: ir::NameKind::LenVar(v),
            ..
        }) => Ok(Linear {
            coefs: vec![(*v, int(1, e.span))],
            constant: int(0, e.span),
        }),
        ir::ExprKind::Unary(ir::UnOp::Neg, a) => Ok(linear(a)?.negate()),
        ir::ExprKind::Binary(ir::BinOp::Add, a, b) => Ok(linear(a)?.plus(linear(b)?)),
        ir::ExprKind::Binary(ir::BinOp::Sub, a, b) => Ok(linear(a)?.plus(linear(b)?.negate())),
        ir::ExprKind::Binary(ir::BinOp::Mul, a, b) => match (has_len_var(a), has_len_var(b)) {
            (false, _) => Ok(linear(b)?.scale(a)),
            (_, false) => Ok(linear(a)?.scale(b)),
            _ => Err(e.span),
        },
        _ => Err(e.span),
    }
}

// ---------------------------------------------------------------- suggestions

/// The closest candidate within a small edit distance, for "did you mean".
pub(crate) fn suggest<'a>(name: &str, candidates: &'a [String]) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).max(1);
    candidates
        .iter()
        .filter(|c| c.as_str() != name)
        .map(|c| (distance(name, c), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c.as_str())
}

/// Damerau–Levenshtein distance (optimal string alignment): a swap of two
/// neighbours (`rnak` → `rank`) counts as one edit.
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut d = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for (i, row) in d.iter_mut().enumerate() {
        row[0] = i;
    }
    for (j, cell) in d[0].iter_mut().enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[i - 1][j] + 1).min(d[i][j - 1] + 1).min(d[i - 1][j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[i - 2][j - 2] + 1);
            }
            d[i][j] = v;
        }
    }
    d[a.len()][b.len()]
}
