//! Property tests: the checker's verdict on random ring-shift schedules
//! against an independent brute-force oracle, and "never panics" on random
//! IR.

use std::collections::HashMap;

use proptest::prelude::*;

use super::*;
use crate::{check_static, check_world, verify, DiagKind};

// ---- ring shifts against an oracle ----

/// How one phase of a random ring schedule posts its send and receive.
#[derive(Clone, Copy, Debug)]
enum Order {
    /// Blocking: `send` then `recv` on every rank.
    SendFirst,
    /// Blocking: `recv` then `send` on every rank.
    RecvFirst,
    /// Blocking: even ranks send first, odd ranks receive first.
    Parity,
    /// One `batch` holding both.
    Batch,
}

/// Phase `p`: every rank sends `input` to `(rank + shift) % world` with
/// `send_tag` and receives `output.chunk(p, 4)` from
/// `(rank - recv_shift) % world` with `recv_tag`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Phase {
    shift: i64,
    recv_shift: i64,
    send_tag: i64,
    recv_tag: i64,
    order: Order,
}

pub(crate) fn phase() -> impl Strategy<Value = Phase> {
    (
        0_i64..4,
        prop_oneof![3 => Just(None), 1 => (0_i64..4).prop_map(Some)],
        0_i64..2,
        prop_oneof![3 => Just(None), 1 => (0_i64..2).prop_map(Some)],
        prop_oneof![
            Just(Order::SendFirst),
            Just(Order::RecvFirst),
            Just(Order::Parity),
            Just(Order::Batch)
        ],
    )
        .prop_map(|(shift, rs, send_tag, rt, order)| Phase {
            shift,
            recv_shift: rs.unwrap_or(shift),
            send_tag,
            recv_tag: rt.unwrap_or(send_tag),
            order,
        })
}

pub(crate) fn ring_schedule(phases: &[Phase]) -> Schedule {
    let mut body = Vec::new();
    for (idx, ph) in phases.iter().enumerate() {
        let s = send_tag(p(0, "input"), (rank() + ph.shift) % world(), ph.send_tag);
        let r = recv_tag(
            p(1, "output").chunk_of(idx as i64, 4),
            (rank() - ph.recv_shift) % world(),
            ph.recv_tag,
        );
        let s2 = send_tag(p(0, "input"), (rank() + ph.shift) % world(), ph.send_tag);
        let r2 = recv_tag(
            p(1, "output").chunk_of(idx as i64, 4),
            (rank() - ph.recv_shift) % world(),
            ph.recv_tag,
        );
        match ph.order {
            Order::SendFirst => body.extend([s, r]),
            Order::RecvFirst => body.extend([r, s]),
            Order::Parity => body.push(if_else(eq(rank() % 2, 0), vec![s, r], vec![r2, s2])),
            Order::Batch => body.push(batch(vec![s, r])),
        }
    }
    S::new("ring_shifts")
        .input("input", n())
        .output("output", n() * 4)
        .body(body)
}

/// What the oracle expects first (in the order of the language reference, section 7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    SelfMessage,
    Unmatched,
    Deadlock,
    Ok,
}

/// One operation of the oracle: (is send, peer, tag).
type OOp = (bool, usize, i64);

/// A channel: (source, destination, tag).
type Chan = (usize, usize, i64);

