//! One or more failing schedules per diagnostic kind, checking the kind, the
//! message and the primary span.

use super::pass::ring_all_gather;
use super::*;
use crate::{check_static, check_world, verify, DiagKind};

fn span_of(s: &Schedule, f: &dyn Fn(&Stmt) -> bool) -> SpanId {
    find_stmt(&s.body, f).expect("statement").span
}

fn is_send(s: &Stmt) -> bool {
    matches!(s.kind, StmtKind::Send { .. })
}

fn is_recv(s: &Stmt) -> bool {
    matches!(s.kind, StmtKind::Recv { .. })
}

// ---- step 4: deadlock ----

#[test]
fn blocking_ring_deadlocks_at_two() {
    let s = gather_bufs("blocking_ring").worlds(2, 8).body(vec![
        send(p(0, "input"), right()),
        recv(p(1, "output").chunk(left()), left()),
    ]);
    let d = one(&verify(&s), DiagKind::Deadlock);
    assert_eq!(
        d.to_string(),
        "deadlock: with world = 2, rank 0 blocks in `send` to rank 1 while rank 1 blocks in `send` to rank 0\n\
         hint: post both directions at once with `batch` (or `isend`/`irecv`), or order by parity: even ranks send first while odd ranks receive first"
    );
    assert_eq!(d.span, span_of(&s, &is_send));
    assert!(d.notes.is_empty(), "same statement on every rank: {:?}", d.notes);
}

#[test]
fn blocking_ring_at_world_one_is_send_to_self() {
    let s = gather_bufs("blocking_ring").body(vec![
        send(p(0, "input"), right()),
        recv(p(1, "output").chunk(left()), left()),
    ]);
    let d = verify(&s);
    // the `recv` after it finds its matching `send` posted: only the send
    // is reported
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].kind, DiagKind::SendToSelf);
    assert!(
        d[0].message.starts_with("with world = 1, rank 0 sends to itself"),
        "{}",
        d[0]
    );
}

#[test]
fn parity_exchange_deadlocks_only_at_some_sizes() {
    // stride-2 ring, even ranks send first: at odd sizes the cycle holds both
    // parities and unwinds, at world = 4 ranks 0 and 2 form an all-even cycle
    let peer_r = || (rank() + 2) % world();
    let peer_l = || (rank() - 2) % world();
    let s = gather_bufs("parity").world_list(&[3, 5, 4, 6]).body(vec![if_else(
        eq(rank() % 2, 0),
        vec![
            send(p(0, "input"), peer_r()),
            recv(p(1, "output").chunk(peer_l()), peer_l()),
        ],
        vec![
            recv(p(1, "output").chunk(peer_l()), peer_l()),
            send(p(0, "input"), peer_r()),
        ],
    )]);
    assert!(check_world(&s, 3, &[]).is_empty());
    assert!(check_world(&s, 5, &[]).is_empty());
    let d = one(&verify(&s), DiagKind::Deadlock);
    assert!(
        d.message
            .starts_with("with world = 4, rank 0 blocks in `send` to rank 2 while rank 2 blocks in `send` to rank 0"),
        "{d}"
    );
}

#[test]
fn collective_against_point_to_point_deadlocks() {
    let s = gather_bufs("coll_p2p").world_list(&[2]).body(vec![if_else(
        eq(rank(), 0),
        vec![send(p(0, "input"), 1), coll(Collective::Barrier)],
        vec![coll(Collective::Barrier), recv(p(1, "output").chunk(0), 0)],
    )]);
    let d = one(&verify(&s), DiagKind::Deadlock);
    assert_eq!(
        d.message,
        "with world = 2, rank 0 blocks in `send` to rank 1 while rank 1 blocks in `barrier` waiting for rank 0"
    );
    assert_eq!(d.span, span_of(&s, &is_send));
    // the other blocking step of the cycle is a note
    let barrier = span_of(&s, &|x| {
        matches!(
            x.kind,
            StmtKind::Collective {
                kind: Collective::Barrier,
                ..
            }
        )
    });
    assert_eq!(d.notes.len(), 1, "{:?}", d.notes);
    assert!(d.notes[0].1.contains("rank 1 blocks in `barrier`"));
    // the first barrier found is rank 0's, the second (in the else branch)
    // is rank 1's
    assert_ne!(d.notes[0].0, barrier);
    assert!(d.hint.as_deref().unwrap_or("").contains("collective"));
}

#[test]
fn deadlock_names_loop_values() {
    // blocking ring inside a loop: reported with the loop variable
    let s = gather_bufs("loop_ring").worlds(2, 4).body(vec![for_(
        "s",
        0,
        world() - 1,
        vec![
            send(p(1, "output").chunk((rank() - var("s")) % world()), right()),
            recv(p(1, "output").chunk((rank() - var("s") - 1) % world()), left()),
        ],
    )]);
    let d = one(&verify(&s), DiagKind::Deadlock);
    assert!(d.message.contains("rank 0 blocks in `send` to rank 1 (s = 0)"), "{d}");
}

// ---- step 4: collective mismatch ----

