//! Schedules read from text (`hcomm::checker::parse_schedules`): run on host
//! threads with exact data against serial references, and rejected with the
//! diagnostics `comm_schedule!` gives for the same source.

use std::path::{Path, PathBuf};

use hcomm::checker::{parse_schedules, DiagKind, TextDiagnostic, TextSchedule};
use hcomm::ReduceOp;

fn schedules() -> Vec<TextSchedule> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/schedule_text/schedules.sched");
    let text = std::fs::read_to_string(&path).expect("the schedule file is readable");
    match parse_schedules(&text) {
        Ok(s) => s,
        Err(d) => panic!("{}", d.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")),
    }
}

fn named(name: &str) -> TextSchedule {
    schedules()
        .into_iter()
        .find(|s| s.name() == name)
        .expect("the file defines the schedule")
}

fn value(rank: usize, i: usize) -> i64 {
    ((rank * 7 + i * 3) % 5) as i64 - 2
}

#[test]
fn ring_all_gather_from_a_file_gathers_every_block() {
    let ring = named("ring_all_gather");
    // 5 and 6 lie outside the file's verify set: checked at the first call
    for world in [1, 2, 3, 4, 5, 6] {
        let n = 3;
        let out = hcomm::host::run(world, |comm| {
            let input: Vec<i64> = (0..n).map(|i| value(comm.rank(), i)).collect();
            let mut output = vec![0_i64; n * world];
            ring.call(comm)
                .input("input", &input[..])
                .output("output", &mut output[..])
                .run()?;
            Ok(output)
        })
        .unwrap();
        let expected: Vec<i64> = (0..world).flat_map(|r| (0..n).map(move |i| value(r, i))).collect();
        for (rank, got) in out.iter().enumerate() {
            assert_eq!(got, &expected, "world {world}, rank {rank}");
        }
    }
}

fn combine(op: ReduceOp, a: i64, b: i64) -> i64 {
    match op {
        ReduceOp::Sum => a + b,
        ReduceOp::Prod => a * b,
        ReduceOp::Max => a.max(b),
        ReduceOp::Min => a.min(b),
        ReduceOp::Avg => panic!("the schedule language has no mean; no case passes it"),
    }
}

#[test]
fn reduce_scatter_with_an_operator_parameter_reduces_each_block() {
    let ring = named("ring_reduce_scatter");
    for world in [1, 2, 3, 4] {
        for op in [ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min] {
            let n = 2;
            let out = hcomm::host::run(world, |comm| {
                let mut input: Vec<i64> = (0..n * world).map(|i| value(comm.rank(), i)).collect();
                let mut output = vec![0_i64; n];
                ring.call(comm)
                    .output("input", &mut input[..])
                    .output("output", &mut output[..])
                    .op("op", op)
                    .run()?;
                Ok(output)
            })
            .unwrap();
            for (rank, got) in out.iter().enumerate() {
                let expected: Vec<i64> = (0..n)
                    .map(|i| {
                        let at = rank * n + i;
                        (1..world).fold(value(0, at), |acc, r| combine(op, acc, value(r, at)))
                    })
                    .collect();
                assert_eq!(got, &expected, "world {world}, {op:?}, rank {rank}");
            }
        }
    }
}

/// The schedule language combines pairwise and has no mean: `Avg` as an
/// operator parameter is refused on every rank before anything moves.
#[test]
fn an_operator_parameter_refuses_the_mean() {
    let ring = named("ring_reduce_scatter");
    let errors = hcomm::host::run(2, |comm| {
        let mut input = [1_i64; 4];
        let mut output = [0_i64; 2];
        let result = ring
            .call(comm)
            .output("input", &mut input[..])
            .output("output", &mut output[..])
            .op("op", ReduceOp::Avg)
            .run();
        Ok((result.map_err(|e| e.to_string()), output))
    })
    .unwrap();
    for (rank, (result, output)) in errors.iter().enumerate() {
        let message = result.clone().unwrap_err();
        assert!(
            message.starts_with("precondition: a comm_schedule! operator parameter is `ReduceOp::Avg`"),
            "rank {rank}: {message}"
        );
        assert_eq!(output, &[0, 0], "rank {rank}: nothing moved");
    }
}

