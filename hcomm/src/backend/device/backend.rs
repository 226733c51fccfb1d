//! [`DeviceBackend`]: one rank's view of a device communicator, and its
//! [`Backend`] impl, which hands each operation to the file that does it
//! (`p2p.rs`, `wait.rs`, `collective.rs`, `staging.rs`, `subgroup.rs`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::driver::DevError;
use super::handle::CommHandle;
use super::memory::DeviceCtx;
use super::state::State;
use super::world::{DeviceWorld, GroupShared};
use super::{lock, staging};
use crate::backend::liveness::Presence;
use crate::backend::{Backend, Capabilities, EntryRoute, Issue, NativeCall, OpId, OpIds, P2pOp};
use crate::buffer::Memory;
use crate::element::{DataType, ReduceOp};
use crate::error::{Error, Result};
use crate::header::CollHeader;
use crate::select::Algorithm;
use crate::topology::Topology;

/// One rank's view of a device communicator.
pub(crate) struct DeviceBackend {
    pub(super) ctx: Arc<DeviceCtx>,
    pub(super) comm: Arc<CommHandle>,
    /// The world communicator this one was split from (itself for a world).
    pub(super) world_comm: Arc<CommHandle>,
    /// Library rank of each rank of this group.
    pub(super) lib_rank: Vec<u32>,
    /// Whether library ranks equal ranks.
    pub(super) identity: bool,
    /// World rank of each rank of this group.
    pub(super) global: Vec<usize>,
    pub(super) rank: usize,
    pub(super) key: String,
    pub(super) topology: Topology,
    pub(super) timeout: Duration,
    pub(super) env: Option<Arc<DeviceWorld>>,
    /// Keeps this rank "running" for its peers while the backend lives.
    pub(super) presence: Option<Arc<Presence>>,
    pub(super) shared: Arc<GroupShared>,
    /// `shared` again, as the state the group's in-process ranks share.
    token: Arc<dyn std::any::Any + Send + Sync>,
    pub(super) state: Mutex<State>,
}

/// What a new [`DeviceBackend`] is made of.
pub(crate) struct Parts {
    pub(crate) ctx: Arc<DeviceCtx>,
    pub(crate) comm: Arc<CommHandle>,
    pub(crate) world_comm: Arc<CommHandle>,
    pub(crate) lib_rank: Vec<u32>,
    pub(crate) global: Vec<usize>,
    pub(crate) rank: usize,
    pub(crate) key: String,
    pub(crate) topology: Topology,
    pub(crate) timeout: Duration,
    pub(crate) env: Option<Arc<DeviceWorld>>,
    pub(crate) presence: Option<Arc<Presence>>,
}

impl DeviceBackend {
    /// A backend over a communicator, with a new stream on its device.
    pub(crate) fn new(parts: Parts) -> Result<DeviceBackend> {
        let Parts {
            ctx,
            comm,
            world_comm,
            lib_rank,
            global,
            rank,
            key,
            topology,
            timeout,
            env,
            presence,
        } = parts;
        ctx.bind()?;
        let stream = ctx
            .driver
            .stream_create()
            .map_err(|e| e.into_error(ctx.driver.name()))?;
        tracing::debug!(
            backend = ctx.driver.name(),
            device = ctx.device,
            comm.rank = rank,
            comm.world = lib_rank.len(),
            key = key.as_str(),
            "communicator ready"
        );
        let world = lib_rank.len();
        let shared = env
            .as_ref()
            .map_or_else(|| Arc::new(GroupShared::default()), |w| w.group(&key, world));
        Ok(DeviceBackend {
            token: shared.clone(),
            identity: lib_rank.iter().enumerate().all(|(i, &l)| l as usize == i),
            ctx,
            comm,
            world_comm,
            lib_rank,
            global,
            rank,
            key,
            topology,
            timeout,
            env,
            presence,
            shared,
            state: Mutex::new(State::new(stream, world)),
        })
    }

