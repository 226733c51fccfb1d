//! The entry agreement check of schedule calls.
//!
//! Every rank of a communicator must call the same schedule with the same
//! element type, scalars and lengths at the same point (its k-th schedule
//! call on the communicator). Ranks that disagree would otherwise wait for
//! messages that never come, until the timeout. At entry each rank publishes
//! a fingerprint of its call in a record of its own, in memory the
//! communicator's in-process ranks share (keyed by the group's shared
//! backend state), and compares it with its two ring neighbours' records of
//! the same call: agreement of neighbours is agreement of all, and of two
//! neighbours arriving at once at least one sees the other's record. A rank
//! that finds a disagreement gets `Err(Mismatch)` naming both calls, records
//! it for the group and aborts the communicator with the same text, so ranks
//! already inside the call stop waiting; their error, and that of ranks
//! arriving later, becomes the same `Mismatch`. A rank that fails before
//! announcing its call (a wrong buffer length, say) publishes that failure,
//! which disagrees with every call.
//!
//! The cost per call: writing one's own record and reading two others (no
//! lock is shared in the common case). Ranks more than [`SLOTS`] calls apart
//! (which only ranks that never wait for each other can be) skip the older
//! call's comparison; ranks in other processes are not compared.

use std::any::Any;
use std::collections::HashMap;
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

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
#[derive(Clone, PartialEq, Hash)]
struct Arrival {
    schedule: usize,
    dtype: DataType,
    scalars: SmallVec<[i64; 4]>,
    lens: SmallVec<[i64; 3]>,
    failure: Option<String>,
}

impl Arrival {
    /// Equal for equal calls; every failure has the same one.
    fn fingerprint(&self) -> u64 {
        if self.failure.is_some() {
            return FAILED;
        }
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.hash(&mut h);
        // 0 marks a record being written, FAILED a failure
        h.finish().max(2)
    }
}

const FAILED: u64 = 1;

/// Calls per rank whose records are kept.
const SLOTS: usize = 16;

/// One rank's record of one call: `seq` is the call's sequence + 1 (0 while
/// being written), `fp` its fingerprint, `detail` the call for messages.
struct Record {
    seq: AtomicU64,
    fp: AtomicU64,
    detail: Mutex<Option<(u64, Arrival)>>,
}

struct GroupTable {
    token: Weak<dyn Any + Send + Sync>,
    world: usize,
    /// `SLOTS` records per rank.
    records: Vec<Record>,
    /// Whether `failures` holds anything.
    failed: AtomicBool,
    failures: Mutex<Vec<(u64, Error)>>,
}

impl GroupTable {
    fn new(token: &Weak<dyn Any + Send + Sync>, world: usize) -> Self {
        GroupTable {
            token: token.clone(),
            world,
            records: (0..world * SLOTS)
                .map(|_| Record {
                    seq: AtomicU64::new(0),
                    fp: AtomicU64::new(0),
                    detail: Mutex::new(None),
                })
                .collect(),
            failed: AtomicBool::new(false),
            failures: Mutex::new(Vec::new()),
        }
    }

    fn record(&self, rank: usize, seq: u64) -> &Record {
        &self.records[rank * SLOTS + seq as usize % SLOTS]
    }

    fn failure(&self, seq: u64) -> Option<Error> {
        if !self.failed.load(Ordering::Acquire) {
            return None;
        }
        let failures = self.failures.lock().unwrap_or_else(PoisonError::into_inner);
        failures.iter().find(|(s, _)| *s == seq).map(|(_, e)| e.clone())
    }
}

type Tables = Mutex<HashMap<usize, Arc<GroupTable>>>;

fn tables() -> &'static Tables {
    static TABLES: OnceLock<Tables> = OnceLock::new();
    TABLES.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The table of `comm`'s group, kept by the communicator after its first
/// schedule call; `None` where ranks share no memory.
fn table(comm: &Comm) -> Option<&GroupTable> {
    comm.inner
        .schedule_entries
        .get_or_init(|| {
            let token = comm.inner.backend.group_token()?;
            let world = comm.world();
            let mut tables = tables().lock().unwrap_or_else(PoisonError::into_inner);
            tables.retain(|_, t| t.token.strong_count() > 0);
            let t = tables
                .entry(token.as_ptr().cast::<()>() as usize)
                .or_insert_with(|| Arc::new(GroupTable::new(&token, world)));
            if !t.token.ptr_eq(&token) || t.world != world {
                // a group that lived at the same address before
                *t = Arc::new(GroupTable::new(&token, world));
            }
            let shared: Arc<dyn Any + Send + Sync> = t.clone();
            Some(shared)
        })
        .as_ref()?
        .downcast_ref::<GroupTable>()
}

/// Announces this rank's call; `Err(Mismatch)` when it disagrees with a
/// neighbour's, or when a disagreement was found for this call.
pub(super) fn enter(comm: &Comm, schedule: &'static Schedule, entry: &Entry<'_>) -> crate::Result<()> {
    let arrival = Arrival {
        schedule: std::ptr::from_ref(schedule) as usize,
        dtype: entry.dtype,
        scalars: entry.scalars.iter().copied().collect(),
        lens: entry.lens.iter().copied().collect(),
        failure: None,
    };
    arrive(comm, schedule, entry.seq, &arrival)
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
    let _ = arrive(comm, schedule, seq, &arrival);
}

/// The disagreement found for call `seq`, if any.
pub(super) fn disagreement(comm: &Comm, seq: u64) -> Option<Error> {
    table(comm)?.failure(seq)
}

fn arrive(comm: &Comm, schedule: &Schedule, seq: u64, arrival: &Arrival) -> crate::Result<()> {
    let world = comm.world();
    if world < 2 {
        return Ok(());
    }
    let Some(t) = table(comm) else {
        return Ok(());
    };
    let rank = comm.rank();
    if let Some(e) = t.failure(seq) {
        return Err(e);
    }
    let fp = arrival.fingerprint();
    let mine = t.record(rank, seq);
    mine.seq.store(0, Ordering::SeqCst);
    mine.fp.store(fp, Ordering::SeqCst);
    *mine.detail.lock().unwrap_or_else(PoisonError::into_inner) = Some((seq, arrival.clone()));
    mine.seq.store(seq + 1, Ordering::SeqCst);
    for q in [(rank + 1) % world, (rank + world - 1) % world] {
        let theirs = t.record(q, seq);
        if theirs.seq.load(Ordering::SeqCst) != seq + 1 {
            continue;
        }
        let their_fp = theirs.fp.load(Ordering::SeqCst);
        if their_fp == fp || theirs.seq.load(Ordering::SeqCst) != seq + 1 {
            continue;
        }
        let detail = theirs.detail.lock().unwrap_or_else(PoisonError::into_inner).clone();
        let Some((s, other)) = detail.filter(|(s, _)| *s == seq) else {
            continue;
        };
        debug_assert_eq!(s, seq);
        let e = Error::mismatch(describe(schedule, q, &other, rank, arrival));
        let e = {
            let mut failures = t.failures.lock().unwrap_or_else(PoisonError::into_inner);
            // the first disagreement found for a call is the one every rank reports
            if let Some((_, first)) = failures.iter().find(|(s, _)| *s == seq) {
                first.clone()
            } else {
                failures.push((seq, e.clone()));
                t.failed.store(true, Ordering::Release);
                e
            }
        };
        // ranks inside the call stop waiting; their error becomes `e`
        comm.inner.backend.abort(&e.to_string());
        return Err(e);
    }
    Ok(())
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
