//! The entry agreement check of schedule calls.
//!
//! Every rank of a communicator must call the same schedule with the same
//! element type, scalars and lengths at the same point (its k-th schedule
//! call on the communicator). Ranks that disagree would otherwise wait for
//! messages that never come, until the timeout. At entry each rank announces
//! its call in a table the communicator's in-process ranks share (keyed by
//! the group's shared backend state); the first rank's call is kept, each
//! later one is compared with it, and the entry is dropped once every rank
//! arrived. A rank that disagrees gets `Err(Mismatch)` at once and aborts the
//! communicator with the same text, so ranks already inside the call stop
//! waiting; their error becomes the same `Mismatch`. A rank that fails before
//! announcing its call (a wrong buffer length, say) counts as disagreeing
//! with the ranks that entered.
//!
//! The cost is one uncontended-in-the-common-case lock of the call's slot
//! and a comparison of a few integers per call. Ranks in other processes share no table; their calls
//! are not compared.

use std::any::Any;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Mutex, OnceLock, PoisonError, Weak};

use hcomm_schedule::ir::Schedule;
use smallvec::SmallVec;

use crate::comm::Comm;
use crate::element::DataType;
use crate::error::Error;

/// What one rank called.
pub(super) struct Entry<'a> {
    /// The call's place among the communicator's schedule calls.
    pub(super) seq: u64,
    pub(super) dtype: DataType,
    pub(super) scalars: &'a [i64],
    pub(super) lens: &'a [i64],
}

/// One rank's announced call, or its failure before announcing one.
#[derive(Clone, PartialEq)]
struct Arrival {
    schedule: usize,
    dtype: DataType,
    scalars: SmallVec<[i64; 4]>,
    lens: SmallVec<[i64; 3]>,
    failure: Option<String>,
}

struct Call {
    first_rank: usize,
    first: Arrival,
    arrived: usize,
    /// Whether a rank announced a call (and may be waiting inside it).
    entered: bool,
    disagreement: Option<Error>,
}

/// One slot per call modulo [`SLOTS`]: ranks more than that many calls
/// apart (which only ranks that never wait for each other can be) drop the
/// older call's check.
const SLOTS: usize = 64;

struct GroupTable {
    token: Weak<dyn Any + Send + Sync>,
    slots: Vec<Mutex<Option<(u64, Call)>>>,
}

type Tables = Mutex<HashMap<usize, std::sync::Arc<GroupTable>>>;

fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| Mutex::new(HashMap::new()))
}

thread_local! {
    /// The table this thread used last: ranks call schedules on one
    /// communicator again and again, and then take no process-wide lock.
    static LAST: std::cell::RefCell<Option<std::sync::Arc<GroupTable>>> = const { std::cell::RefCell::new(None) };
}

/// The table of the group `token` names.
fn table(token: &Weak<dyn Any + Send + Sync>) -> std::sync::Arc<GroupTable> {
    let cached = LAST.with(|l| l.borrow().as_ref().filter(|t| t.token.ptr_eq(token)).cloned());
    if let Some(t) = cached {
        return t;
    }
    let t = {
        let mut tables = tables().lock().unwrap_or_else(PoisonError::into_inner);
        tables.retain(|_, t| t.token.strong_count() > 0);
        let t = tables.entry(key(token)).or_insert_with(|| {
            std::sync::Arc::new(GroupTable {
                token: token.clone(),
                slots: (0..SLOTS).map(|_| Mutex::new(None)).collect(),
            })
        });
        if !t.token.ptr_eq(token) {
            // a group that lived at the same address before
            *t = std::sync::Arc::new(GroupTable {
                token: token.clone(),
                slots: (0..SLOTS).map(|_| Mutex::new(None)).collect(),
            });
        }
        std::sync::Arc::clone(t)
    };
    LAST.with(|l| *l.borrow_mut() = Some(std::sync::Arc::clone(&t)));
    t
}

