//! Tensor- and expert-parallel cases shared by the host tests and the
//! tests on the HCCL stand-in: each runs on one rank and asserts the exact
//! data against a serial reference computed on that rank.
#![allow(dead_code, unreachable_pub)]

use hcomm::ndarray::{Array, Array2, ArrayView2, Axis, Dimension, IxDyn, ShapeBuilder};
use hcomm::{moe, tp, Comm, Error};

/// What rank `r` holds at index `idx` (small integers, exact in f64).
fn val(r: usize, idx: &[usize]) -> f64 {
    let mut v = r as f64 * 1000.0;
    for (i, &x) in idx.iter().enumerate() {
        v += (x as f64 + 1.0) * 10f64.powi(i as i32);
    }
    v
}

fn local(r: usize, shape: &[usize]) -> Array<f64, IxDyn> {
    Array::from_shape_fn(IxDyn(shape), |idx| val(r, idx.slice()))
}

fn with(idx: &[usize], d: usize, x: usize) -> Vec<usize> {
    let mut v = idx.to_vec();
    v[d] = x;
    v
}

fn expect_precondition(e: &Error, words: &[&str]) {
    match e {
        Error::Precondition { message } => {
            for w in words {
                assert!(message.contains(w), "`{message}` should mention `{w}`");
            }
        }
        other => panic!("expected a precondition error, got {other}"),
    }
}

/// A shape disagreement: on a backend that compares collective headers
/// (host), the header's mismatch (or, on a rank whose own arguments failed
/// a check first, that precondition and the mismatch) naming both shapes;
/// on the device backends, the shape exchange's precondition naming the
/// dimension.
fn expect_shape_error(comm: &Comm, e: &Error, device: &[&str], host: &[&str]) {
    if comm.backend_name() != "host" {
        return expect_precondition(e, device);
    }
    let message = match e {
        Error::Mismatch { message } | Error::Precondition { message } => message,
        other => panic!("expected a shape mismatch, got {other:?}"),
    };
    assert!(message.contains("array shape"), "{message}");
    for w in host {
        assert!(message.contains(w), "`{w}` missing from: {message}");
    }
}

