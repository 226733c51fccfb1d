//! Compiled expressions ([`CExpr`]: names as slots, the shape unrolling
//! evaluates) and how they evaluate: register code without an interpreter
//! loop, affine fast paths, and linear forms for expressions with length
//! variables. The integer rules themselves are [`crate::eval`]'s.

use crate::counts;
use crate::eval::{binary, call, div_floor, rem_euclid, short_circuit, unary, EvalError};
use crate::ir::{BinOp, Func, SpanId, UnOp};
use crate::lin::Lin;

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
    /// Register code (see [`codegen`]) for the roots of
    /// expressions and their largest subtrees without length variables;
    /// `None`: walk the tree.
    pub(crate) code: Option<Code>,
    /// How [`eval_fast`] evaluates it (kept in step with `kind`
    /// and `code`).
    pub(crate) fast: Fast,
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
    /// A count: a linear form over count entries (`has_len` is set).
    Count(Box<CCount>),
}

/// A compiled line of a count parameter.
#[derive(Debug)]
pub(crate) struct CLine {
    /// Index into `Schedule::counts`.
    pub(crate) param: u32,
    pub(crate) kind: CLineKind,
}

/// [`CLine`] shapes.
#[derive(Debug)]
pub(crate) enum CLineKind {
    Vector,
    Row(Box<CExpr>),
    Col(Box<CExpr>),
}

/// A compiled count: an entry of a line, or the sum of a range of it.
#[derive(Debug)]
pub(crate) struct CCount {
    pub(crate) line: CLine,
    pub(crate) which: CWhich,
}

/// What a [`CCount`] takes of its line.
#[derive(Debug)]
pub(crate) enum CWhich {
    Entry(Box<CExpr>),
    /// `None`: the whole line.
    Sum(Option<Box<(CExpr, CExpr)>>),
}

impl CCount {
    fn exprs_mut(&mut self) -> Vec<&mut CExpr> {
        let mut v: Vec<&mut CExpr> = Vec::new();
        if let CLineKind::Row(e) | CLineKind::Col(e) = &mut self.line.kind {
            v.push(&mut **e);
        }
        match &mut self.which {
            CWhich::Entry(e) => v.push(&mut **e),
            CWhich::Sum(Some(ab)) => {
                let (a, b) = &mut **ab;
                v.push(a);
                v.push(b);
            }
            CWhich::Sum(None) => {}
        }
        v
    }

    fn exprs(&self) -> Vec<&CExpr> {
        let mut v: Vec<&CExpr> = Vec::new();
        if let CLineKind::Row(e) | CLineKind::Col(e) = &self.line.kind {
            v.push(&**e);
        }
        match &self.which {
            CWhich::Entry(e) => v.push(&**e),
            CWhich::Sum(Some(ab)) => {
                v.push(&ab.0);
                v.push(&ab.1);
            }
            CWhich::Sum(None) => {}
        }
        v
    }
}

impl CExpr {
    pub(crate) fn int(v: i64, span: SpanId) -> Self {
        Self {
            kind: CK::Int(v),
            span,
            has_len: false,
            code: None,
            fast: Fast::Int(v),
        }
    }

    pub(crate) fn new(kind: CK, span: SpanId, has_len: bool) -> Self {
        let mut e = Self {
            kind,
            span,
            has_len,
            code: None,
            fast: Fast::None,
        };
        e.fast = Fast::of(&e);
        e
    }

    /// Generates the evaluation code of this root: for the whole expression,
    /// or, when it has a length variable (evaluated as a linear form), for
    /// each largest subtree without one.
    pub(crate) fn attach_code(&mut self) {
        if !self.has_len {
            self.code = codegen(self);
            self.fast = Fast::of(self);
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
            CK::Count(c) => c.exprs_mut().into_iter().for_each(CExpr::attach_code),
        }
    }

