//! Name resolution: what every name of a schedule refers to, in which scope,
//! and whether lengths are linear in the length variables.
//!
//! The macro writes names as text ([`NameKind::Var`] for every name in an
//! expression, [`BufKind::Scratch`] for every buffer, [`OpExpr::Name`] for an
//! operator parameter, an empty [`Schedule::len_vars`] and
//! [`ScalarRange::scalar`] set to [`UNRESOLVED`]); [`resolve`] turns them into
//! what they name, in place, and decides the length binding. Already resolved
//! kinds are kept (and checked against where they stand), so resolving twice
//! changes nothing.
//!
//! Scopes are Rust's: `rank`, `world`, the parameters and the length
//! variables are visible everywhere they are allowed; a `let`, `scratch`
//! buffer, loop variable or request handle from the statement after its
//! definition to the end of its block, shadowing earlier ones. Where a name
//! may stand:
//!
//! | place | names |
//! |---|---|
//! | statements (peers, tags, conditions, `let`s, loop ranges, roots, `over`) | `rank`, `world`, scalars, `let`s, loop variables |
//! | region bounds, `scratch` lengths | the same and length variables, linearly |
//! | a buffer parameter's length | `world`, scalars; any other name declares a length variable |
//! | `#[requires]`, a postcondition's `root` | `world`, scalars |
//! | a scalar range of `#[verify]` | `world` |
//! | a length variable's range of `#[verify]` | none: integer constants |
//!
//! At most one diagnostic per statement (or parameter, attribute entry) and
//! at most 8 in all.

pub(crate) mod len_ranges;
mod lengths;
mod suggest;

pub use lengths::LenBinding;
pub use suggest::suggest;

use crate::diag::{DiagKind, Diagnostic, Sink};
use crate::ir::{
    BinOp, BufKind, BufRef, Collective, Count, CountLine, CountRef, Expr, ExprKind, Ident, LineKind, Name, NameKind,
    OpExpr, PostKind, Region, RegionKind, ScalarRange, Schedule, SpanId, Stmt, StmtKind, UnOp,
};
use crate::lin::MAX_LEN_VARS;
use suggest::did_you_mean;

/// [`ScalarRange::scalar`] before resolution.
pub const UNRESOLVED: usize = usize::MAX;

/// Names the language gives a meaning to; they cannot be rebound.
const RESERVED: [&str; 2] = ["rank", "world"];

/// Note of `unknown name` for a length variable used outside lengths.
const LEN_VAR_NOTE: &str = "length variables may appear only in buffer lengths, `scratch` lengths and region bounds";

/// Where counts may be written.
const COUNT_NOTE: &str = "the entries of a count parameter are lengths: they may appear in buffer lengths, `scratch` lengths and region bounds, and name the lines of `.part(..)`, `all_gatherv` and `all_to_allv`";

/// Where operator parameters may be written.
const OP_PARAM_NOTE: &str =
    "an operator parameter is written where an operator is: `reduce OP`, `accumulate .., OP`, a collective's `OP`";

/// What [`resolve`] found.
#[derive(Debug, Default)]
pub struct Resolution {
    /// Unknown names, names where they may not stand, reserved or duplicate
    /// names, non-linear lengths, missing or misplaced ranges; the schedule
    /// is resolved only when this is empty.
    pub diagnostics: Vec<Diagnostic>,
    /// How the generated code binds each length variable from the buffer
    /// lengths, in evaluation order.
    pub len_bindings: Vec<LenBinding>,
}

