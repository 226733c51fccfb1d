//! The candle custom ops on 1 to 4 threads: forward results and the
//! gradients `backward()` produces through the paired operations, exact
//! against serial references (small integers, exact in f32).

use candle_core::{Device, Tensor, Var};

fn c(e: candle_core::Error) -> hcomm::Error {
    hcomm_candle::to_hcomm(e)
}

/// What rank `r` holds at element `i`.
fn val(r: usize, i: usize) -> f32 {
    (r * 100 + i) as f32
}

fn tensor(r: usize, rows: usize, cols: usize) -> candle_core::Result<Tensor> {
    Tensor::from_vec(
        (0..rows * cols).map(|i| val(r, i)).collect::<Vec<_>>(),
        (rows, cols),
        &Device::Cpu,
    )
}

/// Weights of the loss `sum(y * weights)`, so the gradient of `y` is them.
fn weights(rows: usize, cols: usize) -> candle_core::Result<Tensor> {
    Tensor::from_vec(
        (0..rows * cols).map(|i| (i % 7) as f32 - 3.0).collect::<Vec<_>>(),
        (rows, cols),
        &Device::Cpu,
    )
}

#[test]
fn forwards_and_backwards_match_serial_references() {
    for w in 1..=4 {
        hcomm::host::run(w, |comm| {
            let r = comm.rank();
            let (rows, cols) = (2 * w, 2 * w);
            let x = Var::from_tensor(&tensor(r, rows, cols).map_err(c)?).map_err(c)?;
            let sum_of = |f: &dyn Fn(usize) -> f32| (0..w).map(f).sum::<f32>();

            // copy_to: identity forward; backward sums the gradient.
            let y = hcomm_candle::copy_to_tensor_model_parallel_region(comm, x.as_tensor()).map_err(c)?;
            assert_eq!(
                y.flatten_all().and_then(|t| t.to_vec1::<f32>()).map_err(c)?,
                (0..rows * cols).map(|i| val(r, i)).collect::<Vec<_>>()
            );
            let g = weights(rows, cols).map_err(c)?;
            let loss = (&y * &g).and_then(|t| t.sum_all()).map_err(c)?;
            let grads = loss.backward().map_err(c)?;
            let gx = grads
                .get(x.as_tensor())
                .unwrap()
                .flatten_all()
                .and_then(|t| t.to_vec1::<f32>())
                .map_err(c)?;
            let gw = g.flatten_all().and_then(|t| t.to_vec1::<f32>()).map_err(c)?;
            assert_eq!(
                gx,
                gw.iter().map(|v| v * w as f32).collect::<Vec<_>>(),
                "copy_to backward on {w} ranks"
            );

            // reduce_from: sum forward; backward passes the gradient through.
            let y = hcomm_candle::reduce_from_tensor_model_parallel_region(comm, x.as_tensor()).map_err(c)?;
            let want: Vec<f32> = (0..rows * cols).map(|i| sum_of(&|q| val(q, i))).collect();
            assert_eq!(
                y.flatten_all().and_then(|t| t.to_vec1::<f32>()).map_err(c)?,
                want,
                "reduce_from on {w} ranks"
            );
            let loss = (&y * &g).and_then(|t| t.sum_all()).map_err(c)?;
            let gx = loss
                .backward()
                .map_err(c)?
                .get(x.as_tensor())
                .unwrap()
                .flatten_all()
                .and_then(|t| t.to_vec1::<f32>())
                .map_err(c)?;
            assert_eq!(gx, gw, "reduce_from backward on {w} ranks");

            // gather_from (last dim): backward keeps this rank's columns.
            let y = hcomm_candle::gather_from_tensor_model_parallel_region(comm, x.as_tensor()).map_err(c)?;
            assert_eq!(y.dims(), &[rows, cols * w]);
            let gw_wide = weights(rows, cols * w).map_err(c)?;
            let loss = (&y * &gw_wide).and_then(|t| t.sum_all()).map_err(c)?;
            let gx = loss
                .backward()
                .map_err(c)?
                .get(x.as_tensor())
                .unwrap()
                .flatten_all()
                .and_then(|t| t.to_vec1::<f32>())
                .map_err(c)?;
            let wide = gw_wide.to_vec2::<f32>().map_err(c)?;
            let want: Vec<f32> = wide
                .iter()
                .flat_map(|row| row[r * cols..(r + 1) * cols].to_vec())
                .collect();
            assert_eq!(gx, want, "gather_from backward on {w} ranks");

            // reduce_scatter to the sequence region: backward all-gathers.
            let y = hcomm_candle::reduce_scatter_to_sequence_parallel_region(comm, x.as_tensor()).map_err(c)?;
            let part = rows / w;
            let want: Vec<f32> = (r * part * cols..(r + 1) * part * cols)
                .map(|i| sum_of(&|q| val(q, i)))
                .collect();
            assert_eq!(
                y.flatten_all().and_then(|t| t.to_vec1::<f32>()).map_err(c)?,
                want,
                "reduce_scatter forward on {w} ranks"
            );
            let gs = weights(part, cols).map_err(c)?;
            let loss = (&y * &gs).and_then(|t| t.sum_all()).map_err(c)?;
            let gx = loss
                .backward()
                .map_err(c)?
                .get(x.as_tensor())
                .unwrap()
                .flatten_all()
                .and_then(|t| t.to_vec1::<f32>())
                .map_err(c)?;
            let one = gs.flatten_all().and_then(|t| t.to_vec1::<f32>()).map_err(c)?;
            assert_eq!(gx, one.repeat(w), "reduce_scatter backward on {w} ranks");

            // In place, with the mean.
            let m = tensor(r, 1, 3).map_err(c)?;
            hcomm_candle::all_reduce_in_place(comm, &m, hcomm::ReduceOp::Avg).map_err(c)?;
            let want: Vec<f32> = (0..3).map(|i| sum_of(&|q| val(q, i)) / w as f32).collect();
            assert_eq!(
                m.flatten_all().and_then(|t| t.to_vec1::<f32>()).map_err(c)?,
                want,
                "avg on {w} ranks"
            );
            Ok(())
        })
        .unwrap();
    }
}

#[test]
fn a_transposed_tensor_is_refused_in_place_and_named() {
    hcomm::host::run(2, |comm| {
        let t = tensor(comm.rank(), 2, 3).map_err(c)?.t().map_err(c)?;
        let e = hcomm_candle::all_reduce_in_place(comm, &t, hcomm::ReduceOp::Sum)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is not contiguous") && e.contains("[3, 2]"), "{e}");
        Ok(())
    })
    .unwrap();
}
