//! Fits for the scaling tables: the slope of log(y) against log(x) (the
//! exponent of a power law) and the least-squares line y = a + b x.

/// The least-squares line through `points`: `(intercept, slope)`, or `None`
/// for fewer than two distinct x.
pub fn linear_fit(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    (points.len() >= 2 && sxx > 0.0).then(|| (my - sxy / sxx * mx, sxy / sxx))
}

/// The exponent `k` of the power law `y ~ x^k` that fits `points` best (the
/// slope of log y against log x); `None` for fewer than two distinct
/// positive x.
pub fn loglog_slope(points: &[(f64, f64)]) -> Option<f64> {
    let logs: Vec<(f64, f64)> = points
        .iter()
        .filter(|p| p.0 > 0.0 && p.1 > 0.0)
        .map(|p| (p.0.ln(), p.1.ln()))
        .collect();
    linear_fit(&logs).map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fits_recover_exact_laws() {
        let (a, b) = linear_fit(&[(1.0, 5.0), (2.0, 7.0), (4.0, 11.0)]).unwrap();
        assert!((a - 3.0).abs() < 1e-9 && (b - 2.0).abs() < 1e-9);
        let quadratic: Vec<_> = [8.0, 16.0, 64.0].iter().map(|&x: &f64| (x, 0.5 * x * x)).collect();
        assert!((loglog_slope(&quadratic).unwrap() - 2.0).abs() < 1e-9);
        assert_eq!(linear_fit(&[(1.0, 2.0)]), None);
        assert_eq!(loglog_slope(&[(1.0, 2.0), (1.0, 3.0)]), None);
    }
}