/// Resolves every name of `s` in place (see the module documentation).
pub fn resolve(s: &mut Schedule) -> Resolution {
    let mut r = Resolver {
        sink: Sink::default(),
        key: 0,
        buffers: s.buffers.iter().map(|b| b.name.clone()).collect(),
        scalars: s.scalars.iter().map(|x| (x.name.clone(), x.op)).collect(),
        counts: s.counts.iter().map(|c| (c.name.clone(), c.matrix)).collect(),
        len_vars: std::mem::take(&mut s.len_vars),
        param_deg: Vec::new(),
        scopes: vec![Vec::new()],
    };
    r.params(s);
    for b in &mut s.buffers {
        r.begin();
        let d = r.expr(&mut b.len, Ctx::Len);
        r.param_deg.push(d);
    }
    if let Some(extra) = r.len_vars.get(MAX_LEN_VARS) {
        let d = Diagnostic::new(
            DiagKind::SyntaxError,
            extra.span,
            format!(
                "`{}` is a length variable beyond the {MAX_LEN_VARS} a schedule may use",
                extra.name
            ),
        );
        r.begin();
        r.push(d);
    }
    r.ranges(s);
    for e in &mut s.requires {
        r.begin();
        r.expr(e, Ctx::Attr);
    }
    if let Some(p) = &mut s.postcondition {
        r.begin();
        r.post(&mut p.kind, p.span);
    }
    let len_bindings = lengths::bindings(&s.buffers, &r.len_vars);
    if len_bindings.len() < r.len_vars.len() && r.sink.is_empty() {
        let names: Vec<String> = (0..r.len_vars.len())
            .filter(|v| !len_bindings.iter().any(|b| b.var == *v))
            .map(|v| format!("`{}`", r.len_vars[v].name))
            .collect();
        r.begin();
        r.push(
            Diagnostic::new(
                DiagKind::NonLinearLength,
                s.span,
                format!(
                    "the buffer lengths do not determine the length variable{} {}",
                    if names.len() == 1 { "" } else { "s" },
                    names.join(", ")
                ),
            )
            .with_hint("give each length variable a buffer whose length uses it and already-determined variables only"),
        );
    }
    r.block(&mut s.body);
    s.len_vars = r.len_vars;
    Resolution {
        diagnostics: r.sink.into_vec(),
        len_bindings,
    }
}

/// The diagnostics of [`resolve`] on a copy of `s` (the checker's step 0
/// starts with them).
pub(crate) fn check(s: &Schedule) -> Vec<Diagnostic> {
    resolve(&mut s.clone()).diagnostics
}

/// Where an expression stands, which decides the names it may use.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    /// Statement expressions: `rank`, `world`, scalars, loop variables, `let`s.
    Body,
    /// Region bounds and `scratch` lengths: also length variables.
    Bound,
    /// A parameter's length: `world`, scalars; any other name is a length
    /// variable.
    Len,
    /// Attribute expressions (`#[requires]`, `root = ..` of a postcondition):
    /// `world` and scalars.
    Attr,
    /// Bounds of a scalar range in `#[verify]`: `world` only.
    WorldOnly,
    /// The index of a count in a parameter's length: `rank`, `world`,
    /// scalars.
    CountIndex,
}

impl Ctx {
    fn allows_locals(self) -> bool {
        matches!(self, Ctx::Body | Ctx::Bound)
    }

    fn allows_len_vars(self) -> bool {
        matches!(self, Ctx::Bound | Ctx::Len)
    }
}

/// What a name in scope is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Local {
    Int,
    /// A scratch buffer and the degree of its length in the length variables.
    Scratch(u8),
    Handle,
}

struct Resolver {
    sink: Sink,
    /// The current statement (or other source item): one diagnostic each.
    key: u64,
    buffers: Vec<String>,
    /// Scalar parameters and whether each is an operator parameter.
    scalars: Vec<(String, bool)>,
    /// Count parameters and whether each is a matrix.
    counts: Vec<(String, bool)>,
    len_vars: Vec<Ident>,
    /// Degree (0 or 1) of each buffer parameter's length.
    param_deg: Vec<u8>,
    /// Lexical scopes of `let`s, loop variables, scratch buffers and handles.
    scopes: Vec<Vec<(String, Local)>>,
}

impl Resolver {
    // ------------------------------------------------------------ diagnostics

    /// Starts a new statement (or other source item).
    fn begin(&mut self) {
        self.key += 1;
    }

    fn push(&mut self, d: Diagnostic) {
        self.sink.push(self.key, d);
    }

