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

mod gathered;

use std::any::Any;
use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};

use crate::fnv::Fnv;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};
use std::time::Duration;

use hcomm_schedule::ir::Schedule;
use smallvec::SmallVec;

use self::gathered::Gathered;

use crate::backend::entries::{self, EntryNote};
use crate::backend::{Backend, EntryRoute};
use crate::element::DataType;
use crate::error::Error;

/// What one rank called.
pub(crate) struct Entry<'a> {
    /// The call's place among the communicator's schedule calls.
    pub(crate) seq: u64,
    pub(crate) dtype: DataType,
    pub(crate) scalars: &'a [i64],
    pub(crate) lens: &'a [i64],
    /// Each count parameter's name and entries (a matrix row-major).
    pub(crate) counts: &'a [(&'static str, Vec<usize>)],
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
struct GroupTable {
    token: Weak<dyn Any + Send + Sync>,
    ranks: Vec<Rank>,
    /// Whether `failures` holds anything.
    failed: AtomicBool,
    failures: Mutex<Vec<(u64, Error)>>,
}

impl GroupTable {
    fn new(token: &Arc<dyn Any + Send + Sync>, world: usize) -> Self {
        GroupTable {
            token: Arc::downgrade(token),
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

/// What a communicator keeps for the entry check of its schedule calls.
pub(crate) struct EntryCheck {
    /// Whether calls are checked (off only to measure what it costs).
    on: AtomicBool,
    /// How the group's ranks compare their calls; found at the first call.
    route: OnceLock<Route>,
    /// The last call checked by all-gather, where that is the route.
    gathered: Gathered,
}

/// The route of [`EntryRoute`] with what the check keeps for it.
enum Route {
    /// The records this rank shares with the group's other ranks.
    Table(Arc<GroupTable>),
    /// Notes the backend carries ([`EntryRoute::Carried`]).
    Carried,
    /// An all-gather of notes ([`EntryRoute::Exchanged`]).
    Gathered,
}

impl Default for EntryCheck {
    fn default() -> Self {
        EntryCheck {
            on: AtomicBool::new(true),
            route: OnceLock::new(),
            gathered: Gathered::default(),
        }
    }
}

impl EntryCheck {
    /// Turns the check off or back on.
    pub(crate) fn set(&self, on: bool) {
        self.on.store(on, Ordering::Relaxed);
    }
}

/// One rank's communicator as the entry check sees it.
#[derive(Clone, Copy)]
pub(crate) struct Site<'a> {
    pub(crate) check: &'a EntryCheck,
    pub(crate) backend: &'a dyn Backend,
    pub(crate) rank: usize,
    pub(crate) world: usize,
    /// How long an exchange of notes may wait.
    pub(crate) timeout: Duration,
}

impl Site<'_> {
    /// The group's route, found at the first schedule call.
    #[inline]
    fn route(&self) -> &Route {
        self.check.route.get_or_init(|| self.find_route())
    }

    #[cold]
    fn find_route(&self) -> Route {
        let token = match self.backend.capabilities().entries {
            EntryRoute::Shared(token) => token,
            EntryRoute::Carried(_) => return Route::Carried,
            EntryRoute::Exchanged => return Route::Gathered,
        };
        let world = self.world;
        let mut tables = tables().lock().unwrap_or_else(PoisonError::into_inner);
        tables.retain(|_, t| t.token.strong_count() > 0);
        let t = tables
            .entry(Arc::as_ptr(token).cast::<()>() as usize)
            .or_insert_with(|| Arc::new(GroupTable::new(token, world)));
        if !std::ptr::addr_eq(t.token.as_ptr(), Arc::as_ptr(token)) || t.ranks.len() != world {
            // a group that lived at the same address before
            *t = Arc::new(GroupTable::new(token, world));
        }
        Route::Table(Arc::clone(t))
    }

    /// The backend's note carrier.
    #[cold]
    fn carry(&self, note: &EntryNote) -> crate::Result<()> {
        match self.backend.capabilities().entries {
            EntryRoute::Carried(carrier) => carrier.announce(note),
            _ => Err(self.lost_route()),
        }
    }

    /// The error of a backend whose route changed after the first call.
    #[cold]
    fn lost_route(&self) -> Error {
        Error::precondition(format!(
            "internal error: the {} backend no longer carries entry notes; please report it",
            self.backend.name()
        ))
    }
}

/// Announces this rank's call; `Err(Mismatch)` when it disagrees with
/// another rank's, or when a disagreement was found for this call.
#[inline]
pub(crate) fn enter(site: Site<'_>, schedule: &'static Schedule, entry: &Entry<'_>) -> crate::Result<()> {
    let call = Call {
        schedule,
        dtype: entry.dtype,
        scalars: entry.scalars,
        lens: entry.lens,
        counts: entry.counts,
        failure: None,
    };
    arrive(site, entry.seq, call)
}

/// Records that this rank failed call `seq` before announcing it.
pub(crate) fn fail_before_entry(site: Site<'_>, schedule: &'static Schedule, seq: u64, error: &Error) {
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
    let _ = arrive(site, seq, call);
}

/// The disagreement found for call `seq`, if any.
#[inline]
pub(crate) fn disagreement(site: Site<'_>, seq: u64) -> Option<Error> {
    match site.route() {
        Route::Table(t) => t.failure(seq),
        Route::Carried => match site.backend.capabilities().entries {
            EntryRoute::Carried(carrier) => carrier.failure(seq),
            _ => Some(site.lost_route()),
        },
        Route::Gathered => site.check.gathered.failure(seq),
    }
}

fn arrive(site: Site<'_>, seq: u64, arrival: Call<'_>) -> crate::Result<()> {
    let world = site.world;
    if world < 2 || !site.check.on.load(Ordering::Relaxed) {
        return Ok(());
    }
    let t = match site.route() {
        Route::Table(t) => t,
        // ranks in other processes
        Route::Carried => return site.carry(&arrival.note(seq)),
        Route::Gathered => {
            return site
                .check
                .gathered
                .check(site.backend, site.timeout, &arrival.note(seq))
        }
    };
    let rank = site.rank;
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
        return Err(disagree(site, t, seq, (q, their_fp), arrival));
    }
    Ok(())
}

/// The disagreement of this rank's call `arrival` with neighbour `q`'s,
/// whose fingerprint is `their_fp`: recorded for the group (the first one
/// found for a call is the one every rank reports), and the communicator
/// aborted with it.
#[cold]
#[inline(never)]
fn disagree(site: Site<'_>, t: &GroupTable, seq: u64, (q, their_fp): (usize, u64), arrival: Call<'_>) -> Error {
    let rank = site.rank;
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
    site.backend.abort(&e.to_string());
    e
}
