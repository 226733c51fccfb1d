//! The schedule IR: what `comm_schedule!` lowers a `fn` item into.
//!
//! Plain owned data (`Vec`, `Box`, `String`, all fields public), built by
//! [`crate::syntax`] from a schedule's text, at compile time by the macro
//! and at run time from the same text (the generated `NAME::SOURCE`, or a
//! file read by `hcomm::checker`). Every node carries a [`SpanId`], an
//! opaque index into the parser's table of source spans
//! ([`crate::syntax::SpanTable`]); the checker only passes them through.
//!
//! # Names
//!
//! The macro writes every name as text: [`NameKind::Var`] in expressions,
//! [`BufKind::Scratch`] for buffers, [`OpExpr::Name`] for an operator
//! parameter, no [`Schedule::len_vars`] and `resolve::UNRESOLVED` in
//! [`ScalarRange::scalar`]. `resolve::resolve` then decides what
//! each name refers to (reporting `unknown name` and friends) and rewrites
//! the kinds in place. The checker trusts the kinds of `rank`, `world`,
//! scalar parameters and length variables, and looks loop variables and
//! `let` bindings ([`NameKind::Var`]), `scratch` buffers and request handles
//! up by text, lexically.
//!
//! # Scoping
//!
//! `let` bindings, `scratch` buffers and request handles (`let h = isend ..`)
//! are scoped like Rust `let`s: visible from the statement after their
//! definition to the end of the enclosing block (`for`/`if` body, `batch`
//! body, or the function body); a later definition with the same name shadows
//! an earlier one. A request whose handle goes out of scope (or is
//! shadowed) while still pending can no longer be waited by name; a later
//! `wait all` completes it, and one that reaches the end of the schedule
//! still pending is an `unwaited request`.

pub mod visit;

/// Opaque source location: an index into the parser's table of spans
/// ([`crate::syntax::SpanTable`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct SpanId(pub u32);

/// An identifier with its location (buffer, scalar, loop variable, `let`,
/// scratch buffer or request handle name).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Ident {
    /// The identifier's text.
    pub name: String,
    /// Where it is written.
    pub span: SpanId,
}

/// One `fn` item of a `comm_schedule!` invocation.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// The function's name.
    pub name: String,
    /// Buffer parameters, in declaration order (interleaved scalars removed).
    pub buffers: Vec<Buffer>,
    /// Scalar (`usize`) parameters, in declaration order. Scalar values passed
    /// to the checker are in this order.
    pub scalars: Vec<Scalar>,
    /// Count parameters (`NAME: &[usize; world]`, `NAME: &[[usize; world];
    /// world]`), in declaration order; [`CountLine`]s index this list.
    pub counts: Vec<CountParam>,
    /// Length variables: every identifier used in a buffer `LEN` that is not
    /// `world` or a scalar, in order of first appearance (empty as the macro
    /// writes it; resolution fills it). [`NameKind::LenVar`] indexes this
    /// list.
    pub len_vars: Vec<Ident>,
    /// The `#[verify(..)]` attribute, or [`VerifySpec::default_for`] when absent.
    pub verify: VerifySpec,
    /// `#[requires(EXPR)]` attributes, all of which must hold. Their
    /// expressions may use `world` and scalars only.
    pub requires: Vec<Expr>,
    /// The `#[postcondition(..)]` attribute, if any.
    pub postcondition: Option<Postcondition>,
    /// The function body.
    pub body: Vec<Stmt>,
    /// The whole item (used when nothing smaller is at fault).
    pub span: SpanId,
}

/// A buffer parameter `NAME: &[T; LEN]` or `NAME: &mut [T; LEN]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Buffer {
    /// The parameter name.
    pub name: String,
    /// `true` for `&mut [T; ..]`; writing a read-only buffer is an error.
    pub writable: bool,
    /// The declared length, linear in the length variables.
    pub len: Expr,
    /// The parameter.
    pub span: SpanId,
}

/// A scalar parameter `NAME: usize`, or an operator parameter
/// `NAME: ReduceOp`.
///
/// An operator parameter is a scalar whose value is the index of the operator
/// in [`Op::ALL`] (`sum` = 0, `prod` = 1, `max` = 2, `min` = 3). It has no
/// range in `#[verify]`: every operator is checked. It may be used only where
/// an operator is written ([`OpExpr::Param`]), never in an expression.
#[derive(Clone, Debug, PartialEq)]
pub struct Scalar {
    /// The parameter name.
    pub name: String,
    /// `true` for an operator parameter (`NAME: ReduceOp`).
    pub op: bool,
    /// The parameter.
    pub span: SpanId,
}