    fn report(&mut self, kind: DiagKind, span: SpanId, message: String, hint: Option<String>) {
        let mut d = Diagnostic::new(kind, span, message);
        d.hint = hint;
        self.push(d);
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
        if RESERVED.contains(&name.name.as_str()) {
            self.report(
                DiagKind::SyntaxError,
                name.span,
                format!("`{}` is reserved and cannot be rebound", name.name),
                Some("choose another name".to_owned()),
            );
        }
        if let Some(scope) = self.scopes.last_mut() {
            scope.push((name.name.clone(), local));
        }
    }

    fn scalar(&self, name: &str) -> Option<usize> {
        self.scalars.iter().position(|(s, _)| s == name)
    }

    // ------------------------------------------------------------ parameters and attributes

    fn params(&mut self, s: &Schedule) {
        let params = s
            .buffers
            .iter()
            .map(|b| (&b.name, b.span))
            .chain(s.scalars.iter().map(|x| (&x.name, x.span)))
            .chain(s.counts.iter().map(|c| (&c.name, c.span)));
        let mut seen: Vec<&str> = Vec::new();
        for (name, span) in params {
            self.begin();
            if RESERVED.contains(&name.as_str()) || name == "comm" || name.starts_with("__") {
                let hint = if name == "comm" {
                    "the generated function's first parameter is `comm: &hcomm::Comm`".to_owned()
                } else if name.starts_with("__") {
                    "names starting with `__` belong to the generated code".to_owned()
                } else {
                    format!("`{name}` is given by the communicator")
                };
                self.report(
                    DiagKind::SyntaxError,
                    span,
                    format!("`{name}` is reserved and cannot name a parameter"),
                    Some(hint),
                );
            } else if seen.contains(&name.as_str()) {
                self.report(
                    DiagKind::SyntaxError,
                    span,
                    format!("duplicate parameter `{name}`"),
                    None,
                );
            }
            seen.push(name);
        }
    }

    fn ranges(&mut self, s: &mut Schedule) {
        self.len_ranges(s);
        let mut has_range = vec![false; self.scalars.len()];
        for r in &mut s.verify.scalars {
            self.begin();
            self.range(r, &mut has_range);
        }
        for (i, scalar) in s.scalars.iter().enumerate() {
            if !scalar.op && !has_range[i] {
                self.begin();
                let name = &scalar.name;
                self.report(
                    DiagKind::MissingRange,
                    scalar.span,
                    format!("scalar parameter `{name}` has no range in `#[verify]`"),
                    Some(format!(
                        "add `{name} in LO..HI` to `#[verify(..)]`, e.g. `#[verify(world in 1..=16, {name} in 0..world)]`"
                    )),
                );
            }
        }
    }

    fn range(&mut self, r: &mut ScalarRange, has_range: &mut [bool]) {
        let name = r.name.name.as_str();
        let Some(i) = self.scalar(name) else {
            let lens = self.len_vars.iter().map(|v| v.name.as_str());
            let candidates = self
                .scalars
                .iter()
                .map(|(s, _)| s.as_str())
                .chain(lens)
                .chain(["world"]);
            let hint = suggest(name, candidates).map(did_you_mean);
            let message = if self.buffers.iter().any(|b| b == name) {
                format!("`{name}` is a buffer; `#[verify]` gives ranges to `world` and scalar parameters")
            } else {
                format!("`{name}` is not `world`, a scalar parameter or a length variable")
            };
            self.report(DiagKind::UnknownName, r.name.span, message, hint);
            return;
        };
        r.scalar = i;
        if self.scalars[i].1 {
            self.report(
                DiagKind::SyntaxError,
                r.span,
                format!("`{name}` is an operator parameter and takes no range in `#[verify]`"),
                Some("every operator (`sum`, `prod`, `max`, `min`) is checked".to_owned()),
            );
            return;
        }
        if has_range[i] {
            self.report(
                DiagKind::SyntaxError,
                r.span,
                format!("`{name}` has two ranges in `#[verify]`"),
                None,
            );
            return;
        }
        has_range[i] = true;
        self.expr(&mut r.lo, Ctx::WorldOnly);
        self.expr(&mut r.hi, Ctx::WorldOnly);
    }