    /// Every slot it reads, in order of appearance.
    pub(crate) fn slots(&self, out: &mut Vec<u32>) {
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
            CK::Count(c) => c.exprs().into_iter().for_each(|a| a.slots(out)),
        }
    }

    /// Whether it reads `rank`.
    pub(crate) fn reads_rank(&self) -> bool {
        let mut slots = Vec::new();
        self.slots(&mut slots);
        slots.contains(&RANK)
    }
}

/// Why a compiled expression has no value during unrolling.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fail {
    /// An evaluation error at the node with this span.
    Eval(SpanId, EvalError),
    /// A length variable where an integer is needed (normally caught by
    /// step 0).
    NonLinear(SpanId),
}

/// An operand of [`Instr`]: a constant, a slot of the environment or a
/// register.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Opnd {
    Imm(i64),
    Slot(u32),
    Reg(u8),
}

/// One instruction of an expression's register code: operands are read in
/// place (constants and slots need no instruction), results go to register
/// `dst`.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Instr {
    Bin {
        op: BinOp,
        a: Opnd,
        b: Opnd,
        dst: u8,
        span: SpanId,
    },
    Un {
        op: UnOp,
        a: Opnd,
        dst: u8,
        span: SpanId,
    },
    Call {
        f: Func,
        a: Opnd,
        b: Opnd,
        dst: u8,
        span: SpanId,
    },
    /// `&&` / `||` after the left operand `a`: when it decides the result,
    /// set `dst` to 0 / 1 and jump to the absolute index `end`.
    Short {
        op: BinOp,
        a: Opnd,
        dst: u8,
        end: u32,
    },
    /// `dst = (a != 0)` (the right operand of `&&` / `||`).
    Bool {
        a: Opnd,
        dst: u8,
    },
}

/// Register code of an expression without length variables.
#[derive(Clone, Debug)]
pub(crate) struct Code {
    instrs: Vec<Instr>,
    result: Opnd,
    /// The common small shapes, run without the interpreter loop.
    shape: Shape,
    /// The expression as a sum of leaf terms (then `%` or `/`), when it has
    /// that form: `(rank - s - 1) % world`.
    affine: Option<Affine>,
}

/// Most leaf terms of an [`Affine`] expression.
const AFFINE_TERMS: usize = 4;

/// An expression built from `+`, `-`, unary `-`, slots, constants and
/// `constant * slot`, optionally under one `% m` or `/ m` (`m` a slot or
/// constant). Each slot leaf is a term `coeff * env[slot]`; constant leaves
/// are summed into `konst`. When every slot value is within `±2^31` (and
/// coefficients within `±2^20`, constants within `2^40` in absolute sum, at
/// most 4 terms), every intermediate value of the original evaluation order
/// is a signed sum of some of the leaves, below `2^53` in magnitude: nothing
/// can overflow, so the sum is the exact value and only the final `%` / `/`
/// can fail, exactly as in the step-by-step evaluation. Otherwise the
/// register code runs.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Affine {
    slots: [u32; AFFINE_TERMS],
    coeffs: [i64; AFFINE_TERMS],
    nterms: u8,
    konst: i64,
    post: Post,
}

/// The final operation of an [`Affine`] expression.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Post {
    None,
    /// `% slot`.
    RemSlot(u32),
    /// `% m` with a constant `m`.
    Rem(Opnd),
    Div(Opnd),
}

/// Slot values up to this magnitude take the [`Affine`] path.
const AFFINE_VAL: i64 = 1 << 31;

impl Affine {
    fn of(e: &CExpr) -> Option<Self> {
        let mut a = Affine {
            slots: [0; AFFINE_TERMS],
            coeffs: [0; AFFINE_TERMS],
            nterms: 0,
            konst: 0,
            post: Post::None,
        };
        let mut kabs: i128 = 0;
        let body = match &e.kind {
            CK::Binary(op @ (BinOp::Rem | BinOp::Div), x, m) => {
                let m = match m.kind {
                    CK::Int(v) => Opnd::Imm(v),
                    CK::Slot(s) => Opnd::Slot(s),
                    _ => return None,
                };
                a.post = match (op, m) {
                    (BinOp::Rem, Opnd::Slot(s)) => Post::RemSlot(s),
                    (BinOp::Rem, _) => Post::Rem(m),
                    _ => Post::Div(m),
                };
                x
            }
            _ => e,
        };
        Self::leaves(body, 1, &mut a, &mut kabs)?;
        // a bare slot or constant is cheaper through the register code
        (!matches!(e.kind, CK::Int(_) | CK::Slot(_))).then_some(a)
    }

