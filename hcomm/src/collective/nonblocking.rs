//! Non-blocking collectives: `iall_reduce`, `iall_gather`,
//! `ireduce_scatter`, bound to [`crate::scope`] like `isend`/`irecv`.
//!
//! Design: each communicator has one helper thread, started on the first
//! non-blocking collective, that runs them in the order this rank issued
//! them, on a subgroup of every rank reserved for them. Every rank issues
//! its non-blocking collectives in the same order, so they match up on the
//! subgroup; running them there (not on the communicator itself) keeps them
//! out of the order of the blocking collectives the caller runs meanwhile,
//! which therefore overlap with them safely.
//!
//! A request for a non-blocking collective is a [`Task`]: waiting for it
//! waits for the helper to finish it (each step of the collective has the
//! communicator's timeout, so the wait is bounded). The buffers stay
//! borrowed for the scope, and the scope waits every task it still holds
//! when its closure returns. On unwinding (a panic leaving the scope's
//! closure, or a request dropped while the thread panics) a task that has
//! not started is withdrawn and one that is running is stopped, and the
//! subgroup is aborted: the peers' copies of the collective fail with
//! [`Error::Aborted`](crate::Error::Aborted) at once instead of waiting for
//! this rank until the timeout, and later non-blocking collectives of the
//! communicator fail the same way (its blocking operations are unaffected).
//! The cancel returns only once the helper no longer touches the buffers.

use std::panic::{self, AssertUnwindSafe};
use std::sync::mpsc::{self, Sender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};

use super::raw::RawBuf;
use crate::buffer::{Buffer, BufferMut};
use crate::comm::Comm;
use crate::element::{Element, ReduceOp};
use crate::error::{Error, Result};
use crate::request::{Request, Scope};

/// The collective a task runs on the helper's communicator.
type Body = Box<dyn FnOnce(&Comm) -> Result<()> + Send>;

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
    side: Comm,
    queue: Mutex<Sender<Arc<Task>>>,
}

impl Worker {
    fn start(comm: &Comm) -> Result<Worker> {
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
}

/// A buffer view that a task carries to the helper thread.
struct Lent<T>(RawBuf<T>);

// SAFETY: the view points into a buffer borrowed for the scope of the
// request that carries it; the scope waits or cancels the task (which
// returns only once the helper is done with the buffer) before the borrow
// ends, and element types are `Send + Sync`.
unsafe impl<T: Element> Send for Lent<T> {}

impl<T: Element> Lent<T> {
    fn get(&self) -> RawBuf<T> {
        self.0
    }
}

impl Comm {
    /// Queues `body` on this communicator's helper thread and binds it to
    /// `scope`.
    ///
    /// # Safety
    ///
    /// The buffers `body` uses are borrowed for `'s` (receive buffers
    /// exclusively).
    unsafe fn post_task<'s, 'env: 's>(
        &self,
        scope: &'s Scope<'s, 'env>,
        body: impl FnOnce(&Comm) -> Result<()> + Send + 'static,
    ) -> Result<Request<'s, 'env>> {
        self.call("posting a non-blocking collective", || {
            // SAFETY: forwarded from the caller.
            unsafe { self.post_task_now(scope, body) }
        })
    }

