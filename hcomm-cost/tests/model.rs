//! The model: topology files, presets, and the built-in patterns against
//! the full simulation of the same schedules.

use hcomm_cost::{predict_schedule, preset, Builtin, CostError, Link, Machine, PRESETS};
use hcomm_schedule::syntax::{front, parse_str};
use hcomm_schedule::Schedule;

/// The schedules of hcomm's built-ins that the patterns follow (the same
/// programs as `hcomm::collective::schedules`, without their comments).
const SCHEDULES: &str = r"
    #[verify(world in 1..=4)]
    fn ring_all_gather(input: &[T; n], output: &mut [T; n * world]) {
        copy input -> output.chunk(rank);
        if world > 1 {
            batch {
                send input to (rank + 1) % world;
                recv output.chunk((rank - 1) % world) from (rank - 1) % world;
            }
        }
        for s in 1..world - 1 {
            batch {
                send output.chunk((rank - s) % world) to (rank + 1) % world;
                recv output.chunk((rank - s - 1) % world) from (rank - 1) % world;
            }
        }
    }
    #[verify(world in 1..=4)]
    fn bruck_all_gather(input: &[T; n], output: &mut [T; n * world]) {
        let tmp = scratch[T; n * world];
        copy input -> tmp.chunk(0);
        if world > 1 {
            for k in 0..log2(world - 1) + 1 {
                let d = pow2(k);
                let count = min(d, world - d);
                batch {
                    send tmp[0..count * n] to (rank - d) % world;
                    recv tmp[d * n..(d + count) * n] from (rank + d) % world;
                }
            }
        }
        for i in 0..world {
            copy tmp.chunk(i) -> output.chunk((rank + i) % world);
        }
    }
    #[verify(world in 1..=4)]
    fn pairwise_all_to_all(input: &[T; n * world], output: &mut [T; n * world]) {
        copy input.chunk(rank) -> output.chunk(rank);
        for s in 1..world {
            batch {
                send input.chunk((rank + s) % world) to (rank + s) % world;
                recv output.chunk((rank - s) % world) from (rank - s) % world;
            }
        }
    }
    #[verify(world in 1..=4)]
    fn ring_all_reduce(buf: &mut [T; n * world], op: ReduceOp) {
        for s in 0..world - 1 {
            batch {
                send buf.chunk((rank - s) % world) to (rank + 1) % world;
                recv buf.chunk((rank - s - 1) % world) from (rank - 1) % world reduce op;
            }
        }
        for s in 0..world - 1 {
            batch {
                send buf.chunk((rank + 1 - s) % world) to (rank + 1) % world;
                recv buf.chunk((rank - s) % world) from (rank - 1) % world;
            }
        }
    }
    #[verify(world in 1..=4)]
    fn direct_all_reduce(input: &[T; n * world], output: &mut [T; n * world], op: ReduceOp) {
        copy input.chunk(rank) -> output.chunk(rank);
        for s in 1..world {
            batch {
                send input.chunk((rank - s) % world) to (rank - s) % world;
                recv output.chunk(rank) from (rank + s) % world reduce op;
            }
        }
        for s in 1..world {
            batch {
                send output.chunk(rank) to (rank + s) % world;
                recv output.chunk((rank - s) % world) from (rank - s) % world;
            }
        }
    }
    #[verify(world in [1, 2, 4])]
    #[requires(is_pow2(world))]
    fn recursive_halving_reduce_scatter(input: &[T; n * world], output: &mut [T; n], op: ReduceOp) {
        let tmp = scratch[T; n * world];
        copy input -> tmp;
        for k in 0..log2(world) {
            let d = world / pow2(k + 1);
            let peer = rank ^ d;
            batch {
                send tmp[peer / d * d * n..(peer / d * d + d) * n] to peer;
                recv tmp[rank / d * d * n..(rank / d * d + d) * n] from peer reduce op;
            }
        }
        copy tmp.chunk(rank) -> output;
    }
";

fn schedules() -> Vec<Schedule> {
    let input = parse_str(SCHEDULES).expect("the test schedules parse");
    input
        .items
        .iter()
        .map(|item| front(item).map_or_else(|_| panic!("a test schedule is rejected"), |f| f.ir))
        .collect()
}

fn machines() -> Vec<Machine> {
    let flat = Machine::flat("switch", Link::Switch, 10.0, 2.0, 5.0);
    let ring = Machine::flat("ring", Link::Ring, 10.0, 2.0, 5.0);
    let mesh = Machine::flat("mesh", Link::Mesh, 10.0, 2.0, 5.0);
    let pods = Machine::flat("mesh of 4", Link::Mesh, 20.0, 1.0, 5.0)
        .grouped(4, 4.0)
        .unwrap();
    let mut shared = pods.clone();
    shared.levels[0].shared_gbs = Some(30.0);
    vec![
        flat,
        ring,
        mesh,
        pods,
        shared,
        preset("host").unwrap(),
        preset("dgx-h100").unwrap(),
        preset("ascend-910b-pod").unwrap(),
    ]
}

