//! The device plan against a model of a device issuing each rank's steps.

use proptest::prelude::*;

use crate::compile::compile;
use crate::ir::Schedule;
use crate::lin::overlaps;
use crate::plan::*;
use crate::tests::pass::{ring_all_gather, ring_all_reduce};
use crate::tests::props::{phase, ring_schedule, stmts};
use crate::tests::{eq, if_, int, n, p, rank, recv, send, world, RegionExt, S};
use crate::trace::EvKind;
use crate::unroll::unroll;
use rustc_hash::FxHashMap;

/// The plan of `s` at `world`, checked against the device model: every
/// rank issues its steps in order, a group call completes once each of
/// its messages' other end has stood at its own call, a collective once
/// every member stands at it; messages pair per channel in issue order,
/// without tags, and those pairs must be the checker's.
fn check_plan(s: &Schedule, w: i64) {
    let (prog, _) = compile(s);
    let mut un = unroll(&prog, w, &[]).unwrap();
    assert!(crate::check::matching::check(&mut un).is_empty());
    let p = plan(s, w, &[]).unwrap();
    let nr = un.ranks.len();
    // (rank, OpRef) <-> op index
    let index_of = |r: usize, o: OpRef| -> u32 {
        match un.ranks[r].events[o.event as usize].kind {
            EvKind::Batch(a, _) => a + o.index,
            EvKind::Blocking(i) | EvKind::Post(i) => i,
            k => panic!("{k:?} holds no operation"),
        }
    };
    // every operation, copy and collective issued exactly once
    for (r, rp) in p.ranks.iter().enumerate() {
        let t = &un.ranks[r];
        let mut seen = vec![0_u32; t.ops.len()];
        let mut events = vec![0_u32; t.events.len()];
        for step in &rp.steps {
            match step {
                Step::Group(ops) => {
                    let mut chans = Vec::new();
                    for (k, &o) in ops.iter().enumerate() {
                        let op = &t.ops[index_of(r, o) as usize];
                        seen[index_of(r, o) as usize] += 1;
                        assert!(!chans.contains(&(op.peer, op.send)), "two ops of one channel in a call");
                        chans.push((op.peer, op.send));
                        for &o2 in &ops[..k] {
                            let other = &t.ops[index_of(r, o2) as usize];
                            let (x, y) = (&un.regs[op.reg as usize], &un.regs[other.reg as usize]);
                            let clash = x.buf == y.buf && overlaps(&x.start, &x.end, &y.start, &y.end);
                            assert!(op.send && other.send || !clash, "rank {r}: a call writes what it uses");
                        }
                    }
                }
                Step::SelfMessage { send, recv } => {
                    seen[index_of(r, *send) as usize] += 1;
                    seen[index_of(r, *recv) as usize] += 1;
                }
                Step::Local(e) | Step::Collective(e) => events[*e as usize] += 1,
            }
        }
        assert!(seen.iter().all(|&c| c == 1), "rank {r}: {seen:?}");
        // operations that touch a common element keep their program order
        let mut step_of = vec![0_usize; t.ops.len()];
        for (k, step) in rp.steps.iter().enumerate() {
            match step {
                Step::Group(ops) => ops.iter().for_each(|&o| step_of[index_of(r, o) as usize] = k),
                Step::SelfMessage { send, recv } => {
                    step_of[index_of(r, *send) as usize] = k;
                    step_of[index_of(r, *recv) as usize] = k;
                }
                _ => {}
            }
        }
        let end = |o: &crate::trace::P2p| if o.done == crate::trace::NONE { o.ev } else { o.done };
        for (a, oa) in t.ops.iter().enumerate() {
            for (b, ob) in t.ops.iter().enumerate() {
                let (x, y) = (&un.regs[oa.reg as usize], &un.regs[ob.reg as usize]);
                let clash = (!oa.send || !ob.send) && x.buf == y.buf && overlaps(&x.start, &x.end, &y.start, &y.end);
                if clash && end(oa) < ob.ev {
                    assert!(step_of[a] < step_of[b], "rank {r}: op {b} issued before op {a}");
                }
            }
        }
        for (e, ev) in t.events.iter().enumerate() {
            let want = u32::from(matches!(ev.kind, EvKind::Copy(_) | EvKind::Coll(_)));
            assert_eq!(events[e], want, "rank {r} event {e}");
        }
    }
    // positional pairing per channel equals the checker's
    let mut sends: FxHashMap<(usize, u32), Vec<u32>> = FxHashMap::default();
    let mut recvs: FxHashMap<(u32, usize), Vec<u32>> = FxHashMap::default();
    for (r, rp) in p.ranks.iter().enumerate() {
        for step in &rp.steps {
            if let Step::Group(ops) = step {
                for &o in ops {
                    let i = index_of(r, o);
                    let op = &un.ranks[r].ops[i as usize];
                    if op.send {
                        sends.entry((r, op.peer)).or_default().push(i);
                    } else {
                        recvs.entry((op.peer, r)).or_default().push(i);
                    }
                }
            }
        }
    }
    for ((src, dst), ss) in &sends {
        let rs = &recvs[&(*src as u32, *dst as usize)];
        assert_eq!(ss.len(), rs.len());
        for (si, ri) in ss.iter().zip(rs) {
            assert_eq!(
                un.ranks[*src].ops[*si as usize].partner,
                (*dst, *ri),
                "device pairs another message"
            );
        }
    }
    // completion
    let mut pc = vec![0_usize; nr];
    let mut done: Vec<Vec<bool>> = un.ranks.iter().map(|t| vec![false; t.ops.len()]).collect();
    let standing = |pc: &[usize], r: usize, i: u32| -> bool {
        matches!(p.ranks[r].steps.get(pc[r]), Some(Step::Group(ops)) if ops.iter().any(|&o| index_of(r, o) == i))
    };
    loop {
        let mut moved = false;
        for r in 0..nr {
            match p.ranks[r].steps.get(pc[r]) {
                None => {}
                Some(Step::Local(_) | Step::SelfMessage { .. }) => {
                    pc[r] += 1;
                    moved = true;
                }
                Some(Step::Group(ops)) => {
                    for &o in ops {
                        let i = index_of(r, o);
                        let (q, j) = un.ranks[r].ops[i as usize].partner;
                        if standing(&pc, q as usize, j) {
                            done[r][i as usize] = true;
                            done[q as usize][j as usize] = true;
                        }
                    }
                    if ops.iter().all(|&o| done[r][index_of(r, o) as usize]) {
                        pc[r] += 1;
                        moved = true;
                    }
                }
                Some(Step::Collective(e)) => {
                    let EvKind::Coll(ci) = un.ranks[r].events[*e as usize].kind else {
                        panic!()
                    };
                    let c = &un.ranks[r].colls[ci as usize];
                    let at = |m: usize| match p.ranks[m].steps.get(pc[m]) {
                        Some(Step::Collective(f)) => match un.ranks[m].events[*f as usize].kind {
                            EvKind::Coll(cj) => {
                                let d = &un.ranks[m].colls[cj as usize];
                                d.group == c.group && d.seq == c.seq
                            }
                            _ => false,
                        },
                        _ => false,
                    };
                    let members = &un.groups[c.group as usize];
                    if members.iter().all(|&m| at(m as usize)) {
                        for &m in members {
                            pc[m as usize] += 1;
                        }
                        moved = true;
                    }
                }
            }
        }
        if !moved {
            break;
        }
    }
    for (r, rp) in p.ranks.iter().enumerate() {
        assert_eq!(pc[r], rp.steps.len(), "rank {r} stops at {:?}", rp.steps.get(pc[r]));
    }
}