#[test]
fn collective_mismatch_of_kinds() {
    let s = S::new("mismatch")
        .output("a", n() * world())
        .output("b", n() * world())
        .world_list(&[2])
        .body(vec![if_else(
            eq(rank(), 0),
            vec![coll(Collective::AllReduce {
                src: p(0, "a"),
                dst: None,
                op: Op::Sum.into(),
            })],
            vec![coll(Collective::AllGather {
                src: p(0, "a").chunk(rank()),
                dst: p(1, "b"),
            })],
        )]);
    let d = one(&verify(&s), DiagKind::CollectiveMismatch);
    assert_eq!(
        d.message,
        "with world = 2, rank 0 calls `all_reduce` while rank 1 calls `all_gather`"
    );
    assert_eq!(d.notes.len(), 1);
}

#[test]
fn collective_mismatch_of_ops_and_roots() {
    let s = S::new("mismatch_op")
        .output("a", n())
        .world_list(&[3])
        .body(vec![if_else(
            eq(rank(), 2),
            vec![coll(Collective::AllReduce {
                src: p(0, "a"),
                dst: None,
                op: Op::Max.into(),
            })],
            vec![coll(Collective::AllReduce {
                src: p(0, "a"),
                dst: None,
                op: Op::Sum.into(),
            })],
        )]);
    let d = one(&verify(&s), DiagKind::CollectiveMismatch);
    assert_eq!(
        d.message,
        "with world = 3, rank 0 calls `all_reduce` with `sum` while rank 2 uses `max`"
    );
    let s = S::new("mismatch_root")
        .output("a", n())
        .world_list(&[2])
        .body(vec![coll(Collective::Broadcast {
            region: p(0, "a"),
            root: rank(),
        })]);
    let d = one(&verify(&s), DiagKind::CollectiveMismatch);
    assert!(d.message.contains("with root 0 while rank 1 uses root 1"), "{d}");
}

#[test]
fn collective_called_by_only_some_ranks() {
    let s = S::new("some")
        .output("a", n())
        .worlds(1, 4)
        .body(vec![if_(eq(rank(), 0), vec![coll(Collective::Barrier)])]);
    let d = one(&verify(&s), DiagKind::CollectiveMismatch);
    assert_eq!(
        d.message,
        "with world = 2, rank 0 calls `barrier` but rank 1 finishes without calling it"
    );
}

// ---- step 3: matching ----

#[test]
fn unmatched_send_names_both_ranks_and_the_tag() {
    let s = gather_bufs("tags").world_list(&[2]).body(vec![
        if_(eq(rank(), 0), vec![send_tag(p(0, "input"), 1, 3)]),
        if_(eq(rank(), 1), vec![recv_tag(p(1, "output").chunk(0), 0, 4)]),
    ]);
    let d = verify(&s);
    assert_eq!(d.len(), 2, "{d:?}");
    assert_eq!(d[0].kind, DiagKind::UnmatchedSend);
    assert_eq!(
        d[0].message,
        "with world = 2, rank 0's 1st `send` on tag 3 to rank 1 has no matching `recv`: rank 1 never receives from rank 0 on tag 3"
    );
    assert_eq!(d[0].span, span_of(&s, &is_send));
    assert_eq!(d[0].notes.len(), 1);
    assert_eq!(d[0].notes[0].0, span_of(&s, &is_recv));
    assert!(d[0].notes[0].1.starts_with("receive expected here"), "{:?}", d[0].notes);
    assert_eq!(d[1].kind, DiagKind::UnmatchedRecv);
    assert_eq!(
        d[1].message,
        "with world = 2, rank 1's 1st `recv` on tag 4 from rank 0 has no matching `send`: rank 0 never sends to rank 1 on tag 4"
    );
}

#[test]
fn unmatched_count_on_a_channel() {
    let s = gather_bufs("count").world_list(&[2]).body(vec![if_else(
        eq(rank(), 0),
        vec![for_("i", 0, 3, vec![send(p(0, "input"), 1)])],
        vec![for_("i", 0, 2, vec![recv(p(1, "output").chunk(0), 0)])],
    )]);
    let d = one(&verify(&s), DiagKind::UnmatchedSend);
    assert!(
        d.message.starts_with(
            "with world = 2, i = 2, rank 0's 3rd `send` on tag 0 to rank 1 has no matching `recv`: rank 1 posts only 2 matching `recv` for the 3 messages"
        ),
        "{d}"
    );
}

#[test]
fn length_mismatch_of_a_pair() {
    let s = S::new("lens")
        .input("input", n())
        .output("output", n() * 2)
        .world_list(&[2])
        .body(vec![if_else(
            eq(rank(), 0),
            vec![send(p(0, "input"), 1)],
            vec![recv(p(1, "output"), 0)],
        )]);
    let d = one(&verify(&s), DiagKind::LengthMismatch);
    assert_eq!(
        d.message,
        "with world = 2, rank 0 sends n elements to rank 1 but rank 1 receives 2 * n elements"
    );
    assert_eq!(d.notes[0].0, span_of(&s, &is_recv));
}

#[test]
fn length_mismatch_of_a_collective_shape() {
    let s = S::new("ag_shape")
        .input("input", n())
        .output("output", n() * 2)
        .worlds(1, 4)
        .body(vec![coll(Collective::AllGather {
            src: p(0, "input"),
            dst: p(1, "output"),
        })]);
    let d = one(&verify(&s), DiagKind::LengthMismatch);
    assert!(d.message.starts_with("with world = 1, rank 0 calls `all_gather` with an output of 2 * n elements, but 1 ranks times an input of n need n"), "{d}");
}

// ---- step 2: ranges ----

