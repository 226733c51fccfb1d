//! The rank layout of `Context` against groups worked out by hand, and its
//! errors on every rank.

use std::time::Duration;

use hcomm::parallel::{Context, Order, ParallelConfig, ParallelExtras};
use hcomm::{CommOptions, Error};

fn options() -> CommOptions {
    CommOptions::default().with_timeout(Duration::from_secs(20))
}

/// Each rank's groups as world ranks: (tp, pp, dp, ep), plus its stage flags.
type Groups = (Vec<usize>, Vec<usize>, Vec<usize>, Vec<usize>, bool, bool);

fn groups(world: usize, config: ParallelConfig) -> Vec<Groups> {
    hcomm::host::run_with(world, &options(), |comm| {
        let ctx = Context::init(comm, config)?;
        // Each group's members in group-rank order, as world ranks.
        let members = |g: &hcomm::Comm| -> hcomm::Result<Vec<usize>> {
            let mut all = vec![0u64; g.world()];
            g.all_gather(&[comm.rank() as u64], &mut all)?;
            Ok(all.into_iter().map(|r| r as usize).collect())
        };
        assert!(ctx.world().same_group(comm));
        Ok((
            members(ctx.tp())?,
            members(ctx.pp())?,
            members(ctx.dp())?,
            members(ctx.ep())?,
            ctx.is_first_stage(),
            ctx.is_last_stage(),
        ))
    })
    .unwrap()
}

/// The group of `rank` among `sets`.
fn find(sets: &[&[usize]], rank: usize) -> Vec<usize> {
    sets.iter().find(|s| s.contains(&rank)).unwrap().to_vec()
}

fn check(world: usize, config: ParallelConfig, tp: &[&[usize]], pp: &[&[usize]], dp: &[&[usize]], ep: &[&[usize]]) {
    let got = groups(world, config);
    for (rank, g) in got.iter().enumerate() {
        assert_eq!(g.0, find(tp, rank), "tp group of rank {rank} in {config:?}");
        assert_eq!(g.1, find(pp, rank), "pp group of rank {rank} in {config:?}");
        assert_eq!(g.2, find(dp, rank), "dp group of rank {rank} in {config:?}");
        assert_eq!(g.3, find(ep, rank), "ep group of rank {rank} in {config:?}");
        let stage = g.1.iter().position(|&r| r == rank).unwrap();
        assert_eq!(g.4, stage == 0);
        assert_eq!(g.5, stage + 1 == config.pp);
    }
}

#[test]
fn megatron_layout_tp2_pp2_dp2() {
    let config = ParallelConfig {
        tp: 2,
        pp: 2,
        dp: 2,
        ..Default::default()
    };
    check(
        8,
        config,
        &[&[0, 1], &[2, 3], &[4, 5], &[6, 7]],
        &[&[0, 4], &[1, 5], &[2, 6], &[3, 7]],
        &[&[0, 2], &[1, 3], &[4, 6], &[5, 7]],
        &[&[0], &[1], &[2], &[3], &[4], &[5], &[6], &[7]],
    );
}

#[test]
fn tp_pp_dp_order_swaps_the_last_two_axes() {
    // rank = tp_i + 2 * (pp_i + 2 * dp_i)
    let config = ParallelConfig {
        tp: 2,
        pp: 2,
        dp: 2,
        ep: 2,
        order: Order::TpPpDp,
    };
    check(
        8,
        config,
        &[&[0, 1], &[2, 3], &[4, 5], &[6, 7]],
        &[&[0, 2], &[1, 3], &[4, 6], &[5, 7]],
        &[&[0, 4], &[1, 5], &[2, 6], &[3, 7]],
        &[&[0, 4], &[1, 5], &[2, 6], &[3, 7]],
    );
}