impl Scalar {
    /// The value as the checker's diagnostics write it: the operator's
    /// keyword for an operator parameter, the number otherwise.
    pub fn show(&self, value: i64) -> String {
        match (self.op, Op::from_index(value)) {
            (true, Some(op)) => op.as_str().to_owned(),
            _ => value.to_string(),
        }
    }
}

/// A count parameter: `NAME: &[usize; world]` (a count vector) or `NAME:
/// &[[usize; world]; world]` (a count matrix, entry `[i][j]` being what rank
/// `i` sends to rank `j`). Its entries are lengths the checker keeps
/// symbolic: what it decides about them holds for every value `>= 0`.
#[derive(Clone, Debug, PartialEq)]
pub struct CountParam {
    /// The parameter name.
    pub name: String,
    /// `true` for a `world x world` matrix.
    pub matrix: bool,
    /// The parameter.
    pub span: SpanId,
}

/// A count parameter named where a line, `all_gatherv` or `all_to_allv`
/// needs one.
#[derive(Clone, Debug, PartialEq)]
pub struct CountRef {
    /// The name as written.
    pub name: String,
    /// Index into [`Schedule::counts`]; [`crate::resolve::UNRESOLVED`] until
    /// resolved.
    pub param: usize,
    /// The name.
    pub span: SpanId,
}

/// A line of a count parameter: a vector, a row or a column of a matrix.
#[derive(Clone, Debug, PartialEq)]
pub struct CountLine {
    /// The count parameter.
    pub count: CountRef,
    /// Which line of it.
    pub kind: LineKind,
}

/// Which line of a count parameter a [`CountLine`] is.
#[derive(Clone, Debug, PartialEq)]
pub enum LineKind {
    /// `NAME` (a count vector).
    Vector,
    /// `NAME[ROW]`: what rank `ROW` sends to each rank.
    Row(Box<Expr>),
    /// `col(NAME, COL)`: what each rank sends to rank `COL`.
    Col(Box<Expr>),
}

/// A length over count entries (reference, section 10).
#[derive(Clone, Debug, PartialEq)]
pub enum Count {
    /// `LINE[INDEX]`: one entry.
    Entry(CountLine, Box<Expr>),
    /// `sum(LINE)` (`range == None`) or `sum(LINE[A..B])`.
    Sum(CountLine, Option<(Box<Expr>, Box<Expr>)>),
}

/// The `#[verify(..)]` attribute: which world sizes and scalar values are
/// checked at compile time.
#[derive(Clone, Debug, PartialEq)]
pub struct VerifySpec {
    /// The world sizes.
    pub world: WorldSet,
    /// One range per scalar parameter (in any order). A scalar without one is
    /// a `missing range` error; two for the same scalar are a `syntax error`.
    pub scalars: Vec<ScalarRange>,
    /// One range per length variable that has one (in any order); a length
    /// variable without one ranges over `1..` (reference, section 2).
    pub lengths: Vec<LenRange>,
    /// The attribute (or the item's span for the default).
    pub span: SpanId,
}

impl VerifySpec {
    /// The spec used when the attribute is absent: `world in 1..=16`, no
    /// scalar ranges.
    pub fn default_for(span: SpanId) -> Self {
        Self {
            world: WorldSet::Range {
                lo: 1,
                hi: 16,
                inclusive: true,
            },
            scalars: Vec::new(),
            lengths: Vec::new(),
            span,
        }
    }

    /// The values of length variable `var`: its declared range, else `1..`
    /// (first value, last value when bounded).
    pub fn len_range(&self, var: usize) -> (i64, Option<i64>) {
        self.lengths
            .iter()
            .find(|r| r.var == var)
            .map_or((1, None), |r| (r.lo, r.hi))
    }
}

/// The world sizes of `#[verify(world in ..)]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WorldSet {
    /// `world in lo..hi` (`inclusive == false`) or `world in lo..=hi`.
    Range {
        /// First size.
        lo: i64,
        /// Last size (inclusive) or one past it.
        hi: i64,
        /// Whether `hi` is part of the set.
        inclusive: bool,
    },
    /// `world in [a, b, c]`; order and duplicates do not matter.
    List(Vec<i64>),
}