#[test]
fn rank_out_of_range_without_modulo() {
    let s = gather_bufs("no_mod").world_list(&[4]).body(vec![batch(vec![
        send(p(0, "input"), rank() + 1),
        recv(p(1, "output").chunk(left()), left()),
    ])]);
    let d = one(&verify(&s), DiagKind::RankOutOfRange);
    assert!(
        d.message
            .starts_with("with world = 4, rank 3 sends to 4, which is not in `0..world`"),
        "{d}"
    );
    let send_stmt = find_stmt(&s.body, &is_send).unwrap();
    let StmtKind::Send { peer, .. } = &send_stmt.kind else {
        unreachable!()
    };
    assert_eq!(d.span, peer.span, "primary span is the peer expression");
    assert!(d.hint.unwrap().contains("% world"));
}

#[test]
fn region_out_of_bounds_and_uneven_chunk() {
    let s = gather_bufs("oob")
        .world_list(&[2])
        .body(vec![copy(p(0, "input"), p(1, "output").chunk(world()))]);
    let d = one(&verify(&s), DiagKind::RegionOutOfBounds);
    assert!(d.message.contains("chunk index 2, which is not in `0..2`"), "{d}");

    let s = S::new("uneven")
        .output("buf", n() * 4)
        .world_list(&[1])
        .body(vec![copy(p(0, "buf").chunk_of(0, 3), p(0, "buf").chunk_of(1, 3))]);
    let d = one(&verify(&s), DiagKind::UnevenChunk);
    assert!(
        d.message
            .contains("divides a region of length 4 * n into 3 chunks in `buf.chunk(0, 3)`"),
        "{d}"
    );

    let s = S::new("slice")
        .output("buf", n())
        .world_list(&[1])
        .body(vec![copy(p(0, "buf").slice(0, 1), p(0, "buf").slice(1, 2))]);
    let d = one(&verify(&s), DiagKind::RegionOutOfBounds);
    assert!(d.message.contains("elements 1..2 of a region of length n"), "{d}");
}

#[test]
fn recv_from_self() {
    let s = gather_bufs("self_recv")
        .world_list(&[1])
        .body(vec![recv(p(1, "output"), rank())]);
    let d = one(&verify(&s), DiagKind::RecvFromSelf);
    assert!(d.message.starts_with("with world = 1, rank 0 receives from itself"));
}

#[test]
fn self_messages_in_a_batch_are_fine() {
    let s = gather_bufs("self_batch")
        .worlds(1, 3)
        .post(PostKind::AllGather {
            input: bref(0, "input"),
            output: bref(1, "output"),
        })
        .body(vec![for_(
            "j",
            0,
            world(),
            vec![batch(vec![
                send(p(0, "input"), (rank() + var("j")) % world()),
                recv(
                    p(1, "output").chunk((rank() - var("j")) % world()),
                    (rank() - var("j")) % world(),
                ),
            ])],
        )]);
    let d = verify(&s);
    assert!(d.is_empty(), "{d:?}");
}

// ---- step 1: evaluation ----

#[test]
fn evaluation_errors() {
    let s = gather_bufs("log0").world_list(&[2]).body(vec![let_("k", log2(rank()))]);
    let d = one(&verify(&s), DiagKind::EvaluationError);
    assert_eq!(
        d.message,
        "with world = 2, rank 0 hits `log2` of 0, which is not positive"
    );
    let s = gather_bufs("div0")
        .world_list(&[3])
        .body(vec![for_("i", 0, 2, vec![let_("k", rank() / var("i"))])]);
    let d = one(&verify(&s), DiagKind::EvaluationError);
    assert_eq!(d.message, "with world = 3, i = 0, rank 0 hits division by zero");
    let s = gather_bufs("ovf")
        .world_list(&[1])
        .body(vec![let_("k", int(i64::MAX) + 1)]);
    let d = one(&verify(&s), DiagKind::EvaluationError);
    assert!(d.message.contains("overflow"), "{d}");
    let s = gather_bufs("big_loop").world_list(&[1]).body(vec![for_(
        "i",
        0,
        int(1) << int(40),
        vec![copy(p(0, "input"), p(1, "output"))],
    )]);
    let d = one(&verify(&s), DiagKind::EvaluationError);
    assert!(d.message.contains("more than 2^24 loop iterations"), "{d}");
}

// ---- step 5: hazards ----

#[test]
fn write_while_isend_in_flight() {
    let s = gather_bufs("isend_hazard").worlds(2, 3).body(vec![
        copy(p(0, "input"), p(1, "output").chunk(rank())),
        isend("h", p(1, "output").chunk(rank()), right()),
        recv(p(1, "output").chunk(left()), left()),
        copy(p(0, "input"), p(1, "output").chunk(rank())),
        wait(&["h"]),
    ]);
    let d = one(&verify(&s), DiagKind::BufferHazard);
    assert!(
        d.message.starts_with("with world = 2, rank 0's `copy` writes `output[0..n]` while `h` (`isend` of `output[0..n]` to rank 1) is in flight"),
        "{d}"
    );
    assert_eq!(d.notes[0].1, "`h` is posted here");
    assert_eq!(d.span, s.body[3].span);
    assert_eq!(d.notes[0].0, s.body[1].span);
}

