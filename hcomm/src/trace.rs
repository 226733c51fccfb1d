//! Run traces for Perfetto and `chrome://tracing`, recorded from the
//! `tracing` spans every operation opens.
//!
//! Each point-to-point operation, batch, collective and schedule opens a span
//! carrying the rank and what it does (`peer`, `bytes`, `tag`, `op`,
//! `algorithm`, ...). A [`TraceLayer`] — a `tracing-subscriber` layer —
//! turns each closed span of hcomm into one [`TraceEvent`]: the operation,
//! its rank, its fields, when it started and how long it took. A [`Trace`]
//! holds the events and writes them as Chrome trace-event JSON, one track
//! per rank, one process per operating-system process.
//!
//! The library installs no subscriber: recording is something the
//! application (or its launcher) turns on. Rank threads started by the
//! launchers ([`host::run`](crate::host::run), [`run`](crate::run) on every
//! backend) report to the subscriber of the thread that called them. Two
//! ways to record (both need the `trace` feature):
//!
//! * **`HCOMM_TRACE=path`**: the application calls [`init_from_env`] at the
//!   start of `main` (the examples do) and keeps the guard; the calling
//!   thread, and the rank threads the launchers start from it, then record
//!   into the process's trace, written to `path` when the guard is dropped
//!   or [finished](TraceGuard::finish). A program that drives a rank from a
//!   thread of its own calls it on that thread. `{pid}` in the path is
//!   replaced by the process id and `{rank}` by `HCOMM_RANK` (or `RANK`), so
//!   that the processes of one job write files of their own; [`merge_files`]
//!   joins them into one trace (timestamps are Unix time, so the processes
//!   line up). The recording threads report to this subscriber instead of
//!   the program's own.
//! * **The API**, to keep the program's own subscriber: add the layer of
//!   [`layer`] to it, run, then [`Trace::write`].
//!
//! ```
//! use tracing_subscriber::layer::SubscriberExt;
//!
//! let (layer, trace) = hcomm::trace::layer();
//! let subscriber = tracing_subscriber::registry().with(layer);
//! tracing::subscriber::with_default(subscriber, || {
//!     // ranks driven by this thread, e.g. one rank of `host::comms`
//!     let comm = hcomm::host::comms(1, &hcomm::CommOptions::default()).unwrap().remove(0);
//!     comm.barrier().unwrap();
//! });
//! let events = trace.events();
//! assert_eq!(events[0].name, "barrier");
//! assert_eq!(events[0].rank, 0);
//! let json = trace.to_chrome_json();
//! assert!(json["traceEvents"].is_array());
//! ```

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Map, Value};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Dispatch, Subscriber};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

use crate::error::{Error, Result};

/// The environment variable naming the trace file.
pub const TRACE_ENV: &str = "HCOMM_TRACE";

/// One operation of one rank.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceEvent {
    /// What ran: `send`, `recv`, `batch`, the collective (`all_reduce`, ...)
    /// or the schedule's name.
    pub name: String,
    /// The kind of span: `send`, `recv`, `batch`, `collective`,
    /// `schedule`, ...
    pub category: String,
    /// The rank (the track): the world rank of the launcher's rank thread,
    /// else the rank in the operation's communicator.
    pub rank: usize,
    /// Microseconds since the Unix epoch when the operation started.
    pub start_us: f64,
    /// How long it took, in microseconds.
    pub duration_us: f64,
    /// The span's fields (`peer`, `bytes`, `algorithm`, `comm.rank`, ...).
    pub args: Map<String, Value>,
}

/// The events recorded by a [`TraceLayer`]; cheap to clone (shared).
#[derive(Clone, Debug)]
pub struct Trace {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    /// The clock's origin, as an instant and as Unix time.
    origin: Instant,
    origin_unix_us: f64,
    events: Mutex<Vec<TraceEvent>>,
}

/// A `tracing-subscriber` layer that records hcomm's spans into a [`Trace`].
#[derive(Debug)]
pub struct TraceLayer {
    shared: Arc<Shared>,
}

/// A new layer and the trace it records into.
pub fn layer() -> (TraceLayer, Trace) {
    let origin_unix_us = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64() * 1e6);
    let shared = Arc::new(Shared {
        origin: Instant::now(),
        origin_unix_us,
        events: Mutex::new(Vec::new()),
    });
    (
        TraceLayer {
            shared: Arc::clone(&shared),
        },
        Trace { shared },
    )
}