/// Every tensor-parallel op on 1-, 2- and 3-dimensional arrays along every
/// dimension (positive and negative), against serial references.
pub fn tensor_parallel(comm: &Comm) -> hcomm::Result<()> {
    let (r, w) = (comm.rank(), comm.world());
    for shape in [vec![3], vec![2, 3], vec![2, 3, 2]] {
        let n = shape.len();
        // all_reduce
        let mut x = local(r, &shape);
        tp::all_reduce(comm, x.view_mut())?;
        let want = Array::from_shape_fn(IxDyn(&shape), |i| (0..w).map(|q| val(q, i.slice())).sum::<f64>());
        assert_eq!(x, want, "all_reduce of shape {shape:?}");
        for d in 0..n {
            for dim in [d as isize, d as isize - n as isize] {
                // all_gather: concatenation along d in rank order.
                let got = tp::all_gather(comm, local(r, &shape).view(), dim)?;
                let mut big = shape.clone();
                big[d] *= w;
                let len = shape[d];
                let want = Array::from_shape_fn(IxDyn(&big), |i| {
                    let i = i.slice();
                    val(i[d] / len, &with(i, d, i[d] % len))
                });
                assert_eq!(got, want, "all_gather of {shape:?} along {dim}");
                // reduce_scatter and split of an array w times longer along d.
                let mut full = shape.clone();
                full[d] = 2 * w;
                let got = tp::reduce_scatter(comm, local(r, &full).view(), dim)?;
                let mut part = full.clone();
                part[d] = 2;
                let want = Array::from_shape_fn(IxDyn(&part), |i| {
                    let i = i.slice();
                    (0..w).map(|q| val(q, &with(i, d, r * 2 + i[d]))).sum::<f64>()
                });
                assert_eq!(got, want, "reduce_scatter of {full:?} along {dim}");
                let mine = local(r, &full);
                let got = tp::split(comm, mine.view(), dim)?;
                let want = Array::from_shape_fn(IxDyn(&part), |i| {
                    let i = i.slice();
                    val(r, &with(i, d, r * 2 + i[d]))
                });
                assert_eq!(got, want, "split of {full:?} along {dim}");
            }
        }
    }
    // Static dimensions and a transposed (column-major) input.
    let x = Array2::from_shape_fn((3, 2).f(), |(i, j)| val(r, &[i, j]));
    let got = tp::all_gather(comm, x.view(), 1)?;
    let want = Array2::from_shape_fn((3, 2 * w), |(i, j)| val(j / 2, &[i, j % 2]));
    assert_eq!(got, want, "all_gather of a column-major array");
    let tall = Array2::from_shape_fn((2 * w, 3).f(), |(i, j)| val(r, &[i, j]));
    let got = tp::reduce_scatter(comm, tall.view(), 0)?;
    let want = Array2::from_shape_fn((2, 3), |(i, j)| (0..w).map(|q| val(q, &[2 * r + i, j])).sum::<f64>());
    assert_eq!(got, want, "reduce_scatter of a column-major array");
    let mut t = Array2::from_shape_fn((2, 3), |(i, j)| val(r, &[i, j]));
    tp::all_reduce(comm, t.view_mut().reversed_axes())?;
    let want = Array2::from_shape_fn((2, 3), |(i, j)| (0..w).map(|q| val(q, &[i, j])).sum::<f64>());
    assert_eq!(t, want, "all_reduce of a transposed view");
    let err = comm
        .all_reduce_in_place(&mut x.clone(), hcomm::ReduceOp::Sum)
        .unwrap_err();
    expect_precondition(&err, &["[3, 2]", "strides", "standard"]);

    // Errors on every rank, naming the dimension.
    let x = local(r, &[2, 4]);
    expect_precondition(
        &tp::all_gather(comm, x.view(), 2).unwrap_err(),
        &["dim 2", "2 dimensions"],
    );
    expect_precondition(&tp::all_gather(comm, x.view(), -3).unwrap_err(), &["dim -3"]);
    expect_precondition(&tp::split(comm, x.view(), -3).unwrap_err(), &["dim -3"]);
    if w > 1 {
        let odd = local(r, &[2, 2 * w + 1]);
        expect_precondition(
            &tp::reduce_scatter(comm, odd.view(), -1).unwrap_err(),
            &["dimension 1", &format!("length {}", 2 * w + 1)],
        );
        expect_precondition(&tp::split(comm, odd.view(), 1).unwrap_err(), &["dimension 1"]);
        // A shape disagreement is a collective mismatch, which ends the
        // group it happens on (as every mismatch does): each case runs on
        // a group of its own.
        let all: Vec<usize> = (0..w).collect();
        let fresh = |case: &str| comm.subgroup(&format!("tp-shape-case-{case}"), &all);
        let uneven = local(r, &[2, if r == w - 1 { 5 } else { 4 }]);
        let e = tp::all_gather(&fresh("gather")?, uneven.view(), 0).unwrap_err();
        expect_shape_error(
            comm,
            &e,
            &["dimension 1 differs", "rank 0 has 4", &format!("rank {} has 5", w - 1)],
            &["[2, 4]", "[2, 5]"],
        );
        let e = tp::all_reduce(&fresh("reduce")?, uneven.clone().view_mut()).unwrap_err();
        expect_shape_error(comm, &e, &["dimension 1 differs"], &["[2, 4]", "[2, 5]"]);
        // Equal element counts, different shapes: still an error.
        let turned = local(r, if r == w - 1 { &[4, 2] } else { &[2, 4] });
        let e = tp::all_reduce(&fresh("turned")?, &mut turned.clone()).unwrap_err();
        expect_shape_error(comm, &e, &["dimension 0 differs"], &["[2, 4]", "[4, 2]"]);
        let ndims = if r == 0 { local(r, &[8]) } else { local(r, &[2, 4]) };
        let e = tp::reduce_scatter(&fresh("ndims")?, ndims.view(), 0).unwrap_err();
        expect_shape_error(comm, &e, &["number of dimensions"], &["[8]", "[2, 4]"]);
    }
    // The group still works after the errors.
    let got = tp::all_gather(comm, local(r, &[1]).view(), 0)?;
    assert_eq!(got.len(), w);
    Ok(())
}

/// One expert: `y = (x * scale + shift)` row-wise, with `scale` and
/// `shift` depending on the expert id.
fn expert(e: usize, row: &[f64]) -> Vec<f64> {
    let scale = (e + 2) as f64;
    row.iter()
        .enumerate()
        .map(|(h, &x)| x * scale + (e * 10 + h) as f64)
        .collect()
}