#[test]
fn read_before_irecv_is_waited() {
    let s = gather_bufs("irecv_hazard").worlds(2, 3).body(vec![
        irecv("r", p(1, "output").chunk(left()), left()),
        send(p(0, "input"), right()),
        copy(p(1, "output").chunk(left()), p(1, "output").chunk(rank())),
        wait(&["r"]),
    ]);
    let d = one(&verify(&s), DiagKind::BufferHazard);
    assert!(
        d.message.starts_with("with world = 2, rank 0's `copy` reads `output[n..2 * n]` while `r` (`irecv` of `output[n..2 * n]` from rank 1) is in flight"),
        "{d}"
    );
}

#[test]
fn overlapping_copy_and_collective() {
    let s = S::new("copy_overlap")
        .output("buf", n() * 2)
        .world_list(&[1])
        .body(vec![copy(
            p(0, "buf").slice(0, n()),
            p(0, "buf").slice(n() - 1, n() * 2 - 1),
        )]);
    let d = one(&verify(&s), DiagKind::BufferHazard);
    assert!(
        d.message
            .contains("`copy` reads `buf[0..n]` and writes `buf[n - 1..2 * n - 1]`, which overlap"),
        "{d}"
    );
    let s = S::new("ar_overlap")
        .output("buf", n())
        .world_list(&[2])
        .body(vec![coll(Collective::AllReduce {
            src: p(0, "buf"),
            dst: Some(p(0, "buf")),
            op: Op::Sum.into(),
        })]);
    let d = one(&verify(&s), DiagKind::BufferHazard);
    assert!(d.hint.unwrap().contains("in-place"));
}

#[test]
fn batch_receives_into_what_it_sends() {
    let s = gather_bufs("batch_overlap").worlds(2, 3).body(vec![batch(vec![
        send(p(1, "output").chunk(rank()), right()),
        recv(p(1, "output").chunk(rank()), left()),
    ])]);
    let d = one(&verify(&s), DiagKind::BufferHazard);
    assert!(
        d.message
            .contains("`batch` receives into `output[0..n]` and sends from `output[0..n]`"),
        "{d}"
    );
}

#[test]
fn batch_rule_two_sends_to_one_peer() {
    let s = gather_bufs("batch_rule").world_list(&[2]).body(vec![batch(vec![
        send(p(0, "input"), right()),
        send(p(1, "output").chunk(rank()), right()),
        recv(p(1, "output").chunk(left()), left()),
        recv(p(1, "output").chunk(left()), left()),
    ])]);
    // matching holds (two messages each way); the batch rule fails
    let d = one(&verify(&s), DiagKind::BatchRule);
    assert_eq!(d.message, "with world = 2, rank 0's `batch` sends twice to rank 1");
    let sends: Vec<SpanId> = match &s.body[0].kind {
        StmtKind::Batch { body } => body.iter().map(|x| x.span).collect(),
        _ => unreachable!(),
    };
    assert_eq!(d.span, sends[1]);
    assert_eq!(d.notes, vec![(sends[0], "previous `send` to rank 1 here".to_owned())]);
}

#[test]
fn self_send_in_a_batch_loop_without_its_recv_is_unmatched() {
    // every rank sends to every rank (itself included) but receives only
    // from the others
    let s = S::new("direct_all_to_all_no_self_recv")
        .input("a", n() * world())
        .output("b", n() * world())
        .body(vec![batch(vec![for_(
            "j",
            0,
            world(),
            vec![
                send(p(0, "a").chunk(var("j")), var("j")),
                if_(
                    bin(BinOp::Ne, var("j"), rank()),
                    vec![recv(p(1, "b").chunk(var("j")), var("j"))],
                ),
            ],
        )])]);
    let d = one(&verify(&s), DiagKind::UnmatchedSend);
    assert!(
        d.message
            .starts_with("with world = 1, j = 0, rank 0's 1st `send` on tag 0 to rank 0 has no matching `recv`: rank 0 never receives from rank 0 on tag 0"),
        "{d}"
    );
    assert_eq!(d.span, span_of(&s, &is_send));
    // at a size where the others do match, only the self messages fail
    let d = check_world(&s, 3, &[]);
    assert_eq!(d.len(), 1, "one error per statement: {d:?}");
    assert_eq!(d[0].kind, DiagKind::UnmatchedSend);
    assert!(
        d[0].message.contains("rank 0's 1st `send` on tag 0 to rank 0"),
        "{}",
        d[0]
    );
}

#[test]
fn self_recv_in_a_batch_loop_without_its_send_is_unmatched() {
    let s = S::new("no_self_send")
        .input("a", n() * world())
        .output("b", n() * world())
        .worlds(1, 4)
        .body(vec![batch(vec![for_(
            "j",
            0,
            world(),
            vec![
                if_(
                    bin(BinOp::Ne, var("j"), rank()),
                    vec![send(p(0, "a").chunk(var("j")), var("j"))],
                ),
                recv(p(1, "b").chunk(var("j")), var("j")),
            ],
        )])]);
    let d = one(&verify(&s), DiagKind::UnmatchedRecv);
    assert!(
        d.message
            .starts_with("with world = 1, j = 0, rank 0's 1st `recv` on tag 0 from rank 0 has no matching `send`: rank 0 never sends to rank 0 on tag 0"),
        "{d}"
    );
}