    /// Adds the leaves of `e` (times `sign`) to `a`.
    fn leaves(e: &CExpr, sign: i64, a: &mut Affine, kabs: &mut i128) -> Option<()> {
        match &e.kind {
            CK::Int(v) => {
                *kabs += i128::from(*v).abs();
                if *kabs > 1 << 40 {
                    return None;
                }
                a.konst += sign * *v;
            }
            CK::Slot(s) => a.push(*s, sign)?,
            CK::Binary(BinOp::Add, x, y) => {
                Self::leaves(x, sign, a, kabs)?;
                Self::leaves(y, sign, a, kabs)?;
            }
            CK::Binary(BinOp::Sub, x, y) => {
                Self::leaves(x, sign, a, kabs)?;
                Self::leaves(y, -sign, a, kabs)?;
            }
            CK::Unary(UnOp::Neg, x) => Self::leaves(x, -sign, a, kabs)?,
            CK::Binary(BinOp::Mul, x, y) => match (&x.kind, &y.kind) {
                (CK::Int(k), CK::Slot(s)) | (CK::Slot(s), CK::Int(k)) if k.unsigned_abs() <= 1 << 20 => {
                    a.push(*s, sign * *k)?;
                }
                _ => return None,
            },
            _ => return None,
        }
        Some(())
    }

    fn push(&mut self, slot: u32, coeff: i64) -> Option<()> {
        let i = usize::from(self.nterms);
        *self.slots.get_mut(i)? = slot;
        *self.coeffs.get_mut(i)? = coeff;
        self.nterms += 1;
        Some(())
    }

    /// The value, or `None` when a slot value is out of the safe range or
    /// the final `%` / `/` fails (the register code then gives the error).
    #[inline(always)]
    #[allow(clippy::inline_always)] // the unroller's hot path (measured)
    fn eval(&self, env: &[i64]) -> Option<i64> {
        let n = usize::from(self.nterms).min(AFFINE_TERMS);
        let mut x = self.konst;
        // one test for all terms: a value out of the safe range sends the
        // expression to the register code (the sum is then discarded, so
        // wrapping is harmless)
        let mut big = false;
        for (&s, &k) in self.slots[..n].iter().zip(&self.coeffs[..n]) {
            let v = *env.get(s as usize)?;
            big |= !small(v);
            x = x.wrapping_add(k.wrapping_mul(v));
        }
        if big {
            return None;
        }
        self.post.apply(x, env)
    }
}

/// Whether a slot value is in the safe range of [`Affine`] expressions.
#[inline(always)]
#[allow(clippy::inline_always)] // the unroller's hot path (measured)
fn small(v: i64) -> bool {
    v.unsigned_abs() <= AFFINE_VAL.unsigned_abs()
}

impl Post {
    /// The final `%` / `/` of an [`Affine`] expression whose sum is `x`.
    #[inline(always)]
    #[allow(clippy::inline_always)] // the unroller's hot path (measured)
    fn apply(self, x: i64, env: &[i64]) -> Option<i64> {
        match self {
            Post::None => Some(x),
            Post::RemSlot(m) => {
                let m = *env.get(m as usize)?;
                // the idioms `(rank + k) % world` and `(rank - k) % world`
                if m > 0 {
                    if (x as u64) < (m as u64) {
                        return Some(x);
                    }
                    if x < 0 && x >= -m {
                        return Some(x + m);
                    }
                }
                rem_euclid(x, m).ok()
            }
            Post::Rem(m) => {
                let m = plain_val(m, env);
                // the idioms `(rank + k) % world` and `(rank - k) % world`
                if m > 0 {
                    if (0..m).contains(&x) {
                        return Some(x);
                    }
                    if x < 0 && x >= -m {
                        return Some(x + m);
                    }
                }
                rem_euclid(x, m).ok()
            }
            Post::Div(m) => div_floor(x, plain_val(m, env)).ok(),
        }
    }
}

