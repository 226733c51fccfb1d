//! One executor thread per communicator: it makes every call on it, so the
//! runtime's one-call-at-a-time guard never refuses Python's operations, and
//! it takes them in the order Python started them (the order that pairs
//! them up across ranks).
//!
//! A blocking operation (a collective, `send`/`recv`, an asynchronous
//! collective) runs on the executor to its end. A non-blocking one
//! (`isend`/`irecv`) is posted in a scope the executor keeps open while any
//! is pending; between commands the executor tests the pending requests and
//! completes each one's outcome when its test says done. With nothing
//! pending it waits for the next command, and it ends after [`IDLE`] without
//! one. A group's [`Lane`] lets a blocking call skip the executor (and its
//! hand-over) when nothing is queued on it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};
use std::time::{Duration, Instant};

/// The turn of one communicator's calls, shared by every Python object of
/// the group and its executor: the executor holds `turn` while it runs a
/// command or has requests pending; `queued` counts the commands handed to
/// it and not yet finished. A blocking call may run on its caller's thread
/// (no hand-over) only when nothing is queued and it gets the turn, so the
/// calls of a group still run one at a time, in the order Python made them.
pub(crate) struct Lane {
    turn: Mutex<()>,
    queued: AtomicUsize,
}

impl Lane {
    /// The turn, when nothing is queued and nobody holds it.
    pub(crate) fn try_enter(&self) -> Option<MutexGuard<'_, ()>> {
        if self.queued.load(Ordering::Acquire) != 0 {
            return None;
        }
        match self.turn.try_lock() {
            Ok(guard) => Some(guard),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        }
    }

    fn finished(&self) {
        self.queued.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The lanes of the groups that have Python objects, by group.
static LANES: Mutex<Vec<(hcomm::Comm, Weak<Lane>)>> = Mutex::new(Vec::new());

/// The lane of `comm`'s group (one per group, while any holder lives).
pub(crate) fn lane(comm: &hcomm::Comm) -> Arc<Lane> {
    let mut lanes = LANES.lock().unwrap_or_else(PoisonError::into_inner);
    lanes.retain(|(_, l)| l.strong_count() > 0);
    if let Some(l) = lanes
        .iter()
        .find(|(c, _)| c.same_group(comm))
        .and_then(|(_, l)| l.upgrade())
    {
        return l;
    }
    let l = Arc::new(Lane {
        turn: Mutex::new(()),
        queued: AtomicUsize::new(0),
    });
    lanes.push((comm.clone(), Arc::downgrade(&l)));
    l
}

/// A blocking command: runs to its end and completes its own outcome.
pub(crate) type Blocking = Box<dyn FnOnce() + Send + 'static>;

/// Posts a non-blocking operation in the executor's scope.
pub(crate) type Post =
    Box<dyn for<'s> FnOnce(&'s hcomm::Scope<'s, 'static>) -> hcomm::Result<Req<'s>> + Send + 'static>;

/// Completes a posted operation's outcome (once).
pub(crate) type Done = Box<dyn FnOnce(hcomm::Result<()>) + Send + 'static>;

/// A request of the executor's scope.
pub(crate) type Req<'s> = hcomm::Request<'s, 'static>;

/// What the executor is asked to do.
pub(crate) enum Command {
    Run(Blocking),
    Post(Post, Done),
}

/// How long an executor with nothing pending waits for a command before it
/// ends.
const IDLE: Duration = Duration::from_secs(30);

/// How long an executor with pending requests and nothing new yields
/// between tests before it sleeps between them instead.
const SPIN: Duration = Duration::from_micros(200);

/// The pause between tests once [`SPIN`] has passed without progress.
const NAP: Duration = Duration::from_micros(50);

/// The running executors, each by its communicator.
static EXECUTORS: Mutex<Vec<(hcomm::Comm, Sender<Command>)>> = Mutex::new(Vec::new());

fn executors() -> MutexGuard<'static, Vec<(hcomm::Comm, Sender<Command>)>> {
    EXECUTORS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `command`, counted in `lane`'s queue until it has finished (a posted
/// operation: until its request has completed).
fn counted(lane: &Arc<Lane>, command: Command) -> Command {
    lane.queued.fetch_add(1, Ordering::AcqRel);
    let lane = Arc::clone(lane);
    match command {
        Command::Run(job) => Command::Run(Box::new(move || {
            job();
            lane.finished();
        })),
        Command::Post(post, done) => Command::Post(
            post,
            Box::new(move |result| {
                done(result);
                lane.finished();
            }),
        ),
    }
}

