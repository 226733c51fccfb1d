//! Source-like rendering of expressions and regions, for messages.

use std::fmt;

use crate::ir::{BinOp, Count, CountLine, Expr, ExprKind, LineKind, Region, RegionKind, UnOp};

/// Binding strength as in Rust (higher binds tighter).
fn prec(op: BinOp) -> u8 {
    match op {
        BinOp::Mul | BinOp::Div | BinOp::Rem => 9,
        BinOp::Add | BinOp::Sub => 8,
        BinOp::Shl | BinOp::Shr => 7,
        BinOp::BitAnd => 6,
        BinOp::BitXor => 5,
        BinOp::BitOr => 4,
        BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge => 3,
        BinOp::And => 2,
        BinOp::Or => 1,
    }
}

fn expr_prec(e: &Expr) -> u8 {
    match &e.kind {
        ExprKind::Binary(op, ..) => prec(*op),
        ExprKind::Unary(..) => 10,
        ExprKind::Int(v) if *v < 0 => 10,
        _ => 11,
    }
}

fn write_operand(f: &mut fmt::Formatter<'_>, e: &Expr, parens: bool) -> fmt::Result {
    if parens {
        write!(f, "({e})")
    } else {
        write!(f, "{e}")
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ExprKind::Int(v) => write!(f, "{v}"),
            ExprKind::Name(n) => f.write_str(&n.text),
            ExprKind::Unary(op, x) => {
                f.write_str(match op {
                    UnOp::Neg => "-",
                    UnOp::Not => "!",
                })?;
                write_operand(f, x, expr_prec(x) < 10)
            }
            ExprKind::Binary(op, a, b) => {
                let p = prec(*op);
                write_operand(f, a, expr_prec(a) < p || (p == 3 && expr_prec(a) == 3))?;
                write!(f, " {} ", op.as_str())?;
                write_operand(f, b, expr_prec(b) <= p)
            }
            ExprKind::Call(func, args) => {
                write!(f, "{}(", func.as_str())?;
                for (i, a) in args.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{a}")?;
                }
                f.write_str(")")
            }
            ExprKind::Count(c) => write!(f, "{c}"),
        }
    }
}

impl fmt::Display for CountLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = &self.count.name;
        match &self.kind {
            LineKind::Vector => f.write_str(name),
            LineKind::Row(i) => write!(f, "{name}[{i}]"),
            LineKind::Col(j) => write!(f, "col({name}, {j})"),
        }
    }
}

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Count::Entry(line, i) => write!(f, "{line}[{i}]"),
            Count::Sum(line, None) => write!(f, "sum({line})"),
            Count::Sum(line, Some((a, b))) => write!(f, "sum({line}[{a}..{b}])"),
        }
    }
}

impl fmt::Display for Region {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            RegionKind::Whole(b) => f.write_str(&b.name),
            RegionKind::Slice { base, start, end } => write!(f, "{base}[{start}..{end}]"),
            RegionKind::Chunk { base, index, parts } => match parts {
                Some(k) => write!(f, "{base}.chunk({index}, {k})"),
                None => write!(f, "{base}.chunk({index})"),
            },
            RegionKind::Part { base, line, index } => write!(f, "{base}.part({line}, {index})"),
        }
    }
}