impl Trace {
    /// The events so far, in the order they ended.
    pub fn events(&self) -> Vec<TraceEvent> {
        self.shared
            .events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The events as Chrome trace-event JSON (`{"traceEvents": [..]}`): one
    /// complete (`"ph": "X"`) event per operation, the rank as the thread,
    /// this process as the process (named after its job rank when
    /// `HCOMM_RANK` or `RANK` is set), with names for both.
    pub fn to_chrome_json(&self) -> Value {
        let pid = std::process::id();
        let events = self.events();
        let mut ranks: Vec<usize> = events.iter().map(|e| e.rank).collect();
        ranks.sort_unstable();
        ranks.dedup();
        let process = match job_rank() {
            Some(r) => format!("hcomm rank {r} (pid {pid})"),
            None => format!("hcomm (pid {pid})"),
        };
        let mut out = vec![json!({
            "name": "process_name", "ph": "M", "pid": pid, "tid": 0,
            "args": { "name": process },
        })];
        for r in &ranks {
            out.push(json!({
                "name": "thread_name", "ph": "M", "pid": pid, "tid": r,
                "args": { "name": format!("rank {r}") },
            }));
            out.push(json!({
                "name": "thread_sort_index", "ph": "M", "pid": pid, "tid": r,
                "args": { "sort_index": r },
            }));
        }
        for e in events {
            out.push(json!({
                "name": e.name,
                "cat": e.category,
                "ph": "X",
                "ts": e.start_us,
                "dur": e.duration_us,
                "pid": pid,
                "tid": e.rank,
                "args": Value::Object(e.args),
            }));
        }
        json!({ "traceEvents": out, "displayTimeUnit": "ns" })
    }

    /// Writes [`Trace::to_chrome_json`] to `path`.
    pub fn write(&self, path: &Path) -> Result<()> {
        let text = serde_json::to_string(&self.to_chrome_json()).map_err(|e| Error::Config {
            message: format!("trace: cannot encode the events: {e}"),
        })?;
        std::fs::write(path, text).map_err(|e| Error::Config {
            message: format!("{TRACE_ENV}: cannot write the trace to {}: {e}", path.display()),
        })
    }
}

/// What a span under way has recorded.
struct Open {
    name: String,
    category: String,
    rank: Option<usize>,
    /// The launcher's rank thread, when the span was opened on one.
    thread_rank: Option<usize>,
    args: Map<String, Value>,
    start: Option<Instant>,
}

struct Fields<'a>(&'a mut Map<String, Value>);

impl Visit for Fields<'_> {
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().to_owned(), value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().to_owned(), value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().to_owned(), value.into());
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.into());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}").into());
    }
}

/// This process's rank in a job of one process per rank, as its launcher
/// says (`HCOMM_RANK`, else torchrun's `RANK`).
fn job_rank() -> Option<String> {
    ["HCOMM_RANK", "RANK"]
        .into_iter()
        .find_map(|n| std::env::var(n).ok().filter(|v| !v.trim().is_empty()))
        .map(|v| v.trim().to_owned())
}

/// Joins Chrome trace files (such as the files of the processes of one job)
/// into one at `output`: their events, one after the other.
pub fn merge_files(inputs: &[PathBuf], output: &Path) -> Result<()> {
    let mut all = Vec::new();
    for path in inputs {
        let bad = |why: String| Error::Config {
            message: format!("trace {}: {why}", path.display()),
        };
        let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
        let mut json: Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
        match json.get_mut("traceEvents").map(Value::take) {
            Some(Value::Array(events)) => all.extend(events),
            _ => return Err(bad("no `traceEvents` array".to_owned())),
        }
    }
    let merged = json!({ "traceEvents": all, "displayTimeUnit": "ns" });
    std::fs::write(output, merged.to_string()).map_err(|e| Error::Config {
        message: format!("cannot write the trace to {}: {e}", output.display()),
    })
}

/// The rank of a launcher thread (`hcomm-rank-N`).
fn thread_rank() -> Option<usize> {
    std::thread::current().name()?.strip_prefix("hcomm-rank-")?.parse().ok()
}