/// `NAME in LO..HI` (or `..=`) inside `#[verify(..)]`. The bounds may use
/// `world` (and integer literals) only.
#[derive(Clone, Debug, PartialEq)]
pub struct ScalarRange {
    /// Index into [`Schedule::scalars`] (`resolve::UNRESOLVED` as the macro
    /// writes it; resolution sets it from `name`).
    pub scalar: usize,
    /// The scalar's name as written in the attribute.
    pub name: Ident,
    /// Lower bound (inclusive).
    pub lo: Expr,
    /// Upper bound.
    pub hi: Expr,
    /// `true` for `..=` (then `hi` is part of the range).
    pub inclusive: bool,
    /// The whole `NAME in LO..HI`.
    pub span: SpanId,
}

/// `NAME in LO..`, `NAME in LO..HI` or `NAME in LO..=HI` inside
/// `#[verify(..)]` for a length variable: integer constants, `LO >= 0`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LenRange {
    /// Index into [`Schedule::len_vars`] (`resolve::UNRESOLVED` until
    /// resolution sets it from `name`).
    pub var: usize,
    /// The variable's name as written in the attribute.
    pub name: Ident,
    /// The first value.
    pub lo: i64,
    /// The last value (inclusive); `None` for `LO..`.
    pub hi: Option<i64>,
    /// The whole `NAME in ..`.
    pub span: SpanId,
}

impl LenRange {
    /// The range as written in messages: `0..`, `1..=16`.
    pub fn text(&self) -> String {
        match self.hi {
            Some(hi) => format!("{}..={hi}", self.lo),
            None => format!("{}..", self.lo),
        }
    }
}

/// A reduction operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// `sum`
    Sum,
    /// `prod`
    Prod,
    /// `max`
    Max,
    /// `min`
    Min,
}

impl Op {
    /// Every operator, in the order of an operator parameter's values.
    pub const ALL: [Op; 4] = [Op::Sum, Op::Prod, Op::Max, Op::Min];

    /// The operator whose index in [`Op::ALL`] is `value`.
    pub fn from_index(value: i64) -> Option<Op> {
        usize::try_from(value).ok().and_then(|i| Op::ALL.get(i).copied())
    }

    /// The DSL keyword (`sum`, `prod`, `max`, `min`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Op::Sum => "sum",
            Op::Prod => "prod",
            Op::Max => "max",
            Op::Min => "min",
        }
    }
}

/// Where an operator is written: a keyword or an operator parameter.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum OpExpr {
    /// `sum`, `prod`, `max` or `min`.
    Lit(Op),
    /// An operator parameter: index into [`Schedule::scalars`] (whose entry
    /// has `op` set).
    Param(usize),
    /// A name where an operator stands, before resolution
    /// (`resolve::resolve` turns it into [`OpExpr::Param`]).
    Name(Ident),
}

impl OpExpr {
    /// The operator with the scalar values `scalars` (in the order of
    /// [`Schedule::scalars`]); `None` when a parameter's value is not an
    /// operator index.
    pub fn resolve(&self, scalars: &[i64]) -> Option<Op> {
        match self {
            OpExpr::Lit(op) => Some(*op),
            OpExpr::Param(i) => Op::from_index(*scalars.get(*i)?),
            OpExpr::Name(_) => None,
        }
    }
}

impl From<Op> for OpExpr {
    fn from(op: Op) -> Self {
        OpExpr::Lit(op)
    }
}

/// The blocks of a block-wise `shift(IN.chunk(G, KI) -> OUT.chunk(j, KO),
/// from = F)`: rank `r`'s output block `j` (of `KO`) ends as rank `F`'s
/// input block `G` (of `KI`), `F` and `G` evaluated with `rank = r` and the
/// block variable `j`.
#[derive(Clone, Debug, PartialEq)]
pub struct ShiftBlocks {
    /// The block variable, bound by the output's `chunk(j, KO)`.
    pub var: Ident,
    /// `KO`: how many blocks the output has (`None`: `world`).
    pub out_parts: Option<Expr>,
    /// `G`: which input block output block `j` ends with.
    pub block: Expr,
    /// `KI`: how many blocks the input has (`None`: `world`).
    pub in_parts: Option<Expr>,
}