    fn post(&mut self, kind: &mut PostKind, span: SpanId) {
        let (bufs, op, root): (Vec<&mut BufRef>, Option<&mut OpExpr>, Option<&mut Expr>) = match kind {
            PostKind::AllGather { input, output } | PostKind::AllToAll { input, output } => {
                (vec![input, output], None, None)
            }
            PostKind::AllReduce { input, output, op } | PostKind::ReduceScatter { input, output, op } => {
                (vec![input, output], Some(op), None)
            }
            PostKind::AllGatherV { input, output, counts } => {
                self.count_ref(counts, false);
                (vec![input, output], None, None)
            }
            PostKind::AllToAllV { input, output, sizes } => {
                self.count_ref(sizes, true);
                (vec![input, output], None, None)
            }
            PostKind::Broadcast { buf, root } => (vec![buf], None, Some(root)),
            PostKind::Shift {
                input,
                output,
                from,
                blocks,
            } => {
                self.buf_ref(input);
                self.buf_ref(output);
                // a function of the rank (and of the block variable):
                // `rank`, `world` and scalars; no other local is in scope
                // in an attribute
                self.scopes.push(Vec::new());
                if let Some(b) = blocks {
                    for parts in [&mut b.out_parts, &mut b.in_parts].into_iter().flatten() {
                        self.expr(parts, Ctx::Attr);
                    }
                    self.bind(&b.var, Local::Int);
                    self.expr(&mut b.block, Ctx::Body);
                }
                self.expr(from, Ctx::Body);
                self.scopes.pop();
                return;
            }
            PostKind::Reduce {
                input,
                output,
                op,
                root,
            } => (vec![input, output], Some(op), Some(root)),
        };
        for b in bufs {
            self.buf_ref(b);
        }
        if let Some(op) = op {
            self.op(op, span);
        }
        if let Some(root) = root {
            self.expr(root, Ctx::Attr);
        }
    }

    // ------------------------------------------------------------ expressions