/// Brute force: each rank's steps (a step is one blocking op or a batch),
/// channels paired by counting, then rendezvous steps repeated until
/// nothing moves.
fn oracle(phases: &[Phase], world: usize) -> Verdict {
    let w = world as i64;
    let mut steps: Vec<Vec<(Vec<OOp>, bool)>> = vec![Vec::new(); world];
    for (r, rs) in steps.iter_mut().enumerate() {
        let ri = r as i64;
        for ph in phases {
            let s: OOp = (true, (ri + ph.shift).rem_euclid(w) as usize, ph.send_tag);
            let v: OOp = (false, (ri - ph.recv_shift).rem_euclid(w) as usize, ph.recv_tag);
            let send_first = match ph.order {
                Order::Batch => {
                    rs.push((vec![s, v], true));
                    continue;
                }
                Order::SendFirst => true,
                Order::RecvFirst => false,
                Order::Parity => r % 2 == 0,
            };
            if send_first {
                rs.extend([(vec![s], false), (vec![v], false)]);
            } else {
                rs.extend([(vec![v], false), (vec![s], false)]);
            }
        }
    }
    // step 2: a blocking message to self whose match (FIFO on its tag) was
    // not posted before it
    for (r, rs) in steps.iter().enumerate() {
        let mut posted: HashMap<i64, (usize, usize)> = HashMap::new();
        for (ops, in_batch) in rs {
            for &(send, _, tag) in ops.iter().filter(|o| o.1 == r) {
                let (sends, recvs) = posted.entry(tag).or_default();
                let matched = if send { *recvs > *sends } else { *sends > *recvs };
                if !in_batch && !matched {
                    return Verdict::SelfMessage;
                }
                if send {
                    *sends += 1;
                } else {
                    *recvs += 1;
                }
            }
        }
    }
    // step 3: channel counts; remember for each op its partner's step
    let mut chans: HashMap<Chan, (Vec<usize>, Vec<usize>)> = HashMap::new();
    for (r, rs) in steps.iter().enumerate() {
        for (k, (ops, _)) in rs.iter().enumerate() {
            for &(send, peer, tag) in ops {
                let e = if send {
                    chans.entry((r, peer, tag)).or_default()
                } else {
                    chans.entry((peer, r, tag)).or_default()
                };
                if send {
                    e.0.push(k);
                } else {
                    e.1.push(k);
                }
            }
        }
    }
    if chans.values().any(|(s, v)| s.len() != v.len()) {
        return Verdict::Unmatched;
    }
    // partner step of each (rank, step, op)
    let mut partner: HashMap<(usize, usize, usize), (usize, usize)> = HashMap::new();
    let mut seen: HashMap<(usize, usize, i64, bool), usize> = HashMap::new();
    for (r, rs) in steps.iter().enumerate() {
        for (k, (ops, _)) in rs.iter().enumerate() {
            for (j, &(send, peer, tag)) in ops.iter().enumerate() {
                let key = if send { (r, peer, tag) } else { (peer, r, tag) };
                let c = seen.entry((key.0, key.1, key.2, send)).or_default();
                let (ss, vs) = &chans[&key];
                let other = if send { vs[*c] } else { ss[*c] };
                *c += 1;
                partner.insert((r, k, j), (peer, other));
            }
        }
    }
    // step 4: a rank at step k moves when every partner's rank has reached
    // the partner's step
    let mut pc = vec![0_usize; world];
    loop {
        let mut moved = false;
        for r in 0..world {
            while pc[r] < steps[r].len() {
                let k = pc[r];
                let ready = (0..steps[r][k].0.len()).all(|j| {
                    let (q, qk) = partner[&(r, k, j)];
                    pc[q] >= qk
                });
                if !ready {
                    break;
                }
                pc[r] += 1;
                moved = true;
            }
        }
        if !moved {
            break;
        }
    }
    if (0..world).any(|r| pc[r] < steps[r].len()) {
        Verdict::Deadlock
    } else {
        Verdict::Ok
    }
}

