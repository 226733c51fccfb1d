//! The drawing model: columns follow the rendezvous simulation, and failing
//! checks leave their marks.

use super::pass::ring_all_gather;
use super::*;
use crate::timeline::{timeline, Mark, Order, StepKind};
use crate::DiagKind;

#[test]
fn ring_all_gather_steps_share_columns_with_their_partners() {
    let t = timeline(&ring_all_gather(1, 8), 4, &[]).unwrap();
    assert_eq!((t.world, t.order, t.columns), (4, Order::Simulated, 4));
    assert!(t.failure.is_none());
    // every rank: copy in column 0, then one batch per column
    for r in 0..4 {
        let mine: Vec<(u32, StepKind)> = t
            .steps
            .iter()
            .filter(|s| s.rank == r)
            .map(|s| (s.column, s.kind))
            .collect();
        assert_eq!(
            mine,
            vec![
                (0, StepKind::Copy),
                (1, StepKind::Batch),
                (2, StepKind::Batch),
                (3, StepKind::Batch)
            ]
        );
    }
    assert_eq!(t.messages.len(), 12);
    let m = t.messages.iter().find(|m| m.from == 3 && m.column == 2).unwrap();
    assert_eq!((m.to, m.send_column, m.recv_column), (0, Some(2), Some(2)));
    // step s = 1 of rank 3 sends chunk 2
    assert_eq!((m.region.as_str(), m.len.as_str()), ("output[2 * n..3 * n]", "n"));
    assert_eq!(m.label(), "output[2 * n..3 * n] (n)");
    let batch = t.steps.iter().find(|s| s.rank == 3 && s.column == 2).unwrap();
    assert_eq!(batch.detail, "s = 1");
}

/// Every rank sends to the right, then receives: a deadlock.
fn blocking_ring() -> Schedule {
    S::new("blocking_ring")
        .input("input", n())
        .output("output", n() * world())
        .worlds(2, 8)
        .body(vec![
            send(p(0, "input"), right()),
            recv(p(1, "output").chunk(left()), left()),
        ])
}

#[test]
fn blocking_ring_draws_its_deadlock_cycle() {
    let s = blocking_ring();
    let t = timeline(&s, 3, &[]).unwrap();
    let f = t.failure.unwrap();
    assert_eq!(f.diagnostic.kind, DiagKind::Deadlock);
    let waits: Vec<(u32, u32, u32)> = f
        .marks
        .iter()
        .map(|m| match m {
            Mark::Waits {
                rank,
                column,
                waits_for,
            } => (*rank, *column, *waits_for),
            other => panic!("unexpected mark {other:?}"),
        })
        .collect();
    assert_eq!(waits, vec![(0, 0, 1), (1, 0, 2), (2, 0, 0)]);
    assert!(t.messages.is_empty());
    assert_eq!(t.steps.len(), 3);
    assert!(t.steps.iter().all(|s| s.blocked && s.kind == StepKind::Send));
}

#[test]
fn unmatched_send_dangles_in_program_order() {
    let s = S::new("lonely")
        .input("input", n())
        .output("output", n() * world())
        .worlds(2, 4)
        .body(vec![if_(eq(rank(), 0), vec![send(p(0, "input"), int(1))])]);
    let t = timeline(&s, 2, &[]).unwrap();
    assert_eq!(t.order, Order::Program);
    assert_eq!(t.messages.len(), 1);
    let m = &t.messages[0];
    assert_eq!(
        (m.from, m.to, m.send_column, m.recv_column, m.unmatched),
        (0, 1, Some(0), None, true)
    );
    let f = t.failure.unwrap();
    assert_eq!(f.diagnostic.kind, DiagKind::UnmatchedSend);
    assert_eq!(f.marks, vec![Mark::Unmatched { message: 0 }]);
}

#[test]
fn wrong_postcondition_marks_the_rank_and_its_writer() {
    // the ring stops one step early: rank 0 never receives block 2
    let mut s = ring_all_gather(1, 8);
    if let StmtKind::For { end, .. } = &mut s.body[1].kind {
        *end = world() - 2;
    }
    let t = timeline(&s, 3, &[]).unwrap();
    let f = t.failure.unwrap();
    assert_eq!(f.diagnostic.kind, DiagKind::PostconditionViolated);
    assert_eq!(
        f.marks,
        vec![Mark::WrongOutput {
            rank: 0,
            column: None,
            place: "output block 1".to_owned()
        }]
    );
}

#[test]
fn wrong_postcondition_marks_a_writer_that_ran_once() {
    // world 2: one step, whose receive files the block under the wrong index
    let s = S::new("wrong_index")
        .input("input", n())
        .output("output", n() * world())
        .worlds(1, 8)
        .post(PostKind::AllGather {
            input: bref(0, "input"),
            output: bref(1, "output"),
        })
        .body(vec![
            copy(p(0, "input"), p(1, "output").chunk(rank())),
            batch(vec![
                send(p(0, "input"), right()),
                recv(p(1, "output").chunk(rank()), left()),
            ]),
        ]);
    let t = timeline(&s, 2, &[]).unwrap();
    let f = t.failure.unwrap();
    assert_eq!(
        f.marks,
        vec![Mark::WrongOutput {
            rank: 0,
            column: Some(1),
            place: "output block 0".to_owned()
        }]
    );
}

#[test]
fn nothing_to_draw_is_an_error() {
    let e = timeline(&ring_all_gather(1, 8), 0, &[]).unwrap_err();
    assert!(e.message.contains("world = 0"), "{e}");
    let e = timeline(&ring_all_gather(1, 8), 2, &[1]).unwrap_err();
    assert!(e.message.contains("0 scalar values"), "{e}");
}

#[test]
fn device_plan_of_the_ring_is_one_group_call_per_step() {
    use crate::timeline::plan_timeline;
    let t = plan_timeline(&ring_all_gather(1, 8), 4, &[]).unwrap();
    assert_eq!((t.order, t.columns), (Order::Plan, 4));
    for r in 0..4 {
        let mine: Vec<(u32, StepKind, &str)> = t
            .steps
            .iter()
            .filter(|s| s.rank == r)
            .map(|s| (s.column, s.kind, s.label.as_str()))
            .collect();
        assert_eq!(
            mine,
            vec![
                (0, StepKind::Copy, "copy"),
                (1, StepKind::Batch, "group call"),
                (2, StepKind::Batch, "group call"),
                (3, StepKind::Batch, "group call")
            ]
        );
    }
    assert_eq!(t.messages.len(), 12);
    assert!(t
        .messages
        .iter()
        .all(|m| m.send_column == m.recv_column && m.to == (m.from + 1) % 4));
}

#[test]
fn device_plan_of_a_failing_schedule_is_its_failure() {
    let s = blocking_ring();
    let t = crate::timeline::plan_timeline(&s, 3, &[]).unwrap();
    assert_eq!(t.order, Order::Simulated);
    assert_eq!(t.failure.unwrap().diagnostic.kind, DiagKind::Deadlock);
}
