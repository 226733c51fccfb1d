//! Non-blocking point-to-point operations bound to a scope.
//!
//! [`scope`] works like [`std::thread::scope`]: buffers lent to
//! [`Comm::isend`] and [`Comm::irecv`] stay borrowed until the scope ends, so
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

use std::cell::RefCell;
use std::marker::PhantomData;
use std::panic::{self, AssertUnwindSafe};

use smallvec::SmallVec;

use crate::backend::{OpId, OpIds};
use crate::buffer::{Buffer, BufferMut};
use crate::collective::Xfer;
use crate::comm::Comm;
use crate::element::ReduceOp;
use crate::error::{Error, Result};
use crate::p2p::Tag;

/// The scope that non-blocking requests are bound to; see [`scope`].
pub struct Scope<'s, 'env: 's> {
    pending: RefCell<SmallVec<[(Comm, OpId); 8]>>,
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

impl Scope<'_, '_> {
    fn register(&self, comm: &Comm, id: OpId) {
        self.pending.borrow_mut().push((comm.clone(), id));
    }

    fn unregister(&self, id: OpId) {
        let mut p = self.pending.borrow_mut();
        if let Some(i) = p.iter().position(|(_, o)| *o == id) {
            p.swap_remove(i);
        }
    }

    fn record(&self, e: Error) {
        self.errors.borrow_mut().get_or_insert(e);
    }

    fn take_pending(&self) -> SmallVec<[(Comm, OpId); 8]> {
        self.pending.borrow_mut().drain(..).collect()
    }

    /// Cancels every op still registered (a panic left the scope's closure):
    /// queued ones are withdrawn, one already copying finishes first.
    fn cancel_all(&self) {
        for (comm, id) in self.take_pending() {
            comm.cancel_ids(&[id]);
        }
    }

    /// Waits every op still registered (requests dropped without `wait`, or
    /// leaked), so no buffer is in use when the scope returns.
    fn complete_all(&self) -> Option<Error> {
        let mut first = None;
        for (comm, id) in self.take_pending() {
            if let Err(e) = comm.wait_ids(&[id], "request left pending at the end of its scope") {
                first.get_or_insert(e);
            }
        }
        first
    }
}

/// A posted non-blocking operation; complete it with [`Request::wait`] or
/// [`Request::test`]. Dropping it waits for it; dropping it while the thread
/// panics cancels it.
#[must_use = "a request must be waited; dropping it blocks until it completes"]
pub struct Request<'s, 'env: 's> {
    scope: &'s Scope<'s, 'env>,
    comm: Comm,
    id: Option<OpId>,
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
    /// Blocks until the operation completes (or fails, or times out).
    pub fn wait(mut self) -> Result<()> {
        match self.id.take() {
            Some(id) => {
                self.scope.unregister(id);
                self.comm.wait_ids(&[id], "wait")
            }
            None => Ok(()),
        }
    }

    /// Checks without blocking whether the operation completed.
    pub fn test(mut self) -> Result<Progress<'s, 'env>> {
        let Some(id) = self.id else {
            return Ok(Progress::Done);
        };
        match self.comm.test_id(id) {
            Ok(false) => Ok(Progress::Pending(self)),
            done => {
                self.id = None;
                self.scope.unregister(id);
                done.map(|_| Progress::Done)
            }
        }
    }
}

impl Drop for Request<'_, '_> {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.scope.unregister(id);
            if std::thread::panicking() {
                // Unwinding: never block on a peer; withdraw the operation.
                self.comm.cancel_ids(&[id]);
            } else if let Err(e) = self.comm.wait_ids(&[id], "request dropped without wait") {
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
        let id = ids[0];
        scope.register(self, id);
        Ok(Request {
            scope,
            comm: self.clone(),
            id: Some(id),
        })
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