/// Deterministic routing: `k` distinct-or-not expert ids per token, with
/// loads skewed towards low expert ids and some experts never chosen.
fn routing(r: usize, t: usize, k: usize, experts: usize, skip: usize) -> Array2<usize> {
    Array2::from_shape_fn((t, k), |(i, j)| {
        let raw = (i * 7 + j * 3 + r * 5) % (experts * 2);
        let e = if raw >= experts { raw % 3 % experts } else { raw };
        // With three experts or more, never route to `skip`: that expert
        // stays empty on every rank.
        if e == skip && experts >= 3 {
            (e + 1) % experts
        } else {
            e
        }
    })
}

/// Weights summing to one exactly (powers of two).
fn weights(t: usize, k: usize) -> Array2<f32> {
    Array2::from_shape_fn((t, k), |(i, j)| {
        let first = if i % 2 == 0 { 0.75 } else { 0.5 };
        match (k, j) {
            (1, _) => 1.0,
            (2, 0) => first,
            (2, _) => 1.0 - first,
            _ => 1.0 / k as f32,
        }
    })
}

fn tokens(r: usize, t: usize, h: usize) -> Array2<f64> {
    Array2::from_shape_fn((t, h), |(i, c)| (r * 100 + i * 4 + c) as f64 * 0.5)
}

/// Expert dispatch → experts → combine against a dense reference.
pub fn expert_parallel(comm: &Comm) -> hcomm::Result<()> {
    let (r, w) = (comm.rank(), comm.world());
    let h = 3;
    for experts_per_rank in [1, 2] {
        let experts = experts_per_rank * w;
        for k in [1, 2, 8] {
            // Uneven loads: rank r has 2 + 3r tokens (rank 0 of a big world
            // may have few), one rank has none at all.
            let t = if w > 1 && r == 1 { 0 } else { 2 + 3 * r };
            let x = tokens(r, t, h);
            let ids = routing(r, t, k, experts, experts - 1);
            let wts = weights(t, k);
            let d = moe::dispatch(comm, x.view(), ids.view(), wts.view(), experts)?;
            assert_eq!(d.tokens_per_expert.len(), experts_per_rank);
            assert_eq!(d.tokens_per_expert.iter().sum::<usize>(), d.tokens.nrows());
            check_arrivals(comm, &d, k, experts, h);
            // Identity experts give the input back exactly.
            let out = moe::combine(comm, d.tokens.view(), &d)?;
            assert_eq!(out, x, "identity experts, k = {k}, {experts} experts");
            // Real experts against the dense reference.
            let y = apply_experts(r, experts_per_rank, &d.tokens.view(), &d.tokens_per_expert);
            let out = moe::combine(comm, y.view(), &d)?;
            let want = Array2::from_shape_fn((t, h), |(i, c)| {
                let mut acc = 0.0;
                for j in 0..k {
                    let e = ids[[i, j]];
                    acc += f64::from(wts[[i, j]]) * expert(e, x.row(i).as_slice().unwrap())[c];
                }
                acc
            });
            assert_eq!(out, want, "dense reference, k = {k}, {experts} experts");
        }
    }
    // `k` may differ between ranks.
    let k = 1 + r % 2;
    let x = tokens(r, 3, h);
    let ids = routing(r, 3, k, 2 * w, 0);
    let d = moe::dispatch(comm, x.view(), ids.view(), weights(3, k).view(), 2 * w)?;
    assert_eq!(moe::combine(comm, d.tokens.view(), &d)?, x, "k = {k} on rank {r}");
    // An out-of-range expert id on the last rank fails every rank.
    let x = tokens(r, 4, h);
    let mut ids = routing(r, 4, 2, 2 * w, 0);
    if r == w - 1 {
        ids[[3, 1]] = 2 * w;
    }
    let e = moe::dispatch(comm, x.view(), ids.view(), weights(4, 2).view(), 2 * w).unwrap_err();
    expect_precondition(
        &e,
        &[
            &format!("rank {}", w - 1),
            &format!("expert id {}", 2 * w),
            "token 3",
            "out of range",
        ],
    );
    if w > 1 {
        // A hidden size or expert count that differs on one rank fails every rank.
        let wide = tokens(r, 4, if r == w - 1 { h + 1 } else { h });
        let ids = routing(r, 4, 2, 2 * w, 0);
        let e = moe::dispatch(comm, wide.view(), ids.view(), weights(4, 2).view(), 2 * w).unwrap_err();
        expect_precondition(&e, &["hidden size differs", &format!("rank {} has {}", w - 1, h + 1)]);
        let experts = if r == 0 { 4 * w } else { 2 * w };
        let e = moe::dispatch(comm, x.view(), ids.view(), weights(4, 2).view(), experts).unwrap_err();
        expect_precondition(&e, &["number of experts differs"]);
    }
    // The group still works afterwards.
    let ids = routing(r, 4, 2, 2 * w, 0);
    let d = moe::dispatch(comm, x.view(), ids.view(), weights(4, 2).view(), 2 * w)?;
    assert_eq!(moe::combine(comm, d.tokens.view(), &d)?, x);
    Ok(())
}