    /// Resolves `e`; returns its degree in the length variables (0 or 1;
    /// non-linear uses are reported).
    fn expr(&mut self, e: &mut Expr, ctx: Ctx) -> u8 {
        let span = e.span;
        match &mut e.kind {
            ExprKind::Int(_) => 0,
            ExprKind::Name(n) => self.name(n, span, ctx),
            ExprKind::Unary(op, x) => {
                let d = self.expr(x, ctx);
                if d > 0 && *op == UnOp::Not {
                    self.nonlinear(span, "`!` of a length");
                }
                d
            }
            ExprKind::Binary(op, a, b) => {
                let (da, db) = (self.expr(a, ctx), self.expr(b, ctx));
                match op {
                    BinOp::Add | BinOp::Sub => da.max(db),
                    BinOp::Mul => {
                        if da > 0 && db > 0 {
                            let what = if has_count(a) || has_count(b) {
                                "a product of two lengths, at least one of them a count"
                            } else {
                                "a product of two length variables"
                            };
                            self.nonlinear(span, what);
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
                }
            }
            ExprKind::Call(f, args) => {
                if args.len() != f.arity() {
                    let n = f.arity();
                    self.report(
                        DiagKind::SyntaxError,
                        span,
                        format!(
                            "`{}` takes {n} argument{}, not {}",
                            f.as_str(),
                            if n == 1 { "" } else { "s" },
                            args.len()
                        ),
                        None,
                    );
                }
                let mut deg = 0;
                for a in args.iter_mut() {
                    deg = deg.max(self.expr(a, ctx));
                }
                if deg > 0 {
                    self.nonlinear(span, &format!("`{}` of a length variable", f.as_str()));
                }
                0
            }
            ExprKind::Count(c) => self.count(c, span, ctx),
        }
    }

    /// Resolves a count; its degree is 1, like a length variable's, where
    /// lengths may stand.
    fn count(&mut self, c: &mut Count, span: SpanId, ctx: Ctx) -> u8 {
        if !ctx.allows_len_vars() {
            self.report(
                DiagKind::UnknownName,
                span,
                "a count is a length, not an integer known to the checker".to_owned(),
                Some(COUNT_NOTE.to_owned()),
            );
            return 0;
        }
        let index_ctx = if ctx == Ctx::Len { Ctx::CountIndex } else { Ctx::Body };
        match c {
            Count::Entry(line, i) => {
                self.line(line, ctx);
                self.index(i, index_ctx);
            }
            Count::Sum(line, range) => {
                self.line(line, ctx);
                if let Some((a, b)) = range {
                    self.index(a, index_ctx);
                    self.index(b, index_ctx);
                }
            }
        }
        1
    }

    /// An index into a line or a part number: an integer, never a length.
    fn index(&mut self, e: &mut Expr, ctx: Ctx) {
        if self.expr(e, ctx) > 0 {
            self.nonlinear(e.span, "an index of counts involving a length");
        }
    }

    /// Resolves a line of counts: a vector, or a row or column of a matrix.
    fn line(&mut self, line: &mut CountLine, ctx: Ctx) {
        let index_ctx = if ctx == Ctx::Len { Ctx::CountIndex } else { Ctx::Body };
        let matrix = match &mut line.kind {
            LineKind::Vector => false,
            LineKind::Row(i) | LineKind::Col(i) => {
                self.index(i, index_ctx);
                true
            }
        };
        self.count_ref(&mut line.count, matrix);
    }

    /// Resolves the name of a count parameter, which must be a matrix when
    /// `matrix` (else a vector).
    fn count_ref(&mut self, c: &mut CountRef, matrix: bool) {
        let name = c.name.as_str();
        match self.counts.iter().position(|(n, _)| n == name) {
            Some(i) if self.counts[i].1 == matrix => c.param = i,
            Some(i) => {
                c.param = i;
                let message = if matrix {
                    format!("`{name}` is a count vector; a row `{name}[i]`, a column `col({name}, j)` and `all_to_allv` need a count matrix `&[[usize; world]; world]`")
                } else {
                    format!("`{name}` is a count matrix; name one of its lines: a row `{name}[i]` or a column `col({name}, j)`")
                };
                self.report(DiagKind::UnknownName, c.span, message, None);
            }
            None => {
                let hint = suggest(name, self.counts.iter().map(|(n, _)| n.as_str())).map_or_else(
                    || "declare it as a parameter `NAME: &[usize; world]` (or `&[[usize; world]; world]`)".to_owned(),
                    did_you_mean,
                );
                self.report(
                    DiagKind::UnknownName,
                    c.span,
                    format!("`{name}` is not a count parameter"),
                    Some(hint),
                );
            }
        }
    }

    fn name(&mut self, n: &mut Name, span: SpanId, ctx: Ctx) -> u8 {
        let kind = match n.kind {
            NameKind::Var => self.lookup_name(&n.text, span, ctx),
            kind => kind,
        };
        n.kind = self.admit(kind, &n.text, span, ctx);
        u8::from(matches!(n.kind, NameKind::LenVar(_)) && ctx.allows_len_vars())
    }

    /// What the name `text` refers to; reports names that refer to nothing
    /// (and locals that are not integers).
    fn lookup_name(&mut self, text: &str, span: SpanId, ctx: Ctx) -> NameKind {
        if text == "world" {
            return NameKind::World;
        }
        if text == "rank" {
            return NameKind::Rank;
        }
        if ctx.allows_locals() {
            match self.lookup(text) {
                Some(Local::Int) => return NameKind::Var,
                Some(local) => {
                    let what = if local == Local::Handle {
                        "a request handle"
                    } else {
                        "a scratch buffer"
                    };
                    self.report(
                        DiagKind::UnknownName,
                        span,
                        format!("`{text}` is {what}, not an integer"),
                        None,
                    );
                    return NameKind::Var;
                }
                None => {}
            }
        }
        if let Some(i) = self.scalar(text) {
            return NameKind::Scalar(i);
        }
        if let Some(i) = self.len_vars.iter().position(|v| v.name == text) {
            return NameKind::LenVar(i);
        }
        if let Some((_, matrix)) = self.counts.iter().find(|(n, _)| n == text) {
            let example = if *matrix {
                format!("`{text}[rank][j]`, `sum({text}[rank])`, `sum(col({text}, rank))`")
            } else {
                format!("`{text}[rank]`, `sum({text})`")
            };
            self.report(
                DiagKind::UnknownName,
                span,
                format!("`{text}` is a count parameter, not an integer"),
                Some(format!("{COUNT_NOTE}, e.g. {example}")),
            );
            return NameKind::Var;
        }
        if ctx == Ctx::Len {
            self.len_vars.push(Ident {
                name: text.to_owned(),
                span,
            });
            return NameKind::LenVar(self.len_vars.len() - 1);
        }
        let candidates = self.candidates(ctx);
        let hint = suggest(text, candidates.iter().map(String::as_str)).map(did_you_mean);
        let message = if self.buffers.iter().any(|b| b == text) {
            format!("`{text}` is a buffer, not an integer")
        } else {
            format!("`{text}` is not defined here")
        };
        self.report(DiagKind::UnknownName, span, message, hint);
        NameKind::Var
    }

    /// Checks that `kind` may stand in `ctx`; reports it when not.
    fn admit(&mut self, kind: NameKind, text: &str, span: SpanId, ctx: Ctx) -> NameKind {
        match kind {
            NameKind::World | NameKind::Var => kind,
            NameKind::Rank => {
                if ctx.allows_locals() || ctx == Ctx::CountIndex {
                    return kind;
                }
                let place = match ctx {
                    Ctx::Len => "a buffer length",
                    Ctx::WorldOnly => "a scalar range",
                    _ => "an attribute",
                };
                self.report(
                    DiagKind::UnknownName,
                    span,
                    format!("`rank` cannot appear in {place}"),
                    Some("it must have the same value on every rank".to_owned()),
                );
                NameKind::World
            }
            NameKind::Scalar(i) => {
                match self.scalars.get(i) {
                    None => self.report(
                        DiagKind::UnknownName,
                        span,
                        format!("`{text}` is not a scalar parameter"),
                        None,
                    ),
                    Some((_, true)) => self.report(
                        DiagKind::UnknownName,
                        span,
                        format!("`{text}` is an operator parameter, not an integer"),
                        Some(OP_PARAM_NOTE.to_owned()),
                    ),
                    Some(_) if ctx == Ctx::WorldOnly => self.report(
                        DiagKind::UnknownName,
                        span,
                        format!("`{text}`: the range of a scalar may depend on `world` only"),
                        suggest(text, ["world"]).map(did_you_mean),
                    ),
                    Some(_) => {}
                }
                kind
            }
            NameKind::LenVar(i) => {
                if i >= self.len_vars.len() {
                    self.report(
                        DiagKind::UnknownName,
                        span,
                        format!("`{text}` is not a length variable"),
                        None,
                    );
                } else if !ctx.allows_len_vars() {
                    self.report(
                        DiagKind::UnknownName,
                        span,
                        format!("`{text}` is a length variable and cannot appear here"),
                        Some(LEN_VAR_NOTE.to_owned()),
                    );
                }
                kind
            }
        }
    }

    /// Every integer name visible in `ctx`, for suggestions.
    fn candidates(&self, ctx: Ctx) -> Vec<String> {
        let mut names: Vec<String> = vec!["world".to_owned()];
        if ctx == Ctx::WorldOnly {
            return names;
        }
        names.extend(self.scalars.iter().map(|(s, _)| s.clone()));
        if ctx.allows_locals() {
            names.push("rank".to_owned());
            for (name, local) in self.scopes.iter().flatten() {
                if *local == Local::Int {
                    names.push(name.clone());
                }
            }
        }
        if ctx == Ctx::Bound {
            names.extend(self.len_vars.iter().map(|v| v.name.clone()));
        }
        names
    }

    /// An operator: a keyword, or an operator parameter (`span` locates it
    /// when it has no name of its own).
    fn op(&mut self, op: &mut OpExpr, span: SpanId) {
        match op {
            OpExpr::Lit(_) => {}
            OpExpr::Param(i) => {
                if !self.scalars.get(*i).is_some_and(|(_, op)| *op) {
                    let name = self.scalars.get(*i).map_or("?", |(s, _)| s.as_str()).to_owned();
                    self.report(
                        DiagKind::UnknownName,
                        span,
                        format!("`{name}` is not an operator parameter"),
                        Some("an operator is `sum`, `prod`, `max`, `min` or a parameter `NAME: ReduceOp`".to_owned()),
                    );
                }
            }
            OpExpr::Name(name) => {
                if let Some(i) = self.scalar(&name.name).filter(|&i| self.scalars[i].1) {
                    *op = OpExpr::Param(i);
                    return;
                }
                let candidates = ["sum", "prod", "max", "min"]
                    .into_iter()
                    .chain(self.scalars.iter().filter(|(_, op)| *op).map(|(s, _)| s.as_str()));
                let hint = suggest(&name.name, candidates)
                    .map_or_else(|| "declare it as a parameter `NAME: ReduceOp`".to_owned(), did_you_mean);
                let (text, at) = (name.name.clone(), name.span);
                self.report(
                    DiagKind::UnknownName,
                    at,
                    format!("`{text}` is not an operator (`sum`, `prod`, `max`, `min`) or an operator parameter"),
                    Some(hint),
                );
            }
        }
    }

    // ------------------------------------------------------------ regions

    /// Resolves a buffer reference; returns the degree of its length.
    fn buf_ref(&mut self, b: &mut BufRef) -> u8 {
        if let BufKind::Param(i) = b.kind {
            if let Some(&d) = self.param_deg.get(i) {
                return d;
            }
            if i < self.buffers.len() {
                return 0;
            }
            self.report(
                DiagKind::UnknownName,
                b.span,
                format!("`{}` is not a buffer parameter", b.name),
                None,
            );
            return 0;
        }
        let text = b.name.as_str();
        match self.lookup(text) {
            Some(Local::Scratch(d)) => return d,
            Some(local) => {
                let what = if local == Local::Handle {
                    "a request handle"
                } else {
                    "an integer"
                };
                self.report(
                    DiagKind::UnknownName,
                    b.span,
                    format!("`{text}` is {what}, not a buffer"),
                    None,
                );
                return 0;
            }
            None => {}
        }
        if let Some(i) = self.buffers.iter().position(|p| p == text) {
            b.kind = BufKind::Param(i);
            return self.param_deg.get(i).copied().unwrap_or(0);
        }
        let scratch = self
            .scopes
            .iter()
            .flatten()
            .filter(|(_, l)| matches!(l, Local::Scratch(_)))
            .map(|(n, _)| n.as_str());
        let hint = suggest(text, self.buffers.iter().map(String::as_str).chain(scratch)).map(did_you_mean);
        let message = if self.scalar(text).is_some() || RESERVED.contains(&text) {
            format!("`{text}` is an integer, not a buffer")
        } else {
            format!("there is no buffer `{text}`")
        };
        let span = b.span;
        self.report(DiagKind::UnknownName, span, message, hint);
        0
    }

    /// Resolves a region; returns the degree of its length.
    fn region(&mut self, r: &mut Region) -> u8 {
        match &mut r.kind {
            RegionKind::Whole(b) => self.buf_ref(b),
            RegionKind::Slice { base, start, end } => {
                self.region(base);
                let ds = self.expr(start, Ctx::Bound);
                let de = self.expr(end, Ctx::Bound);
                ds.max(de)
            }
            RegionKind::Chunk { base, index, parts } => {
                let dbase = self.region(base);
                let di = self.expr(index, Ctx::Bound);
                if let Some(p) = parts {
                    if self.expr(p, Ctx::Bound) > 0 {
                        self.nonlinear(p.span, "a chunk count involving a length variable");
                    }
                }
                if di > 0 && dbase > 0 {
                    self.nonlinear(
                        index.span,
                        "a chunk index involving a length variable, multiplied by a chunk length that involves one",
                    );
                }
                dbase.max(di)
            }
            RegionKind::Part { base, line, index } => {
                self.region(base);
                self.line(line, Ctx::Bound);
                self.index(index, Ctx::Body);
                1
            }
        }
    }

    // ------------------------------------------------------------ statements

    fn block(&mut self, stmts: &mut [Stmt]) {
        self.scopes.push(Vec::new());
        for s in stmts {
            self.stmt(s);
        }
        self.scopes.pop();
    }

    fn p2p(&mut self, region: &mut Region, peer: &mut Expr, tag: Option<&mut Expr>) {
        self.region(region);
        self.expr(peer, Ctx::Body);
        if let Some(t) = tag {
            self.expr(t, Ctx::Body);
        }
    }

    fn stmt(&mut self, st: &mut Stmt) {
        self.begin();
        let span = st.span;
        match &mut st.kind {
            StmtKind::Send { region, peer, tag } => self.p2p(region, peer, tag.as_mut()),
            StmtKind::Recv {
                region,
                peer,
                tag,
                reduce,
            } => {
                self.p2p(region, peer, tag.as_mut());
                if let Some(op) = reduce {
                    self.op(op, span);
                }
            }
            StmtKind::Isend {
                handle,
                region,
                peer,
                tag,
            } => {
                self.p2p(region, peer, tag.as_mut());
                self.bind(handle, Local::Handle);
            }
            StmtKind::Irecv {
                handle,
                region,
                peer,
                tag,
                reduce,
            } => {
                self.p2p(region, peer, tag.as_mut());
                if let Some(op) = reduce {
                    self.op(op, span);
                }
                self.bind(handle, Local::Handle);
            }
            // A handle that is not in scope is the checker's `unknown request`.
            StmtKind::Wait { .. } | StmtKind::WaitAll => {}
            StmtKind::Batch { body } => self.block(body),
            StmtKind::Copy { src, dst } => {
                self.region(src);
                self.region(dst);
            }
            StmtKind::Accumulate { src, dst, op } => {
                self.region(src);
                self.region(dst);
                self.op(op, span);
            }
            StmtKind::Let { name, value } => {
                self.expr(value, Ctx::Body);
                self.bind(name, Local::Int);
            }
            StmtKind::Scratch { name, len } => {
                let d = self.expr(len, Ctx::Bound);
                self.bind(name, Local::Scratch(d));
            }
            StmtKind::For {
                var, start, end, body, ..
            } => {
                self.expr(start, Ctx::Body);
                self.expr(end, Ctx::Body);
                self.scopes.push(Vec::new());
                self.bind(var, Local::Int);
                self.block(body);
                self.scopes.pop();
            }
            StmtKind::If { branches, else_body } => {
                for (cond, body) in branches {
                    self.begin();
                    self.expr(cond, Ctx::Body);
                    self.block(body);
                }
                if let Some(body) = else_body {
                    self.block(body);
                }
            }
            StmtKind::Collective { kind, over } => {
                self.collective(kind, span);
                if let Some(o) = over {
                    self.expr(o, Ctx::Body);
                }
            }
        }
    }

    fn collective(&mut self, kind: &mut Collective, span: SpanId) {
        match kind {
            Collective::AllReduce { src, dst, op } => {
                self.region(src);
                if let Some(d) = dst {
                    self.region(d);
                }
                self.op(op, span);
            }
            Collective::AllGather { src, dst } | Collective::AllToAll { src, dst } => {
                self.region(src);
                self.region(dst);
            }
            Collective::ReduceScatter { src, dst, op } => {
                self.region(src);
                self.region(dst);
                self.op(op, span);
            }
            Collective::Broadcast { region, root } => {
                self.region(region);
                self.expr(root, Ctx::Body);
            }
            Collective::Reduce { src, dst, op, root } => {
                self.region(src);
                self.region(dst);
                self.op(op, span);
                self.expr(root, Ctx::Body);
            }
            Collective::AllGatherV { src, dst, counts } => {
                self.region(src);
                self.region(dst);
                self.count_ref(counts, false);
            }
            Collective::AllToAllV { src, dst, sizes } => {
                self.region(src);
                self.region(dst);
                self.count_ref(sizes, true);
            }
            Collective::Barrier => {}
        }
    }
}

/// Whether a count occurs in `e`.
fn has_count(e: &Expr) -> bool {
    match &e.kind {
        ExprKind::Count(_) => true,
        ExprKind::Int(_) | ExprKind::Name(_) => false,
        ExprKind::Unary(_, x) => has_count(x),
        ExprKind::Binary(_, a, b) => has_count(a) || has_count(b),
        ExprKind::Call(_, args) => args.iter().any(has_count),
    }
}