fn verdict_of(d: &[crate::Diagnostic]) -> Verdict {
    let Some(first) = d.first() else {
        return Verdict::Ok;
    };
    let all = |ks: &[DiagKind]| d.iter().all(|x| ks.contains(&x.kind));
    if all(&[DiagKind::SendToSelf, DiagKind::RecvFromSelf]) {
        Verdict::SelfMessage
    } else if all(&[DiagKind::UnmatchedSend, DiagKind::UnmatchedRecv]) {
        Verdict::Unmatched
    } else if first.kind == DiagKind::Deadlock && d.len() == 1 {
        Verdict::Deadlock
    } else {
        panic!("unexpected diagnostics: {d:?}")
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Shifted rings in every order, with random tags and batches: the
    /// checker agrees with the brute-force oracle at every size.
    #[test]
    fn ring_shifts_agree_with_the_oracle(
        phases in prop::collection::vec(phase(), 1..=4),
        world in 1_usize..=7,
    ) {
        let s = ring_schedule(&phases);
        let d = check_world(&s, world as i64, &[]);
        prop_assert_eq!(verdict_of(&d), oracle(&phases, world), "{:?}", d);
    }

    /// A batch whose `for` loop sends to every rank `(rank + j * k) % world`
    /// and receives from `(rank - j * k) % world`: the batch rule fails
    /// exactly when two iterations name the same peer.
    #[test]
    fn batch_rule_in_loops_agrees_with_the_oracle(k in 0_i64..6, count in 1_i64..5, size in 1_i64..=7) {
        let s = S::new("batch_loop")
            .input("input", n())
            .output("output", n() * 8)
            .body(vec![batch(vec![for_(
                "j",
                0,
                count,
                vec![
                    send(p(0, "input"), (rank() + var("j") * k) % world()),
                    recv(p(1, "output").chunk_of(var("j"), 8), (rank() - var("j") * k) % world()),
                ],
            )])]);
        let d = check_world(&s, size, &[]);
        let peers: Vec<i64> = (0..count).map(|j| (j * k).rem_euclid(size)).collect();
        let repeated = (1..peers.len()).any(|j| peers[..j].contains(&peers[j]));
        if repeated {
            prop_assert_eq!(d.len(), 1, "{:?}", d);
            prop_assert_eq!(d[0].kind, DiagKind::BatchRule, "{}", d[0]);
        } else {
            prop_assert!(d.is_empty(), "{:?}", d);
        }
    }
}

// ---- never panics on random IR ----

fn leaf_expr() -> impl Strategy<Value = Expr> {
    prop_oneof![
        prop_oneof![
            Just(0_i64),
            Just(1),
            Just(2),
            Just(3),
            Just(-1),
            Just(63),
            Just(1 << 40),
            Just(i64::MAX),
            Just(i64::MIN)
        ]
        .prop_map(int),
        Just(()).prop_map(|()| rank()),
        Just(()).prop_map(|()| world()),
        Just(()).prop_map(|()| var("i")),
        Just(()).prop_map(|()| var("x")),
        Just(()).prop_map(|()| var("nope")),
        Just(()).prop_map(|()| scalar(0, "k")),
        Just(()).prop_map(|()| scalar(5, "ghost")),
        Just(()).prop_map(|()| n()),
        Just(()).prop_map(|()| name(NameKind::LenVar(7), "m")),
    ]
}

/// Every binary operator of the language.
pub(super) fn binop() -> impl Strategy<Value = BinOp> {
    prop::sample::select(vec![
        BinOp::Add,
        BinOp::Sub,
        BinOp::Mul,
        BinOp::Div,
        BinOp::Rem,
        BinOp::BitXor,
        BinOp::BitAnd,
        BinOp::BitOr,
        BinOp::Shl,
        BinOp::Shr,
        BinOp::Eq,
        BinOp::Ne,
        BinOp::Lt,
        BinOp::Le,
        BinOp::Gt,
        BinOp::Ge,
        BinOp::And,
        BinOp::Or,
    ])
}

fn expr() -> impl Strategy<Value = Expr> {
    leaf_expr().prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            (binop(), inner.clone(), inner.clone()).prop_map(|(op, a, b)| bin(op, a, b)),
            (prop::bool::ANY, inner.clone())
                .prop_map(|(neg, x)| ex(ExprKind::Unary(if neg { UnOp::Neg } else { UnOp::Not }, Box::new(x)))),
            (
                prop::sample::select(vec![Func::Log2, Func::Pow2, Func::IsPow2, Func::Min, Func::Max]),
                prop::collection::vec(inner, 0..4)
            )
                .prop_map(|(f, args)| call(f, args)),
        ]
    })
}

/// A loop bound: small, huge, or a random expression clamped to `-4..=4`.
fn bound() -> impl Strategy<Value = Expr> {
    prop_oneof![
        3 => (0_i64..4).prop_map(int),
        1 => prop_oneof![Just(1_i64 << 30), Just(i64::MAX), Just(i64::MIN)].prop_map(int),
        2 => expr().prop_map(|e| call(Func::Max, vec![call(Func::Min, vec![e, int(4)]), int(-4)])),
    ]
}

fn region() -> impl Strategy<Value = Region> {
    let leaf = prop_oneof![
        Just(()).prop_map(|()| p(0, "input")),
        Just(()).prop_map(|()| p(1, "output")),
        Just(()).prop_map(|()| p(9, "bogus")),
        Just(()).prop_map(|()| scr("t")),
    ];
    leaf.prop_recursive(3, 6, 1, |inner| {
        prop_oneof![
            (inner.clone(), expr()).prop_map(|(r, i)| r.chunk(i)),
            (inner.clone(), expr(), expr()).prop_map(|(r, i, k)| r.chunk_of(i, k)),
            (inner, expr(), expr()).prop_map(|(r, a, b)| r.slice(a, b)),
        ]
    })
}