/// Every row that arrived is a token some rank routed to that expert: the
/// count per expert matches the global routing.
fn check_arrivals(comm: &Comm, d: &moe::Dispatch<f64>, k: usize, experts: usize, h: usize) {
    let (r, w) = (comm.rank(), comm.world());
    let local = experts / w;
    let mut at = 0;
    for (e_local, &n) in d.tokens_per_expert.iter().enumerate() {
        let e = r * local + e_local;
        let mut want = Vec::new();
        for src in 0..w {
            let t = if w > 1 && src == 1 { 0 } else { 2 + 3 * src };
            let ids = routing(src, t, k, experts, experts - 1);
            let x = tokens(src, t, h);
            for ((i, _), &id) in ids.indexed_iter() {
                if id == e {
                    want.push(x.row(i).to_owned());
                }
            }
        }
        assert_eq!(n, want.len(), "rows for expert {e}");
        for (row, want) in d.tokens.axis_iter(Axis(0)).skip(at).take(n).zip(&want) {
            assert_eq!(row, want.view(), "row for expert {e}");
        }
        at += n;
    }
}

fn apply_experts(r: usize, local: usize, x: &ArrayView2<'_, f64>, per_expert: &[usize]) -> Array2<f64> {
    let mut y = Array2::zeros(x.dim());
    let mut at = 0;
    for (e_local, &n) in per_expert.iter().enumerate() {
        for i in at..at + n {
            let out = expert(r * local + e_local, x.row(i).as_slice().unwrap());
            y.row_mut(i).assign(&hcomm::ndarray::ArrayView1::from(&out[..]));
        }
        at += n;
    }
    y
}

/// `all_gatherv` with uneven and empty blocks, and counts that disagree.
pub fn all_gatherv(comm: &Comm) -> hcomm::Result<()> {
    let (r, w) = (comm.rank(), comm.world());
    let counts: Vec<usize> = (0..w).map(|q| (q * 3) % 4).collect();
    let mine: Vec<i32> = (0..counts[r]).map(|i| (r * 10 + i) as i32).collect();
    let mut all = vec![0i32; counts.iter().sum()];
    comm.all_gatherv(&mine, &mut all, &counts)?;
    let want: Vec<i32> = (0..w)
        .flat_map(|q| (0..counts[q]).map(move |i| (q * 10 + i) as i32))
        .collect();
    assert_eq!(all, want);
    if w > 1 {
        // The last rank believes rank 0 sends one more element than it does.
        let mut wrong = counts.clone();
        if r == w - 1 {
            wrong[0] += 1;
            wrong[r] = mine.len();
        }
        let mut all = vec![0i32; wrong.iter().sum()];
        let e = comm.all_gatherv(&mine, &mut all, &wrong).unwrap_err();
        assert!(matches!(e, Error::Mismatch { .. }), "{e}");
        assert!(e.to_string().contains(&format!("ranks [{}]", w - 1)), "{e}");
    }
    Ok(())
}