#[test]
fn expert_groups_are_blocks_of_the_data_parallel_axis() {
    // tp 1, pp 2, dp 4, ep 2: rank = dp_i + 4 * pp_i.
    let config = ParallelConfig {
        tp: 1,
        pp: 2,
        dp: 4,
        ep: 2,
        ..Default::default()
    };
    check(
        8,
        config,
        &[&[0], &[1], &[2], &[3], &[4], &[5], &[6], &[7]],
        &[&[0, 4], &[1, 5], &[2, 6], &[3, 7]],
        &[&[0, 1, 2, 3], &[4, 5, 6, 7]],
        &[&[0, 1], &[2, 3], &[4, 5], &[6, 7]],
    );
    // tp 2, pp 1, dp 3, ep 3 over 6 ranks: rank = tp_i + 2 * dp_i.
    let config = ParallelConfig {
        tp: 2,
        pp: 1,
        dp: 3,
        ep: 3,
        ..Default::default()
    };
    check(
        6,
        config,
        &[&[0, 1], &[2, 3], &[4, 5]],
        &[&[0], &[1], &[2], &[3], &[4], &[5]],
        &[&[0, 2, 4], &[1, 3, 5]],
        &[&[0, 2, 4], &[1, 3, 5]],
    );
}

#[test]
fn pipeline_only_and_tensor_only_layouts() {
    let config = ParallelConfig {
        pp: 3,
        ..Default::default()
    };
    check(
        3,
        config,
        &[&[0], &[1], &[2]],
        &[&[0, 1, 2]],
        &[&[0], &[1], &[2]],
        &[&[0], &[1], &[2]],
    );
    // tp 3, pp 2, dp 2 over 12 with TpPpDp: rank = tp_i + 3 * (pp_i + 2 * dp_i).
    let config = ParallelConfig {
        tp: 3,
        pp: 2,
        dp: 2,
        ep: 1,
        order: Order::TpPpDp,
    };
    check(
        12,
        config,
        &[&[0, 1, 2], &[3, 4, 5], &[6, 7, 8], &[9, 10, 11]],
        &[&[0, 3], &[1, 4], &[2, 5], &[6, 9], &[7, 10], &[8, 11]],
        &[&[0, 6], &[1, 7], &[2, 8], &[3, 9], &[4, 10], &[5, 11]],
        &[&[0], &[1], &[2], &[3], &[4], &[5], &[6], &[7], &[8], &[9], &[10], &[11]],
    );
}

fn errors(world: usize, config: impl Fn(usize) -> ParallelConfig + Sync) -> Vec<Error> {
    hcomm::host::run_with(world, &options(), |comm| {
        Ok(Context::init(comm, config(comm.rank())).expect_err("the layout must be rejected"))
    })
    .unwrap()
}

fn message(e: &Error) -> &str {
    match e {
        Error::Precondition { message } | Error::Mismatch { message } => message,
        other => panic!("unexpected error {other}"),
    }
}

#[test]
fn bad_layouts_fail_on_every_rank_naming_the_numbers() {
    let cases: [(ParallelConfig, &str); 4] = [
        (
            ParallelConfig {
                tp: 4,
                pp: 2,
                dp: 4,
                ..Default::default()
            },
            "tp 4 × pp 2 × dp 4 = 32, but the communicator has 16 ranks",
        ),
        (
            ParallelConfig {
                tp: 0,
                pp: 4,
                dp: 4,
                ..Default::default()
            },
            "tp is 0",
        ),
        (
            ParallelConfig {
                tp: 2,
                pp: 2,
                dp: 4,
                ep: 3,
                ..Default::default()
            },
            "ep 3 does not divide dp 4",
        ),
        (
            ParallelConfig {
                tp: 2,
                pp: 2,
                dp: 4,
                ep: 0,
                ..Default::default()
            },
            "ep is 0",
        ),
    ];
    for (config, text) in cases {
        for e in errors(16, |_| config) {
            assert!(matches!(e, Error::Precondition { .. }), "{e}");
            assert!(message(&e).contains(text), "`{e}` should say `{text}`");
        }
    }
}

#[test]
fn disagreeing_layouts_fail_on_every_rank() {
    let errs = errors(4, |r| ParallelConfig {
        tp: if r == 3 { 4 } else { 2 },
        dp: if r == 3 { 1 } else { 2 },
        ..Default::default()
    });
    for e in errs {
        assert!(matches!(e, Error::Mismatch { .. }), "{e}");
        assert!(message(&e).contains("rank 3 passes tp 4 pp 1 dp 1"), "{e}");
    }
    let errs = errors(4, |r| ParallelConfig {
        tp: 2,
        dp: 2,
        order: if r == 0 { Order::TpPpDp } else { Order::TpDpPp },
        ..Default::default()
    });
    for e in errs {
        assert!(message(&e).contains("order TpPpDp"), "{e}");
    }
}

