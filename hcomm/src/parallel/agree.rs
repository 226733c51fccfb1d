//! Agreement across a group before an operation: every rank learns every
//! rank's local problem and array shape, so an argument that is wrong on
//! one rank fails the call on all of them instead of leaving the others
//! waiting.

use crate::collective::{digest, Exchange};
use crate::comm::Comm;
use crate::error::{Error, Result};

/// How many dimensions of a shape travel in the clear; the rest are only
/// compared through the digest.
const SHOWN_DIMS: usize = 6;

/// Fails on every rank of `comm` when any rank's `local` check failed,
/// with every failing rank's message (`"{what}: rank 2: ..."`), or when the
/// ranks pass different values for one of `same` (named settings that must
/// agree), naming the setting and two ranks that differ.
pub(crate) fn all_ok(comm: &Comm, what: &str, local: Result<()>, same: &[(&str, u64)]) -> Result<()> {
    let message = match local {
        Ok(()) => String::new(),
        Err(Error::Precondition { message }) => message,
        Err(e) => e.to_string(),
    };
    let mut mine = vec![message.len() as u64];
    mine.extend(same.iter().map(|&(_, v)| v));
    let mut all = vec![0u64; mine.len() * comm.world()];
    comm.exchange(Exchange::Agreement, &mine, &mut all)?;
    let rows: Vec<&[u64]> = all.chunks(mine.len()).collect();
    let lens: Vec<u64> = rows.iter().map(|r| r[0]).collect();
    if lens.iter().all(|&l| l == 0) {
        for (i, (name, _)) in same.iter().enumerate() {
            if let Some(other) = rows.iter().position(|r| r[1 + i] != rows[0][1 + i]) {
                return Err(Error::precondition(format!(
                    "{what}: the {name} differs across the group: rank 0 has {}, rank {other} has {}",
                    rows[0][1 + i],
                    rows[other][1 + i]
                )));
            }
        }
        return Ok(());
    }
    let counts: Vec<usize> = lens.iter().map(|&l| l as usize).collect();
    let mut text = vec![0u8; counts.iter().sum()];
    comm.exchange_gatherv(Exchange::AgreementText, message.as_bytes(), &mut text, &counts)?;
    let mut parts = Vec::new();
    let mut start = 0;
    for (rank, &n) in counts.iter().enumerate() {
        if n > 0 {
            parts.push(format!(
                "rank {rank}: {}",
                String::from_utf8_lossy(&text[start..start + n])
            ));
        }
        start += n;
    }
    Err(Error::precondition(format!("{what}: {}", parts.join("; "))))
}

/// Fails on every rank of `comm` unless every rank passes the same `shape`,
/// naming the first dimension that differs.
pub(crate) fn same_shape(comm: &Comm, what: &str, shape: &[usize]) -> Result<()> {
    let mut mine = [0u64; 2 + SHOWN_DIMS];
    mine[0] = shape.len() as u64;
    mine[1] = digest(shape);
    for (slot, &d) in mine[2..].iter_mut().zip(shape) {
        *slot = d as u64;
    }
    let mut all = vec![0u64; mine.len() * comm.world()];
    comm.exchange(Exchange::Shape, &mine, &mut all)?;
    let rows: Vec<&[u64]> = all.chunks(mine.len()).collect();
    let Some(other) = rows.iter().position(|r| *r != rows[0]) else {
        return Ok(());
    };
    let (a, b) = (rows[0], rows[other]);
    let shown = |r: &[u64]| {
        let dims: Vec<u64> = r[2..2 + (r[0] as usize).min(SHOWN_DIMS)].to_vec();
        format!(
            "{dims:?}{}",
            if r[0] as usize > SHOWN_DIMS { " (and more)" } else { "" }
        )
    };
    let detail = if a[0] == b[0] {
        match (0..(a[0] as usize).min(SHOWN_DIMS)).find(|&i| a[2 + i] != b[2 + i]) {
            Some(i) => format!(
                "dimension {i} differs: rank 0 has {}, rank {other} has {}",
                a[2 + i],
                b[2 + i]
            ),
            None => format!("a dimension past the first {SHOWN_DIMS} differs"),
        }
    } else {
        format!(
            "the number of dimensions differs: rank 0 has {}, rank {other} has {}",
            a[0], b[0]
        )
    };
    Err(Error::precondition(format!(
        "{what}: shapes disagree across the group: {detail} (rank 0: {}, rank {other}: {})",
        shown(a),
        shown(b)
    )))
}
