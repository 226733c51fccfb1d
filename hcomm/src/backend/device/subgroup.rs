//! Subgroups: a sub-communicator made by the library from the world
//! communicator, wrapped in a [`DeviceBackend`] of its own.

use std::sync::Arc;

use super::driver::SubRequest;
use super::handle::CommHandle;
use super::{lock, DeviceBackend, Parts};
use crate::error::{Error, Result};
use crate::topology::Topology;

impl DeviceBackend {
    /// The backend of subgroup `members` (see
    /// [`crate::backend::Backend::subgroup`]).
    pub(super) fn split(&self, key: &str, members: &[usize]) -> Result<DeviceBackend> {
        crate::backend::check_members(self.rank, self.lib_rank.len(), members)?;
        let me = members.iter().position(|&m| m == self.rank).ok_or_else(|| {
            Error::precondition(format!(
                "rank {} is not a member of the subgroup {members:?}",
                self.rank
            ))
        })?;
        let global: Vec<usize> = members.iter().map(|&m| self.global[m]).collect();
        let in_world: Vec<u32> = global.iter().map(|&g| g as u32).collect();
        let sub_key = format!("{}/{key}{members:?}", self.key);
        let sub = {
            let _st = lock(&self.state);
            self.ctx.bind()?;
            self.ctx.driver.subcomm(&SubRequest {
                world_comm: self.world_comm.raw,
                device: self.ctx.device,
                key: &sub_key,
                members: &in_world,
                me,
                timeout: self.timeout,
                world: self.env.as_deref(),
            })?
        };
        let comm = CommHandle::new(Arc::clone(&self.ctx), sub.comm);
        let topology = match &self.topology {
            Topology::Custom { .. } => Topology::FullMesh,
            t => t.clone(),
        };
        DeviceBackend::new(Parts {
            ctx: Arc::clone(&self.ctx),
            comm,
            world_comm: Arc::clone(&self.world_comm),
            lib_rank: sub.lib_rank,
            global,
            rank: me,
            key: sub_key,
            topology,
            timeout: self.timeout,
            env: self.env.clone(),
            presence: self.presence.clone(),
        })
    }
}