/// Announces this rank's call; `Err(Mismatch)` when it disagrees with the
/// ranks that announced theirs before.
pub(super) fn enter(comm: &Comm, schedule: &'static Schedule, entry: &Entry<'_>) -> crate::Result<()> {
    let arrival = Arrival {
        schedule: std::ptr::from_ref(schedule) as usize,
        dtype: entry.dtype,
        scalars: entry.scalars.iter().copied().collect(),
        lens: entry.lens.iter().copied().collect(),
        failure: None,
    };
    arrive(comm, schedule, entry.seq, arrival)
}

/// Records that this rank failed call `seq` before announcing it.
pub(super) fn fail_before_entry(comm: &Comm, schedule: &'static Schedule, seq: u64, error: &Error) {
    let arrival = Arrival {
        schedule: std::ptr::from_ref(schedule) as usize,
        dtype: DataType::U8,
        scalars: SmallVec::new(),
        lens: SmallVec::new(),
        failure: Some(error.to_string()),
    };
    // this rank already fails with its own error
    let _ = arrive(comm, schedule, seq, arrival);
}

/// The disagreement found for call `seq`, if any.
pub(super) fn disagreement(comm: &Comm, seq: u64) -> Option<Error> {
    let token = comm.inner.backend.group_token()?;
    let t = table(&token);
    let slot = t.slots[seq as usize % SLOTS]
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    match &*slot {
        Some((s, call)) if *s == seq => call.disagreement.clone(),
        _ => None,
    }
}

fn key(token: &Weak<dyn Any + Send + Sync>) -> usize {
    token.as_ptr().cast::<()>() as usize
}

fn arrive(comm: &Comm, schedule: &Schedule, seq: u64, arrival: Arrival) -> crate::Result<()> {
    let world = comm.world();
    if world < 2 {
        return Ok(());
    }
    let Some(token) = comm.inner.backend.group_token() else {
        return Ok(());
    };
    let rank = comm.rank();
    let t = table(&token);
    let (e, abort) = {
        let mut slot = t.slots[seq as usize % SLOTS]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let call = match &mut *slot {
            Some((s, call)) if *s == seq => call,
            other => {
                let entered = arrival.failure.is_none();
                *other = Some((
                    seq,
                    Call {
                        first_rank: rank,
                        first: arrival,
                        arrived: 1,
                        entered,
                        disagreement: None,
                    },
                ));
                return Ok(());
            }
        };
        call.arrived += 1;
        if let Some(e) = &call.disagreement {
            return Err(e.clone());
        }
        // ranks that all failed before entering agree: nobody is inside
        let agrees = call.first == arrival || (call.first.failure.is_some() && arrival.failure.is_some());
        if agrees {
            if call.arrived >= world {
                *slot = None;
            }
            return Ok(());
        }
        let e = Error::mismatch(describe(schedule, call.first_rank, &call.first, rank, &arrival));
        call.disagreement = Some(e.clone());
        let abort = call.entered || arrival.failure.is_none();
        call.entered |= arrival.failure.is_none();
        (e, abort)
    };
    if abort {
        // ranks inside the call stop waiting; their error becomes `e`
        comm.inner.backend.abort(&e.to_string());
    }
    Err(e)
}

/// "ranks 0 and 2 called `bcast` with different arguments: rank 0 with
/// root = 0, n = 4; rank 2 with root = 1, n = 4".
fn describe(s: &Schedule, ra: usize, a: &Arrival, rb: usize, b: &Arrival) -> String {
    let show = |x: &Arrival| -> String {
        if let Some(f) = &x.failure {
            return format!("failed before entering it: {f}");
        }
        if x.schedule != std::ptr::from_ref(s) as usize {
            return "called another schedule".to_owned();
        }
        let mut t = format!("T = {}", x.dtype);
        for (sc, v) in s.scalars.iter().zip(&x.scalars) {
            let _ = write!(t, ", {} = {v}", sc.name);
        }
        for (var, v) in s.len_vars.iter().zip(&x.lens) {
            let _ = write!(t, ", {} = {v}", var.name);
        }
        format!("with {t}")
    };
    let (lo, a, hi, b) = if ra < rb { (ra, a, rb, b) } else { (rb, b, ra, a) };
    format!(
        "ranks {lo} and {hi} disagree on their call of `{}` (every rank must pass the same scalars and lengths): rank {lo} {}; rank {hi} {}",
        s.name,
        show(a),
        show(b)
    )
}
