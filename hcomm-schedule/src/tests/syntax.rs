//! The schedule language read from text (`crate::syntax`): what the macro
//! and `hcomm::checker` share.

use crate::syntax::{self, Front};

const RING: &str = "
    /// Ring all-gather.
    #[verify(world in 1..=8)]
    #[postcondition(all_gather(input -> output))]
    pub fn ring_all_gather(input: &[T; n], output: &mut [T; n * world]) {
        copy input -> output.chunk(rank);
        for s in 0..world - 1 {
            batch {
                send output.chunk((rank - s) % world) to (rank + 1) % world;
                recv output.chunk((rank - s - 1) % world) from (rank - 1) % world;
            }
        }
    }
";

fn front_of(src: &str) -> Front {
    let input = syntax::parse_str(src).expect("the text parses");
    syntax::front(&input.items[0]).expect("the item resolves")
}

/// Every error of the first item of `src`: `(line, column, text)`.
fn errors(src: &str) -> Vec<(usize, usize, String)> {
    let rejection = match syntax::parse_str(src) {
        Err(e) => {
            return e
                .into_iter()
                .map(|e| {
                    let s = e.span().start();
                    (s.line, s.column + 1, e.to_string())
                })
                .collect()
        }
        Ok(input) => match syntax::front(&input.items[0]) {
            Err(r) => r,
            Ok(front) => syntax::check(&front).expect_err("the schedule is rejected"),
        },
    };
    rejection
        .errors
        .iter()
        .map(|(sp, text)| {
            let (line, column) = sp.line_column();
            (line, column, text.clone())
        })
        .collect()
}

#[test]
fn an_items_source_parses_back_into_the_same_ir() {
    let input = syntax::parse_str(RING).expect("the text parses");
    let item = &input.items[0];
    let first = syntax::front(item).expect("the item resolves");
    syntax::check(&first).expect("the ring checks");
    let source = item.source();
    assert!(source.starts_with("# [doc = \" Ring all-gather.\"]"), "{source}");
    let again = front_of(&source);
    assert_eq!(first.ir, again.ir);
    assert_eq!(first.ir.name, "ring_all_gather");
    assert_eq!(first.ir.len_vars.len(), 1);
}

#[test]
fn errors_carry_the_line_and_column_of_the_text() {
    let src = "fn f(x: &mut [T; n]) {\n    send x to rank + 1\n}\n";
    assert_eq!(errors(src), vec![(3, 1, "syntax error: expected `;`".to_owned())]);
    let src = "#[verify(world in 2..=2)]\nfn f(x: &mut [T; n]) {\n    send x to (rank + 1) % world;\n}\n";
    let errs = errors(src);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert_eq!((errs[0].0, errs[0].1), (3, 5));
    assert!(
        errs[0].2.starts_with(
            "unmatched send: with world = 2, rank 0's 1st `send` on tag 0 to rank 1 has no matching `recv`"
        ),
        "{errs:?}"
    );
    let src = "fn f(x: &mut [T; n]) {\n    copy x -> y;\n}\n";
    let errs = errors(src);
    assert_eq!((errs[0].0, errs[0].1), (2, 15), "{errs:?}");
    assert!(errs[0].2.starts_with("unknown name: "), "{errs:?}");
}

#[test]
fn a_token_the_lexer_rejects_is_a_syntax_error_at_its_place() {
    let errs = errors("fn f(x: &mut [T; n]) {\n  \"open\n}");
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].2.starts_with("syntax error: "), "{errs:?}");
}

#[test]
fn world_constants_fold_through_the_evaluator() {
    let ok = front_of("#[verify(world in pow2(1)..=(1 << 2) + 2 * 2)]\nfn f(x: &mut [T; n]) {}");
    assert_eq!(
        ok.ir.verify.world,
        crate::ir::WorldSet::Range {
            lo: 2,
            hi: 8,
            inclusive: true
        }
    );
    // `3 << 62` overflows `i64`: not a constant (it used to wrap)
    let errs = errors("#[verify(world in 1..=3 << 62)]\nfn f(x: &mut [T; n]) {}");
    assert_eq!(
        errs,
        vec![(
            1,
            23,
            "syntax error: world sizes in `#[verify]` must be integer constants".to_owned()
        )]
    );
    let errs = errors("#[verify(world in 1..=pow2(63))]\nfn f(x: &mut [T; n]) {}");
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].2.ends_with("must be integer constants"), "{errs:?}");
}