#[test]
fn batch_rule_applies_across_loop_iterations() {
    // two iterations of a loop inside one `batch` send twice to the same peer
    let s = gather_bufs("batch_rule_loop").worlds(2, 4).body(vec![batch(vec![for_(
        "h",
        0,
        2,
        vec![send(p(0, "input"), right()), recv(p(1, "output").chunk(left()), left())],
    )])]);
    let d = one(&verify(&s), DiagKind::BatchRule);
    assert_eq!(
        d.message,
        "with world = 2, h = 1, rank 0's `batch` sends twice to rank 1"
    );
    assert_eq!(d.span, span_of(&s, &is_send));
    // ... also when the peer is the caller itself
    let s = S::new("batch_rule_self")
        .output("buf", n() * 4)
        .world_list(&[1])
        .body(vec![batch(vec![for_(
            "h",
            0,
            2,
            vec![
                send(p(0, "buf").chunk_of(var("h"), 4), rank()),
                recv(p(0, "buf").chunk_of(var("h") + 2, 4), rank()),
            ],
        )])]);
    let d = one(&verify(&s), DiagKind::BatchRule);
    assert_eq!(
        d.message,
        "with world = 1, h = 1, rank 0's `batch` sends twice to rank 0"
    );
    // a loop whose peers are distinct is fine, self included
    let s = gather_bufs("batch_loop_ok").worlds(1, 6).body(vec![batch(vec![for_(
        "j",
        0,
        world(),
        vec![
            send(p(0, "input"), var("j")),
            recv(p(1, "output").chunk(var("j")), var("j")),
        ],
    )])]);
    let d = verify(&s);
    assert!(d.is_empty(), "{d:?}");
}

// ---- step 6: completion ----

#[test]
fn unwaited_and_unknown_requests() {
    let s = gather_bufs("unwaited").worlds(2, 3).body(vec![
        isend("h", p(0, "input"), right()),
        recv(p(1, "output").chunk(left()), left()),
    ]);
    let d = one(&verify(&s), DiagKind::UnwaitedRequest);
    assert_eq!(
        d.message,
        "with world = 2, rank 0's `isend` to rank 1 (`h`) is never waited"
    );
    assert_eq!(d.span, s.body[0].span);

    let s = gather_bufs("twice").worlds(2, 3).body(vec![
        isend("h", p(0, "input"), right()),
        recv(p(1, "output").chunk(left()), left()),
        wait(&["h"]),
        wait(&["h"]),
    ]);
    let d = one(&verify(&s), DiagKind::UnknownRequest);
    assert_eq!(
        d.message,
        "with world = 2, rank 0 waits for `h`, which was already waited"
    );
    assert_eq!(d.span, s.body[3].span);

    let s = gather_bufs("undefined").worlds(1, 2).body(vec![wait(&["nope"])]);
    let d = one(&verify(&s), DiagKind::UnknownRequest);
    assert!(d.message.contains("which no `isend` or `irecv` in scope defines"));

    // a handle defined in a loop body goes out of scope at the iteration end
    let s = gather_bufs("scope").worlds(2, 3).body(vec![
        for_("i", 0, 1, vec![isend("h", p(0, "input"), right())]),
        recv(p(1, "output").chunk(left()), left()),
        wait(&["h"]),
    ]);
    let d = verify(&s);
    assert_eq!(d.len(), 2, "{d:?}");
    // the handle is out of scope at the wait; its request, which no
    // `wait all` completes, is still in flight at the end
    assert_eq!(d[0].kind, DiagKind::UnknownRequest);
    assert_eq!(d[0].span, s.body[2].span);
    assert_eq!(d[1].kind, DiagKind::UnwaitedRequest);
    assert_eq!(
        d[1].message,
        "with world = 2, i = 0, rank 0's `isend` to rank 1 (`h`) is never waited"
    );
}

// ---- step 7: postcondition ----

#[test]
fn postcondition_violated_with_expected_shape() {
    // the received block is filed under the wrong index
    let s = gather_bufs("wrong_index")
        .worlds(1, 8)
        .post(PostKind::AllGather {
            input: bref(0, "input"),
            output: bref(1, "output"),
        })
        .body(vec![
            copy(p(0, "input"), p(1, "output").chunk(rank())),
            for_(
                "s",
                0,
                world() - 1,
                vec![batch(vec![
                    // passes blocks the wrong way round the ring (right to
                    // left) but files them as if they came from the left
                    send(p(1, "output").chunk((rank() - var("s")) % world()), left()),
                    recv(p(1, "output").chunk((rank() - var("s") - 1) % world()), right()),
                ])],
            ),
        ]);
    let d = one(&verify(&s), DiagKind::PostconditionViolated);
    assert_eq!(
        d.message,
        "with world = 3, rank 0 ends with output block 1 = rank 2's input block 0, expected rank 1's input"
    );
    assert_eq!(d.span, span_of(&s, &is_recv));
    // the region the send forwarded, then the attribute
    assert_eq!(d.notes.len(), 2);
    let Some(StmtKind::Send { region, .. }) = find_stmt(&s.body, &is_send).map(|st| &st.kind) else {
        panic!("no send")
    };
    assert_eq!(d.notes[0], (region.span, "rank 1 sent it from here".to_owned()));
}

#[test]
fn postcondition_unwritten_output_points_at_the_attribute() {
    let s = gather_bufs("nothing")
        .worlds(1, 4)
        .post(PostKind::AllGather {
            input: bref(0, "input"),
            output: bref(1, "output"),
        })
        .body(vec![]);
    let d = one(&verify(&s), DiagKind::PostconditionViolated);
    assert_eq!(
        d.message,
        "with world = 1, rank 0 ends with output block 0 = rank 0's initial output block 0, expected rank 0's input"
    );
    assert_eq!(d.span, s.postcondition.as_ref().unwrap().span);
}