    /// [`Comm::post_task`] inside the call already taken.
    ///
    /// # Safety
    ///
    /// As [`Comm::post_task`].
    unsafe fn post_task_now<'s, 'env: 's>(
        &self,
        scope: &'s Scope<'s, 'env>,
        body: impl FnOnce(&Comm) -> Result<()> + Send + 'static,
    ) -> Result<Request<'s, 'env>> {
        let mut slot = lock(&self.inner.nonblocking);
        let worker = match slot.take() {
            Some(worker) => worker,
            None => Worker::start(self)?,
        };
        let worker = slot.insert(worker);
        worker.side.set_timeout(self.timeout());
        let task = Arc::new(Task {
            side: worker.side.clone(),
            state: Mutex::new(State::Queued(Box::new(body))),
            finished: Condvar::new(),
        });
        lock(&worker.queue)
            .send(Arc::clone(&task))
            .map_err(|_| Error::Backend {
                backend: self.backend_name(),
                message: "the thread of non-blocking collectives has stopped".into(),
            })?;
        Ok(Request::for_task(scope, task))
    }

    /// Starts [`Comm::all_reduce`] of `send` into `recv`; complete it with
    /// the request. Every rank issues its non-blocking collectives in the
    /// same order.
    pub fn iall_reduce<'s, 'env: 's, T, S, R>(
        &self,
        scope: &'s Scope<'s, 'env>,
        send: &'s S,
        recv: &'s mut R,
        op: ReduceOp,
    ) -> Result<Request<'s, 'env>>
    where
        T: Element,
        S: Buffer<Elem = T> + ?Sized,
        R: BufferMut<Elem = T> + ?Sized,
    {
        let (send, recv) = (Lent(self.view(send)?), Lent(self.view_mut(recv)?));
        if recv.0.len != send.0.len {
            return Err(Error::buffer_length("recv", recv.0.len, send.0.len));
        }
        let body = move |c: &Comm| {
            // SAFETY: the views stay valid until the task finishes (see `Lent`).
            unsafe { c.all_reduce_raw(send.get(), recv.get(), op) }
        };
        // SAFETY: both buffers are borrowed for `'s`, `recv` exclusively.
        unsafe { self.post_task(scope, body) }
    }

    /// Starts [`Comm::all_reduce_in_place`] on `buf` (a gradient bucket,
    /// say); complete it with the request.
    ///
    /// ```
    /// use hcomm::ReduceOp;
    ///
    /// hcomm::host::run(2, |comm| {
    ///     let mut bucket = vec![comm.rank() as f32 + 1.0; 4];
    ///     hcomm::scope(|s| {
    ///         let req = comm.iall_reduce_in_place(s, &mut bucket, ReduceOp::Sum)?;
    ///         // ... compute the next bucket's gradients meanwhile ...
    ///         req.wait()
    ///     })?;
    ///     assert_eq!(bucket, vec![3.0; 4]);
    ///     Ok(())
    /// })
    /// .unwrap();
    /// ```
    pub fn iall_reduce_in_place<'s, 'env: 's, B: BufferMut + ?Sized>(
        &self,
        scope: &'s Scope<'s, 'env>,
        buf: &'s mut B,
        op: ReduceOp,
    ) -> Result<Request<'s, 'env>> {
        let buf = Lent(self.view_mut(buf)?);
        let body = move |c: &Comm| {
            // SAFETY: the view stays valid until the task finishes (see `Lent`).
            unsafe { c.all_reduce_raw(buf.get(), buf.get(), op) }
        };
        // SAFETY: the buffer is borrowed exclusively for `'s`.
        unsafe { self.post_task(scope, body) }
    }

    /// Starts [`Comm::all_gather`]; complete it with the request.
    pub fn iall_gather<'s, 'env: 's, T, S, R>(
        &self,
        scope: &'s Scope<'s, 'env>,
        send: &'s S,
        recv: &'s mut R,
    ) -> Result<Request<'s, 'env>>
    where
        T: Element,
        S: Buffer<Elem = T> + ?Sized,
        R: BufferMut<Elem = T> + ?Sized,
    {
        let (send, recv) = (Lent(self.view(send)?), Lent(self.view_mut(recv)?));
        self.check_blocks(("recv", recv.0.len), ("send", send.0.len))?;
        let body = move |c: &Comm| {
            // SAFETY: the views stay valid until the task finishes (see `Lent`).
            unsafe { c.all_gather_raw(send.get(), recv.get()) }
        };
        // SAFETY: both buffers are borrowed for `'s`, `recv` exclusively.
        unsafe { self.post_task(scope, body) }
    }

    /// Starts [`Comm::reduce_scatter`]; complete it with the request.
    pub fn ireduce_scatter<'s, 'env: 's, T, S, R>(
        &self,
        scope: &'s Scope<'s, 'env>,
        send: &'s S,
        recv: &'s mut R,
        op: ReduceOp,
    ) -> Result<Request<'s, 'env>>
    where
        T: Element,
        S: Buffer<Elem = T> + ?Sized,
        R: BufferMut<Elem = T> + ?Sized,
    {
        let (send, recv) = (Lent(self.view(send)?), Lent(self.view_mut(recv)?));
        self.check_blocks(("send", send.0.len), ("recv", recv.0.len))?;
        let body = move |c: &Comm| {
            // SAFETY: the views stay valid until the task finishes (see `Lent`).
            unsafe { c.reduce_scatter_raw(send.get(), recv.get(), op) }
        };
        // SAFETY: both buffers are borrowed for `'s`, `recv` exclusively.
        unsafe { self.post_task(scope, body) }
    }
}
