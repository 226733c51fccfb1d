//! The helper thread of a communicator's non-blocking collectives and the
//! tasks it runs (the collectives themselves are
//! `collective/nonblocking.rs`'s): one thread per communicator, started on
//! the first non-blocking collective, running them in the order this rank
//! issued them on a subgroup of every rank reserved for them.

use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use super::Comm;
use crate::error::{Error, Result};

/// The collective a task runs on the helper's communicator.
pub(crate) type Body = Box<dyn FnOnce(&Comm) -> Result<()> + Send>;

/// One non-blocking collective.
pub(crate) struct Task {
    side: Comm,
    state: Mutex<State>,
    finished: Condvar,
}

enum State {
    Queued(Body),
    Running,
    Done(Result<()>),
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Task {
    /// Runs the task on the helper thread, unless it was withdrawn; its
    /// error, if it ran and failed.
    fn run(&self) -> Option<Error> {
        let body = {
            let mut state = lock(&self.state);
            match std::mem::replace(&mut *state, State::Running) {
                State::Queued(body) => body,
                done => {
                    *state = done;
                    return None;
                }
            }
        };
        // A panic inside the collective must not leave waiters blocked.
        let result = panic::catch_unwind(AssertUnwindSafe(|| body(&self.side))).unwrap_or_else(|_| {
            Err(Error::Backend {
                backend: self.side.backend_name(),
                message: "a non-blocking collective panicked on the helper thread".into(),
            })
        });
        let error = result.as_ref().err().cloned();
        *lock(&self.state) = State::Done(result);
        self.finished.notify_all();
        error
    }

    /// Finishes the task with `error` unless it was withdrawn.
    fn fail(&self, error: &Error) {
        let mut state = lock(&self.state);
        if matches!(*state, State::Queued(_)) {
            *state = State::Done(Err(error.clone()));
            self.finished.notify_all();
        }
    }

    /// Blocks until the helper finished the task; its result.
    pub(crate) fn wait(&self) -> Result<()> {
        let mut state = lock(&self.state);
        loop {
            if let State::Done(result) = &*state {
                return result.clone();
            }
            state = self.finished.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }

    /// The result once the task finished, `None` while it is queued or running.
    pub(crate) fn test(&self) -> Option<Result<()>> {
        match &*lock(&self.state) {
            State::Done(result) => Some(result.clone()),
            _ => None,
        }
    }

    /// Withdraws the task if it has not started, else stops it; either way
    /// aborts the helper's communicator, so that the peers' copies of the
    /// collective fail at once instead of waiting for this rank until the
    /// timeout. Returns once the buffers are free.
    pub(crate) fn cancel(&self) {
        let running = {
            let mut state = lock(&self.state);
            match &*state {
                State::Queued(_) => {
                    // Dropping the body drops only its copies of the pointers.
                    *state = State::Done(Err(Error::Aborted {
                        reason: "non-blocking collective cancelled before it started".into(),
                    }));
                    self.finished.notify_all();
                    false
                }
                State::Done(_) => return,
                State::Running => true,
            }
        };
        self.side.abort(&format!(
            "rank {} cancelled a non-blocking collective while unwinding",
            self.side.rank()
        ));
        if running {
            // Aborted operations fail at once and release their buffers, so
            // the helper finishes promptly.
            let _ = self.wait();
        }
    }
}

/// The helper thread of a communicator and the subgroup it runs on.
pub(crate) struct Worker {
    pub(crate) side: Comm,
    queue: Mutex<Sender<Arc<Task>>>,
}

impl Worker {
    pub(crate) fn start(comm: &Comm) -> Result<Worker> {
        let every: Vec<usize> = (0..comm.world()).collect();
        let side = comm.subgroup("hcomm.nonblocking", &every)?;
        let (tx, rx) = mpsc::channel::<Arc<Task>>();
        std::thread::Builder::new()
            .name(format!("hcomm-nonblocking-{}", comm.rank()))
            .spawn(move || {
                // Ends when the communicator (the queue's sender) is gone.
                // After a failure the ranks' helpers may no longer agree on
                // which collective comes next: every later task fails with
                // the first error instead of meeting another rank's task.
                let mut failed: Option<Error> = None;
                for task in rx {
                    match &failed {
                        Some(e) => task.fail(e),
                        None => failed = task.run(),
                    }
                }
            })
            .map_err(|e| Error::Backend {
                backend: comm.backend_name(),
                message: format!("cannot start the thread of non-blocking collectives: {e}"),
            })?;
        Ok(Worker {
            side,
            queue: Mutex::new(tx),
        })
    }

    /// Queues `body` for the helper thread, with `comm`'s timeout.
    pub(crate) fn queue(&self, comm: &Comm, body: Body) -> Result<Arc<Task>> {
        self.side.set_timeout(comm.timeout());
        let task = Arc::new(Task {
            side: self.side.clone(),
            state: Mutex::new(State::Queued(body)),
            finished: Condvar::new(),
        });
        lock(&self.queue).send(Arc::clone(&task)).map_err(|_| Error::Backend {
            backend: comm.backend_name(),
            message: "the thread of non-blocking collectives has stopped".into(),
        })?;
        Ok(task)
    }
}
