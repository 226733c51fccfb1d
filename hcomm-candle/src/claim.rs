//! What each rank claims before a collective on device tensors (its own
//! checks passed, its element type, its shape), as the words one small
//! all-gather exchanges, and the verdict on every rank's claims. The
//! exchange itself is the CUDA halves'; the verdict is checked here on
//! plain rows.

use hcomm::DataType;

/// Dimensions compared one by one; a tensor of more is refused (after the
/// exchange, so every rank fails alike or names the difference).
pub(crate) const DIMS: usize = 16;

/// The number of words in a claim.
pub(crate) const WORDS: usize = 3 + DIMS;

/// The words one rank sends: whether its own checks passed (1 or 0), its
/// element type (its index in [`DataType::ALL`]), its number of
/// dimensions, then its dimensions (the first [`DIMS`], zero-padded).
pub(crate) fn words(ok: bool, dtype: DataType, dims: &[usize]) -> [i64; WORDS] {
    let mut w = [0i64; WORDS];
    w[0] = i64::from(ok);
    w[1] = DataType::ALL.iter().position(|&d| d == dtype).map_or(-1, |i| i as i64);
    w[2] = dims.len() as i64;
    for (slot, &d) in w[3..].iter_mut().zip(dims) {
        *slot = d as i64;
    }
    w
}

/// A rank's words as text: `f32 [4, 8]`.
fn shown(w: &[i64]) -> String {
    let dtype = usize::try_from(w[1])
        .ok()
        .and_then(|i| DataType::ALL.get(i))
        .map_or("an unknown type", |d| d.name());
    let n = usize::try_from(w[2]).unwrap_or(0);
    let dims = &w[3..3 + n.min(DIMS)];
    format!("{dtype} {dims:?}{}", if n > DIMS { " (and more)" } else { "" })
}

/// The verdict on every rank's words (`all`, in rank order) for a rank
/// whose own checks passed (one whose checks failed reports its own error
/// instead): the first rank whose checks failed, else the first rank whose
/// claim differs from rank 0's, else a tensor of more than [`DIMS`]
/// dimensions; `what` names the call.
pub(crate) fn verdict(what: &str, all: &[i64]) -> Result<(), String> {
    let rows: Vec<&[i64]> = all.chunks(WORDS).collect();
    if let Some(failed) = rows.iter().position(|r| r[0] != 1) {
        return Err(format!(
            "{what}: rank {failed} of the group refused its tensor (its own error says why); this rank's was fine"
        ));
    }
    if let Some(other) = rows.iter().position(|r| *r != rows[0]) {
        return Err(format!(
            "{what}: tensors disagree across the group: rank 0 passes {}, rank {other} passes {}",
            shown(rows[0]),
            shown(rows[other])
        ));
    }
    match rows.first() {
        Some(r) if usize::try_from(r[2]).is_ok_and(|n| n > DIMS) => Err(format!(
            "{what}: a tensor of {} dimensions; hcomm_candle takes at most {DIMS} on a device. hint: reshape it first",
            r[2]
        )),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use hcomm::DataType;

    use super::{verdict, words};

    fn rows(claims: &[(bool, DataType, &[usize])]) -> Vec<i64> {
        claims.iter().flat_map(|&(ok, t, dims)| words(ok, t, dims)).collect()
    }

    #[test]
    fn agreeing_claims_pass_and_each_difference_is_named() {
        let x: &[usize] = &[4, 6];
        assert_eq!(verdict("op", &rows(&[(true, DataType::F32, x); 3])), Ok(()));
        assert_eq!(
            verdict(
                "op",
                &rows(&[
                    (true, DataType::F32, x),
                    (true, DataType::F32, &[4, 7]),
                    (true, DataType::F32, x)
                ])
            ),
            Err("op: tensors disagree across the group: rank 0 passes f32 [4, 6], rank 1 passes f32 [4, 7]".into())
        );
        assert_eq!(
            verdict(
                "op",
                &rows(&[
                    (true, DataType::F32, x),
                    (true, DataType::F32, x),
                    (true, DataType::Bf16, x)
                ])
            ),
            Err("op: tensors disagree across the group: rank 0 passes f32 [4, 6], rank 2 passes bf16 [4, 6]".into())
        );
        assert_eq!(
            verdict(
                "op",
                &rows(&[(true, DataType::F32, x), (true, DataType::F32, &[4, 6, 1])])
            ),
            Err("op: tensors disagree across the group: rank 0 passes f32 [4, 6], rank 1 passes f32 [4, 6, 1]".into())
        );
        assert_eq!(
            verdict("op", &rows(&[(true, DataType::F32, x), (false, DataType::F32, x)])),
            Err("op: rank 1 of the group refused its tensor (its own error says why); this rank's was fine".into())
        );
    }

    #[test]
    fn more_dimensions_than_the_claim_holds_are_shown_and_refused() {
        let many: Vec<usize> = vec![1; 17];
        let mut other = many.clone();
        other[16] = 2;
        assert_eq!(
            verdict("op", &rows(&[(true, DataType::F64, many.as_slice()); 2])),
            Err(
                "op: a tensor of 17 dimensions; hcomm_candle takes at most 16 on a device. hint: reshape it first"
                    .into()
            )
        );
        assert_eq!(
            verdict(
                "op",
                &rows(&[(true, DataType::F64, &[2; 16]), (true, DataType::F64, many.as_slice())])
            ),
            Err(format!(
                "op: tensors disagree across the group: rank 0 passes f64 {:?}, rank 1 passes f64 {:?} (and more)",
                [2; 16], [1; 16]
            ))
        );
        // Past the first 16 dimensions, two tensors of as many dimensions are
        // both refused (their claims do not tell them apart).
        assert!(verdict(
            "op",
            &rows(&[
                (true, DataType::F64, many.as_slice()),
                (true, DataType::F64, other.as_slice())
            ])
        )
        .is_err());
    }
}
