//! What the HCCL and NCCL entry points share: wrapping a library
//! communicator in a [`Comm`], one communicator per device of this process,
//! and in-process worlds of one thread (and one device) per rank. What
//! differs between the libraries is their [`DeviceLibrary`] impl.

use std::sync::Arc;

use super::ranks::{guard_rank, run_rank_threads};
use crate::backend::device::memory::DeviceCtx;
use crate::backend::device::world::DeviceWorld;
use crate::backend::device::{CommHandle, DeviceBackend, Driver, Parts, Raw};
use crate::backend::liveness::Presence;
use crate::comm::Comm;
use crate::error::{Error, Result};
use crate::options::CommOptions;

/// How a loaded device library makes world communicators.
pub(crate) trait DeviceLibrary: Driver {
    /// The bootstrap id made on rank 0 and given unchanged to every rank.
    type Id: Sync;
    /// The number of visible devices.
    fn devices(&self) -> Result<usize>;
    /// A new id for an in-process world.
    fn new_id(&self) -> Result<Self::Id>;
    /// Joins the communicator of `id` as `rank` of `world` on `device`
    /// (collective and blocking).
    fn join(&self, world: usize, id: &Self::Id, rank: usize, device: i32, options: &CommOptions) -> Result<Raw>;
    /// One communicator per device of `devices`, rank `i` on `devices[i]`.
    fn join_all(&self, devices: &[i32]) -> Result<Vec<Raw>>;
}

/// Rank `rank` of the world communicator `raw` of `world` ranks on `device`,
/// with its in-process world and presence when the world's ranks are
/// threads of this process.
fn world_comm<L: DeviceLibrary>(
    lib: &Arc<L>,
    raw: Raw,
    world: usize,
    rank: usize,
    device: i32,
    options: &CommOptions,
    in_process: Option<(&Arc<DeviceWorld>, Arc<Presence>)>,
) -> Result<Comm> {
    let driver: Arc<dyn Driver> = Arc::clone(lib) as Arc<dyn Driver>;
    let ctx = DeviceCtx::get(&driver, device);
    let comm = CommHandle::new(Arc::clone(&ctx), raw);
    let (env, presence) = in_process.map_or((None, None), |(w, p)| (Some(Arc::clone(w)), Some(p)));
    let backend = DeviceBackend::new(Parts {
        ctx,
        world_comm: Arc::clone(&comm),
        comm,
        lib_rank: (0..world as u32).collect(),
        global: (0..world).collect(),
        rank,
        key: "world".to_owned(),
        topology: options.topology.clone(),
        timeout: options.timeout,
        env,
        presence,
    })?;
    Ok(Comm::from_backend(Arc::new(backend), options))
}

/// Joins the communicator of `id` as `rank` of `world` on `device`.
pub(crate) fn init_rank<L: DeviceLibrary>(
    lib: &Arc<L>,
    world: usize,
    rank: usize,
    id: &L::Id,
    device: i32,
    options: &CommOptions,
) -> Result<Comm> {
    if rank >= world {
        return Err(Error::precondition(format!(
            "rank {rank} is out of range for a world of {world}"
        )));
    }
    let visible = lib.devices()?;
    if usize::try_from(device).map_or(true, |d| d >= visible) {
        return Err(Error::Config {
            message: format!(
                "rank {rank} asks for device {device}, but {visible} device(s) are visible to this process; hint: \
                 `LOCAL_RANK` picks each process's device, so start at most {visible} process(es) per host, or make \
                 more devices visible"
            ),
        });
    }
    let raw = lib.join(world, id, rank, device, options)?;
    world_comm(lib, raw, world, rank, device, options, None)
}

/// One communicator per device of `devices` (rank `i` on `devices[i]`), for
/// threads of the caller's own.
pub(crate) fn init_all<L: DeviceLibrary>(lib: &Arc<L>, devices: &[i32], options: &CommOptions) -> Result<Vec<Comm>> {
    let raws = lib.join_all(devices)?;
    let world = devices.len();
    let dw = DeviceWorld::new(world);
    raws.into_iter()
        .enumerate()
        .map(|(rank, raw)| {
            let presence = Presence::new(&dw.liveness, rank);
            world_comm(lib, raw, world, rank, devices[rank], options, Some((&dw, presence)))
        })
        .collect()
}

/// Runs `f` on `world` ranks, threads of this process with rank `r` on
/// device `r`, with the failure semantics of [`crate::host::run`].
pub(crate) fn run<L, R, F>(lib: &Arc<L>, world: usize, options: &CommOptions, f: F) -> Result<Vec<R>>
where
    L: DeviceLibrary,
    R: Send,
    F: Fn(&Comm) -> Result<R> + Sync,
{
    check_devices(lib.name(), world, lib.devices()?)?;
    if world == 0 {
        return Err(Error::precondition("a world needs at least one rank"));
    }
    let id = lib.new_id()?;
    let dw = DeviceWorld::new(world);
    run_rank_threads(std::iter::repeat_n((), world), |rank, ()| {
        let presence = Presence::new(&dw.liveness, rank);
        guard_rank(
            rank,
            |e| presence.fail(e),
            || {
                let device = rank as i32;
                let raw = lib.join(world, &id, rank, device, options)?;
                let in_process = Some((&dw, Arc::clone(&presence)));
                let comm = world_comm(lib, raw, world, rank, device, options, in_process)?;
                f(&comm)
            },
        )
    })
    .map_err(|e| dw.liveness.first_failure().map_or(e, |(_, root)| root))
}

/// Checks that `world` ranks fit on `count` devices (one device per rank).
fn check_devices(backend: &str, world: usize, count: usize) -> Result<()> {
    if world > count {
        return Err(Error::Config {
            message: format!("{backend}: {world} ranks need {world} devices (one per rank), but {count} are visible"),
        });
    }
    Ok(())
}