impl<S> Layer<S> for TraceLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let meta = attrs.metadata();
        let target = meta.target();
        if target != "hcomm" && !target.starts_with("hcomm::") {
            return;
        }
        let Some(span) = ctx.span(id) else { return };
        let mut args = Map::new();
        attrs.record(&mut Fields(&mut args));
        let rank = args
            .get("comm.rank")
            .and_then(Value::as_u64)
            .map(|r| r as usize)
            .or_else(|| span.parent()?.extensions().get::<Open>()?.rank);
        // a collective is named after its operation, a schedule after itself
        let name = match meta.name() {
            "collective" => args.get("op").and_then(Value::as_str),
            "schedule" => args.get("name").and_then(Value::as_str),
            _ => None,
        }
        .unwrap_or(meta.name())
        .to_owned();
        span.extensions_mut().insert(Open {
            name,
            category: meta.name().to_owned(),
            rank,
            thread_rank: thread_rank(),
            args,
            start: None,
        });
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(open) = span.extensions_mut().get_mut::<Open>() {
                values.record(&mut Fields(&mut open.args));
            }
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id) {
            if let Some(open) = span.extensions_mut().get_mut::<Open>() {
                open.start.get_or_insert_with(Instant::now);
            }
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        let end = Instant::now();
        let Some(span) = ctx.span(&id) else { return };
        let Some(open) = span.extensions_mut().remove::<Open>() else {
            return;
        };
        // a span never entered did no work
        let (Some(start), Some(rank)) = (open.start, open.thread_rank.or(open.rank)) else {
            return;
        };
        let sh = &self.shared;
        let event = TraceEvent {
            name: open.name,
            category: open.category,
            rank,
            start_us: sh.origin_unix_us + start.saturating_duration_since(sh.origin).as_secs_f64() * 1e6,
            duration_us: end.saturating_duration_since(start).as_secs_f64() * 1e6,
            args: open.args,
        };
        sh.events.lock().unwrap_or_else(PoisonError::into_inner).push(event);
    }
}

/// The trace `HCOMM_TRACE` asks for: every guard of the process records into
/// it, and each guard, when done, rewrites the file with everything so far.
#[derive(Debug)]
struct EnvTrace {
    path: PathBuf,
    trace: Trace,
    dispatch: Dispatch,
}

impl EnvTrace {
    /// The process's trace when `HCOMM_TRACE` is set (read once).
    fn get() -> Option<&'static EnvTrace> {
        static ENV: OnceLock<Option<EnvTrace>> = OnceLock::new();
        ENV.get_or_init(|| {
            let raw = std::env::var_os(TRACE_ENV).filter(|p| !p.is_empty())?;
            let path = raw
                .to_string_lossy()
                .replace("{pid}", &std::process::id().to_string())
                .replace("{rank}", &job_rank().unwrap_or_default());
            let (layer, trace) = layer();
            Some(EnvTrace {
                path: PathBuf::from(path),
                trace,
                dispatch: Dispatch::new(tracing_subscriber::registry().with(layer)),
            })
        })
        .as_ref()
    }

    /// Writes everything recorded so far. Writers take turns, so the last
    /// one to write (whose snapshot is the latest) leaves the file.
    fn write(&self) -> Result<()> {
        static TURN: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _turn = TURN.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        self.trace.write(&self.path)
    }
}

/// With `HCOMM_TRACE` set: records the operations of the calling thread,
/// and of the rank threads hcomm's launchers start from it, until the guard
/// is dropped or [finished](TraceGuard::finish), then writes the process's
/// trace. `None` when the variable is unset. Called by the application (at
/// the start of `main`, or on each thread that drives a rank of its own),
/// never by the library.
#[must_use = "the thread records only while the guard lives"]
pub fn init_from_env() -> Option<TraceGuard> {
    let env = EnvTrace::get()?;
    Some(TraceGuard {
        default: Some(tracing::dispatcher::set_default(&env.dispatch)),
        env,
    })
}

/// Records the calling thread into the `HCOMM_TRACE` trace while it lives
/// (see [`init_from_env`]).
#[derive(Debug)]
pub struct TraceGuard {
    default: Option<tracing::dispatcher::DefaultGuard>,
    env: &'static EnvTrace,
}

impl TraceGuard {
    /// Stops recording and writes the trace, reporting a failure to write.
    pub fn finish(mut self) -> Result<()> {
        self.default.take();
        self.env.write()
    }
}

impl Drop for TraceGuard {
    fn drop(&mut self) {
        if self.default.take().is_some() {
            if let Err(e) = self.env.write() {
                tracing::warn!(error = %e, "the trace could not be written");
            }
        }
    }
}
