//! The entry agreement check of schedule calls.
//!
//! Every rank of a communicator must call the same schedule with the same
//! element type, scalars and lengths at the same point (its k-th schedule
//! call on the communicator). Ranks that disagree would otherwise wait for
//! messages that never come, until the timeout, or exchange the wrong data.
//! Each rank compares its call with its two ring neighbours' calls:
//! agreement of neighbours is agreement of all. A rank that finds a
//! disagreement gets `Err(Mismatch)` naming both calls, records it for the
//! group and aborts the communicator with the same text, so ranks already
//! inside the call stop waiting; their error, and that of ranks arriving
//! later, becomes the same `Mismatch`. A rank that fails before announcing
//! its call (a wrong buffer length, say) publishes that failure, which
//! disagrees with every call.
//!
//! Ranks in one process publish a fingerprint of their call in a record of
//! their own, in memory they share (keyed by the group's shared backend
//! state), and read their neighbours' records of the same call; of two
//! neighbours arriving at once at least one sees the other's record. The
//! cost per call: writing one's own record and reading two others (no lock
//! is shared in the common case). Ranks more than [`SLOTS`] calls apart
//! (which only ranks that never wait for each other can be) skip the older
//! call's comparison.
//!
//! Ranks in different processes send their call to their neighbours ahead
//! of the call's data to them, and compare when both are known
//! ([`crate::backend::entries`]); the fingerprint is the same in every
//! process of a job (it names the schedule by a digest of its definition,
//! not by its address).

use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};

use crate::fnv::Fnv;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use hcomm_schedule::ir::Schedule;
use smallvec::SmallVec;

use crate::backend::entries::{self, EntryNote};
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
    /// Each count parameter's name and entries (a matrix row-major).
    pub(super) counts: &'a [(&'static str, Vec<usize>)],
}

/// One rank's announced call, or its failure before announcing one, as
/// kept in its record for its neighbours' messages.
struct Arrival {
    schedule: &'static Schedule,
    dtype: DataType,
    scalars: SmallVec<[i64; 4]>,
    lens: SmallVec<[i64; 3]>,
    counts: Vec<(&'static str, Vec<usize>)>,
    failure: Option<String>,
}

impl Arrival {
    fn call(&self) -> Call<'_> {
        Call {
            schedule: self.schedule,
            dtype: self.dtype,
            scalars: &self.scalars,
            lens: &self.lens,
            counts: &self.counts,
            failure: self.failure.as_deref(),
        }
    }
}

/// One rank's announced call, or its failure before announcing one,
/// borrowed from the caller.
#[derive(Clone, Copy)]
struct Call<'a> {
    schedule: &'static Schedule,
    dtype: DataType,
    scalars: &'a [i64],
    lens: &'a [i64],
    counts: &'a [(&'static str, Vec<usize>)],
    failure: Option<&'a str>,
}

impl Call<'_> {
    /// The call as kept in a record.
    fn to_arrival(self) -> Arrival {
        Arrival {
            schedule: self.schedule,
            dtype: self.dtype,
            scalars: self.scalars.into(),
            lens: self.lens.into(),
            counts: self.counts.to_vec(),
            failure: self.failure.map(str::to_owned),
        }
    }

    /// Equal for equal calls of one process; every failure has the same one.
    fn fingerprint(&self) -> u64 {
        self.fingerprint_with(std::ptr::from_ref(self.schedule) as u64)
    }

    /// Equal for equal calls in every process of a job.
    fn portable_fingerprint(&self) -> u64 {
        self.fingerprint_with(digest(self.schedule))
    }

    /// The fingerprint with `schedule` naming the schedule.
    fn fingerprint_with(&self, schedule: u64) -> u64 {
        if self.failure.is_some() {
            return FAILED;
        }
        let mut h = Fnv::default();
        h.write_u64(schedule);
        self.dtype.hash(&mut h);
        h.write_usize(self.scalars.len());
        for &v in self.scalars.iter().chain(self.lens) {
            h.write_i64(v);
        }
        for (_, entries) in self.counts {
            h.write_usize(entries.len());
            for &v in entries {
                h.write_usize(v);
            }
        }
        // 0 marks a record being written, FAILED a failure
        h.finish().max(2)
    }

    /// The call as a message names it: `with T = f32, op = max, n = 4`.
    fn show(&self) -> String {
        if let Some(f) = &self.failure {
            return format!("failed before entering it: {f}");
        }
        let s = self.schedule;
        let mut t = format!("with T = {}", self.dtype);
        for (sc, &v) in s.scalars.iter().zip(self.scalars) {
            let _ = write!(t, ", {} = {}", sc.name, sc.show(v));
        }
        for (var, v) in s.len_vars.iter().zip(self.lens) {
            let _ = write!(t, ", {} = {v}", var.name);
        }
        for (name, v) in self.counts {
            let _ = write!(t, ", {name} = {v:?}");
        }
        t
    }

    /// What the rank's neighbours in other processes compare.
    fn note(&self, seq: u64) -> EntryNote {
        EntryNote {
            seq,
            fingerprint: self.portable_fingerprint(),
            schedule: self.schedule.name.clone(),
            call: self.show(),
        }
    }
}