#[test]
fn all_gatherv_with_counts_lays_out_every_part() {
    let gather = named("gather_through_scratch");
    for world in [1, 2, 3, 4] {
        let counts: Vec<usize> = (0..world).map(|r| (r * 2 + 1) % 4).collect();
        let out = hcomm::host::run(world, |comm| {
            let x: Vec<f32> = (0..counts[comm.rank()])
                .map(|i| (comm.rank() * 10 + i) as f32)
                .collect();
            let mut all = vec![0.0_f32; counts.iter().sum()];
            gather
                .call(comm)
                .counts("counts", &counts)
                .input("x", &x[..])
                .output("out", &mut all[..])
                .run()?;
            Ok(all)
        })
        .unwrap();
        let expected: Vec<f32> = (0..world)
            .flat_map(|r| (0..counts[r]).map(move |i| (r * 10 + i) as f32))
            .collect();
        for (rank, got) in out.iter().enumerate() {
            assert_eq!(got, &expected, "world {world}, rank {rank}");
        }
    }
}

#[test]
fn broadcast_from_a_scalar_root_copies_the_roots_buffer() {
    let bcast = named("linear_broadcast");
    for world in [1, 3, 4] {
        for root in 0..world {
            let out = hcomm::host::run(world, |comm| {
                let mut buf: Vec<i32> = (0..5).map(|i| (comm.rank() * 100 + i) as i32).collect();
                bcast
                    .call(comm)
                    .output("buf", &mut buf[..])
                    .scalar("root", root)
                    .run()?;
                Ok(buf)
            })
            .unwrap();
            let expected: Vec<i32> = (0..5).map(|i| (root * 100 + i) as i32).collect();
            assert!(
                out.iter().all(|b| *b == expected),
                "world {world}, root {root}: {out:?}"
            );
        }
    }
}

#[test]
fn wrong_arguments_are_preconditions_naming_the_argument() {
    let bcast = named("linear_broadcast");
    let ring = named("ring_all_gather");
    let errors = hcomm::host::run(2, |comm| {
        let mut buf = [0_i32; 4];
        let missing = bcast.call(comm).output("buf", &mut buf[..]).run();
        let read_only = bcast.call(comm).input("buf", &buf[..]).scalar("root", 0).run();
        let unknown = bcast
            .call(comm)
            .output("buf", &mut buf[..])
            .scalar("root", 0)
            .scalar("rot", 0)
            .run();
        let range = bcast.call(comm).output("buf", &mut buf[..]).scalar("root", 2).run();
        let input = [0_i32; 2];
        let mut short = [0_i32; 3];
        let length = ring
            .call(comm)
            .input("input", &input[..])
            .output("output", &mut short[..])
            .run();
        Ok([missing, read_only, unknown, range, length].map(|r| r.unwrap_err().to_string()))
    })
    .unwrap();
    let [missing, read_only, unknown, range, length] = &errors[0];
    assert!(
        missing.contains("`linear_broadcast`: scalar argument `root` is missing"),
        "{missing}"
    );
    assert!(
        read_only.contains("buffer `buf` is written by the schedule: pass it with `output`"),
        "{read_only}"
    );
    assert!(
        unknown.contains("`rot` is not a parameter of the schedule"),
        "{unknown}"
    );
    assert!(range.contains("scalar `root` = 2 is outside its range 0..2"), "{range}");
    assert!(length.contains("output"), "{length}");
}

/// `n in 0..`: an empty payload is `n = 0`; the one-element headers still
/// travel, exact against the serial reference, within the verify set and
/// past it (world 5, checked at the first call).
#[test]
fn a_length_variable_ranging_from_0_runs_with_empty_payloads() {
    let headed = named("headed_all_gather");
    for world in 1..=5 {
        for n in 0..=2 {
            let out = hcomm::host::run(world, |comm| {
                let input: Vec<i64> = (0..=n).map(|i| value(comm.rank(), i)).collect();
                let mut output = vec![0_i64; (n + 1) * world];
                headed
                    .call(comm)
                    .input("input", &input[..])
                    .output("output", &mut output[..])
                    .run()?;
                Ok(output)
            })
            .unwrap_or_else(|e| panic!("world {world}, n = {n}: {e}"));
            let expected: Vec<i64> = (0..world).flat_map(|r| (0..=n).map(move |i| value(r, i))).collect();
            for (rank, got) in out.iter().enumerate() {
                assert_eq!(got, &expected, "world {world}, n = {n}, rank {rank}");
            }
        }
    }
}

