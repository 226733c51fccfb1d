//! Non-blocking operations bound to a scope.
//!
//! [`scope`] works like [`std::thread::scope`]: buffers lent to
//! [`Comm::isend`], [`Comm::irecv`] and the non-blocking collectives
//! ([`Comm::iall_reduce`], [`Comm::iall_gather`], [`Comm::ireduce_scatter`])
//! stay borrowed until the scope ends, so
//! safe code cannot touch them while a transfer may still use them, and the
//! scope completes (or cancels) every request that was not waited, even one
//! that was leaked with [`std::mem::forget`].
//!
//! Unwinding is covered too. A request dropped while its thread panics is
//! cancelled rather than waited (a panic never blocks on a peer), and when a
//! panic leaves the scope's closure the scope cancels every request still
//! pending — a transfer that is already copying finishes first — before the
//! panic resumes, so no buffer is written after the stack that owns it is
//! gone. A cancelled receive consumes no message: the peer's message waits
//! for the next matching receive.
//!
//! ```compile_fail
//! hcomm::host::run(2, |comm| {
//!     let mut buf = [1.0f32; 4];
//!     hcomm::scope(|s| {
//!         let req = comm.isend(s, &buf, 1 - comm.rank())?;
//!         buf[0] = 2.0; // error: `buf` is lent to the send until the scope ends
//!         req.wait()
//!     })
//! })
//! .unwrap();
//! ```

use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;

use smallvec::SmallVec;

use crate::backend::{OpId, OpIds};
use crate::buffer::{Buffer, BufferMut};
use crate::comm::Comm;
use crate::comm::Task;
use crate::element::ReduceOp;
use crate::error::{Error, Result};
use crate::p2p::Tag;
use crate::raw::Xfer;

/// The scope that non-blocking requests are bound to; see [`scope`].
pub struct Scope<'s, 'env: 's> {
    /// What every request of the scope stands for, under the key the
    /// request holds: the scope owns it, so a request leaked with
    /// [`std::mem::forget`] leaks nothing and is still completed here.
    pending: RefCell<SmallVec<[(u64, Pending); 8]>>,
    next_key: Cell<u64>,
    errors: RefCell<Option<Error>>,
    _lifetime: PhantomData<&'s mut &'s ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

/// Runs `f` with a scope for non-blocking requests. When `f` returns, every
/// request it did not complete is waited (or, past the timeout, cancelled)
/// before the borrowed buffers are released; an error from those waits is
/// returned if `f` itself succeeded. When `f` panics, every request still
/// pending is cancelled and the panic resumes.
pub fn scope<'env, R>(f: impl for<'s> FnOnce(&'s Scope<'s, 'env>) -> Result<R>) -> Result<R> {
    let scope = Scope {
        pending: RefCell::new(SmallVec::new()),
        next_key: Cell::new(0),
        errors: RefCell::new(None),
        _lifetime: PhantomData,
        _env: PhantomData,
    };
    // The panic is resumed below once nothing borrowed is in use, so no
    // broken state of `f`'s captures can be observed afterwards.
    let out = match panic::catch_unwind(AssertUnwindSafe(|| f(&scope))) {
        Ok(out) => out,
        Err(payload) => {
            scope.cancel_all();
            panic::resume_unwind(payload);
        }
    };
    let leftover = scope.complete_all();
    let recorded = scope.errors.borrow_mut().take();
    match (out, leftover.or(recorded)) {
        (Ok(v), None) => Ok(v),
        (Ok(_), Some(e)) | (Err(e), _) => Err(e),
    }
}

/// What a request stands for: a backend operation, or a non-blocking
/// collective run by the communicator's helper thread.
#[derive(Clone)]
enum Pending {
    Op(Comm, OpId),
    Task(Arc<Task>),
}

impl Pending {
    fn wait(&self, what: &str) -> Result<()> {
        match self {
            Pending::Op(comm, id) => comm.wait_ids(&[*id], what),
            Pending::Task(task) => task.wait(),
        }
    }

