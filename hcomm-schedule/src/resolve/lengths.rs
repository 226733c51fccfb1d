//! Length binding: which buffer parameter's actual length determines which
//! length variable when the generated function is entered.
//!
//! Each buffer length is a linear form `constant + Σ coef·var` (coefficients
//! and constant over `world`, scalars and literals). Length variables are
//! bound one at a time, each from the first buffer (in declaration order)
//! whose length uses it alone among the unbound ones, preferring a literal
//! coefficient.

use crate::ir::{BinOp, Buffer, Expr, ExprKind, Ident, Name, NameKind, SpanId, UnOp};

/// One length variable bound from one buffer's actual length:
/// `len(buffer) == coef * var + constant`.
#[derive(Clone, Debug, PartialEq)]
pub struct LenBinding {
    /// Index into [`crate::ir::Schedule::len_vars`].
    pub var: usize,
    /// Index into [`crate::ir::Schedule::buffers`].
    pub buffer: usize,
    /// The coefficient, over `world`, scalars and literals.
    pub coef: Expr,
    /// The rest, over `world`, scalars, literals and length variables bound
    /// earlier.
    pub constant: Expr,
}

/// `constant + Σ coef·var` over length variables; coefficients and the
/// constant are expressions without length variables.
struct Linear {
    coefs: Vec<(usize, Expr)>,
    constant: Expr,
}

fn int(v: i64, span: SpanId) -> Expr {
    Expr {
        kind: ExprKind::Int(v),
        span,
    }
}

fn binary(op: BinOp, a: Expr, b: Expr) -> Expr {
    let span = a.span;
    Expr {
        kind: ExprKind::Binary(op, Box::new(a), Box::new(b)),
        span,
    }
}

fn neg(a: Expr) -> Expr {
    let span = a.span;
    Expr {
        kind: ExprKind::Unary(UnOp::Neg, Box::new(a)),
        span,
    }
}

fn has_len_var(e: &Expr) -> bool {
    match &e.kind {
        // a count is known at run time, like a scalar
        ExprKind::Int(_) | ExprKind::Count(_) => false,
        ExprKind::Name(n) => matches!(n.kind, NameKind::LenVar(_)),
        ExprKind::Unary(_, a) => has_len_var(a),
        ExprKind::Binary(_, a, b) => has_len_var(a) || has_len_var(b),
        ExprKind::Call(_, args) => args.iter().any(has_len_var),
    }
}

impl Linear {
    fn plus(mut self, other: Linear) -> Self {
        self.constant = binary(BinOp::Add, self.constant, other.constant);
        for (v, c) in other.coefs {
            if let Some(slot) = self.coefs.iter_mut().find(|(w, _)| *w == v) {
                let old = std::mem::replace(&mut slot.1, int(0, c.span));
                slot.1 = binary(BinOp::Add, old, c);
            } else {
                self.coefs.push((v, c));
            }
        }
        self
    }

    fn scale(self, k: &Expr) -> Self {
        Linear {
            constant: binary(BinOp::Mul, k.clone(), self.constant),
            coefs: self
                .coefs
                .into_iter()
                .map(|(v, c)| (v, binary(BinOp::Mul, k.clone(), c)))
                .collect(),
        }
    }

    fn negate(self) -> Self {
        Linear {
            constant: neg(self.constant),
            coefs: self.coefs.into_iter().map(|(v, c)| (v, neg(c))).collect(),
        }
    }
}

/// The linear form of a resolved length expression; `None` when it is not
/// linear (reported by resolution already).
fn linear(e: &Expr) -> Option<Linear> {
    if !has_len_var(e) {
        return Some(Linear {
            coefs: Vec::new(),
            constant: e.clone(),
        });
    }
    match &e.kind {
        ExprKind::Name(Name {
            kind: NameKind::LenVar(v),
            ..
        }) => Some(Linear {
            coefs: vec![(*v, int(1, e.span))],
            constant: int(0, e.span),
        }),
        ExprKind::Unary(UnOp::Neg, a) => Some(linear(a)?.negate()),
        ExprKind::Binary(BinOp::Add, a, b) => Some(linear(a)?.plus(linear(b)?)),
        ExprKind::Binary(BinOp::Sub, a, b) => Some(linear(a)?.plus(linear(b)?.negate())),
        ExprKind::Binary(BinOp::Mul, a, b) => match (has_len_var(a), has_len_var(b)) {
            (false, _) => Some(linear(b)?.scale(a)),
            (_, false) => Some(linear(a)?.scale(b)),
            _ => None,
        },
        _ => None,
    }
}

/// The bindings of `len_vars` from `buffers` (resolved, linear lengths), in
/// the order the generated code evaluates them; a variable no buffer
/// determines has none.
pub(crate) fn bindings(buffers: &[Buffer], len_vars: &[Ident]) -> Vec<LenBinding> {
    let forms: Vec<(usize, Linear)> = buffers
        .iter()
        .enumerate()
        .filter_map(|(b, buffer)| Some((b, linear(&buffer.len)?)))
        .filter(|(_, form)| form.coefs.iter().all(|(v, _)| *v < len_vars.len()))
        .collect();
    let mut bound = vec![false; len_vars.len()];
    let mut out = Vec::new();
    while out.len() < bound.len() {
        // Prefer a buffer whose only unbound variable has a literal coefficient.
        let mut pick: Option<(usize, usize, bool)> = None;
        for (b, form) in &forms {
            let unbound: Vec<usize> = form.coefs.iter().map(|(v, _)| *v).filter(|v| !bound[*v]).collect();
            if let [v] = unbound[..] {
                let literal = form
                    .coefs
                    .iter()
                    .any(|(w, c)| *w == v && matches!(c.kind, ExprKind::Int(_)));
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
                let var = Expr {
                    kind: ExprKind::Name(Name {
                        kind: NameKind::LenVar(*w),
                        text: len_vars[*w].name.clone(),
                    }),
                    span: c.span,
                };
                constant = binary(BinOp::Add, constant, binary(BinOp::Mul, c.clone(), var));
            }
        }
        bound[v] = true;
        out.push(LenBinding {
            var: v,
            buffer: b,
            coef,
            constant,
        });
    }
    out
}