    pub(super) fn name(&self) -> &'static str {
        self.ctx.driver.name()
    }

    pub(super) fn dev_err(&self, e: DevError) -> Error {
        e.into_error(self.name())
    }

    /// The error every operation gets once the group is unusable.
    pub(super) fn unusable(&self, st: &State) -> Option<Error> {
        if let Some(reason) = self.shared.aborted() {
            return Some(Error::Aborted { reason });
        }
        st.sticky.clone()
    }
}

impl Backend for DeviceBackend {
    fn name(&self) -> &'static str {
        self.ctx.driver.name()
    }

    fn rank(&self) -> usize {
        self.rank
    }

    fn world(&self) -> usize {
        self.lib_rank.len()
    }

    fn accepts(&self, memory: Memory) -> bool {
        match memory {
            Memory::Host => true,
            Memory::Device { backend, device } => backend == self.name() && device == self.ctx.device,
        }
    }

    fn topology(&self) -> Topology {
        self.topology.clone()
    }

    unsafe fn post(&self, ops: &[P2pOp], ids: &mut OpIds) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { self.post_ops(ops, ids) }
    }

    fn wait(&self, ids: &[OpId], timeout: Duration, what: &str) -> Result<()> {
        let mut st = lock(&self.state);
        self.wait_ids(&mut st, ids, timeout, what)
    }

    fn test(&self, id: OpId) -> Result<bool> {
        let mut st = lock(&self.state);
        self.test_id(&mut st, id)
    }

    fn cancel(&self, ids: &[OpId]) {
        let mut st = lock(&self.state);
        self.cancel_ids(&mut st, ids);
    }

    fn enter_collective(&self, _header: &CollHeader) -> Result<()> {
        // The library checks that ranks agree; only a dead group fails fast.
        let st = lock(&self.state);
        self.unusable(&st).map_or(Ok(()), Err)
    }

    fn confirm_collective(&self, _header: &CollHeader, _timeout: Duration) -> Result<()> {
        // The library's collective synchronised every rank already.
        Ok(())
    }

    fn subgroup(&self, key: &str, members: &[usize]) -> Result<Arc<dyn Backend>> {
        Ok(Arc::new(self.split(key, members)?))
    }

    fn native_collectives(&self) -> bool {
        true
    }

    fn capabilities(&self) -> Capabilities<'_> {
        // ranks in one process share the group's state; ranks in other
        // processes exchange their notes with the library's all-gather
        let entries = if self.env.is_some() {
            EntryRoute::Shared(&self.token)
        } else {
            EntryRoute::Exchanged
        };
        Capabilities {
            board: None,
            entries,
            issue: Issue::Plans,
            presence: self.presence.as_deref(),
        }
    }

    unsafe fn native_collective(
        &self,
        call: &NativeCall<'_>,
        dtype: DataType,
        timeout: Duration,
    ) -> Option<Result<Algorithm>> {
        let mut st = lock(&self.state);
        if let Some(e) = self.unusable(&st) {
            return Some(Err(e));
        }
        // In-flight point-to-point operations go first, in posting order.
        self.flush(&mut st);
        // SAFETY: forwarded from the caller.
        Some(unsafe { self.run_collective(&mut st, call, dtype, timeout) })
    }

    fn device_ctx(&self) -> Option<Arc<DeviceCtx>> {
        Some(Arc::clone(&self.ctx))
    }

    unsafe fn local_copy(&self, dst: *mut u8, src: *const u8, bytes: usize) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { staging::local_copy(&self.ctx, dst, src, bytes) }
    }

    unsafe fn local_reduce(
        &self,
        dtype: DataType,
        op: ReduceOp,
        dst: *mut u8,
        src: *const u8,
        count: usize,
    ) -> Result<()> {
        // SAFETY: forwarded from the caller.
        unsafe { staging::local_reduce(&self.ctx, dtype, op, dst, src, count) }
    }

    fn abort(&self, reason: &str) {
        self.abort_group(reason);
    }
}