/// Hands `command` to `comm`'s executor, starting one if there is none.
pub(crate) fn submit(comm: &hcomm::Comm, lane: &Arc<Lane>, command: Command) -> std::io::Result<()> {
    let command = counted(lane, command);
    let sent = send(comm, lane, command);
    if sent.is_err() {
        lane.finished();
    }
    sent
}

fn send(comm: &hcomm::Comm, lane: &Arc<Lane>, command: Command) -> std::io::Result<()> {
    // Sent under the lock: an executor leaves the list under it too, after a
    // last look at its channel, so no command is lost to an ending thread.
    let mut list = executors();
    let command = match list.iter().find(|(c, _)| c.same_group(comm)) {
        Some((_, tx)) => match tx.send(command) {
            Ok(()) => return Ok(()),
            Err(back) => back.0,
        },
        None => command,
    };
    list.retain(|(c, _)| !c.same_group(comm));
    let (tx, rx) = channel::<Command>();
    tx.send(command)
        .map_err(|_| std::io::Error::other("a new command channel is closed"))?;
    let own = comm.clone();
    let lane = Arc::clone(lane);
    std::thread::Builder::new()
        .name("hcomm-py-comm".into())
        .spawn(move || serve(&own, &lane, &rx))?;
    list.push((comm.clone(), tx));
    Ok(())
}

/// The executor's loop: a command at a time, and the pending requests.
fn serve(comm: &hcomm::Comm, lane: &Lane, rx: &Receiver<Command>) {
    loop {
        let command = match rx.recv_timeout(IDLE) {
            Ok(command) => command,
            Err(RecvTimeoutError::Timeout) => {
                let mut list = executors();
                if let Ok(command) = rx.try_recv() {
                    command
                } else {
                    list.retain(|(c, _)| !c.same_group(comm));
                    return;
                }
            }
            Err(RecvTimeoutError::Disconnected) => return,
        };
        // The group's turn, while the command runs and requests are pending.
        let _turn = lane.turn.lock().unwrap_or_else(PoisonError::into_inner);
        // Every request posted here is completed (tested done, or waited)
        // before the closure returns; an error left over at the end of the
        // scope belongs to no Python operation.
        let _ = hcomm::scope(|s| {
            let mut pending = Vec::new();
            handle(s, command, &mut pending);
            drive(comm, s, rx, &mut pending);
            Ok(())
        });
    }
}

/// A posted request, its outcome's completion and when it was posted.
struct InFlight<'s> {
    req: Req<'s>,
    done: Done,
    since: Instant,
}

/// Runs or posts `command`.
fn handle<'s>(scope: &'s hcomm::Scope<'s, 'static>, command: Command, pending: &mut Vec<InFlight<'s>>) {
    match command {
        Command::Run(job) => job(),
        Command::Post(post, done) => {
            let posted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| post(scope)))
                .unwrap_or_else(|p| Err(crate::errors::panicked(&*p)));
            match posted {
                Ok(req) => pending.push(InFlight {
                    req,
                    done,
                    since: Instant::now(),
                }),
                Err(e) => done(Err(e)),
            }
        }
    }
}

/// Takes commands and tests `pending` until none is left.
fn drive<'s>(
    comm: &hcomm::Comm,
    scope: &'s hcomm::Scope<'s, 'static>,
    rx: &Receiver<Command>,
    pending: &mut Vec<InFlight<'s>>,
) {
    let mut last_progress = Instant::now();
    while !pending.is_empty() {
        let mut progressed = false;
        while let Ok(command) = rx.try_recv() {
            handle(scope, command, pending);
            progressed = true;
        }
        let limit = comm.timeout();
        for flight in std::mem::take(pending) {
            let InFlight { req, done, since } = flight;
            match req.test() {
                Ok(hcomm::Progress::Done) => {
                    done(Ok(()));
                    progressed = true;
                }
                Ok(hcomm::Progress::Pending(req)) if since.elapsed() >= limit => {
                    // Past the communicator's limit: the wait ends it (done,
                    // or a timeout error that ends the communicator).
                    done(req.wait());
                    progressed = true;
                }
                Ok(hcomm::Progress::Pending(req)) => pending.push(InFlight { req, done, since }),
                Err(e) => {
                    done(Err(e));
                    progressed = true;
                }
            }
        }
        if progressed {
            last_progress = Instant::now();
        } else if last_progress.elapsed() < SPIN {
            std::thread::yield_now();
        } else {
            std::thread::sleep(NAP);
        }
    }
}