/// `#[postcondition(..)]`: the collective the schedule computes over the whole
/// communicator.
#[derive(Clone, Debug, PartialEq)]
pub struct Postcondition {
    /// Which collective.
    pub kind: PostKind,
    /// The attribute (primary span when no statement wrote a wrong element).
    pub span: SpanId,
}

/// The collective named by a postcondition. Buffers must be parameters
/// ([`BufKind::Param`]); the in-place form of `all_reduce(buf, OP)` has
/// `input == output`.
#[derive(Clone, Debug, PartialEq)]
pub enum PostKind {
    /// `all_gather(input -> output)`: every rank's `output` block `j` (of
    /// `world` blocks) is rank `j`'s `input`.
    AllGather {
        /// Input buffer.
        input: BufRef,
        /// Output buffer.
        output: BufRef,
    },
    /// `all_reduce(input -> output, OP)` or in place `all_reduce(buf, OP)`.
    AllReduce {
        /// Input buffer.
        input: BufRef,
        /// Output buffer (same buffer as `input` for the in-place form).
        output: BufRef,
        /// The reduction.
        op: OpExpr,
    },
    /// `reduce_scatter(input -> output, OP)`: rank `r`'s `output` is the
    /// reduction of every rank's `input` block `r`.
    ReduceScatter {
        /// Input buffer.
        input: BufRef,
        /// Output buffer.
        output: BufRef,
        /// The reduction.
        op: OpExpr,
    },
    /// `all_to_all(input -> output)`: rank `r`'s `output` block `j` is rank
    /// `j`'s `input` block `r`.
    AllToAll {
        /// Input buffer.
        input: BufRef,
        /// Output buffer.
        output: BufRef,
    },
    /// `broadcast(buf, root = E)`: every rank's `buf` ends as the root's
    /// initial `buf`. `E` may use `world` and scalars.
    Broadcast {
        /// The buffer.
        buf: BufRef,
        /// The root rank.
        root: Expr,
    },
    /// `shift(input -> output, from = E)`: every rank `r`'s `output` ends as
    /// rank `E`'s `input`, with `E` evaluated at `rank = r` (a shift, a
    /// permutation, or several ranks reading one). `E` may use `rank`,
    /// `world` and scalars.
    Shift {
        /// Input buffer.
        input: BufRef,
        /// Output buffer (as long as the input, or of blocks as long as
        /// the input's with `blocks`).
        output: BufRef,
        /// The rank whose input rank `rank` ends with (with `blocks`, the
        /// rank whose input block output block `j` ends with).
        from: Expr,
        /// The block-wise form `shift(IN.chunk(G, KI) -> OUT.chunk(j, KO),
        /// from = F)`, `None` for whole buffers.
        blocks: Option<Box<ShiftBlocks>>,
    },
    /// `all_gatherv(input -> output, COUNTS)`: every rank's
    /// `output.part(COUNTS, j)` is rank `j`'s `input`.
    AllGatherV {
        /// Input buffer (`COUNTS[rank]` elements).
        input: BufRef,
        /// Output buffer (`sum(COUNTS)` elements).
        output: BufRef,
        /// The count vector.
        counts: CountRef,
    },
    /// `all_to_allv(input -> output, SIZES)`: rank `r`'s
    /// `output.part(col(SIZES, r), j)` is rank `j`'s `input.part(SIZES[j], r)`.
    AllToAllV {
        /// Input buffer (`sum(SIZES[rank])` elements).
        input: BufRef,
        /// Output buffer (`sum(col(SIZES, rank))` elements).
        output: BufRef,
        /// The count matrix.
        sizes: CountRef,
    },
    /// `reduce(input -> output, OP, root = E)`: the root's `output` is the
    /// reduction of every rank's `input`; other ranks' `output` is
    /// unconstrained.
    Reduce {
        /// Input buffer.
        input: BufRef,
        /// Output buffer.
        output: BufRef,
        /// The reduction.
        op: OpExpr,
        /// The root rank.
        root: Expr,
    },
}

/// A statement of the body, with its span (the primary span of most errors
/// about it).
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    /// What it does.
    pub kind: StmtKind,
    /// The whole statement.
    pub span: SpanId,
}

