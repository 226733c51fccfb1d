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
//! A request for a non-blocking collective is a `Task` (`comm/worker.rs`): waiting for it
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

use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::buffer::{Buffer, BufferMut};
use crate::comm::{Comm, Worker};
use crate::element::{Element, ReduceOp};
use crate::error::{Error, Result};
use crate::raw::RawBuf;
use crate::request::{Request, Scope};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
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
        let task = worker.queue(self, Box::new(body))?;
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