#[test]
fn postcondition_wrong_reduction() {
    // all_reduce that forgets the last rank, and one with the wrong op
    let s = S::new("partial")
        .input("input", n())
        .output("output", n())
        .worlds(1, 4)
        .post(PostKind::AllReduce {
            input: bref(0, "input"),
            output: bref(1, "output"),
            op: Op::Sum.into(),
        })
        .body(vec![
            copy(p(0, "input"), p(1, "output")),
            coll_over(
                Collective::AllReduce {
                    src: p(1, "output"),
                    dst: None,
                    op: Op::Sum.into(),
                },
                lt(rank(), 2),
            ),
        ]);
    let d = one(&verify(&s), DiagKind::PostconditionViolated);
    assert!(
        d.message.starts_with("with world = 3, rank 0 ends with output element 0 = a `sum` of 2 contributions (rank 0's input element 0, rank 1's input element 0), expected the `sum` of every rank's input element 0, each once"),
        "{d}"
    );
    let s = ring_all_gather(1, 4);
    assert!(verify(&s).is_empty());
    let mut s = super::pass::ring_all_reduce();
    s.postcondition = Some(Postcondition {
        kind: PostKind::AllReduce {
            input: bref(0, "input"),
            output: bref(1, "output"),
            op: Op::Max.into(),
        },
        span: sp(),
    });
    let d = one(&verify(&s), DiagKind::PostconditionViolated);
    assert!(d.message.starts_with("with world = 2,"), "{d}");
}

#[test]
fn postcondition_caught_only_at_n_2() {
    // `output[rank..rank + 1]` equals `output.chunk(rank)` only when n = 1
    let s = S::new("slice_vs_chunk")
        .input("input", n())
        .output("output", n() * world())
        .worlds(1, 2)
        .post(PostKind::AllGather {
            input: bref(0, "input"),
            output: bref(1, "output"),
        })
        .body(vec![copy(
            p(0, "input").slice(0, 1),
            p(1, "output").slice(rank(), rank() + 1),
        )]);
    let d = one(&verify(&s), DiagKind::PostconditionViolated);
    assert!(
        d.message
            .starts_with("with world = 1, n = 2, rank 0 ends with output block 0 element 1"),
        "{d}"
    );
}

#[test]
fn broadcast_from_the_wrong_root() {
    let mut s = super::pass::binomial_broadcast();
    if let Some(Postcondition {
        kind: PostKind::Broadcast { root, .. },
        ..
    }) = &mut s.postcondition
    {
        *root = int(0);
    }
    let d = one(&verify(&s), DiagKind::PostconditionViolated);
    assert!(d.message.starts_with("with world = 2, root = 1, rank 0 ends with buf element 0 = rank 1's initial buf element 0, expected rank 0's initial buf element 0"), "{d}");
}

// ---- step 0 ----

#[test]
fn static_errors() {
    // non-linear length
    let s = S::new("nonlinear").output("buf", n() * n()).body(vec![]);
    let d = one(&check_static(&s), DiagKind::NonLinearLength);
    assert!(d.message.contains("a product of two length variables"), "{d}");
    let s = S::new("nonlinear_div").output("buf", n()).body(vec![copy(
        p(0, "buf").slice(0, n() / 2),
        p(0, "buf").slice(n() / 2, n()),
    )]);
    assert_eq!(check_static(&s).len(), 1);
    assert_eq!(check_static(&s)[0].kind, DiagKind::NonLinearLength);

    // missing range
    let s = S::new("no_range").output("buf", n()).scalar("root").body(vec![]);
    let d = one(&verify(&s), DiagKind::MissingRange);
    assert_eq!(d.message, "scalar parameter `root` has no range in `#[verify]`");
    assert_eq!(d.span, s.scalars[0].span);

    // read-only write
    let s = gather_bufs("ro").body(vec![recv(p(0, "input"), 0)]);
    let d = one(&verify(&s), DiagKind::WriteToReadOnly);
    assert_eq!(d.message, "`recv` writes `input`, which is declared `&[T; n]`");

    // rank-dependent group
    let s = gather_bufs("rdg").body(vec![
        let_("k", rank() / 2),
        coll_over(
            Collective::AllGather {
                src: p(0, "input"),
                dst: p(1, "output"),
            },
            var("k"),
        ),
    ]);
    let d = one(&verify(&s), DiagKind::RankDependentGroup);
    assert_eq!(d.message, "`over k` uses `k`, whose value depends on `rank`");

    // unknown names, with a suggestion and the length-variable note
    let s = gather_bufs("typo").body(vec![send(p(0, "input"), (var("rnak") + 1) % world())]);
    let d = one(&verify(&s), DiagKind::UnknownName);
    assert_eq!(d.message, "`rnak` is not defined here");
    assert_eq!(d.hint.as_deref(), Some("did you mean `rank`?"));
    let s = gather_bufs("lenvar").body(vec![let_("k", n())]);
    let d = one(&verify(&s), DiagKind::UnknownName);
    assert_eq!(d.message, "`n` is a length variable and cannot appear here");
    assert_eq!(
        d.hint.as_deref(),
        Some("length variables may appear only in buffer lengths, `scratch` lengths and region bounds")
    );

    // statements not allowed in a batch
    let s = gather_bufs("batch_copy").body(vec![batch(vec![copy(p(0, "input"), p(1, "output").chunk(0))])]);
    let d = one(&verify(&s), DiagKind::SyntaxError);
    assert_eq!(d.message, "`copy` is not allowed inside `batch`");
}

