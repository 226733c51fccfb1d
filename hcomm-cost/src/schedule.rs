//! The model over any checked schedule: the columns of the checker's
//! rendezvous simulation ([`hcomm_schedule::timeline`]) are the rounds; the
//! messages of one column run together.

use hcomm_schedule::timeline::{timeline, Order};
use hcomm_schedule::Schedule;

use crate::error::{CostError, Result};
use crate::round::{round_us, Msg};
use crate::topology::Machine;

/// A prediction: the time and the number of rounds that moved data.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Prediction {
    /// Predicted time in microseconds.
    pub us: f64,
    /// Rounds with at least one message.
    pub rounds: usize,
}

/// Predicts schedule `s` on `world` ranks of `machine` with `scalars` (in
/// the order of [`Schedule::scalars`]) and the length variables at
/// `lengths` (in the order of [`Schedule::len_vars`]), elements of
/// `elem_bytes` bytes. Unrolls every rank: for small worlds (the checker's
/// cost), and for schedules the built-in patterns do not cover.
pub fn predict_schedule(
    machine: &Machine,
    s: &Schedule,
    world: usize,
    scalars: &[i64],
    lengths: &[i64],
    elem_bytes: usize,
) -> Result<Prediction> {
    let unsupported = |message: String| CostError::Unsupported {
        what: s.name.clone(),
        message,
    };
    if lengths.len() != s.len_vars.len() || lengths.iter().any(|&l| l < 1) {
        return Err(unsupported(format!(
            "it has {} length variables, each at least 1; given {lengths:?}",
            s.len_vars.len()
        )));
    }
    let t = timeline(s, world as i64, scalars).map_err(|d| unsupported(d.to_string()))?;
    if let Some(f) = t.failure {
        return Err(unsupported(format!("the checker rejects it: {}", f.diagnostic)));
    }
    if t.order != Order::Simulated {
        return Err(unsupported("its messages do not match".to_owned()));
    }
    if let Some(c) = t.collectives.first() {
        return Err(unsupported(format!(
            "it calls `{}`; collective statements are not modelled. hint: predict the collective's own algorithm",
            c.kind
        )));
    }
    let mut by_column: Vec<Vec<Msg>> = vec![Vec::new(); t.columns as usize + 1];
    for msg in &t.messages {
        let form = msg.len_form.ok_or_else(|| {
            unsupported(format!(
                "message `{}` has a length set by a count parameter",
                msg.label()
            ))
        })?;
        let elems = form[0] + form[1..].iter().zip(lengths).map(|(c, l)| c * l).sum::<i64>();
        let col = msg.column as usize;
        if col >= by_column.len() {
            by_column.resize(col + 1, Vec::new());
        }
        by_column[col].push(Msg {
            from: msg.from as usize,
            to: msg.to as usize,
            bytes: (elems.max(0) as usize * elem_bytes) as f64,
            reduce: msg.reduce.is_some(),
        });
    }
    let mut p = Prediction { us: 0.0, rounds: 0 };
    for msgs in by_column.iter().filter(|m| m.iter().any(|m| m.from != m.to)) {
        p.us += round_us(machine, world, world, msgs, msgs);
        p.rounds += 1;
    }
    Ok(p)
}