/// Gradient buckets all-reduced without blocking while a blocking
/// collective runs, against serial sums.
pub fn nonblocking_buckets(comm: &Comm) -> hcomm::Result<()> {
    let (r, w) = (comm.rank(), comm.world());
    let value = |q: usize, b: usize, i: usize| (q * 100 + b * 10 + i) as f32;
    let lens = [5, 0, 17];
    let mut buckets: Vec<Vec<f32>> = lens
        .iter()
        .enumerate()
        .map(|(b, &n)| (0..n).map(|i| value(r, b, i)).collect())
        .collect();
    let mine = [r as u32; 2];
    let mut all = vec![0u32; 2 * w];
    hcomm::scope(|s| {
        let mut reqs = Vec::new();
        for b in &mut buckets {
            reqs.push(comm.iall_reduce_in_place(s, b, hcomm::ReduceOp::Sum)?);
        }
        reqs.push(comm.iall_gather(s, &mine, &mut all)?);
        comm.barrier()?;
        hcomm::wait_all(reqs)
    })?;
    for (b, got) in buckets.iter().enumerate() {
        let want: Vec<f32> = (0..lens[b]).map(|i| (0..w).map(|q| value(q, b, i)).sum()).collect();
        assert_eq!(*got, want, "bucket {b}");
    }
    let want: Vec<u32> = (0..w as u32).flat_map(|q| [q, q]).collect();
    assert_eq!(all, want);
    Ok(())
}

/// Pipeline transfers over `comm` as the pipeline group: a forward sweep,
/// a backward sweep with the paired calls, then a length mismatch between
/// stages 0 and 1 that both see as an error.
pub fn pipeline_pairs(comm: &Comm) -> hcomm::Result<()> {
    let pipe = hcomm::pp::Pipeline::new(comm);
    let (s, p) = (pipe.stage(), pipe.stages());
    let mut act = vec![0i64; 3];
    let mut grad = vec![0i64; 3];
    if !pipe.is_first_stage() {
        pipe.recv_forward(&mut act)?;
        assert_eq!(act, vec![(s - 1) as i64; 3]);
    }
    if !pipe.is_last_stage() {
        pipe.send_forward_recv_backward(&vec![s as i64; 3], &mut grad)?;
        assert_eq!(grad, vec![-((s + 1) as i64); 3]);
    }
    if !pipe.is_first_stage() {
        pipe.send_backward(&vec![-(s as i64); 3])?;
    }
    if p > 1 {
        let r = match s {
            0 => pipe.send_forward(&[1.0f32; 4]),
            1 => pipe.recv_forward(&mut [0.0f32; 5]),
            _ => Ok(()),
        };
        if s < 2 {
            let e = r.expect_err("a length mismatch fails on both sides");
            assert!(
                matches!(e, Error::Mismatch { .. } | Error::BufferLength { .. }),
                "stage {s}: {e}"
            );
        }
    }
    Ok(())
}