/// The statements of the language (reference, section 3).
///
/// Inside a [`StmtKind::Batch`] only these may appear: `send`, `recv` (with
/// or without `reduce`), and `let`, `for` and `if` whose bodies again hold
/// only these. Anything else there (`isend`, `irecv`, `wait`, `copy`,
/// `accumulate`, `scratch`, collectives, a nested `batch`) is reported by the
/// checker's step 0 as a `syntax error` on that statement (the macro may
/// reject it earlier).
#[derive(Clone, Debug, PartialEq)]
pub enum StmtKind {
    /// `send REGION to PEER [tag TAG];`
    Send {
        /// What is sent.
        region: Region,
        /// Destination rank.
        peer: Expr,
        /// Message tag; `None` means tag 0.
        tag: Option<Expr>,
    },
    /// `recv REGION from PEER [tag TAG] [reduce OP];`
    Recv {
        /// Where it is received (read and written when `reduce` is set).
        region: Region,
        /// Source rank.
        peer: Expr,
        /// Message tag; `None` means tag 0.
        tag: Option<Expr>,
        /// `reduce OP`: combine the incoming data into `region`.
        reduce: Option<OpExpr>,
    },
    /// `let HANDLE = isend REGION to PEER [tag TAG];`
    Isend {
        /// The request handle.
        handle: Ident,
        /// What is sent.
        region: Region,
        /// Destination rank.
        peer: Expr,
        /// Message tag; `None` means tag 0.
        tag: Option<Expr>,
    },
    /// `let HANDLE = irecv REGION from PEER [tag TAG] [reduce OP];`
    Irecv {
        /// The request handle.
        handle: Ident,
        /// Where it is received.
        region: Region,
        /// Source rank.
        peer: Expr,
        /// Message tag; `None` means tag 0.
        tag: Option<Expr>,
        /// `reduce OP`: combine the incoming data into `region`.
        reduce: Option<OpExpr>,
    },
    /// `wait H, H2, ...;`
    Wait {
        /// The handles, in order.
        handles: Vec<Ident>,
    },
    /// `wait all;`: waits for every request of the rank still in flight,
    /// whether its handle is in scope or went out of scope (posted in an
    /// earlier iteration of a loop, or shadowed).
    WaitAll,
    /// `batch { ... }`: post all, complete all (one group call).
    Batch {
        /// The batched statements (see the restriction above).
        body: Vec<Stmt>,
    },
    /// `copy SRC -> DST;`
    Copy {
        /// Source region.
        src: Region,
        /// Destination region.
        dst: Region,
    },
    /// `accumulate SRC -> DST, OP;` (`dst = dst OP src`).
    Accumulate {
        /// Source region.
        src: Region,
        /// Destination region (read and written).
        dst: Region,
        /// The reduction.
        op: OpExpr,
    },
    /// `let NAME = EXPR;` (integer binding).
    Let {
        /// The binding.
        name: Ident,
        /// Its value; may not use length variables.
        value: Expr,
    },
    /// `let NAME = scratch[T; LEN];` (a fresh buffer each time it runs).
    Scratch {
        /// The buffer's name.
        name: Ident,
        /// Its length, linear in the length variables.
        len: Expr,
    },
    /// `for VAR in START..END { .. }`, `..=` when `inclusive`, and
    /// `(START..END).rev()` when `reverse`.
    For {
        /// The loop variable.
        var: Ident,
        /// First value (of the unreversed range).
        start: Expr,
        /// End of the range (exclusive unless `inclusive`).
        end: Expr,
        /// `..=`.
        inclusive: bool,
        /// `.rev()`: iterate from the last value down to `start`.
        reverse: bool,
        /// The loop body.
        body: Vec<Stmt>,
    },
    /// `if C1 { .. } else if C2 { .. } else { .. }`; a condition holds when it
    /// is non-zero.
    If {
        /// Each condition with its block, in order.
        branches: Vec<(Expr, Vec<Stmt>)>,
        /// The final `else` block.
        else_body: Option<Vec<Stmt>>,
    },
    /// A collective, optionally `over EXPR`.
    Collective {
        /// Which collective.
        kind: Collective,
        /// `over EXPR`: the subgroup of ranks for which `EXPR` has the
        /// caller's value. `None` is the whole communicator.
        over: Option<Expr>,
    },
}