/// A digest of `schedule`'s definition, the same in every process of a
/// job (which runs one build); computed once per schedule.
fn digest(schedule: &'static Schedule) -> u64 {
    type Digests = Mutex<HashMap<usize, u64>>;
    static DIGESTS: OnceLock<Digests> = OnceLock::new();
    let key = std::ptr::from_ref(schedule) as usize;
    let digests = DIGESTS.get_or_init(|| Mutex::new(HashMap::new()));
    let mut digests = digests.lock().unwrap_or_else(PoisonError::into_inner);
    *digests.entry(key).or_insert_with(|| {
        let mut h = Fnv::default();
        h.write(format!("{schedule:?}").as_bytes());
        h.finish()
    })
}

const FAILED: u64 = 1;

/// Calls per rank whose records are kept.
const SLOTS: usize = 16;

/// Distinct calls per rank whose details are kept for messages.
const DETAILS: usize = 16;

/// One rank's record of one call: `seq` is the call's sequence + 1 (0 while
/// being written), `fp` its fingerprint. A cache line of its own, so that a
/// rank writing its next record does not take the line a neighbour reads.
#[repr(align(64))]
struct Record {
    seq: AtomicU64,
    fp: AtomicU64,
}

/// A call a rank announced, for the message of a disagreement: its
/// fingerprint, the sequence it was first announced at (a failure's own
/// sequence) and the call.
struct Detail {
    fp: u64,
    seq: u64,
    arrival: Arrival,
}

/// What one rank of a group publishes.
struct Rank {
    /// The last [`SLOTS`] calls' records.
    records: [Record; SLOTS],
    /// The last [`DETAILS`] distinct calls (and failures) announced, oldest
    /// first; a neighbour that finds a disagreement looks the call up by its
    /// fingerprint. A rank repeating a call does not write it again.
    details: Mutex<VecDeque<Detail>>,
    /// The fingerprint of this rank's last announced call, which is in
    /// `details`; only the rank itself reads and writes it.
    described: Padded,
}

#[repr(align(64))]
struct Padded(AtomicU64);

impl Rank {
    fn new() -> Self {
        Rank {
            records: std::array::from_fn(|_| Record {
                seq: AtomicU64::new(0),
                fp: AtomicU64::new(0),
            }),
            details: Mutex::new(VecDeque::new()),
            described: Padded(AtomicU64::new(0)),
        }
    }

    fn record(&self, seq: u64) -> &Record {
        &self.records[seq as usize % SLOTS]
    }

    /// Keeps `call` (fingerprint `fp`, call `seq`) for messages, unless it
    /// is the call this rank announced last.
    fn describe(&self, fp: u64, seq: u64, call: Call<'_>) {
        if fp != FAILED && self.described.0.load(Ordering::Relaxed) == fp {
            return;
        }
        let mut details = self.details.lock().unwrap_or_else(PoisonError::into_inner);
        // a failure's text differs from call to call: kept every time
        if fp == FAILED || !details.iter().any(|d| d.fp == fp) {
            if details.len() == DETAILS {
                details.pop_front();
            }
            details.push_back(Detail {
                fp,
                seq,
                arrival: call.to_arrival(),
            });
        }
        if fp != FAILED {
            self.described.0.store(fp, Ordering::Relaxed);
        }
    }

    /// The note of call `seq` with fingerprint `fp`, as this rank announced
    /// it; `None` when it is no longer kept.
    fn note(&self, fp: u64, seq: u64) -> Option<EntryNote> {
        let details = self.details.lock().unwrap_or_else(PoisonError::into_inner);
        details
            .iter()
            .rev()
            .find(|d| d.fp == fp && (fp != FAILED || d.seq == seq))
            .map(|d| d.arrival.call().note(seq))
    }
}

/// The entry records of one group's in-process ranks.
pub(crate) struct GroupTable {
    token: Weak<dyn Any + Send + Sync>,
    ranks: Vec<Rank>,
    /// Whether `failures` holds anything.
    failed: AtomicBool,
    failures: Mutex<Vec<(u64, Error)>>,
}

impl GroupTable {
    fn new(token: &Weak<dyn Any + Send + Sync>, world: usize) -> Self {
        GroupTable {
            token: token.clone(),
            ranks: (0..world).map(|_| Rank::new()).collect(),
            failed: AtomicBool::new(false),
            failures: Mutex::new(Vec::new()),
        }
    }