/// `n in 0..=4`: empty buffers run and return `Ok`; a call with `n = 5` is
/// `Err(Precondition)` naming the variable, its value and the range, on
/// every rank, before any communication.
#[test]
fn a_bounded_length_range_is_checked_at_the_call() {
    let small = named("small_all_gather");
    let out = hcomm::host::run(3, |comm| {
        let mut empty: [i64; 0] = [];
        small
            .call(comm)
            .input("input", &[][..])
            .output("output", &mut empty[..])
            .run()?;
        let input = [1_i64; 5];
        let mut output = [0_i64; 15];
        let err = small
            .call(comm)
            .input("input", &input[..])
            .output("output", &mut output[..])
            .run()
            .unwrap_err();
        Ok((
            matches!(err, hcomm::Error::Precondition { .. }),
            err.to_string(),
            output,
        ))
    })
    .unwrap();
    for (rank, (precondition, text, output)) in out.iter().enumerate() {
        assert!(precondition, "rank {rank}: {text}");
        assert!(
            text.contains(
                "`small_all_gather`: length variable `n` = 5 (from buffer `input` of 5 elements) is outside its \
                 range 0..=4 (world = 3)"
            ),
            "rank {rank}: {text}"
        );
        assert_eq!(output, &[0; 15], "rank {rank}: nothing moved");
    }
}

// ------------------------------------------------------------ diagnostics

/// The `comm_schedule! { .. }` invocation of a ui-test, everything else
/// blanked (newlines kept), so lines and columns are those of the file.
fn invocation(source: &str) -> String {
    let start = source.find("comm_schedule! {").expect("a comm_schedule! invocation") + "comm_schedule! {".len();
    let end = source[start..]
        .find("\n}\n")
        .expect("the invocation ends at a line `}`")
        + start;
    source
        .char_indices()
        .map(|(i, c)| if c == '\n' || (start..end).contains(&i) { c } else { ' ' })
        .collect()
}

/// The errors of a `.stderr` snapshot: `(line, column, text)`.
fn snapshot(stderr: &str) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    let mut text: Option<String> = None;
    for line in stderr.lines() {
        if let Some(rest) = line.strip_prefix("error: ") {
            text = Some(rest.to_owned());
        } else if let (Some(t), Some(rest)) = (&mut text, line.strip_prefix("       ")) {
            t.push('\n');
            t.push_str(rest);
        } else if let Some(place) = line.trim_start().strip_prefix("--> ") {
            let mut parts = place.rsplitn(3, ':');
            let column = parts.next().and_then(|c| c.parse().ok()).expect("a column");
            let line = parts.next().and_then(|l| l.parse().ok()).expect("a line");
            if let Some(t) = text.take() {
                out.push((line, column, t));
            }
        }
    }
    out
}