/// The value of `e` when it is quickly known to evaluate without error
/// (a constant, a slot, or an [`Affine`] expression in its safe range);
/// `None`: use [`eval_c`], which gives the same value or the error.
#[inline(always)]
#[allow(clippy::inline_always)] // the unroller's hot path (measured)
pub(crate) fn eval_fast(e: &CExpr, env: &[i64]) -> Option<i64> {
    // the chunk index of the ring idiom, `(rank - s) % world`, first
    if let Fast::Lin2 {
        slots,
        coeffs,
        konst,
        post,
    } = &e.fast
    {
        return lin2(slots, coeffs, *konst, *post, env);
    }
    match &e.fast {
        Fast::Lin1 {
            slot,
            coeff,
            konst,
            post,
        } => {
            let v = *env.get(*slot as usize)?;
            if !small(v) {
                return None;
            }
            post.apply(konst.wrapping_add(coeff.wrapping_mul(v)), env)
        }
        Fast::Lin2 {
            slots,
            coeffs,
            konst,
            post,
        } => lin2(slots, coeffs, *konst, *post, env),
        Fast::Int(v) => Some(*v),
        Fast::Slot(s) => env.get(*s as usize).copied(),
        Fast::Affine(a) => a.eval(env),
        Fast::None => None,
    }
}

/// [`eval_fast`] of [`Fast::Lin2`].
#[inline(always)]
#[allow(clippy::inline_always)] // the unroller's hot path (measured)
fn lin2(slots: &[u32; 2], coeffs: &[i64; 2], konst: i64, post: Post, env: &[i64]) -> Option<i64> {
    let v0 = *env.get(slots[0] as usize)?;
    let v1 = *env.get(slots[1] as usize)?;
    // both in `-2^31..2^31` (a narrower test than `small`, so also
    // a safe one; the rare value it turns away takes the general
    // path, which gives the same result)
    let off = AFFINE_VAL as u64;
    if ((v0 as u64).wrapping_add(off) | (v1 as u64).wrapping_add(off)) >> 32 != 0 {
        return None;
    }
    let x = konst
        .wrapping_add(coeffs[0].wrapping_mul(v0))
        .wrapping_add(coeffs[1].wrapping_mul(v1));
    post.apply(x, env)
}

/// How [`eval_fast`] evaluates an expression, decided when it is compiled.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Fast {
    /// No quick way: [`eval_c`] evaluates it.
    None,
    /// A constant.
    Int(i64),
    /// A slot.
    Slot(u32),
    /// An [`Affine`] expression of one term: `konst + coeff * slot`.
    Lin1 {
        slot: u32,
        coeff: i64,
        konst: i64,
        post: Post,
    },
    /// An [`Affine`] expression of two terms.
    Lin2 {
        slots: [u32; 2],
        coeffs: [i64; 2],
        konst: i64,
        post: Post,
    },
    /// Any other [`Affine`] expression (root of register code).
    Affine(Affine),
}

impl Fast {
    /// The quick evaluation of `e` (after its code is attached).
    pub(crate) fn of(e: &CExpr) -> Self {
        match (&e.code, &e.kind) {
            (Some(Code { affine: Some(a), .. }), _) => match a.nterms {
                1 => Fast::Lin1 {
                    slot: a.slots[0],
                    coeff: a.coeffs[0],
                    konst: a.konst,
                    post: a.post,
                },
                2 => Fast::Lin2 {
                    slots: [a.slots[0], a.slots[1]],
                    coeffs: [a.coeffs[0], a.coeffs[1]],
                    konst: a.konst,
                    post: a.post,
                },
                _ => Fast::Affine(*a),
            },
            (_, CK::Int(v)) => Fast::Int(*v),
            (_, CK::Slot(s)) => Fast::Slot(*s),
            _ => Fast::None,
        }
    }
}

