//! Pipeline-parallel transfers between neighbouring stages.
//!
//! A [`Pipeline`] sends activations forward (stage `s` to `s + 1`) and
//! gradients backward (`s` to `s - 1`) over a pipeline group whose rank is
//! the stage ([`Context::pp`](crate::parallel::Context::pp)). Forward
//! traffic travels on [`FORWARD_TAG`] and backward traffic on
//! [`BACKWARD_TAG`], so a forward message never matches a backward receive.
//! The paired calls post both directions in one batch, so they cannot
//! deadlock for any number of stages, including 2 (where the previous and
//! the next stage are the same rank).
//!
//! End stages: the first stage has no previous stage and the last has no
//! next one. A call that would talk to a missing stage is an
//! [`Error::Precondition`] naming the stage (not a silent no-op: a skipped
//! `recv_forward` would leave stale data in the caller's buffer); guard
//! such calls with [`Pipeline::is_first_stage`] / [`Pipeline::is_last_stage`].
//!
//! A sender and receiver whose lengths or element types differ both get an
//! error rather than a hang.
//!
//! ```
//! use hcomm::parallel::{Context, ParallelConfig};
//!
//! hcomm::host::run(3, |comm| {
//!     let ctx = Context::init(comm, ParallelConfig { pp: 3, ..Default::default() })?;
//!     let pipe = ctx.pipeline();
//!     let mut act = [0.0f32; 4];
//!     if !pipe.is_first_stage() {
//!         pipe.recv_forward(&mut act)?;
//!     }
//!     act.iter_mut().for_each(|a| *a += 1.0);
//!     if !pipe.is_last_stage() {
//!         pipe.send_forward(&act)?;
//!     } else {
//!         assert_eq!(act, [3.0; 4]);
//!     }
//!     Ok(())
//! })
//! .unwrap();
//! ```

use crate::buffer::{Buffer, BufferMut};
use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::p2p::Tag;
use crate::parallel::Context;

/// The tag of activations sent to the next stage.
pub const FORWARD_TAG: Tag = 0x4843_5046;
/// The tag of gradients sent to the previous stage.
pub const BACKWARD_TAG: Tag = 0x4843_5042;

/// Transfers between neighbouring pipeline stages; see the [module](self).
#[derive(Clone, Debug)]
pub struct Pipeline {
    comm: Comm,
}

impl Context {
    /// The pipeline over this rank's pipeline group.
    pub fn pipeline(&self) -> Pipeline {
        Pipeline::new(self.pp())
    }
}

impl Pipeline {
    /// A pipeline whose stages are the ranks of `group`, in rank order.
    pub fn new(group: &Comm) -> Pipeline {
        Pipeline { comm: group.clone() }
    }

    /// The pipeline group.
    pub fn comm(&self) -> &Comm {
        &self.comm
    }

    /// This rank's stage.
    pub fn stage(&self) -> usize {
        self.comm.rank()
    }

    /// The number of stages.
    pub fn stages(&self) -> usize {
        self.comm.world()
    }

    /// Whether this is the first stage.
    pub fn is_first_stage(&self) -> bool {
        self.stage() == 0
    }

    /// Whether this is the last stage.
    pub fn is_last_stage(&self) -> bool {
        self.stage() + 1 == self.stages()
    }

    fn next(&self, what: &str) -> Result<usize> {
        if self.is_last_stage() {
            return Err(self.no_stage(what, "next", "is_last_stage"));
        }
        Ok(self.stage() + 1)
    }

    fn prev(&self, what: &str) -> Result<usize> {
        if self.is_first_stage() {
            return Err(self.no_stage(what, "previous", "is_first_stage"));
        }
        Ok(self.stage() - 1)
    }

    fn no_stage(&self, what: &str, which: &str, guard: &str) -> Error {
        Error::precondition(format!(
            "pipeline `{what}` on stage {} of {}: there is no {which} stage; hint: guard the call with `{guard}()`",
            self.stage(),
            self.stages()
        ))
    }

    /// Sends `act` to the next stage.
    pub fn send_forward<B: Buffer + ?Sized>(&self, act: &B) -> Result<()> {
        let next = self.next("send_forward")?;
        self.comm.send_tagged(act, next, FORWARD_TAG)
    }

    /// Receives the previous stage's activations into `act`.
    pub fn recv_forward<B: BufferMut + ?Sized>(&self, act: &mut B) -> Result<()> {
        let prev = self.prev("recv_forward")?;
        self.comm.recv_tagged(act, prev, FORWARD_TAG)
    }

    /// Sends `grad` to the previous stage.
    pub fn send_backward<B: Buffer + ?Sized>(&self, grad: &B) -> Result<()> {
        let prev = self.prev("send_backward")?;
        self.comm.send_tagged(grad, prev, BACKWARD_TAG)
    }

    /// Receives the next stage's gradients into `grad`.
    pub fn recv_backward<B: BufferMut + ?Sized>(&self, grad: &mut B) -> Result<()> {
        let next = self.next("recv_backward")?;
        self.comm.recv_tagged(grad, next, BACKWARD_TAG)
    }

    /// Sends `act` to the next stage and receives its gradients into `grad`,
    /// both posted at once.
    pub fn send_forward_recv_backward<S, R>(&self, act: &S, grad: &mut R) -> Result<()>
    where
        S: Buffer + ?Sized,
        R: BufferMut + ?Sized,
    {
        let next = self.next("send_forward_recv_backward")?;
        self.comm.batch(|b| {
            b.send_tagged(act, next, FORWARD_TAG)?;
            b.recv_tagged(grad, next, BACKWARD_TAG)
        })
    }

    /// Sends `grad` to the previous stage and receives its activations into
    /// `act`, both posted at once.
    pub fn send_backward_recv_forward<S, R>(&self, grad: &S, act: &mut R) -> Result<()>
    where
        S: Buffer + ?Sized,
        R: BufferMut + ?Sized,
    {
        let prev = self.prev("send_backward_recv_forward")?;
        self.comm.batch(|b| {
            b.send_tagged(grad, prev, BACKWARD_TAG)?;
            b.recv_tagged(act, prev, FORWARD_TAG)
        })
    }
}