#[test]
fn at_most_one_error_per_statement_and_eight_in_all() {
    // twenty sends without receives: one statement, one error
    let s =
        gather_bufs("many")
            .world_list(&[4])
            .body(vec![for_("i", 0, 20, vec![send_tag(p(0, "input"), right(), 7)])]);
    let d = verify(&s);
    assert_eq!(d.len(), 1, "{d:?}");
    // twenty distinct statements: capped at eight
    let body: Vec<Stmt> = (0..20).map(|t| send_tag(p(0, "input"), right(), t)).collect();
    let s = gather_bufs("many2").world_list(&[4]).body(body);
    assert_eq!(verify(&s).len(), 8);
}

#[test]
fn runtime_cache_reports_the_same_text() {
    let s = ring_all_gather(1, 4);
    assert!(s.verify_set_contains(4));
    assert!(!s.verify_set_contains(5));
    let cache = crate::VerifyCache::new();
    assert_eq!(cache.check(&s, 100, &[]), Ok(()));
    assert_eq!(cache.check(&s, 100, &[]), Ok(()));
    let bad = gather_bufs("bad").body(vec![
        send(p(0, "input"), right()),
        recv(p(1, "output").chunk(left()), left()),
    ]);
    let err = cache.check(&bad, 3, &[]).unwrap_err();
    assert!(
        err.starts_with("deadlock: with world = 3, rank 0 blocks in `send` to rank 1 while rank 1"),
        "{err}"
    );
    assert!(err.contains("\nhint: "));
    assert_eq!(cache.runs(), 2);
}

#[test]
fn runtime_cache_checks_each_key_once_while_other_callers_wait() {
    let s = ring_all_gather(1, 4);
    let cache = crate::VerifyCache::new();
    std::thread::scope(|scope| {
        for _ in 0..8 {
            scope.spawn(|| {
                assert_eq!(cache.check(&s, 64, &[]), Ok(()));
                assert_eq!(cache.check(&s, 65, &[]), Ok(()));
            });
        }
    });
    assert_eq!(cache.runs(), 2);
}

#[test]
fn helpers_for_generated_code() {
    let s = super::pass::binomial_broadcast();
    assert_eq!(crate::scalar_range(&s, 0, 5), Ok((0, 5)));
    assert_eq!(crate::requires_holds(&s, 5, &[1]), Ok(true));
    let s = S::new("req")
        .output("buf", n())
        .requires(call(Func::IsPow2, vec![world()]))
        .body(vec![]);
    assert_eq!(crate::requires_holds(&s, 6, &[]), Ok(false));
    assert_eq!(crate::requires_holds(&s, 8, &[]), Ok(true));
    assert_eq!(crate::scalar_range(&s, 0, 4).unwrap_err().kind, DiagKind::MissingRange);
}

/// Dissemination all-reduce with `op` into `buf` (in place), for any world.
fn dissemination(op: Op) -> Schedule {
    dissemination_with(op.into(), S::new("dissemination"))
}

/// [`dissemination`] with `op` (a keyword or an operator parameter of `s`).
fn dissemination_with(op: OpExpr, s: S) -> Schedule {
    let round = batch(vec![
        send(p(0, "buf"), (rank() + pow2(var("k"))) % world()),
        recv(scr("tmp"), (rank() - pow2(var("k"))) % world()),
    ]);
    s.output("buf", n())
        .worlds(1, 9)
        .post(PostKind::AllReduce {
            input: bref(0, "buf"),
            output: bref(0, "buf"),
            op: op.clone(),
        })
        .body(vec![
            scratch("tmp", n()),
            if_(
                bin(BinOp::Gt, world(), int(1)),
                vec![for_(
                    "k",
                    0,
                    log2(world() - 1) + 1,
                    vec![round, accumulate(scr("tmp"), p(0, "buf"), op)],
                )],
            ),
        ])
}

#[test]
fn idempotent_reductions_accept_repeated_contributions() {
    // contributions arrive twice exactly when the world is not a power of two
    for op in [Op::Max, Op::Min] {
        assert!(verify(&dissemination(op)).is_empty(), "{op:?}");
    }
    for op in [Op::Sum, Op::Prod] {
        let d = one(&verify(&dissemination(op)), DiagKind::PostconditionViolated);
        assert!(d.message.starts_with("with world = 3,"), "{d}");
    }
    for w in 1..=9 {
        let d = check_world(&dissemination(Op::Sum), w, &[]);
        assert_eq!(d.is_empty(), (w as u64).is_power_of_two(), "world {w}: {d:?}");
    }
}