/// The collectives of the language (reference, section 3). Roots are ranks inside the group.
#[derive(Clone, Debug, PartialEq)]
pub enum Collective {
    /// `all_reduce(SRC -> DST, OP)`, or in place `all_reduce(SRC, OP)` with
    /// `dst == None`.
    AllReduce {
        /// Input region (also the output when in place).
        src: Region,
        /// Output region; `None` for the in-place form.
        dst: Option<Region>,
        /// The reduction.
        op: OpExpr,
    },
    /// `all_gather(SRC -> DST)`.
    AllGather {
        /// Input region.
        src: Region,
        /// Output region (group size times the input).
        dst: Region,
    },
    /// `reduce_scatter(SRC -> DST, OP)`.
    ReduceScatter {
        /// Input region (group size times the output).
        src: Region,
        /// Output region.
        dst: Region,
        /// The reduction.
        op: OpExpr,
    },
    /// `all_to_all(SRC -> DST)`.
    AllToAll {
        /// Input region.
        src: Region,
        /// Output region (same length, divisible by the group size).
        dst: Region,
    },
    /// `broadcast(REGION, root = ROOT)`.
    Broadcast {
        /// Read on the root, written elsewhere.
        region: Region,
        /// The root (a rank of the group).
        root: Expr,
    },
    /// `reduce(SRC -> DST, OP, root = ROOT)`; `dst` is only used on the root.
    Reduce {
        /// Input region.
        src: Region,
        /// Output region (root only).
        dst: Region,
        /// The reduction.
        op: OpExpr,
        /// The root (a rank of the group).
        root: Expr,
    },
    /// `all_gatherv(SRC -> DST, COUNTS)`, over the whole communicator.
    AllGatherV {
        /// Input region (`COUNTS[rank]` elements).
        src: Region,
        /// Output region (`sum(COUNTS)` elements, laid out by `COUNTS`).
        dst: Region,
        /// The count vector.
        counts: CountRef,
    },
    /// `all_to_allv(SRC -> DST, SIZES)`, over the whole communicator.
    AllToAllV {
        /// Input region, laid out by row `rank` of `SIZES`.
        src: Region,
        /// Output region, laid out by column `rank` of `SIZES`.
        dst: Region,
        /// The count matrix.
        sizes: CountRef,
    },
    /// `barrier`.
    Barrier,
}

impl Collective {
    /// The DSL keyword (`all_reduce`, `barrier`, ...).
    pub const fn name(&self) -> &'static str {
        match self {
            Collective::AllReduce { .. } => "all_reduce",
            Collective::AllGather { .. } => "all_gather",
            Collective::ReduceScatter { .. } => "reduce_scatter",
            Collective::AllToAll { .. } => "all_to_all",
            Collective::Broadcast { .. } => "broadcast",
            Collective::Reduce { .. } => "reduce",
            Collective::AllGatherV { .. } => "all_gatherv",
            Collective::AllToAllV { .. } => "all_to_allv",
            Collective::Barrier => "barrier",
        }
    }
}

/// A reference to a buffer by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BufRef {
    /// The name as written.
    pub name: String,
    /// What it names.
    pub kind: BufKind,
    /// The identifier.
    pub span: SpanId,
}

/// What a [`BufRef`] names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BufKind {
    /// A buffer parameter: index into [`Schedule::buffers`].
    Param(usize),
    /// A `let NAME = scratch[..]` buffer, looked up by name in scope.
    Scratch,
}

/// A region of a buffer, with its span.
#[derive(Clone, Debug, PartialEq)]
pub struct Region {
    /// Its shape.
    pub kind: RegionKind,
    /// The whole region expression.
    pub span: SpanId,
}

/// `REGION` of the language (reference, section 3). Bounds may use length variables (linearly).
#[derive(Clone, Debug, PartialEq)]
pub enum RegionKind {
    /// `IDENT`: the whole buffer.
    Whole(BufRef),
    /// `BASE[START..END]`: elements `[START, END)` of `base` (the reference's
    /// grammar only puts a [`RegionKind::Whole`] here; any region works).
    Slice {
        /// The region sliced.
        base: Box<Region>,
        /// First element, relative to `base`.
        start: Expr,
        /// One past the last element, relative to `base`.
        end: Expr,
    },
    /// `BASE.chunk(INDEX)` (`parts == None`: `world` parts) or
    /// `BASE.chunk(INDEX, PARTS)`.
    Chunk {
        /// The region divided.
        base: Box<Region>,
        /// Which part, in `0..parts`.
        index: Expr,
        /// Number of equal parts; `None` means `world`.
        parts: Option<Expr>,
    },
    /// `BASE.part(LINE, INDEX)`: the elements from the sum of the line's
    /// entries before `INDEX`, entry `INDEX` long.
    Part {
        /// The region divided.
        base: Box<Region>,
        /// The line that lays it out.
        line: CountLine,
        /// Which part, in `0..world`.
        index: Expr,
    },
}

