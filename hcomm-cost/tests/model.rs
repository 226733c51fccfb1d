//! The model: topology files, presets, and the built-in patterns against
//! the full simulation of the same schedules.

use hcomm_cost::{predict_schedule, preset, Builtin, CostError, Link, Machine, PRESETS};
use hcomm_schedule::syntax::{front, parse_str};
use hcomm_schedule::Schedule;

/// A user's schedule: every rank passes its input to the next rank, then
/// the rank after it (two rounds, the second crossing two ring hops).
const USER_SCHEDULE: &str = r"
    #[verify(world in 1..=4)]
    fn shift_twice(input: &[T; n], output: &mut [T; 2 * n]) {
        batch {
            send input to (rank + 1) % world;
            recv output[0..n] from (rank - 1) % world;
        }
        batch {
            send input to (rank + 2) % world;
            recv output[n..2 * n] from (rank - 2) % world;
        }
    }
";

fn user_schedule() -> Schedule {
    let input = parse_str(USER_SCHEDULE).expect("the test schedule parses");
    front(&input.items[0]).map_or_else(|_| panic!("the test schedule is rejected"), |f| f.ir)
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

/// Any schedule is costed over the columns of the checker's simulation:
/// on a ring of 8 at 10 GB/s and 2 us, 4 KiB messages, the first round
/// crosses one hop per message and the second two hops, each hop carrying
/// two messages. (hcomm's own schedules are compared with the built-in
/// patterns in hcomm's `tests/cost_model.rs`.)
#[test]
fn a_users_schedule_by_hand() {
    let s = user_schedule();
    let ring = Machine::flat("ring", Link::Ring, 10.0, 2.0, 5.0);
    let p = predict_schedule(&ring, &s, 8, &[], &[1024], 4).unwrap();
    assert_eq!(p.rounds, 2);
    let expect = (2.0 + 4096.0 / 1e4) + (2.0 + 2.0 * 4096.0 / 1e4);
    assert!((p.us - expect).abs() < 1e-9, "{} us, expected {expect}", p.us);
    let e = predict_schedule(&ring, &s, 8, &[], &[0], 4).unwrap_err();
    assert!(e.to_string().contains("each at least 1"), "{e}");
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

/// 4096 ranks on every test machine without a ring level (the pod presets
/// among them) for every built-in, within seconds in a debug build. (On a
/// ring level, xor rounds have no block symmetry and cost every message's
/// hops: seconds at 4096 ranks.)
#[test]
fn predictions_at_4096_ranks_are_quick() {
    let start = std::time::Instant::now();
    for m in machines()
        .into_iter()
        .filter(|m| m.levels.iter().all(|l| l.link != Link::Ring))
    {
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

/// A level with both cache tiers: a message takes the bandwidth of the
/// first tier it fits, the level's own past both.
#[test]
fn cache_tiers_set_the_bandwidth_by_message_size() {
    let text = "name = \"t\"\nreduce_gbs = 1e9\n[[level]]\nname = \"x\"\nlink = \"switch\"\nbandwidth_gbs = 1.0\nlatency_us = 0.0\ncached_bytes = 4096.0\ncached_bandwidth_gbs = 4.0\nllc_bytes = 65536.0\nllc_bandwidth_gbs = 2.0\n";
    let m = Machine::from_toml(text, "t.toml").unwrap();
    // A ring all-gather on 2 ranks: one round, one message of half the call
    // each way; a switch endpoint carries one message out and one in.
    for (bytes, gbs) in [(8192, 4.0), (131_072, 2.0), (1 << 20, 1.0)] {
        let p = Builtin::RingAllGather.predict(&m, 2, bytes).unwrap();
        let expect = bytes as f64 / 2.0 / (gbs * 1e3);
        assert!(
            (p.us - expect).abs() < 1e-9 * expect,
            "{bytes} B: {} us, expected {expect}",
            p.us
        );
    }
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
        (
            &format!(
                "name = \"t\"\nreduce_gbs = 1.0\n{level}cached_bytes = 4096.0\ncached_bandwidth_gbs = 2.0\nllc_bytes = 1024.0\nllc_bandwidth_gbs = 1.5\n"
            ),
            "level `x` has `llc_bytes` = Some(1024.0)",
        ),
        (
            &format!("name = \"t\"\nreduce_gbs = 1.0\n{level}llc_bytes = 1024.0\n"),
            "`llc_bandwidth_gbs` = None; give both",
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

/// Rows that ran one-shot have the board's pattern; the selection's
/// mapping (its crossovers are message algorithms) leaves them out.
#[test]
fn one_shot_rows_have_the_boards_pattern() {
    for (op, b) in [
        ("all_reduce", Builtin::OneShotAllReduce),
        ("all_gather", Builtin::OneShotAllGather),
        ("reduce_scatter", Builtin::OneShotReduceScatter),
        ("all_to_all", Builtin::OneShotAllToAll),
        ("broadcast", Builtin::OneShotBroadcast),
    ] {
        assert_eq!(Builtin::from_row(op, "one_shot"), Some(b));
        assert_eq!(Builtin::from_names(op, "one_shot"), None);
        assert!(b.is_one_shot());
    }
    assert_eq!(Builtin::from_row("all_reduce", "ring"), Some(Builtin::RingAllReduce));
    assert_eq!(Builtin::from_row("all_reduce", "library"), None);
    let e = Machine::from_toml(
        "name = \"t\"\nreduce_gbs = 1.0\n[board]\nlatency_us = 1.0\ncores = 2\n[[level]]\nname = \"x\"\nlink = \"switch\"\nbandwidth_gbs = 1.0\nlatency_us = 1.0\n",
        "t.toml",
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("`board.cores` is Some(2) and `board.oversubscribed_us` is None"),
        "{e}"
    );
}