/// Expression shapes evaluated directly (operands are constants or slots).
#[derive(Clone, Copy, Debug)]
enum Shape {
    /// Run `instrs`.
    General,
    /// `a OP b`.
    Bin(BinOp, Opnd, Opnd, SpanId),
    /// `(a OP1 b) OP2 c`, as in `(rank + 1) % world`.
    Bin2(BinOp, Opnd, Opnd, SpanId, BinOp, Opnd, SpanId),
}

impl Shape {
    fn of(instrs: &[Instr], result: Opnd) -> Self {
        let plain = |o: Opnd| !matches!(o, Opnd::Reg(_));
        match (instrs, result) {
            (&[Instr::Bin { op, a, b, dst: 0, span }], Opnd::Reg(0)) if plain(a) && plain(b) => {
                Shape::Bin(op, a, b, span)
            }
            (
                &[Instr::Bin { op, a, b, dst: 0, span }, Instr::Bin {
                    op: op2,
                    a: Opnd::Reg(0),
                    b: c,
                    dst: 0,
                    span: span2,
                }],
                Opnd::Reg(0),
            ) if plain(a) && plain(b) && plain(c) => Shape::Bin2(op, a, b, span, op2, c, span2),
            _ => Shape::General,
        }
    }
}

/// An operand that is not a register.
#[inline]
fn plain_val(o: Opnd, env: &[i64]) -> i64 {
    match o {
        Opnd::Imm(v) => v,
        Opnd::Slot(s) => env.get(s as usize).copied().unwrap_or(0),
        Opnd::Reg(_) => 0,
    }
}

/// [`binary`] with the common operators first.
#[inline]
fn binary_fast(op: BinOp, a: i64, b: i64, span: SpanId) -> Result<i64, Fail> {
    let r = match op {
        BinOp::Add => a.checked_add(b).ok_or(EvalError::Overflow),
        BinOp::Sub => a.checked_sub(b).ok_or(EvalError::Overflow),
        BinOp::Rem => rem_euclid(a, b),
        _ => binary(op, a, b),
    };
    r.map_err(|e| Fail::Eval(span, e))
}

/// Registers of [`run`]; expressions needing more are evaluated on the tree.
const REGS: usize = 8;

/// Register code for `e`, or `None` when it has a length variable or needs
/// more than [`REGS`] registers.
pub(crate) fn codegen(e: &CExpr) -> Option<Code> {
    fn go(e: &CExpr, out: &mut Vec<Instr>, dst: usize) -> Option<Opnd> {
        if dst >= REGS {
            return None;
        }
        let d = dst as u8;
        match &e.kind {
            CK::Int(v) => Some(Opnd::Imm(*v)),
            CK::Slot(s) => Some(Opnd::Slot(*s)),
            CK::Len(_) | CK::Count(_) => None,
            CK::Unary(op, x) => {
                let a = go(x, out, dst)?;
                out.push(Instr::Un {
                    op: *op,
                    a,
                    dst: d,
                    span: e.span,
                });
                Some(Opnd::Reg(d))
            }
            CK::Binary(op @ (BinOp::And | BinOp::Or), a, b) => {
                let a = go(a, out, dst)?;
                let at = out.len();
                out.push(Instr::Short {
                    op: *op,
                    a,
                    dst: d,
                    end: 0,
                });
                let b = go(b, out, dst)?;
                out.push(Instr::Bool { a: b, dst: d });
                let end = u32::try_from(out.len()).ok()?;
                out[at] = Instr::Short {
                    op: *op,
                    a,
                    dst: d,
                    end,
                };
                Some(Opnd::Reg(d))
            }
            CK::Binary(op, a, b) => {
                let a = go(a, out, dst)?;
                let b = go(b, out, if matches!(a, Opnd::Reg(_)) { dst + 1 } else { dst })?;
                out.push(Instr::Bin {
                    op: *op,
                    a,
                    b,
                    dst: d,
                    span: e.span,
                });
                Some(Opnd::Reg(d))
            }
            CK::Call(f, args) => {
                if args.len() > 2 {
                    return None;
                }
                let a = match args.first() {
                    Some(x) => go(x, out, dst)?,
                    None => Opnd::Imm(0),
                };
                let b = match args.get(1) {
                    Some(x) => go(x, out, if matches!(a, Opnd::Reg(_)) { dst + 1 } else { dst })?,
                    None => Opnd::Imm(0),
                };
                out.push(Instr::Call {
                    f: *f,
                    a,
                    b,
                    dst: d,
                    span: e.span,
                });
                Some(Opnd::Reg(d))
            }
        }
    }
    if e.has_len {
        return None;
    }
    let mut instrs = Vec::new();
    let result = go(e, &mut instrs, 0)?;
    let shape = Shape::of(&instrs, result);
    let affine = Affine::of(e);
    Some(Code {
        instrs,
        result,
        shape,
        affine,
    })
}

