//! The checker's compiled evaluation (fast paths, register code, tree walk)
//! agrees with the language's rules as the public functions of
//! [`crate::eval`] state them — the functions the generated code calls —
//! on random expressions, with the edge values of `i64` among the inputs.

use proptest::prelude::*;

use super::props::binop;
use crate::cexpr::{eval_c, CExpr, Fail, CK};
use crate::eval::{binary, call, short_circuit, unary, EvalError};
use crate::ir::{BinOp, Func, SpanId, UnOp};

const SLOTS: u32 = 3;

/// Values where the rules have edges: zero, signs, shift widths, the ends of
/// `i64`.
const EDGES: [i64; 16] = [
    0,
    1,
    -1,
    2,
    -2,
    3,
    7,
    62,
    63,
    64,
    65,
    i64::MAX,
    i64::MIN,
    i64::MIN + 1,
    1 << 32,
    -(1 << 31),
];

fn value() -> impl Strategy<Value = i64> {
    prop_oneof![
        3 => prop::sample::select(EDGES.to_vec()),
        1 => -100_i64..100,
        1 => any::<i64>(),
    ]
}

#[derive(Clone, Debug)]
enum E {
    Int(i64),
    Slot(u32),
    Un(UnOp, Box<E>),
    Bin(BinOp, Box<E>, Box<E>),
    Call(Func, Vec<E>),
}

fn expr() -> impl Strategy<Value = E> {
    let leaf = prop_oneof![value().prop_map(E::Int), (0..SLOTS).prop_map(E::Slot)];
    leaf.prop_recursive(4, 24, 2, |inner| {
        prop_oneof![
            (prop::sample::select(vec![UnOp::Neg, UnOp::Not]), inner.clone()).prop_map(|(o, x)| E::Un(o, Box::new(x))),
            (binop(), inner.clone(), inner.clone()).prop_map(|(o, a, b)| E::Bin(o, Box::new(a), Box::new(b))),
            (
                prop::sample::select(vec![Func::Log2, Func::Pow2, Func::IsPow2]),
                inner.clone()
            )
                .prop_map(|(f, x)| E::Call(f, vec![x])),
            (prop::sample::select(vec![Func::Min, Func::Max]), inner.clone(), inner)
                .prop_map(|(f, a, b)| E::Call(f, vec![a, b])),
        ]
    })
}

fn compile(e: &E) -> CExpr {
    let span = SpanId(7);
    let kind = match e {
        E::Int(v) => CK::Int(*v),
        E::Slot(s) => CK::Slot(*s),
        E::Un(o, x) => CK::Unary(*o, Box::new(compile(x))),
        E::Bin(o, a, b) => CK::Binary(*o, Box::new(compile(a)), Box::new(compile(b))),
        E::Call(f, args) => CK::Call(*f, args.iter().map(compile).collect()),
    };
    CExpr::new(kind, span, false)
}

/// The rules, walked directly: operands left to right, `&&`/`||` deciding
/// on their left operand alone when they can.
fn reference(e: &E, env: &[i64]) -> Result<i64, EvalError> {
    match e {
        E::Int(v) => Ok(*v),
        E::Slot(s) => Ok(env[*s as usize]),
        E::Un(o, x) => unary(*o, reference(x, env)?),
        E::Bin(o, a, b) => {
            let va = reference(a, env)?;
            if let Some(v) = short_circuit(*o, va) {
                return Ok(v);
            }
            binary(*o, va, reference(b, env)?)
        }
        E::Call(f, args) => {
            let vals = args.iter().map(|a| reference(a, env)).collect::<Result<Vec<_>, _>>()?;
            call(*f, &vals)
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]
    #[test]
    fn compiled_evaluation_agrees_with_the_rules(
        e in expr(),
        env in prop::collection::vec(value(), SLOTS as usize),
    ) {
        let want = reference(&e, &env);
        let mut c = compile(&e);
        let tree = eval_c(&c, &env).map_err(|f| match f {
            Fail::Eval(_, err) => err,
            Fail::NonLinear(_) => unreachable!("no length variable in the expression"),
        });
        prop_assert_eq!(tree, want);
        c.attach_code();
        let coded = eval_c(&c, &env).map_err(|f| match f {
            Fail::Eval(_, err) => err,
            Fail::NonLinear(_) => unreachable!("no length variable in the expression"),
        });
        prop_assert_eq!(coded, want);
    }
}

#[test]
fn the_edges_named_by_the_rules() {
    let at = |o, a, b| binary(o, a, b);
    assert_eq!(at(BinOp::Shl, 0, 64), Ok(0));
    assert_eq!(at(BinOp::Shl, -1, 63), Ok(i64::MIN));
    assert_eq!(at(BinOp::Shl, 1, 63), Err(EvalError::Overflow));
    assert_eq!(at(BinOp::Shr, 5, 64), Ok(0));
    assert_eq!(at(BinOp::Shr, -5, 64), Ok(-1));
    assert_eq!(at(BinOp::Shr, 5, -1), Err(EvalError::NegativeShift(-1)));
    assert_eq!(at(BinOp::Rem, i64::MIN, -1), Ok(0));
    assert_eq!(at(BinOp::Div, i64::MIN, -1), Err(EvalError::Overflow));
    assert_eq!(at(BinOp::Rem, -1, 4), Ok(3));
    assert_eq!(at(BinOp::Div, -7, 2), Ok(-4));
}