    #[inline]
    fn failure(&self, seq: u64) -> Option<Error> {
        if !self.failed.load(Ordering::Acquire) {
            return None;
        }
        self.failure_slow(seq)
    }

    #[cold]
    fn failure_slow(&self, seq: u64) -> Option<Error> {
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
#[inline]
fn table(comm: &Comm) -> Option<&GroupTable> {
    comm.inner.schedule_entries.get_or_init(|| make_table(comm)).as_deref()
}

#[cold]
fn make_table(comm: &Comm) -> Option<Arc<GroupTable>> {
    let token = comm.inner.backend.group_token()?;
    let world = comm.world();
    let mut tables = tables().lock().unwrap_or_else(PoisonError::into_inner);
    tables.retain(|_, t| t.token.strong_count() > 0);
    let t = tables
        .entry(token.as_ptr().cast::<()>() as usize)
        .or_insert_with(|| Arc::new(GroupTable::new(&token, world)));
    if !t.token.ptr_eq(&token) || t.ranks.len() != world {
        // a group that lived at the same address before
        *t = Arc::new(GroupTable::new(&token, world));
    }
    Some(Arc::clone(t))
}

/// Announces this rank's call; `Err(Mismatch)` when it disagrees with a
/// neighbour's, or when a disagreement was found for this call.
#[inline]
pub(super) fn enter(comm: &Comm, schedule: &'static Schedule, entry: &Entry<'_>) -> crate::Result<()> {
    let call = Call {
        schedule,
        dtype: entry.dtype,
        scalars: entry.scalars,
        lens: entry.lens,
        counts: entry.counts,
        failure: None,
    };
    arrive(comm, entry.seq, call)
}

/// Records that this rank failed call `seq` before announcing it.
pub(super) fn fail_before_entry(comm: &Comm, schedule: &'static Schedule, seq: u64, error: &Error) {
    let failure = error.to_string();
    let call = Call {
        schedule,
        dtype: DataType::U8,
        scalars: &[],
        lens: &[],
        counts: &[],
        failure: Some(&failure),
    };
    // this rank already fails with its own error
    let _ = arrive(comm, seq, call);
}

/// The disagreement found for call `seq`, if any.
#[inline]
pub(super) fn disagreement(comm: &Comm, seq: u64) -> Option<Error> {
    match table(comm) {
        Some(t) => t.failure(seq),
        None => comm.inner.backend.entry_failure(seq),
    }
}

fn arrive(comm: &Comm, seq: u64, arrival: Call<'_>) -> crate::Result<()> {
    let world = comm.world();
    if world < 2 || !comm.inner.entry_check.load(Ordering::Relaxed) {
        return Ok(());
    }
    let Some(t) = table(comm) else {
        // ranks in other processes
        return comm.inner.backend.announce_entry(&arrival.note(seq)).unwrap_or(Ok(()));
    };
    let rank = comm.rank();
    if let Some(e) = t.failure(seq) {
        return Err(e);
    }
    let fp = arrival.fingerprint();
    let me = &t.ranks[rank];
    me.describe(fp, seq, arrival);
    let mine = me.record(seq);
    mine.seq.store(0, Ordering::SeqCst);
    mine.fp.store(fp, Ordering::SeqCst);
    mine.seq.store(seq + 1, Ordering::SeqCst);
    // of two ranks, the one neighbour is both
    let neighbours = [(rank + 1) % world, (rank + world - 1) % world];
    for &q in &neighbours[..if world == 2 { 1 } else { 2 }] {
        let theirs = t.ranks[q].record(seq);
        if theirs.seq.load(Ordering::SeqCst) != seq + 1 {
            continue;
        }
        let their_fp = theirs.fp.load(Ordering::SeqCst);
        if their_fp == fp || theirs.seq.load(Ordering::SeqCst) != seq + 1 {
            continue;
        }
        return Err(disagree(comm, t, seq, (q, their_fp), arrival));
    }
    Ok(())
}

/// The disagreement of this rank's call `arrival` with neighbour `q`'s,
/// whose fingerprint is `their_fp`: recorded for the group (the first one
/// found for a call is the one every rank reports), and the communicator
/// aborted with it.
#[cold]
#[inline(never)]
fn disagree(comm: &Comm, t: &GroupTable, seq: u64, (q, their_fp): (usize, u64), arrival: Call<'_>) -> Error {
    let rank = comm.rank();
    // their calls differ from this one; the details of theirs are gone
    // only after many other calls of theirs
    let other = t.ranks[q].note(their_fp, seq).unwrap_or_else(|| EntryNote {
        seq,
        fingerprint: their_fp,
        schedule: "another schedule call".into(),
        call: "(its details are no longer kept)".into(),
    });
    let e = Error::mismatch(entries::describe(q, &other, rank, &arrival.note(seq)));
    let e = {
        let mut failures = t.failures.lock().unwrap_or_else(PoisonError::into_inner);
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
    e
}