/// Runs register code.
#[inline]
fn run(code: &Code, env: &[i64]) -> Result<i64, Fail> {
    match code.shape {
        Shape::Bin(op, a, b, span) => return binary_fast(op, plain_val(a, env), plain_val(b, env), span),
        Shape::Bin2(op, a, b, span, op2, c, span2) => {
            let x = binary_fast(op, plain_val(a, env), plain_val(b, env), span)?;
            return binary_fast(op2, x, plain_val(c, env), span2);
        }
        Shape::General => {}
    }
    if code.instrs.is_empty() {
        return Ok(plain_val(code.result, env));
    }
    let mut regs = [0_i64; REGS];
    // `codegen` keeps registers below REGS; `get`/`get_mut` keep a bad
    // program from panicking all the same
    let val = |o: Opnd, regs: &[i64; REGS]| match o {
        Opnd::Imm(v) => v,
        Opnd::Slot(s) => env.get(s as usize).copied().unwrap_or(0),
        Opnd::Reg(r) => regs.get(usize::from(r)).copied().unwrap_or(0),
    };
    let mut pc = 0_usize;
    while let Some(ins) = code.instrs.get(pc) {
        pc += 1;
        let (dst, v) = match *ins {
            Instr::Bin { op, a, b, dst, span } => {
                let (x, y) = (val(a, &regs), val(b, &regs));
                (dst, binary(op, x, y).map_err(|e| Fail::Eval(span, e))?)
            }
            Instr::Un { op, a, dst, span } => (dst, unary(op, val(a, &regs)).map_err(|e| Fail::Eval(span, e))?),
            Instr::Call { f, a, b, dst, span } => {
                let args = [val(a, &regs), val(b, &regs)];
                (dst, call(f, &args).map_err(|e| Fail::Eval(span, e))?)
            }
            Instr::Short { op, a, dst, end } => match short_circuit(op, val(a, &regs)) {
                Some(v) => {
                    pc = end as usize;
                    (dst, v)
                }
                None => continue,
            },
            Instr::Bool { a, dst } => (dst, i64::from(val(a, &regs) != 0)),
        };
        if let Some(r) = regs.get_mut(usize::from(dst)) {
            *r = v;
        }
    }
    Ok(val(code.result, &regs))
}

/// Evaluates a compiled expression with `env` holding the slots' values.
#[inline]
pub(crate) fn eval_c(e: &CExpr, env: &[i64]) -> Result<i64, Fail> {
    if let Some(v) = eval_fast(e, env) {
        return Ok(v);
    }
    match &e.code {
        Some(code) => run(code, env),
        None => eval_tree(e, env),
    }
}

fn eval_tree(e: &CExpr, env: &[i64]) -> Result<i64, Fail> {
    let at = |err| Fail::Eval(e.span, err);
    match &e.kind {
        CK::Int(v) => Ok(*v),
        CK::Slot(s) => Ok(env.get(*s as usize).copied().unwrap_or(0)),
        CK::Len(_) | CK::Count(_) => Err(Fail::NonLinear(e.span)),
        CK::Unary(op, x) => unary(*op, eval_c(x, env)?).map_err(at),
        CK::Binary(op, a, b) => {
            let va = eval_c(a, env)?;
            if let Some(v) = short_circuit(*op, va) {
                return Ok(v);
            }
            let vb = eval_c(b, env)?;
            binary(*op, va, vb).map_err(at)
        }
        CK::Call(f, args) => {
            let mut vals = [0_i64; 2];
            for (slot, a) in vals.iter_mut().zip(args) {
                *slot = eval_c(a, env)?;
            }
            call(*f, &vals).map_err(at)
        }
    }
}

