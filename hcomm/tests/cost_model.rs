//! The cost model against hcomm itself: its round patterns against the
//! checker's simulation of hcomm's own schedules, and the policy on a
//! model topology running real calls.

use hcomm::{schedules, Algorithm, Collective, CommOptions, ReduceOp, Topology};
use hcomm_cost::{predict_schedule, preset, Builtin, Link, Machine};

/// Every built-in pattern equals the full simulation of hcomm's schedule of
/// the same name, on a flat switch, a ring, and nodes of 4 on a fabric.
#[test]
fn patterns_equal_the_simulation_of_hcomms_schedules() {
    let irs = [
        &*schedules::ring_all_gather::SCHEDULE,
        &*schedules::recursive_doubling_all_gather::SCHEDULE,
        &*schedules::bruck_all_gather::SCHEDULE,
        &*schedules::direct_all_gather::SCHEDULE,
        &*schedules::pairwise_all_to_all::SCHEDULE,
        &*schedules::ring_all_reduce::SCHEDULE,
        &*schedules::direct_all_reduce::SCHEDULE,
        &*schedules::halving_doubling_all_reduce::SCHEDULE,
        &*schedules::recursive_halving_reduce_scatter::SCHEDULE,
        &*schedules::ring_reduce_scatter::SCHEDULE,
        &*schedules::direct_reduce_scatter::SCHEDULE,
    ];
    let machines = [
        Machine::flat("switch", Link::Switch, 10.0, 2.0, 5.0),
        Machine::flat("ring", Link::Ring, 10.0, 2.0, 5.0),
        Machine::flat("mesh of 4", Link::Mesh, 20.0, 1.0, 5.0)
            .grouped(4, 4.0)
            .unwrap(),
        preset("host").unwrap(),
    ];
    let n = 256;
    for s in irs {
        let b = Builtin::ALL.into_iter().find(|b| b.schedule_name() == s.name).unwrap();
        let scalars: Vec<i64> = s.scalars.iter().map(|_| 0).collect();
        for m in &machines {
            for world in [2usize, 4, 8, 16] {
                let full = predict_schedule(m, s, world, &scalars, &[n], 4).unwrap();
                let fast = b.predict(m, world, n as usize * 4 * b.units_per_call(world)).unwrap();
                assert_eq!(fast.rounds, full.rounds, "{} on {} at {world}", s.name, m.name);
                assert!(
                    (fast.us - full.us).abs() <= 1e-9 * full.us,
                    "{} on {} at {world}: fast {} us, full {} us",
                    s.name,
                    m.name,
                    fast.us,
                    full.us
                );
            }
        }
    }
}

/// On the 910B pod preset, 4 ranks, a 2 MiB all-reduce (past the board):
/// the right sums, by the algorithm the model predicts fastest.
#[test]
fn a_model_topology_runs_the_models_choice() {
    let topology = Topology::parse("preset:ascend-910b-pod").unwrap();
    let options = CommOptions::default().with_topology(topology);
    let len = 1 << 18;
    let out = hcomm::host::run_with(4, &options, |c| {
        let mut x: Vec<i64> = (0..len).map(|i| (c.rank() * len + i) as i64).collect();
        c.all_reduce_in_place(&mut x, ReduceOp::Sum)?;
        Ok((x, c.last_algorithm(Collective::AllReduce)))
    })
    .unwrap();
    let m = preset("ascend-910b-pod").unwrap();
    let candidates = [
        Builtin::RingAllReduce,
        Builtin::HalvingDoublingAllReduce,
        Builtin::DirectAllReduce,
    ];
    let (best, _) = hcomm_cost::argmin(&m, &candidates, 4, len * 8).unwrap();
    for (x, algorithm) in out {
        for (i, v) in x.iter().enumerate() {
            let expect: usize = (0..4).map(|r| r * len + i).sum();
            assert_eq!(*v, expect as i64, "element {i}");
        }
        let algorithm = algorithm.unwrap();
        assert_ne!(algorithm, Algorithm::OneShot);
        assert_eq!(Builtin::from_names("all_reduce", algorithm.name()), Some(best));
    }
}

/// With no topology given, 4 in-process ranks are detected as threads of
/// this host (the fitted preset `host`), and a 2 MiB all-reduce (past the
/// board) gives the right sums by an algorithm the model predicts as fast
/// as its argmin there.
#[test]
fn the_detected_topology_runs_the_models_choice() {
    let len = 1 << 18;
    let out = hcomm::host::run_with(4, &CommOptions::default(), |c| {
        let mut x: Vec<i64> = (0..len).map(|i| (c.rank() * len + i) as i64).collect();
        c.all_reduce_in_place(&mut x, ReduceOp::Sum)?;
        Ok((x, c.last_algorithm(Collective::AllReduce), c.topology()))
    })
    .unwrap();
    let m = preset("host").unwrap();
    let candidates = [
        Builtin::RingAllReduce,
        Builtin::HalvingDoublingAllReduce,
        Builtin::DirectAllReduce,
    ];
    let (_, best) = hcomm_cost::argmin(&m, &candidates, 4, len * 8).unwrap();
    for (x, algorithm, topology) in out {
        for (i, v) in x.iter().enumerate() {
            let expect: usize = (0..4).map(|r| r * len + i).sum();
            assert_eq!(*v, expect as i64, "element {i}");
        }
        assert!(matches!(&topology, Topology::Model(t) if *t.0 == m), "{topology:?}");
        let chosen = Builtin::from_names("all_reduce", algorithm.unwrap().name()).unwrap();
        let us = chosen.predict(&m, 4, len * 8).unwrap().us;
        assert!(
            (us - best.us).abs() <= 1e-9 * best.us,
            "{chosen:?}: {us} us, best {} us",
            best.us
        );
    }
}