/// Megatron-LM's seven mappings, forward and backward, on a `[2w, 2w]`
/// array, against serial references built from every rank's values.
pub fn megatron_mappings(comm: &Comm) -> hcomm::Result<()> {
    use hcomm::ndarray::{concatenate, Slice};
    use hcomm::tp::Mapping;
    let (r, w) = (comm.rank(), comm.world());
    let shape = [2 * w, 2 * w];
    let mine = local(r, &shape);
    let sum = (0..w).fold(Array::zeros(IxDyn(&shape)), |acc, q| acc + local(q, &shape));
    let slice = |a: &Array<f64, IxDyn>, axis: usize| {
        let part = a.len_of(Axis(axis)) / w;
        a.slice_axis(Axis(axis), Slice::from(r * part..(r + 1) * part))
            .to_owned()
    };
    let concat = |parts: &[Array<f64, IxDyn>], axis: usize| {
        let views: Vec<_> = parts.iter().map(|p| p.view()).collect();
        concatenate(Axis(axis), &views).unwrap()
    };
    let every = |f: &dyn Fn(usize) -> Array<f64, IxDyn>| (0..w).map(f).collect::<Vec<_>>();
    let last = 1;
    let cases: [Case; 7] = [
        // (mapping, forward input, forward reference, backward input, backward reference)
        (
            Mapping::CopyToTensorModelParallelRegion,
            mine.clone(),
            mine.clone(),
            mine.clone(),
            sum.clone(),
        ),
        (
            Mapping::ReduceFromTensorModelParallelRegion,
            mine.clone(),
            sum.clone(),
            mine.clone(),
            mine.clone(),
        ),
        (
            Mapping::ScatterToTensorModelParallelRegion,
            mine.clone(),
            slice(&mine, last),
            slice(&mine, last),
            concat(&every(&|q| slice_of(&local(q, &shape), last, q, w)), last),
        ),
        (
            Mapping::GatherFromTensorModelParallelRegion,
            slice(&mine, last),
            concat(&every(&|q| slice_of(&local(q, &shape), last, q, w)), last),
            mine.clone(),
            slice(&mine, last),
        ),
        (
            Mapping::ScatterToSequenceParallelRegion,
            mine.clone(),
            slice(&mine, 0),
            slice(&mine, 0),
            concat(&every(&|q| slice_of(&local(q, &shape), 0, q, w)), 0),
        ),
        (
            Mapping::GatherFromSequenceParallelRegion {
                tensor_parallel_output_grad: true,
            },
            slice(&mine, 0),
            concat(&every(&|q| slice_of(&local(q, &shape), 0, q, w)), 0),
            mine.clone(),
            slice(&sum, 0),
        ),
        (
            Mapping::ReduceScatterToSequenceParallelRegion,
            mine.clone(),
            slice(&sum, 0),
            slice(&mine, 0),
            concat(&every(&|q| slice_of(&local(q, &shape), 0, q, w)), 0),
        ),
    ];
    for (mapping, x, forward, grad, backward) in cases {
        assert_eq!(
            mapping.forward(comm, x.view())?,
            forward,
            "{mapping} forward on {w} ranks"
        );
        assert_eq!(
            mapping.backward(comm, grad.view())?,
            backward,
            "{mapping} backward on {w} ranks"
        );
    }
    // Megatron's flag off: the backward keeps this rank's slice.
    let no_tp_grad = Mapping::GatherFromSequenceParallelRegion {
        tensor_parallel_output_grad: false,
    };
    assert_eq!(no_tp_grad.backward(comm, mine.view())?, slice(&mine, 0));
    // The named functions are the forwards.
    assert_eq!(tp::reduce_from_tensor_model_parallel_region(comm, mine.view())?, sum);
    assert_eq!(
        tp::gather_from_sequence_parallel_region(comm, slice(&mine, 0).view())?,
        concat(&every(&|q| slice_of(&local(q, &shape), 0, q, w)), 0)
    );
    Ok(())
}

/// A mapping, its forward input and reference, its backward input and
/// reference.
type Case = (
    hcomm::tp::Mapping,
    Array<f64, IxDyn>,
    Array<f64, IxDyn>,
    Array<f64, IxDyn>,
    Array<f64, IxDyn>,
);

/// Slice `q` of `w` equal slices of `a` along `axis`.
fn slice_of(a: &Array<f64, IxDyn>, axis: usize, q: usize, w: usize) -> Array<f64, IxDyn> {
    let part = a.len_of(Axis(axis)) / w;
    a.slice_axis(Axis(axis), hcomm::ndarray::Slice::from(q * part..(q + 1) * part))
        .to_owned()
}

/// The mean over the group, in place, through `tp::all_reduce_with`: floats
/// divide the sum once (round to nearest), integers truncate toward zero.
pub fn averages(comm: &Comm) -> hcomm::Result<()> {
    let (r, w) = (comm.rank(), comm.world());
    let shape = [3, 5];
    let mut x = local(r, &shape);
    tp::all_reduce_with(comm, &mut x, hcomm::ReduceOp::Avg)?;
    let sum = (0..w).fold(Array::zeros(IxDyn(&shape)), |acc, q| acc + local(q, &shape));
    assert_eq!(x, sum.mapv(|s: f64| s / w as f64), "f64 mean on {w} ranks");
    let ints = |q: usize| Array::from_shape_fn(IxDyn(&[7]), |i| (q as i32 * 5 - 7) * (i[0] as i32 + 1));
    let mut y = ints(r);
    tp::all_reduce_with(comm, y.view_mut(), hcomm::ReduceOp::Avg)?;
    let want = (0..w)
        .fold(Array::zeros(IxDyn(&[7])), |acc, q| acc + ints(q))
        .mapv(|s: i32| s / w as i32);
    assert_eq!(y, want, "i32 mean on {w} ranks");
    // A transposed view: the mean lands in the caller's layout.
    let mut t = local(r, &[2, 3]);
    tp::all_reduce_with(comm, t.view_mut().reversed_axes(), hcomm::ReduceOp::Max)?;
    assert_eq!(t, local(w - 1, &[2, 3]), "max on {w} ranks");
    Ok(())
}
