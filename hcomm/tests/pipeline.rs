//! Pipeline transfers between stages: paired calls for 2, 3 and 4 stages,
//! tags that keep forward and backward apart, end stages and mismatches.

use std::time::Duration;

use hcomm::parallel::{Context, ParallelConfig};
use hcomm::pp::Pipeline;
use hcomm::{CommOptions, Error};

fn options(secs: u64) -> CommOptions {
    CommOptions::default().with_timeout(Duration::from_secs(secs))
}

fn act(stage: usize, micro: usize) -> Vec<f32> {
    (0..5).map(|i| (stage * 100 + micro * 10 + i) as f32).collect()
}

fn grad(stage: usize, micro: usize) -> Vec<f32> {
    (0..5).map(|i| -((stage * 100 + micro * 10 + i) as f32)).collect()
}

/// A 1F1B schedule with `micro` micro-batches: every received activation
/// and gradient is the one its neighbour sent for that micro-batch.
fn one_f_one_b(pipe: &Pipeline, micro: usize) -> hcomm::Result<usize> {
    let (s, p) = (pipe.stage(), pipe.stages());
    let warmup = (p - s - 1).min(micro);
    let mut received = 0;
    let mut a = vec![0.0f32; 5];
    let mut g = vec![0.0f32; 5];
    let (mut fwd, mut bwd) = (0, 0);
    let forward_in = |a: &mut Vec<f32>, m: usize| -> hcomm::Result<()> {
        if !pipe.is_first_stage() {
            pipe.recv_forward(a)?;
            assert_eq!(*a, act(s - 1, m), "stage {s} forward input of micro-batch {m}");
        }
        Ok(())
    };
    for _ in 0..warmup {
        forward_in(&mut a, fwd)?;
        pipe.send_forward(&act(s, fwd))?;
        fwd += 1;
    }
    if micro > warmup {
        forward_in(&mut a, fwd)?;
    }
    for i in 0..micro - warmup {
        // Steady state: send this forward, receive the oldest backward.
        if pipe.is_last_stage() {
            received += 1;
        } else {
            pipe.send_forward_recv_backward(&act(s, fwd), &mut g)?;
            assert_eq!(g, grad(s + 1, bwd), "stage {s} backward input of micro-batch {bwd}");
            received += 1;
        }
        fwd += 1;
        let last = i + 1 == micro - warmup;
        if pipe.is_first_stage() {
            if !last {
                forward_in(&mut a, fwd)?;
            }
        } else if last {
            pipe.send_backward(&grad(s, bwd))?;
        } else {
            pipe.send_backward_recv_forward(&grad(s, bwd), &mut a)?;
            assert_eq!(a, act(s - 1, fwd), "stage {s} forward input of micro-batch {fwd}");
        }
        bwd += 1;
    }
    for _ in 0..warmup {
        pipe.recv_backward(&mut g)?;
        assert_eq!(g, grad(s + 1, bwd));
        received += 1;
        if !pipe.is_first_stage() {
            pipe.send_backward(&grad(s, bwd))?;
        }
        bwd += 1;
    }
    assert_eq!((fwd, bwd), (micro, micro));
    Ok(received)
}

#[test]
fn paired_calls_run_1f1b_for_2_3_and_4_stages() {
    for pp in [2, 3, 4] {
        for micro in [1, 3, 8] {
            let got = hcomm::host::run_with(pp, &options(20), |comm| {
                let ctx = Context::init(
                    comm,
                    ParallelConfig {
                        pp,
                        ..Default::default()
                    },
                )?;
                one_f_one_b(&ctx.pipeline(), micro)
            })
            .unwrap();
            assert_eq!(got, vec![micro; pp], "pp {pp}, {micro} micro-batches");
        }
    }
}

#[test]
fn forward_and_backward_traffic_never_match_each_other() {
    // Stage 0 sends a forward message and stage 1 a backward one at the same
    // time on two stages (same peer both ways); each lands in the right buffer.
    let got = hcomm::host::run_with(2, &options(20), |comm| {
        let pipe = Pipeline::new(comm);
        let mut buf = [0i64; 3];
        if pipe.is_first_stage() {
            pipe.send_forward_recv_backward(&[1i64, 2, 3], &mut buf)?;
        } else {
            pipe.send_backward_recv_forward(&[-1i64, -2, -3], &mut buf)?;
        }
        Ok(buf)
    })
    .unwrap();
    assert_eq!(got, vec![[-1, -2, -3], [1, 2, 3]]);
}

#[test]
fn end_stages_reject_calls_to_missing_neighbours() {
    let got = hcomm::host::run_with(3, &options(20), |comm| {
        let pipe = Pipeline::new(comm);
        let mut b = [0u8; 2];
        let errs = match pipe.stage() {
            0 => vec![
                pipe.recv_forward(&mut b),
                pipe.send_backward(&b),
                pipe.send_backward_recv_forward(&b, &mut [0u8; 2]),
            ],
            2 => vec![
                pipe.send_forward(&b),
                pipe.recv_backward(&mut b),
                pipe.send_forward_recv_backward(&b, &mut [0u8; 2]),
            ],
            _ => vec![],
        };
        Ok(errs.into_iter().map(|e| e.unwrap_err().to_string()).collect::<Vec<_>>())
    })
    .unwrap();
    for e in &got[0] {
        assert!(e.contains("stage 0 of 3: there is no previous stage"), "{e}");
    }
    for e in &got[2] {
        assert!(e.contains("stage 2 of 3: there is no next stage"), "{e}");
    }
    assert_eq!(got[0].len(), 3);
    assert_eq!(got[2].len(), 3);
}

#[test]
fn mismatched_lengths_and_types_fail_on_both_sides() {
    for pp in [2, 3, 4] {
        let got = hcomm::host::run_with(pp, &options(10), |comm| {
            let pipe = Pipeline::new(comm);
            let s = pipe.stage();
            // Stage 0 sends 4 elements, stage 1 expects 5.
            let r = match s {
                0 => pipe.send_forward(&[1.0f32; 4]),
                1 => pipe.recv_forward(&mut [0.0f32; 5]),
                _ => Ok(()),
            };
            let first = r.err();
            // Stage 1 sends i32 backward, stage 0 expects f32 (paired call).
            let r = match s {
                0 => pipe.send_forward_recv_backward(&[0.0f32; 2], &mut [0.0f32; 2]),
                1 => pipe.send_backward_recv_forward(&[1i32; 2], &mut [0.0f32; 2]),
                _ => Ok(()),
            };
            Ok((first, r.err()))
        })
        .unwrap();
        for (s, (first, second)) in got.iter().enumerate().take(2) {
            let first = first
                .as_ref()
                .unwrap_or_else(|| panic!("stage {s}: a length mismatch must fail"));
            assert!(matches!(first, Error::Mismatch { .. }), "stage {s}: {first}");
            let second = second
                .as_ref()
                .unwrap_or_else(|| panic!("stage {s}: a type mismatch must fail"));
            assert!(matches!(second, Error::Mismatch { .. }), "stage {s}: {second}");
        }
        assert!(got.iter().skip(2).all(|(a, b)| a.is_none() && b.is_none()));
    }
}