/// Context parallelism as Megatron-LM lays it out (`tp-cp-ep-dp-pp`), on
/// live groups: tp 2 × cp 2 × dp 2 over 8 ranks; the cp and dp-cp groups,
/// by the world ranks their members report, and virtual pipeline stages.
#[test]
fn context_parallel_groups_and_virtual_stages_follow_megatron_lm() {
    let config = ParallelConfig {
        tp: 2,
        dp: 2,
        ..Default::default()
    };
    let extras = ParallelExtras { cp: 2, vpp: 3 };
    let got = hcomm::host::run_with(8, &options(), |comm| {
        let ctx = Context::init_with(comm, config, extras)?;
        assert_eq!(ctx.extras(), extras);
        let members = |g: &hcomm::Comm| -> hcomm::Result<Vec<usize>> {
            let mut all = vec![0u64; g.world()];
            g.all_gather(&[comm.rank() as u64], &mut all)?;
            Ok(all.into_iter().map(|r| r as usize).collect())
        };
        let stages: Vec<usize> = (0..3).map(|v| ctx.virtual_stage(v)).collect::<hcomm::Result<_>>()?;
        Ok((
            members(ctx.tp())?,
            members(ctx.cp())?,
            members(ctx.dp())?,
            members(ctx.dp_cp())?,
            ctx.cp_index(),
            stages,
            ctx.chunk_layers(6, 2)?,
        ))
    })
    .unwrap();
    let tp: &[&[usize]] = &[&[0, 1], &[2, 3], &[4, 5], &[6, 7]];
    let cp: &[&[usize]] = &[&[0, 2], &[1, 3], &[4, 6], &[5, 7]];
    let dp: &[&[usize]] = &[&[0, 4], &[1, 5], &[2, 6], &[3, 7]];
    let dp_cp: &[&[usize]] = &[&[0, 2, 4, 6], &[1, 3, 5, 7]];
    for (rank, g) in got.iter().enumerate() {
        assert_eq!(g.0, find(tp, rank), "tp group of rank {rank}");
        assert_eq!(g.1, find(cp, rank), "cp group of rank {rank}");
        assert_eq!(g.2, find(dp, rank), "dp group of rank {rank}");
        assert_eq!(g.3, find(dp_cp, rank), "dp-cp group of rank {rank}");
        assert_eq!(g.4, rank / 2 % 2, "cp index of rank {rank}");
        // pp = 1: chunk v is virtual stage v; 6 layers over 3 stages
        assert_eq!(g.5, [0, 1, 2]);
        assert_eq!(g.6, 4..6);
    }
}

/// Virtual stages over two pipeline ranks (Megatron-LM's interleaving:
/// chunk `v` of rank `p` is stage `v * pp + p`), and the errors of a chunk
/// out of range and of layers that do not split evenly.
#[test]
fn virtual_pipeline_stages_interleave_and_refuse_bad_chunks() {
    let config = ParallelConfig {
        pp: 2,
        ..Default::default()
    };
    let got = hcomm::host::run_with(2, &options(), |comm| {
        let ctx = Context::init_with(comm, config, ParallelExtras { cp: 1, vpp: 2 })?;
        let stage = ctx.stage();
        let first = (ctx.is_first_virtual_stage(0)?, ctx.is_first_virtual_stage(1)?);
        let last = (ctx.is_last_virtual_stage(0)?, ctx.is_last_virtual_stage(1)?);
        let layers = (ctx.chunk_layers(8, 0)?, ctx.chunk_layers(8, 1)?);
        match ctx.virtual_stage(2) {
            Err(Error::Precondition { message }) => {
                assert!(message.contains("model chunk 2 is out of range"), "{message}");
            }
            other => panic!("expected a precondition error, got {other:?}"),
        }
        match ctx.chunk_layers(6, 0) {
            Err(Error::Precondition { message }) => {
                assert!(message.contains("6 layers do not split evenly"), "{message}");
            }
            other => panic!("expected a precondition error, got {other:?}"),
        }
        Ok((stage, first, last, layers))
    })
    .unwrap();
    assert_eq!(got[0], (0, (true, false), (false, false), (0..2, 4..6)));
    assert_eq!(got[1], (1, (false, false), (false, true), (2..4, 6..8)));
}