#[test]
fn a_ring_step_is_one_group_call_per_rank() {
    let s = ring_all_gather(1, 8);
    for w in 1..=8_u32 {
        let p = plan(&s, i64::from(w), &[]).unwrap();
        for (r, rp) in p.ranks.iter().enumerate() {
            assert_eq!(rp.steps.first(), Some(&Step::Local(0)), "world {w} rank {r}");
            assert_eq!(rp.steps.len(), w as usize, "world {w} rank {r}: {:?}", rp.steps);
            for (k, step) in rp.steps[1..].iter().enumerate() {
                let Step::Group(ops) = step else { panic!("{step:?}") };
                let mut events: Vec<u32> = ops.iter().map(|o| o.event).collect();
                events.dedup();
                // step k's send and receive, nothing of another step
                let want = if w == 1 { vec![] } else { vec![k as u32 + 1] };
                assert_eq!(events, want, "world {w} rank {r}");
            }
        }
        check_plan(&s, i64::from(w));
        check_plan(&ring_all_reduce(), i64::from(w));
    }
}

#[test]
fn a_relayed_message_is_received_before_it_is_forwarded() {
    // rank 0 forwards to 2 what it receives from 1: one message each way
    // of different channels, in two calls
    let s = S::new("relay")
        .input("input", n())
        .output("output", n() * world())
        .worlds(3, 3)
        .body(vec![
            if_(eq(rank(), 1), vec![send(p(0, "input"), 0)]),
            if_(
                eq(rank(), 0),
                vec![
                    recv(p(1, "output").chunk_of(0, 3), 1),
                    send(p(1, "output").chunk_of(0, 3), 2),
                ],
            ),
            if_(eq(rank(), 2), vec![recv(p(1, "output").chunk_of(1, 3), 0)]),
        ]);
    assert!(crate::check_world(&s, 3, &[]).is_empty());
    check_plan(&s, 3);
    let plan = plan(&s, 3, &[]).unwrap();
    assert_eq!(plan.ranks[0].steps.len(), 2, "{:?}", plan.ranks[0].steps);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    /// Ring shifts with every posting order and tags: each accepted one
    /// has a plan that completes and pairs as the checker does.
    #[test]
    fn plans_of_accepted_ring_shifts_complete(phases in prop::collection::vec(phase(), 1..4), w in 1_i64..7) {
        let s = ring_schedule(&phases);
        if crate::check_world(&s, w, &[]).is_empty() {
            check_plan(&s, w);
        }
    }

    /// Random statements: each accepted schedule's plan completes and
    /// pairs as the checker does.
    #[test]
    fn plans_of_accepted_random_schedules_complete(body in stmts(), w in 1_i64..5) {
        let s = S::new("fuzz")
            .input("input", n())
            .output("output", n() * world())
            .world_list(&[w])
            .body(body);
        let _ = int(0);
        if crate::check_world(&s, w, &[]).is_empty() {
            check_plan(&s, w);
        }
    }
}