/// An integer expression, with its span.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// Its shape.
    pub kind: ExprKind,
    /// The whole expression.
    pub span: SpanId,
}

/// Integer expressions (language reference, section 4). Booleans are integers: comparisons,
/// `&&`, `||`, `!` and `is_pow2` give `0` or `1`, and a condition holds when
/// non-zero.
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// An integer literal.
    Int(i64),
    /// A resolved name.
    Name(Name),
    /// `-x` or `!x`.
    Unary(UnOp, Box<Expr>),
    /// `a OP b`.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// `log2(x)`, `ceil_log2(x)`, `pow2(k)`, `is_pow2(x)` (one argument), `min(a, b)`,
    /// `max(a, b)` (two); another count is reported as a `syntax error`.
    Call(Func, Vec<Expr>),
    /// A length over count entries; only in lengths and region bounds.
    Count(Count),
}

/// A name in an expression: its resolved kind and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Name {
    /// What it refers to.
    pub kind: NameKind,
    /// The identifier as written (used in messages and to look up
    /// [`NameKind::Var`]).
    pub text: String,
}

/// What a [`Name`] refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum NameKind {
    /// `rank`.
    Rank,
    /// `world`.
    World,
    /// A loop variable or `let` binding, looked up by text in scope.
    Var,
    /// A scalar parameter: index into [`Schedule::scalars`].
    Scalar(usize),
    /// A length variable: index into [`Schedule::len_vars`]. Only allowed in
    /// buffer lengths, `scratch` lengths and region bounds.
    LenVar(usize),
}

/// Unary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum UnOp {
    /// `-x`.
    Neg,
    /// `!x`: logical not (`1` when `x == 0`, else `0`).
    Not,
}

/// Binary operators. `/` rounds toward negative infinity, `%` is Euclidean
/// (result in `0..|m|`), `&&` and `||` short-circuit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BinOp {
    /// `+`
    Add,
    /// `-`
    Sub,
    /// `*`
    Mul,
    /// `/` (floor).
    Div,
    /// `%` (Euclidean).
    Rem,
    /// `^` (bitwise xor, two's complement).
    BitXor,
    /// `&`
    BitAnd,
    /// `|`
    BitOr,
    /// `<<` (`x * 2^k`; `k` must be `>= 0`).
    Shl,
    /// `>>` (`floor(x / 2^k)`; `k` must be `>= 0`).
    Shr,
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
    /// `&&`
    And,
    /// `||`
    Or,
}

impl BinOp {
    /// The operator's token.
    pub const fn as_str(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::BitXor => "^",
            BinOp::BitAnd => "&",
            BinOp::BitOr => "|",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
            BinOp::Eq => "==",
            BinOp::Ne => "!=",
            BinOp::Lt => "<",
            BinOp::Le => "<=",
            BinOp::Gt => ">",
            BinOp::Ge => ">=",
            BinOp::And => "&&",
            BinOp::Or => "||",
        }
    }
}

/// Built-in functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Func {
    /// `log2(x)`: floor of the base-2 logarithm; `x >= 1`.
    Log2,
    /// `ceil_log2(x)`: the least `k >= 0` with `2^k >= x`; `x >= 1`.
    CeilLog2,
    /// `pow2(k)`: `2^k`; `k >= 0`.
    Pow2,
    /// `is_pow2(x)`: `1` when `x` is a positive power of two, else `0`.
    IsPow2,
    /// `min(a, b)`.
    Min,
    /// `max(a, b)`.
    Max,
}

impl Func {
    /// The function's name.
    pub const fn as_str(self) -> &'static str {
        match self {
            Func::Log2 => "log2",
            Func::CeilLog2 => "ceil_log2",
            Func::Pow2 => "pow2",
            Func::IsPow2 => "is_pow2",
            Func::Min => "min",
            Func::Max => "max",
        }
    }

    /// How many arguments it takes.
    pub const fn arity(self) -> usize {
        match self {
            Func::Log2 | Func::CeilLog2 | Func::Pow2 | Func::IsPow2 => 1,
            Func::Min | Func::Max => 2,
        }
    }
}