/// The fast path (a block of ranks per round) gives the full simulation's
/// figure, over the columns of the checker's simulation of each schedule.
#[test]
fn patterns_equal_the_simulation_of_their_schedules() {
    let n = 1024;
    let all = schedules();
    assert_eq!(all.len(), 6);
    for s in all {
        let b = Builtin::ALL.into_iter().find(|b| b.schedule_name() == s.name).unwrap();
        let scalars: Vec<i64> = s.scalars.iter().map(|_| 0).collect();
        for m in machines() {
            for world in [2usize, 4, 8, 16, 32] {
                if !b.supports(world) {
                    continue;
                }
                let full = predict_schedule(&m, &s, world, &scalars, &[n], 4).unwrap();
                let bytes = n as usize * 4 * b.units_per_call(world);
                let fast = b.predict(&m, world, bytes).unwrap();
                assert_eq!(fast.rounds, full.rounds, "{} on {} at {world}", s.name, m.name);
                let rel = (fast.us - full.us).abs() / full.us;
                assert!(
                    rel < 1e-9,
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

/// The figures by hand: a ring all-gather of 8 KiB blocks on 4 ranks of a
/// switch at 10 GB/s and 2 us is 3 rounds of 2 + 8192 / 10^4 us.
#[test]
fn a_ring_all_gather_by_hand() {
    let m = Machine::flat("switch", Link::Switch, 10.0, 2.0, 5.0);
    let p = Builtin::RingAllGather.predict(&m, 4, 4 * 8192).unwrap();
    assert_eq!(p.rounds, 3);
    assert!((p.us - 3.0 * (2.0 + 0.8192)).abs() < 1e-9, "{}", p.us);
    // On a ring, a message to the neighbour uses one hop: the same.
    let r = Machine::flat("ring", Link::Ring, 10.0, 2.0, 5.0);
    assert!((Builtin::RingAllGather.predict(&r, 4, 4 * 8192).unwrap().us - p.us).abs() < 1e-9);
    // Pairwise all-to-all on the ring: shift 2 crosses two hops, each
    // carrying two messages (one from each of two senders), so that round
    // moves twice the bytes per hop.
    let a = Builtin::PairwiseAllToAll.predict(&r, 4, 4 * 8192).unwrap();
    assert!((a.us - (3.0 * 2.0 + 4.0 * 0.8192)).abs() < 1e-9, "{}", a.us);
}

/// 4096 ranks on the pod presets in well under a second for every built-in.
#[test]
fn predictions_at_4096_ranks_are_quick() {
    let start = std::time::Instant::now();
    for name in ["dgx-h100", "ascend-910b-pod"] {
        let m = preset(name).unwrap();
        for b in Builtin::ALL {
            let p = b.predict(&m, 4096, 64 << 20).unwrap();
            assert!(p.us > 0.0 && p.rounds > 0, "{b:?}");
        }
    }
    assert!(start.elapsed().as_secs_f64() < 5.0, "{:?}", start.elapsed());
}

#[test]
fn every_preset_parses() {
    for (name, _) in PRESETS {
        let m = preset(name).unwrap();
        assert_eq!(m.name, name);
        assert!(!m.source.is_empty(), "{name} names its source");
    }
    let e = preset("dgx-a100").unwrap_err();
    assert!(e.to_string().contains("no such preset; expected one of"), "{e}");
}

#[test]
fn bad_topology_files_name_the_problem() {
    let level = "[[level]]\nname = \"x\"\nlink = \"switch\"\nbandwidth_gbs = 1.0\nlatency_us = 1.0\n";
    let cases = [
        ("name = \"t\"\nreduce_gbs = 1.0\nlevel = []\n", "it has no `level`"),
        (
            &format!("name = \"t\"\nreduce_gbs = 0.0\n{level}") as &str,
            "`reduce_gbs` is 0",
        ),
        (
            &format!(
                "name = \"t\"\nreduce_gbs = 1.0\n{}",
                level.replace("1.0\nlat", "-3.0\nlat")
            ),
            "level `x` has `bandwidth_gbs` = -3",
        ),
        (
            &format!(
                "name = \"t\"\nreduce_gbs = 1.0\n{}",
                level.replace("link", "ranks = 8\nlink")
            ),
            "the last level `x` has `ranks`",
        ),
        (
            &format!("name = \"t\"\nreduce_gbs = 1.0\n{level}{level}"),
            "level `x` has no `ranks`",
        ),
    ];
    for (text, expect) in cases {
        let e = Machine::from_toml(text, "t.toml").unwrap_err();
        assert!(matches!(e, CostError::Invalid { .. }), "{e:?}");
        assert!(e.to_string().contains(expect), "{e} / {expect}");
    }
    let e = Machine::from_toml("name = \"t\"\nreduce_gbs = 1.0\nlevel = [{ name = \"x\", link = \"torus\", bandwidth_gbs = 1.0, latency_us = 1.0 }]", "t.toml")
        .unwrap_err();
    assert!(matches!(e, CostError::Parse { .. }), "{e:?}");
    assert!(
        e.to_string().contains("topology `t.toml` does not parse") && e.to_string().contains("torus"),
        "{e}"
    );
}