/// Evaluates a region bound or length into a linear form.
pub(crate) fn eval_lin(e: &CExpr, env: &[i64]) -> Result<Lin, Fail> {
    if !e.has_len {
        return eval_c(e, env).map(Lin::constant);
    }
    let at = |err| Fail::Eval(e.span, err);
    match &e.kind {
        CK::Len(i) => Ok(Lin::var(*i as usize)),
        CK::Count(c) => count_lin(c, env, e.span),
        CK::Unary(UnOp::Neg, x) => eval_lin(x, env)?.scale(-1).map_err(at),
        CK::Binary(BinOp::Add, a, b) => eval_lin(a, env)?.add(&eval_lin(b, env)?).map_err(at),
        CK::Binary(BinOp::Sub, a, b) => eval_lin(a, env)?.sub(&eval_lin(b, env)?).map_err(at),
        CK::Binary(BinOp::Mul, a, b) => {
            let la = eval_lin(a, env)?;
            let lb = eval_lin(b, env)?;
            match (la.as_const(), lb.as_const()) {
                (Some(k), _) => lb.scale(k).map_err(at),
                (_, Some(k)) => la.scale(k).map_err(at),
                _ => Err(Fail::NonLinear(e.span)),
            }
        }
        _ => Err(Fail::NonLinear(e.span)),
    }
}

/// Line `line` of its count parameter (see [`counts`]), with the world size.
pub(crate) fn line_of(line: &CLine, env: &[i64], span: SpanId) -> Result<(counts::Line, i64), Fail> {
    let w = env.get(WORLD as usize).copied().unwrap_or(0);
    if w > counts::MAX_WORLD {
        return Err(Fail::Eval(span, EvalError::Overflow));
    }
    let at = |x: &CExpr| -> Result<u64, Fail> {
        let v = eval_c(x, env)?;
        u64::try_from(v)
            .ok()
            .filter(|&v| v < w.unsigned_abs())
            .ok_or(Fail::Eval(
                x.span,
                EvalError::CountIndex {
                    index: v,
                    end: None,
                    len: w,
                },
            ))
    };
    let sel = match &line.kind {
        CLineKind::Vector => counts::Line::Vector,
        CLineKind::Row(i) => counts::Line::Row(at(i)?),
        CLineKind::Col(j) => counts::Line::Col(at(j)?),
    };
    Ok((sel, w))
}

/// The linear form of a count.
fn count_lin(c: &CCount, env: &[i64], span: SpanId) -> Result<Lin, Fail> {
    let (line, w) = line_of(&c.line, env, span)?;
    let (from, to) = match &c.which {
        CWhich::Entry(i) => {
            let v = eval_c(i, env)?;
            if !(0..w).contains(&v) {
                return Err(Fail::Eval(
                    i.span,
                    EvalError::CountIndex {
                        index: v,
                        end: None,
                        len: w,
                    },
                ));
            }
            (v, v + 1)
        }
        CWhich::Sum(None) => (0, w),
        CWhich::Sum(Some(ab)) => {
            let (a, b) = &**ab;
            let (va, vb) = (eval_c(a, env)?, eval_c(b, env)?);
            if !(0 <= va && va <= vb && vb <= w) {
                return Err(Fail::Eval(
                    a.span,
                    EvalError::CountIndex {
                        index: va,
                        end: Some(vb),
                        len: w,
                    },
                ));
            }
            (va, vb)
        }
    };
    Ok(Lin::count(counts::line_part(
        c.line.param,
        line,
        from.unsigned_abs(),
        to.unsigned_abs(),
    )))
}