#[test]
fn operator_parameters_are_checked_for_every_operator() {
    // `fn dissemination(buf: &mut [T; n], op: ReduceOp)`: scalar 0 is `op`
    let s = dissemination_with(OpExpr::Param(0), S::new("dissemination").op_param("op"));
    let d = one(&verify(&s), DiagKind::PostconditionViolated);
    assert!(d.message.starts_with("with world = 3, op = sum,"), "{d}");
    // the verdict of each operator is that of the schedule written with it
    for (i, op) in Op::ALL.into_iter().enumerate() {
        for w in 1..=9 {
            let by_param = check_world(&s, w, &[i as i64]);
            let written = check_world(&dissemination(op), w, &[]);
            assert_eq!(by_param.is_empty(), written.is_empty(), "{op:?} world {w}");
        }
    }
    assert!(check_world(&s, 8, &[0]).is_empty());
    assert!(check_world(&s, 6, &[2]).is_empty());
    assert!(check_world(&s, 6, &[3]).is_empty());
    let d = one(&check_world(&s, 6, &[1]), DiagKind::PostconditionViolated);
    assert!(d.message.starts_with("with world = 6, op = prod,"), "{d}");
    let d = one(&check_world(&s, 4, &[4]), DiagKind::EvaluationError);
    assert_eq!(
        d.message,
        "op = 4 is not an operator (0 = sum, 1 = prod, 2 = max, 3 = min)"
    );
    assert_eq!(crate::scalar_range(&s, 0, 4), Ok((0, 4)));
}

#[test]
fn idempotent_operator_parameters_pass() {
    // a ring all-reduce over `op` passes for every operator
    let s = super::pass::ring_all_reduce_by(OpExpr::Param(0), S::new("ring").op_param("op"));
    assert!(verify(&s).is_empty());
}

#[test]
fn operator_parameters_are_not_integers() {
    let s = S::new("opint")
        .op_param("op")
        .output("buf", n())
        .world_list(&[2])
        .body(vec![send(p(0, "buf"), scalar(0, "op"))]);
    let d = one(&verify(&s), DiagKind::UnknownName);
    assert_eq!(d.message, "`op` is an operator parameter, not an integer");
    let s = S::new("notop")
        .scalar("k")
        .output("buf", n())
        .world_list(&[2])
        .range(0, int(0), int(2))
        .body(vec![accumulate(p(0, "buf"), p(0, "buf"), OpExpr::Param(0))]);
    let d = one(&verify(&s), DiagKind::UnknownName);
    assert_eq!(d.message, "`k` is not an operator parameter");
}

#[test]
fn local_moves_of_unequal_lengths_are_length_mismatches() {
    let s = S::new("copy_len")
        .input("a", n())
        .output("b", n() * 2)
        .world_list(&[2])
        .body(vec![copy(p(0, "a"), p(1, "b"))]);
    let d = one(&verify(&s), DiagKind::LengthMismatch);
    assert_eq!(
        d.message,
        "with world = 2, rank 0's `copy` reads n elements but writes 2 * n"
    );
}

#[test]
fn empty_verify_sets_say_why() {
    let body = || vec![coll(Collective::Barrier)];
    let s = S::new("req")
        .output("buf", n())
        .world_list(&[3, 5, 6])
        .requires(call(Func::IsPow2, vec![world()]))
        .body(body());
    let d = one(&verify(&s), DiagKind::EmptyVerifySet);
    assert!(
        d.message
            .contains("holds at none of the world sizes of `#[verify]` (3, 5, 6)"),
        "{d}"
    );
    let s = S::new("down").output("buf", n()).worlds(5, 3).body(body());
    one(&verify(&s), DiagKind::EmptyVerifySet);
    let s = S::new("scalar")
        .output("buf", n())
        .scalar("k")
        .worlds(1, 4)
        .range(0, world(), world())
        .body(body());
    let d = one(&verify(&s), DiagKind::EmptyVerifySet);
    assert!(
        d.message.starts_with("the range of `k` is empty at every world size"),
        "{d}"
    );
    // one checked combination is enough
    let s = S::new("some")
        .output("buf", n())
        .world_list(&[3, 4])
        .requires(call(Func::IsPow2, vec![world()]))
        .body(body());
    assert!(verify(&s).is_empty());
}

#[test]
fn blocking_self_messages_need_their_match_posted_before() {
    let ok = S::new("self_ok")
        .input("a", n())
        .output("b", n())
        .worlds(1, 3)
        .body(vec![
            isend("h", p(0, "a"), rank()),
            recv(p(1, "b"), rank()),
            wait(&["h"]),
        ]);
    assert!(verify(&ok).is_empty(), "{:?}", verify(&ok));
    let bad = S::new("self_bad")
        .input("a", n())
        .output("b", n())
        .worlds(1, 3)
        .body(vec![
            recv(p(1, "b"), rank()),
            isend("h", p(0, "a"), rank()),
            wait(&["h"]),
        ]);
    one(&verify(&bad), DiagKind::RecvFromSelf);
}

#[test]
fn unwritten_scratch_may_be_read_but_fails_a_postcondition_it_reaches() {
    let fresh = |post: Option<PostKind>| {
        let s = S::new("fresh").output("buf", n()).worlds(2, 3);
        let s = match post {
            Some(k) => s.post(k),
            None => s,
        };
        s.body(vec![
            scratch("tmp", n()),
            batch(vec![
                send(p(0, "buf"), right()),
                recv_reduce(scr("tmp"), left(), Op::Max),
            ]),
            copy(scr("tmp"), p(0, "buf")),
        ])
    };
    // Reading scratch before writing it is not an error in itself.
    assert!(verify(&fresh(None)).is_empty());
    let claimed = fresh(Some(PostKind::AllReduce {
        input: bref(0, "buf"),
        output: bref(0, "buf"),
        op: Op::Max.into(),
    }));
    let d = one(&verify(&claimed), DiagKind::PostconditionViolated);
    assert!(d.message.contains("uninitialized scratch data"), "{d}");
}
