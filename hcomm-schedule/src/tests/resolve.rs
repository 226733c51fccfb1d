//! Name resolution of a schedule written as text (as the macro lowers it).

use super::*;
use crate::ir::{NameKind, OpExpr};
use crate::resolve::{resolve, UNRESOLVED};
use crate::DiagKind;

/// `text` as the macro writes an operator parameter.
fn op_name(text: &str) -> OpExpr {
    OpExpr::Name(ident(text))
}

/// A ring all-reduce over `op`, every name written as text.
fn ring_as_text(op: &str) -> Schedule {
    let mut s = S::new("ring")
        .output("buf", var("n") * var("world"))
        .op_param("op")
        .scalar("k")
        .body(vec![for_(
            "s",
            0,
            var("world") - 1,
            vec![batch(vec![
                send(
                    scr("buf").chunk((var("rank") - var("s")) % var("world")),
                    (var("rank") + var("k")) % var("world"),
                ),
                recv_reduce(
                    scr("buf").chunk((var("rank") - var("s") - 1) % var("world")),
                    (var("rank") - var("k")) % var("world"),
                    op_name(op),
                ),
            ])],
        )]);
    s.len_vars.clear();
    s.verify.scalars.push(crate::ir::ScalarRange {
        scalar: UNRESOLVED,
        name: ident("k"),
        lo: int(1),
        hi: var("world"),
        inclusive: false,
        span: sp(),
    });
    s
}

fn kinds(e: &Expr, out: &mut Vec<(String, NameKind)>) {
    match &e.kind {
        ExprKind::Int(_) | ExprKind::Count(_) => {}
        ExprKind::Name(n) => out.push((n.text.clone(), n.kind)),
        ExprKind::Unary(_, x) => kinds(x, out),
        ExprKind::Binary(_, a, b) => {
            kinds(a, out);
            kinds(b, out);
        }
        ExprKind::Call(_, args) => args.iter().for_each(|a| kinds(a, out)),
    }
}

#[test]
fn names_written_as_text_are_resolved_in_place() {
    let mut s = ring_as_text("op");
    let r = resolve(&mut s);
    assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);
    let names: Vec<&str> = s.len_vars.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(names, ["n"]);
    assert_eq!(s.verify.scalars[0].scalar, 1);
    let mut found = Vec::new();
    kinds(&s.buffers[0].len, &mut found);
    assert_eq!(
        found,
        vec![
            ("n".to_owned(), NameKind::LenVar(0)),
            ("world".to_owned(), NameKind::World)
        ]
    );
    let StmtKind::For { body, .. } = &s.body[0].kind else {
        panic!("a loop")
    };
    let StmtKind::Batch { body } = &body[0].kind else {
        panic!("a batch")
    };
    let StmtKind::Send { region, peer, .. } = &body[0].kind else {
        panic!("a send")
    };
    let RegionKind::Chunk { base, .. } = &region.kind else {
        panic!("a chunk")
    };
    assert!(matches!(&base.kind, RegionKind::Whole(b) if b.kind == BufKind::Param(0)));
    let mut found = Vec::new();
    kinds(peer, &mut found);
    let expected = [
        ("rank", NameKind::Rank),
        ("k", NameKind::Scalar(1)),
        ("world", NameKind::World),
    ];
    assert_eq!(found, expected.map(|(t, k)| (t.to_owned(), k)).to_vec());
    let StmtKind::Recv { reduce, .. } = &body[1].kind else {
        panic!("a recv")
    };
    assert_eq!(reduce, &Some(OpExpr::Param(0)));
    assert_eq!(r.len_bindings.len(), 1);
    assert_eq!((r.len_bindings[0].var, r.len_bindings[0].buffer), (0, 0));

    // resolving again changes nothing, and the checker accepts the result
    let once = s.clone();
    let again = resolve(&mut s);
    assert!(again.diagnostics.is_empty());
    assert_eq!(s, once);
    assert!(crate::check_static(&s).is_empty());
}

#[test]
fn unknown_operator_suggests_the_parameter() {
    let mut s = ring_as_text("opp");
    let d = one(&resolve(&mut s).diagnostics, DiagKind::UnknownName);
    assert_eq!(
        d.message,
        "`opp` is not an operator (`sum`, `prod`, `max`, `min`) or an operator parameter"
    );
    assert_eq!(d.hint.as_deref(), Some("did you mean `op`?"));
}

#[test]
fn names_out_of_place_are_reported_once_per_statement() {
    // `rank` in a length, `k` in its own range, a scratch buffer as an integer
    let mut s = S::new("misplaced")
        .output("buf", var("n") + var("rank"))
        .scalar("k")
        .body(vec![scratch("tmp", int(4)), send(scr("buf"), var("tmp") + var("nope"))]);
    s.len_vars.clear();
    s.verify.scalars.push(crate::ir::ScalarRange {
        scalar: UNRESOLVED,
        name: ident("k"),
        lo: var("k"),
        hi: var("world"),
        inclusive: false,
        span: sp(),
    });
    let d = resolve(&mut s).diagnostics;
    let messages: Vec<&str> = d.iter().map(|d| d.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "`rank` cannot appear in a buffer length",
            "`k`: the range of a scalar may depend on `world` only",
            "`tmp` is a scratch buffer, not an integer",
        ]
    );
}

#[test]
fn lengths_that_bind_no_variable_are_reported() {
    let mut s = S::new("sum").output("buf", var("n") + var("m")).body(vec![]);
    s.len_vars.clear();
    let d = one(&resolve(&mut s).diagnostics, DiagKind::NonLinearLength);
    assert_eq!(
        d.message,
        "the buffer lengths do not determine the length variables `n`, `m`"
    );

    // a second buffer determines `m` once `n` is bound from the first
    let mut s = S::new("two")
        .output("a", var("n") * int(2))
        .output("b", var("n") + var("m"))
        .body(vec![]);
    s.len_vars.clear();
    let r = resolve(&mut s);
    assert!(r.diagnostics.is_empty(), "{:?}", r.diagnostics);
    let order: Vec<(usize, usize)> = r.len_bindings.iter().map(|b| (b.var, b.buffer)).collect();
    assert_eq!(order, [(0, 0), (1, 1)]);
}