    /// `Ok(true)` once done (and released), `Ok(false)` while in flight.
    fn test(&self) -> Result<bool> {
        match self {
            Pending::Op(comm, id) => comm.test_id(*id),
            Pending::Task(task) => task.test().map_or(Ok(false), |r| r.map(|()| true)),
        }
    }

    /// Withdraws the operation; returns once its buffers are no longer used.
    fn cancel(&self) {
        match self {
            Pending::Op(comm, id) => comm.cancel_ids(&[*id]),
            Pending::Task(task) => task.cancel(),
        }
    }
}

impl Scope<'_, '_> {
    fn register(&self, pending: Pending) -> u64 {
        let key = self.next_key.get();
        self.next_key.set(key + 1);
        self.pending.borrow_mut().push((key, pending));
        key
    }

    /// Removes the request `key`; the caller then owns completing it.
    fn unregister(&self, key: u64) -> Option<Pending> {
        let mut p = self.pending.borrow_mut();
        let i = p.iter().position(|(k, _)| *k == key)?;
        Some(p.swap_remove(i).1)
    }

    /// The request `key`, still registered.
    fn get(&self, key: u64) -> Option<Pending> {
        self.pending
            .borrow()
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, p)| p.clone())
    }

    fn record(&self, e: Error) {
        self.errors.borrow_mut().get_or_insert(e);
    }

    fn take_pending(&self) -> SmallVec<[Pending; 8]> {
        self.pending.borrow_mut().drain(..).map(|(_, p)| p).collect()
    }

    /// Cancels every op still registered (a panic left the scope's closure):
    /// queued ones are withdrawn, one already copying finishes first.
    fn cancel_all(&self) {
        for pending in self.take_pending() {
            pending.cancel();
        }
    }

    /// Waits every op still registered (requests dropped without `wait`, or
    /// leaked), so no buffer is in use when the scope returns.
    fn complete_all(&self) -> Option<Error> {
        let mut first = None;
        for pending in self.take_pending() {
            if let Err(e) = pending.wait("request left pending at the end of its scope") {
                first.get_or_insert(e);
            }
        }
        first
    }
}

/// A posted non-blocking operation; complete it with [`Request::wait`] or
/// [`Request::test`]. Dropping it waits for it; dropping it while the thread
/// panics cancels it. Forgetting it ([`std::mem::forget`]) leaks nothing:
/// the scope completes it.
#[must_use = "a request must be waited; dropping it blocks until it completes"]
pub struct Request<'s, 'env: 's> {
    scope: &'s Scope<'s, 'env>,
    /// The key of the operation in the scope; `None` once completed.
    key: Option<u64>,
}

/// The outcome of [`Request::test`].
#[must_use]
pub enum Progress<'s, 'env: 's> {
    /// The operation completed.
    Done,
    /// Still in flight; here is the request back.
    Pending(Request<'s, 'env>),
}

impl<'s, 'env: 's> Request<'s, 'env> {
    fn new(scope: &'s Scope<'s, 'env>, pending: Pending) -> Self {
        let key = scope.register(pending);
        Request { scope, key: Some(key) }
    }

    /// Takes the operation out of the scope; the caller completes it.
    fn take(&mut self) -> Option<Pending> {
        self.key.take().and_then(|key| self.scope.unregister(key))
    }

    /// A request for a non-blocking collective.
    pub(crate) fn for_task(scope: &'s Scope<'s, 'env>, task: Arc<Task>) -> Self {
        Request::new(scope, Pending::Task(task))
    }

    /// Blocks until the operation completes (or fails, or times out).
    ///
    /// Waiting is a call on the communicator: while another thread is in a
    /// call on it, this returns [`Error::Precondition`] at once and the
    /// operation is cancelled (its buffer is free again).
    pub fn wait(mut self) -> Result<()> {
        match self.take() {
            Some(p) => p.wait("wait"),
            None => Ok(()),
        }
    }

    /// Checks without blocking whether the operation completed.
    pub fn test(mut self) -> Result<Progress<'s, 'env>> {
        let Some(p) = self.key.and_then(|key| self.scope.get(key)) else {
            return Ok(Progress::Done);
        };
        match p.test() {
            Ok(false) => Ok(Progress::Pending(self)),
            done => {
                // `test` released the operation: it only needs forgetting.
                drop(self.take());
                done.map(|_| Progress::Done)
            }
        }
    }
}