#[test]
fn the_visitor_walks_every_node_in_source_order() {
    use crate::ir::visit::{self, Visitor};
    use crate::ir::{Expr, ExprKind, Stmt, StmtKind};

    /// Statement keywords and integer literals, in visiting order.
    #[derive(Default)]
    struct Trace(Vec<String>);
    impl<'a> Visitor<'a> for Trace {
        fn visit_stmt(&mut self, s: &'a Stmt) {
            let word = match &s.kind {
                StmtKind::For { .. } => "for",
                StmtKind::If { .. } => "if",
                StmtKind::Batch { .. } => "batch",
                StmtKind::Collective { .. } => "collective",
                StmtKind::Send { .. } => "send",
                StmtKind::Recv { .. } => "recv",
                _ => "other",
            };
            self.0.push(word.to_owned());
            visit::walk_stmt(self, s);
        }
        fn visit_expr(&mut self, e: &'a Expr) {
            if let ExprKind::Int(v) = e.kind {
                self.0.push(v.to_string());
            }
            visit::walk_expr(self, e);
        }
    }
    let front = front_of(
        "#[verify(world in [2, 4])]
        fn f(a: &mut [T; 2 * n], b: &mut [T; n]) {
            for s in 1..3 {
                if rank % 2 == 0 { all_reduce(a, sum) over rank / 4; } else { all_reduce(a, sum) over rank / 4; }
                batch { send a[0..5] to (rank + 6) % world; recv a[0..5] from (rank - 6) % world; }
            }
            barrier over rank % 7;
        }",
    );
    let mut trace = Trace::default();
    trace.visit_schedule(&front.ir);
    assert_eq!(
        trace.0.join(" "),
        "2 for 1 3 if 2 0 collective 4 collective 4 batch send 0 5 6 recv 0 5 6 collective 7"
    );
    // `over` sites: the two in the `if`, then the barrier
    let sites = visit::over_sites(&front.ir.body);
    let StmtKind::For { body, .. } = &front.ir.body[0].kind else {
        panic!("a loop")
    };
    let StmtKind::If { branches, else_body } = &body[0].kind else {
        panic!("an if")
    };
    let at = |s: &Stmt| sites.get(&(std::ptr::from_ref(s) as usize)).copied();
    assert_eq!(at(&branches[0].1[0]), Some(0));
    assert_eq!(at(&else_body.as_ref().expect("an else")[0]), Some(1));
    assert_eq!(at(&front.ir.body[1]), Some(2));
    assert_eq!(sites.len(), 3);
}

/// The ring all-gather with its loop bound written as `world - 1` followed
/// by `tail`.
fn ring_with_bound_tail(tail: &str) -> String {
    RING.replace("0..world - 1", &format!("0..world - 1{tail}"))
}

#[test]
fn a_flat_sum_of_5000_terms_is_not_nested_too_deeply() {
    // a chain of 5000 operators: parsed, resolved, lowered, unrolled and
    // checked like the short ring, its value unchanged by the regrouping
    // (alternating signs, then runs of each sign)
    let alternating = " + 1 - 1".repeat(2500);
    let runs = format!("{}{}", " - 1".repeat(2500), " + 1".repeat(2500));
    for tail in [alternating, runs] {
        let front = front_of(&ring_with_bound_tail(&tail));
        syntax::check(&front).expect("the ring with a long flat bound checks");
    }
    // one `+ 1` more: a step too many, found at world 1 (where the loop
    // should not run at all)
    let errs = errors(&ring_with_bound_tail(&format!("{} + 1", " + 1 - 1".repeat(2500))));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0]
            .2
            .starts_with("buffer hazard: with world = 1, s = 0, rank 0's `batch` receives into `output`"),
        "{errs:?}"
    );
}

#[test]
fn a_long_chain_of_divisions_is_refused_with_a_hint() {
    // `/` does not regroup: 300 of them fold 300 levels deep
    let errs = errors(&ring_with_bound_tail(&" / 1".repeat(300)));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].2.starts_with("syntax error: expression nested too deeply"),
        "{errs:?}"
    );
    assert!(errs[0].2.contains("hint: long chains of `+`/`-`"), "{errs:?}");
}