fn collective() -> impl Strategy<Value = Collective> {
    prop_oneof![
        (region(), prop::option::of(region())).prop_map(|(src, dst)| Collective::AllReduce {
            src,
            dst,
            op: Op::Sum.into()
        }),
        (region(), region()).prop_map(|(src, dst)| Collective::AllGather { src, dst }),
        (region(), region()).prop_map(|(src, dst)| Collective::ReduceScatter {
            src,
            dst,
            op: Op::Max.into()
        }),
        (region(), region()).prop_map(|(src, dst)| Collective::AllToAll { src, dst }),
        (region(), expr()).prop_map(|(region, root)| Collective::Broadcast { region, root }),
        (region(), region(), expr()).prop_map(|(src, dst, root)| Collective::Reduce {
            src,
            dst,
            op: Op::Min.into(),
            root
        }),
        Just(Collective::Barrier),
    ]
}

fn handle() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec!["h", "g"])
}

fn leaf_stmt() -> impl Strategy<Value = Stmt> {
    prop_oneof![
        (region(), expr()).prop_map(|(r, e)| send(r, e)),
        (region(), expr()).prop_map(|(r, e)| recv(r, e)),
        (region(), expr()).prop_map(|(r, e)| recv_reduce(r, e, Op::Sum)),
        (region(), expr(), -1_i64..3).prop_map(|(r, e, t)| send_tag(r, e, t)),
        (region(), expr(), -1_i64..3).prop_map(|(r, e, t)| recv_tag(r, e, t)),
        (handle(), region(), expr()).prop_map(|(h, r, e)| isend(h, r, e)),
        (handle(), region(), expr()).prop_map(|(h, r, e)| irecv(h, r, e)),
        prop::collection::vec(handle(), 0..3).prop_map(|hs| wait(&hs)),
        (region(), region()).prop_map(|(a, b)| copy(a, b)),
        (region(), region()).prop_map(|(a, b)| accumulate(a, b, Op::Prod)),
        (prop::sample::select(vec!["x", "i", "rank"]), expr()).prop_map(|(v, e)| let_(v, e)),
        expr().prop_map(|e| scratch("t", e)),
        (collective(), prop::option::of(expr())).prop_map(|(c, over)| match over {
            Some(o) => coll_over(c, o),
            None => coll(c),
        }),
    ]
}

pub(crate) fn stmts() -> impl Strategy<Value = Vec<Stmt>> {
    let stmt = leaf_stmt().prop_recursive(3, 24, 4, |inner| {
        let body = prop::collection::vec(inner, 0..4);
        prop_oneof![
            body.clone().prop_map(batch),
            (bound(), bound(), body.clone(), prop::bool::ANY).prop_map(|(a, b, body, rev)| if rev {
                for_rev("i", a, b, body)
            } else {
                for_("i", a, b, body)
            }),
            (expr(), body.clone(), prop::option::of(body)).prop_map(|(c, t, e)| match e {
                Some(e) => if_else(c, t, e),
                None => if_(c, t),
            }),
        ]
    });
    prop::collection::vec(stmt, 0..6)
}

pub(crate) fn post() -> impl Strategy<Value = Option<PostKind>> {
    prop::option::of(prop_oneof![
        Just(()).prop_map(|()| PostKind::AllGather {
            input: bref(0, "input"),
            output: bref(1, "output"),
        }),
        Just(()).prop_map(|()| PostKind::AllReduce {
            input: bref(1, "output"),
            output: bref(1, "output"),
            op: Op::Sum.into(),
        }),
        expr().prop_map(|root| PostKind::Broadcast {
            buf: bref(1, "output"),
            root,
        }),
        expr().prop_map(|root| PostKind::Reduce {
            input: bref(0, "input"),
            output: bref(1, "output"),
            op: Op::Sum.into(),
            root,
        }),
    ])
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    /// Random IR (bad names, divisions by zero, huge loops, odd regions,
    /// wrong arities, stray handles) gets diagnostics, never a panic.
    #[test]
    fn never_panics_on_random_ir(
        body in stmts(),
        post in post(),
        worlds in prop::collection::vec(-1_i64..5, 1..3),
        with_scalar in prop::bool::ANY,
        out_len in prop_oneof![Just(None), expr().prop_map(Some)],
    ) {
        let mut b = S::new("fuzz")
            .input("input", n())
            .output("output", out_len.unwrap_or_else(|| n() * world()))
            .world_list(&worlds);
        if with_scalar {
            b = b.scalar("k").range(0, int(0), world());
        }
        if let Some(p) = post {
            b = b.post(p);
        }
        let s = b.body(body);
        let _ = check_static(&s);
        let _ = verify(&s);
        for w in [1, 2, 3] {
            let _ = check_world(&s, w, &[1]);
            for d in check_world(&s, w, &[]) {
                let _ = d.to_string();
            }
        }
    }
}