fn ui_cases() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../ui-tests/fail");
    let mut files = Vec::new();
    for dir in std::fs::read_dir(&root).expect("the ui-tests are readable") {
        let dir = dir.expect("an entry").path();
        for f in std::fs::read_dir(&dir)
            .expect("a category")
            .map(|e| e.expect("an entry").path())
        {
            if f.extension().is_some_and(|e| e == "rs") {
                files.push(f);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn a_wrong_schedule_from_text_gets_the_macros_diagnostics_at_the_same_places() {
    let cases = ui_cases();
    assert!(cases.len() > 40, "{} ui cases", cases.len());
    for case in &cases {
        let source = std::fs::read_to_string(case).expect("a readable case");
        let stderr = std::fs::read_to_string(case.with_extension("stderr")).expect("a snapshot");
        let expected = snapshot(&stderr);
        let got: Vec<(usize, usize, String)> = match parse_schedules(&invocation(&source)) {
            Ok(_) => Vec::new(),
            Err(diags) => diags.iter().map(|d| (d.line, d.column, d.text())).collect(),
        };
        assert_eq!(got, expected, "{}", case.display());
    }
}

#[test]
fn a_diagnostic_names_its_kind_world_and_place() {
    let text = "#[verify(world in 2..=8)]\npub fn f(a: &[T; n], b: &mut [T; n]) {\n    send a to (rank + 1) % world;\n    recv b from (rank - 1) % world;\n}\n";
    let diags = parse_schedules(text).unwrap_err();
    let first: &TextDiagnostic = &diags[0];
    assert_eq!(first.kind, DiagKind::Deadlock);
    assert_eq!(first.world, Some(2));
    assert_eq!((first.line, first.column), (3, 5));
    assert!(
        first
            .message
            .starts_with("with world = 2, rank 0 blocks in `send` to rank 1"),
        "{first}"
    );
    assert!(
        first
            .hint
            .as_deref()
            .is_some_and(|h| h.starts_with("post both directions at once")),
        "{first}"
    );
    assert!(
        first.to_string().starts_with("3:5: deadlock: with world = 2"),
        "{first}"
    );
}

#[test]
fn wait_all_ceil_log2_and_shift_schedules_from_a_file_move_the_right_blocks() {
    let direct = named("direct_all_gather");
    let bruck = named("bruck_all_gather");
    let barrier = named("dissemination_barrier");
    let shift = named("ring_shift");
    // 7 lies outside both verify sets: checked at the first call
    for world in [1, 2, 3, 5, 7] {
        let n = 2;
        let out = hcomm::host::run(world, |comm| {
            let input: Vec<i64> = (0..n).map(|i| value(comm.rank(), i)).collect();
            let mut a = vec![0_i64; n * world];
            let mut b = vec![0_i64; n * world];
            direct
                .call(comm)
                .input("input", &input[..])
                .output("output", &mut a[..])
                .run()?;
            barrier.call::<u8>(comm).run()?;
            bruck
                .call(comm)
                .input("input", &input[..])
                .output("output", &mut b[..])
                .run()?;
            let mut c = vec![0_i64; n];
            shift
                .call(comm)
                .input("input", &input[..])
                .output("output", &mut c[..])
                .run()?;
            Ok((a, b, c))
        })
        .unwrap();
        let expected: Vec<i64> = (0..world).flat_map(|r| (0..n).map(move |i| value(r, i))).collect();
        for (rank, (a, b, c)) in out.iter().enumerate() {
            assert_eq!(a, &expected, "direct, world {world}, rank {rank}");
            assert_eq!(b, &expected, "bruck, world {world}, rank {rank}");
            let left = (rank + world - 1) % world;
            let shifted: Vec<i64> = (0..n).map(|i| value(left, i)).collect();
            assert_eq!(c, &shifted, "shift, world {world}, rank {rank}");
        }
    }
}

#[test]
fn parsing_the_same_text_twice_keeps_one_schedule() {
    let a = named("ring_all_gather");
    let b = named("ring_all_gather");
    assert!(std::ptr::eq(a.ir(), b.ir()));
    assert!(a.source().contains("pub fn ring_all_gather"));
}

#[test]
fn subgroups_and_device_backends_run_text_schedules() {
    let two_level = named("two_level_all_gather");
    let ring = named("ring_all_gather");
    let expected = |w: usize| -> Vec<i32> { (0..w).flat_map(|q| (0..3).map(move |i| (q * 10 + i) as i32)).collect() };
    let run = |comm: &hcomm::Comm, schedule: TextSchedule, local: Option<usize>| -> hcomm::Result<Vec<i32>> {
        let input: Vec<i32> = (0..3).map(|i| (comm.rank() * 10 + i) as i32).collect();
        let mut output = vec![0_i32; 3 * comm.world()];
        let call = schedule
            .call(comm)
            .input("input", &input[..])
            .output("output", &mut output[..]);
        match local {
            Some(local) => call.scalar("local", local).run()?,
            None => call.run()?,
        }
        Ok(output)
    };
    for (w, local) in [(4, 2), (6, 3), (6, 2)] {
        let out = hcomm::host::run(w, |comm| run(comm, two_level, Some(local))).unwrap();
        assert!(
            out.iter().all(|o| *o == expected(w)),
            "host, world {w}, local {local}: {out:?}"
        );
    }
    // `#[requires]` is checked before any communication
    let err = hcomm::host::run(3, |comm| run(comm, two_level, Some(2))).unwrap_err();
    assert!(err.to_string().contains("requires `world % local == 0`"), "{err}");
    let path = hcomm_hccl_standin::cdylib_path().expect("the stand-in cdylib is built next to the tests");
    let hccl = hcomm::hccl::Hccl::load_from(path).unwrap();
    let options = hcomm::CommOptions::default().with_timeout(std::time::Duration::from_secs(20));
    for w in [2, 4, 5] {
        let out = hccl.run(w, &options, |comm| run(comm, ring, None)).unwrap();
        assert!(
            out.iter().all(|o| *o == expected(w)),
            "hccl stand-in, world {w}: {out:?}"
        );
    }
    let out = hccl.run(4, &options, |comm| run(comm, two_level, Some(2))).unwrap();
    assert!(
        out.iter().all(|o| *o == expected(4)),
        "hccl stand-in two-level: {out:?}"
    );
}

/// Where `libnccl.so.2`, the CUDA runtime and a GPU exist: the ring and the
/// reduce-scatter from text on NCCL (one rank per GPU, at most 4), through
/// the device plan; elsewhere it says why it was skipped and passes.
#[test]
fn text_schedules_run_on_nccl_where_present() {
    if !hcomm_sys::nvidia_available() {
        eprintln!("skipped: libnccl.so.2 or libcudart.so not found");
        return;
    }
    let nccl = hcomm::nccl::Nccl::load().unwrap();
    let world = nccl.device_count().unwrap().min(4);
    if world == 0 {
        eprintln!("skipped: no CUDA device");
        return;
    }
    let (ring, rs) = (named("ring_all_gather"), named("ring_reduce_scatter"));
    let options = hcomm::CommOptions::default().with_timeout(std::time::Duration::from_secs(60));
    let n = 1000;
    let out = nccl
        .run(world, &options, |comm| {
            assert_eq!(comm.backend_name(), "nccl");
            let input: Vec<i64> = (0..n).map(|i| value(comm.rank(), i)).collect();
            let mut gathered = vec![0_i64; n * world];
            ring.call(comm)
                .input("input", &input[..])
                .output("output", &mut gathered[..])
                .run()?;
            let mut blocks: Vec<i64> = (0..n * world).map(|i| value(comm.rank(), i)).collect();
            let mut reduced = vec![0_i64; n];
            rs.call(comm)
                .output("input", &mut blocks[..])
                .output("output", &mut reduced[..])
                .op("op", ReduceOp::Max)
                .run()?;
            Ok((gathered, reduced))
        })
        .unwrap();
    let gathered: Vec<i64> = (0..world).flat_map(|r| (0..n).map(move |i| value(r, i))).collect();
    for (rank, (g, r)) in out.iter().enumerate() {
        assert_eq!(g, &gathered, "rank {rank}");
        let want: Vec<i64> = (0..n)
            .map(|i| (0..world).map(|q| value(q, rank * n + i)).max().unwrap_or_default())
            .collect();
        assert_eq!(r, &want, "rank {rank}");
    }
    eprintln!("ran on nccl with {world} rank(s)");
}

#[test]
fn in_place_all_gather_and_halo_schedules_from_a_file_end_with_every_block() {
    let ring = named("ring_all_gather_in_place");
    let halo = named("halo_exchange");
    // 8 and 9 lie outside both verify sets: checked at the first call
    for world in [1, 2, 3, 8, 9] {
        let n = 3;
        let out = hcomm::host::run(world, |comm| {
            let r = comm.rank();
            // only a rank's own block is its contribution; the rest is overwritten
            let mut buf = vec![-100_i64; n * world];
            for i in 0..n {
                buf[r * n + i] = value(r, r * n + i);
            }
            ring.call(comm).output("buf", &mut buf[..]).run()?;
            let edges: Vec<i64> = (0..2 * n).map(|i| value(r, i)).collect();
            let mut h = vec![0_i64; 2 * n];
            halo.call(comm)
                .input("edges", &edges[..])
                .output("halo", &mut h[..])
                .run()?;
            Ok((buf, h))
        })
        .unwrap();
        let gathered: Vec<i64> = (0..n * world).map(|i| value(i / n, i)).collect();
        for (rank, (buf, h)) in out.iter().enumerate() {
            assert_eq!(buf, &gathered, "all-gather in place, world {world}, rank {rank}");
            let (left, right) = ((rank + world - 1) % world, (rank + 1) % world);
            let want: Vec<i64> = (n..2 * n)
                .map(|i| value(left, i))
                .chain((0..n).map(|i| value(right, i)))
                .collect();
            assert_eq!(h, &want, "halo, world {world}, rank {rank}");
        }
    }
}