impl Drop for Request<'_, '_> {
    fn drop(&mut self) {
        if let Some(p) = self.take() {
            if std::thread::panicking() {
                // Unwinding: never block on a peer; withdraw the operation.
                p.cancel();
            } else if let Err(e) = p.wait("request dropped without wait") {
                self.scope.record(e);
            }
        }
    }
}

/// Waits for every request, even after one fails; returns the first error.
pub fn wait_all<'s, 'env: 's>(requests: impl IntoIterator<Item = Request<'s, 'env>>) -> Result<()> {
    let mut first = None;
    for r in requests {
        if let Err(e) = r.wait() {
            first.get_or_insert(e);
        }
    }
    first.map_or(Ok(()), Err)
}

impl Comm {
    fn post_one<'s, 'env: 's>(&self, scope: &'s Scope<'s, 'env>, xfer: &Xfer<'_>) -> Result<Request<'s, 'env>> {
        let mut ids = OpIds::new();
        // SAFETY: the buffer is borrowed for `'s`, which lasts until the scope
        // has completed or cancelled this op (`Scope::complete_all`).
        unsafe { self.post_ops(xfer.ops(), &mut ids)? };
        Ok(Request::new(scope, Pending::Op(self.clone(), ids[0])))
    }

    /// Starts sending `buf` to `peer` on tag 0.
    pub fn isend<'s, 'env: 's, B: Buffer + ?Sized>(
        &self,
        scope: &'s Scope<'s, 'env>,
        buf: &'s B,
        peer: usize,
    ) -> Result<Request<'s, 'env>> {
        self.isend_tagged(scope, buf, peer, 0)
    }

    /// Starts sending `buf` to `peer` on `tag`.
    pub fn isend_tagged<'s, 'env: 's, B: Buffer + ?Sized>(
        &self,
        scope: &'s Scope<'s, 'env>,
        buf: &'s B,
        peer: usize,
        tag: Tag,
    ) -> Result<Request<'s, 'env>> {
        self.check_peer(peer, "isend")?;
        let mut x = Xfer::p2p(self);
        x.send(self.view(buf)?, peer, i64::from(tag));
        self.post_one(scope, &x)
    }

    /// Starts receiving into `buf` from `peer` on tag 0.
    pub fn irecv<'s, 'env: 's, B: BufferMut + ?Sized>(
        &self,
        scope: &'s Scope<'s, 'env>,
        buf: &'s mut B,
        peer: usize,
    ) -> Result<Request<'s, 'env>> {
        self.irecv_tagged(scope, buf, peer, 0)
    }

    /// Starts receiving into `buf` from `peer` on `tag`.
    pub fn irecv_tagged<'s, 'env: 's, B: BufferMut + ?Sized>(
        &self,
        scope: &'s Scope<'s, 'env>,
        buf: &'s mut B,
        peer: usize,
        tag: Tag,
    ) -> Result<Request<'s, 'env>> {
        self.check_peer(peer, "irecv")?;
        let mut x = Xfer::p2p(self);
        x.recv(self.view_mut(buf)?, peer, i64::from(tag));
        self.post_one(scope, &x)
    }

    /// Starts receiving from `peer` on `tag`, combining into `buf` with `op`.
    pub fn irecv_reduce<'s, 'env: 's, B: BufferMut + ?Sized>(
        &self,
        scope: &'s Scope<'s, 'env>,
        buf: &'s mut B,
        peer: usize,
        tag: Tag,
        op: ReduceOp,
    ) -> Result<Request<'s, 'env>> {
        self.check_peer(peer, "irecv")?;
        let mut x = Xfer::p2p(self);
        x.recv_reduce(self.view_mut(buf)?, peer, i64::from(tag), op);
        self.post_one(scope, &x)
    }
}
